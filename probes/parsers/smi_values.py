"""Cell values shared by the ``nvidia-smi`` XML and CSV parsers: "not available" markers, numbers with units,
PCI bus ids and the clock event reason bits.

nvidia-smi prints a missing value as ``N/A`` in XML and ``[N/A]`` in CSV, an unsupported one as
``Not Supported``/``[Not Supported]``, and numbers with a unit (``1980 MHz``, ``80 %``, ``73.58 W``,
``81559 MiB``, ``16x``, ``976314 us``) unless ``--format=csv,nounits`` is given.
"""

from __future__ import annotations

import re
from enum import Enum

from fleetdx.probes.errors import ParseError

#: what nvidia-smi prints instead of a value (with or without the CSV square brackets)
NOT_AVAILABLE = frozenset(
    {
        "n/a",
        "not supported",
        "unknown error",
        "insufficient permissions",
        "requested functionality has been deprecated",
        "not available",
        "unknown",
        "gpu is lost",
        "gpu requires reset",
    }
)

_NUMBER_RE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)$")
_MIB = 1 << 20
_BUS_RE = re.compile(r"^(?:PCI:)?(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?$")


def is_not_available(cell: str) -> bool:
    """True for ``N/A``, ``[N/A]``, ``[Not Supported]``, an empty cell and the other "no value" markers."""
    s = cell.strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    return s.strip().lower() in NOT_AVAILABLE or s == ""


def number(fmt: str, cell: str | None, units: tuple[str, ...] = (), where: int | None = None) -> float | None:
    """The number in ``cell`` (``"1980 MHz"`` -> 1980.0), ``None`` for a "not available" marker or ``None``.

    ``units`` lists the units accepted after the number (an empty unit is always accepted, as with
    ``--format=csv,nounits``). Raises :class:`ParseError` for anything else: a value that cannot be read is
    never turned into a number.
    """
    if cell is None or is_not_available(cell):
        return None
    m = _NUMBER_RE.match(cell.strip())
    if m is None or (m.group(2) and m.group(2) not in units):
        want = "a number" + (f" in {'/'.join(units)}" if units else "")
        raise ParseError(fmt, where, want, cell)
    return float(m.group(1))


def integer(fmt: str, cell: str | None, units: tuple[str, ...] = (), where: int | None = None) -> int | None:
    """Like :func:`number` but the value must be a whole number."""
    v = number(fmt, cell, units, where)
    if v is None:
        return None
    if v != int(v):
        raise ParseError(fmt, where, "a whole number", cell or "")
    return int(v)


def mib_to_bytes(fmt: str, cell: str | None, where: int | None = None) -> int | None:
    """A memory size printed in MiB (``"81559 MiB"`` or ``"81559"``) as bytes (1 MiB = 2**20 B)."""
    v = integer(fmt, cell, ("MiB",), where)
    return None if v is None else v * _MIB


def yes_no(fmt: str, cell: str | None, where: int | None = None) -> bool | None:
    """``Yes``/``No`` (also ``Active``/``Not Active``, ``1``/``0``) as a bool; ``None`` when not available."""
    if cell is None or is_not_available(cell):
        return None
    s = cell.strip().lower()
    if s in ("yes", "active", "1", "true", "enabled"):
        return True
    if s in ("no", "not active", "0", "false", "disabled"):
        return False
    raise ParseError(fmt, where, "Yes/No or Active/Not Active", cell)


def text(cell: str | None) -> str | None:
    """The stripped cell, ``None`` for a "not available" marker."""
    if cell is None or is_not_available(cell):
        return None
    return cell.strip()


def bus_key(bus_id: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI address, so that the forms printed by different tools compare equal.

    ``"00000000:00:06.0"`` (nvidia-smi), ``"0000:00:06.0"`` (lspci, sysfs) and ``"PCI:0000:00:06"`` (the
    kernel's XID lines, which omit the function) all give ``(0, 0, 6)``. ``None`` when it is not a PCI
    address.
    """
    m = _BUS_RE.match(bus_id.strip())
    if m is None:
        return None
    domain = int(m.group(1), 16) if m.group(1) else 0
    return domain, int(m.group(2), 16), int(m.group(3), 16)


class ClockEventReason(str, Enum):
    """Why the GPU clocks are below their maximum (NVML ``nvmlClocksEventReasons``, formerly
    ``nvmlClocksThrottleReasons``; nvidia-smi ``clocks_event_reasons`` / older ``clocks_throttle_reasons``).

    The value is the name nvidia-smi's XML uses after the ``clocks_event_reason_`` prefix.
    """

    GPU_IDLE = "gpu_idle"
    APPLICATIONS_CLOCKS_SETTING = "applications_clocks_setting"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL_SLOWDOWN = "sw_thermal_slowdown"
    HW_THERMAL_SLOWDOWN = "hw_thermal_slowdown"
    HW_POWER_BRAKE_SLOWDOWN = "hw_power_brake_slowdown"
    DISPLAY_CLOCKS_SETTING = "display_clocks_setting"


#: bit of each reason in the ``clocks_event_reasons.active`` bitmask (nvml.h: nvmlClocksEventReasonGpuIdle
#: 0x1, ApplicationsClocksSetting 0x2, SwPowerCap 0x4, HwSlowdown 0x8, SyncBoost 0x10, SwThermalSlowdown
#: 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80, DisplayClockSetting 0x100)
CLOCK_EVENT_BITS: dict[ClockEventReason, int] = {
    ClockEventReason.GPU_IDLE: 0x1,
    ClockEventReason.APPLICATIONS_CLOCKS_SETTING: 0x2,
    ClockEventReason.SW_POWER_CAP: 0x4,
    ClockEventReason.HW_SLOWDOWN: 0x8,
    ClockEventReason.SYNC_BOOST: 0x10,
    ClockEventReason.SW_THERMAL_SLOWDOWN: 0x20,
    ClockEventReason.HW_THERMAL_SLOWDOWN: 0x40,
    ClockEventReason.HW_POWER_BRAKE_SLOWDOWN: 0x80,
    ClockEventReason.DISPLAY_CLOCKS_SETTING: 0x100,
}


def reasons_from_mask(mask: int) -> list[ClockEventReason]:
    """The reasons whose bit is set in ``mask`` (unknown bits are ignored), in bit order."""
    return [r for r, bit in CLOCK_EVENT_BITS.items() if mask & bit]
