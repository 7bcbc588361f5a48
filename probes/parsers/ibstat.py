"""Parser for ``ibstat``, ``ibstatus`` and fleetdx's sysfs InfiniBand dump, autodetected.

The three formats carry the same per-port facts (state, physical state, rate, link layer, LID):

* ``ibstat`` (infiniband-diags): ``CA 'mlx5_0'`` blocks, tab-indented ``Key: value`` lines, ``Port N:``
  sub-blocks; ``State: Active``, ``Physical state: LinkUp``, ``Rate: 400`` (Gb/s), ``Base lid: 75`` (decimal).
* ``ibstatus`` (infiniband-diags script over sysfs): ``Infiniband device 'mlx4_0' port 1 status:`` blocks with
  ``state: 4: ACTIVE``, ``phys state: 5: LinkUp``, ``rate: 40 Gb/sec (4X QDR)``, ``base lid: 0x3`` (hex).
* fleetdx's sysfs dump (``sysfs_infiniband.txt``, written by :mod:`fleetdx.probes.sysfs`): one ``PATH:VALUE`` line per
  file, as ``grep -H . FILES`` prints it, e.g. ``/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE``; the
  values are the kernel's (``drivers/infiniband/core/sysfs.c``), the same strings ``ibstatus`` shows.

Port states are the IBTA logical states (1 Down, 2 Initializing, 3 Armed, 4 Active, 5 ActiveDefer) and
physical states (1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7
PhyTest), as the kernel names them in ``drivers/infiniband/core/sysfs.c`` (``state_show``,
``phys_state_show``).

Quirks seen in real output (tests/fixtures/host/): CAs in lexical order (``mlx5_1, mlx5_10, mlx5_11,
mlx5_2``), ``Rate: 40`` on a Down port, Ethernet (RoCE) ports listed beside InfiniBand ones, no final newline.

``ibstat`` prints every port of a CA after its ``Number of ports: N`` line (infiniband-diags ``ibstat.c``
dumps ports 1..N, and a CA without ports is not listed): a CA block with fewer ``Port N:`` blocks than it
announced, or with none, is a cut output and raises, rather than reading as a CA without ports.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import TypeVar

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "ibstat"

E = TypeVar("E", bound=Enum)


class IbFormat(str, Enum):
    """Which output was read."""

    IBSTAT = "ibstat"
    IBSTATUS = "ibstatus"
    SYSFS = "sysfs"


class PortState(str, Enum):
    """IBTA logical port state."""

    DOWN = "Down"
    INIT = "Initializing"
    ARMED = "Armed"
    ACTIVE = "Active"
    ACTIVE_DEFER = "ActiveDefer"


class PhysState(str, Enum):
    """IBTA physical port state."""

    SLEEP = "Sleep"
    POLLING = "Polling"
    DISABLED = "Disabled"
    TRAINING = "PortConfigurationTraining"
    LINK_UP = "LinkUp"
    ERROR_RECOVERY = "LinkErrorRecovery"
    PHY_TEST = "PhyTest"


class LinkLayer(str, Enum):
    INFINIBAND = "InfiniBand"
    ETHERNET = "Ethernet"  #: RoCE


#: lower-cased, space-free spellings -> state (ibstat words, kernel words)
_STATE_WORDS = {
    "down": PortState.DOWN,
    "initializing": PortState.INIT,
    "init": PortState.INIT,
    "armed": PortState.ARMED,
    "active": PortState.ACTIVE,
    "activedefer": PortState.ACTIVE_DEFER,
    "active_defer": PortState.ACTIVE_DEFER,
}
_PHYS_WORDS = {
    "sleep": PhysState.SLEEP,
    "polling": PhysState.POLLING,
    "disabled": PhysState.DISABLED,
    "portconfigurationtraining": PhysState.TRAINING,
    "linkup": PhysState.LINK_UP,
    "linkerrorrecovery": PhysState.ERROR_RECOVERY,
    "phytest": PhysState.PHY_TEST,
}
_LAYER_WORDS = {"infiniband": LinkLayer.INFINIBAND, "ethernet": LinkLayer.ETHERNET}

_CA = re.compile(r"^CA '([^'\s]+)'\s*$")
_PORT = re.compile(r"^\s+Port ([0-9]{1,3}):\s*$")
_KV = re.compile(r"^\s+([A-Za-z][A-Za-z _]*?):\s*(.*?)\s*$")
_IBSTATUS_HEAD = re.compile(r"^Infiniband device '([^'\s]+)' port ([0-9]{1,3}) status:\s*$")
_SYSFS_LINE = re.compile(r"^/sys/class/infiniband/([^/\s]+)/(?:ports/([0-9]{1,3})/)?([a-z_]+):(.*)$")
_RATE = re.compile(r"^([0-9]{1,4}(?:\.[0-9]{1,3})?)(?:\s*Gb/sec.*)?$")
_NUM_PREFIX = re.compile(r"^[0-9]:\s*")
_LID = re.compile(r"^(0x[0-9a-fA-F]{1,8}|[0-9]{1,10})$")
_NUM_PORTS = re.compile(r"^[0-9]{1,3}$")


class IbPort(Contract):
    """One port of an HCA. ``rate_gbps`` is the signalling rate in Gb/s (1e9 bit/s) as ibstat prints it
    (400 for NDR 4x); LIDs are integers (``None`` where the output omits them; 0 on Ethernet ports)."""

    port: int
    state: PortState
    phys_state: PhysState | None = None
    rate_gbps: float | None = None
    link_layer: LinkLayer | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    port_guid: str | None = None


class IbCa(Contract):
    """One channel adapter (HCA), e.g. ``mlx5_0``; ``ca_type`` such as ``MT4129`` (ConnectX-7)."""

    name: str
    ca_type: str | None = None
    firmware: str | None = None
    node_guid: str | None = None
    ports: list[IbPort] = Field(default_factory=list)


class IbReport(Contract):
    """All HCAs of a node, in printed order (ibstat prints them in lexical order: mlx5_1, mlx5_10, mlx5_2)."""

    cas: list[IbCa]
    source_format: IbFormat

    def ca(self, name: str) -> IbCa:
        """The CA called ``name``. Raises ``KeyError`` if absent."""
        for ca in self.cas:
            if ca.name == name:
                return ca
        raise KeyError(name)


def _word(table: dict[str, E], value: str, line: int | None, what: str) -> E:
    key = _NUM_PREFIX.sub("", value.strip()).replace(" ", "").lower()
    if key not in table:
        raise ParseError(FMT, line, f"a known {what}", value)
    return table[key]


def _rate(value: str, line: int | None) -> float:
    m = _RATE.match(value.strip())
    if m is None:
        raise ParseError(FMT, line, "a rate in Gb/s such as '400' or '400 Gb/sec (4X NDR)'", value)
    return float(m.group(1))


def _lid(value: str, line: int | None) -> int:
    if not _LID.match(value.strip()):
        raise ParseError(FMT, line, "a LID (decimal or 0x hex)", value)
    return int(value.strip(), 0)


#: port attribute key (lower-cased, as each format names it) -> IbPort field
_PORT_KEYS = {
    "state": "state",
    "physical state": "phys_state",
    "phys state": "phys_state",
    "phys_state": "phys_state",
    "rate": "rate",
    "link layer": "link_layer",
    "link_layer": "link_layer",
    "base lid": "base_lid",
    "lid": "base_lid",
    "sm lid": "sm_lid",
    "sm_lid": "sm_lid",
    "port guid": "port_guid",
}
_CA_KEYS = {
    "ca type": "ca_type",
    "hca_type": "ca_type",
    "firmware version": "firmware",
    "fw_ver": "firmware",
    "node guid": "node_guid",
    "node_guid": "node_guid",
}


class _PortAcc:
    """Port attributes gathered line by line, turned into an :class:`IbPort` once complete."""

    def __init__(self, port: int, line: int) -> None:
        self.port = port
        self.line = line
        self.values: dict[str, tuple[str, int]] = {}

    def set(self, key: str, value: str, line: int) -> None:
        field = _PORT_KEYS.get(key.lower())
        if field is not None:
            self.values[field] = (value, line)

    def build(self) -> IbPort:
        v = self.values
        if "state" not in v:
            raise ParseError(FMT, self.line, f"a state for port {self.port}")
        ps, rate, layer = v.get("phys_state"), v.get("rate"), v.get("link_layer")
        lid, sm, guid = v.get("base_lid"), v.get("sm_lid"), v.get("port_guid")
        return IbPort(
            port=self.port,
            state=_word(_STATE_WORDS, v["state"][0], v["state"][1], "port state"),
            phys_state=_word(_PHYS_WORDS, ps[0], ps[1], "physical state") if ps else None,
            rate_gbps=_rate(*rate) if rate else None,
            link_layer=_word(_LAYER_WORDS, layer[0], layer[1], "link layer") if layer else None,
            base_lid=_lid(*lid) if lid else None,
            sm_lid=_lid(*sm) if sm else None,
            port_guid=guid[0] if guid else None,
        )


def _check_port_count(name: str, line: int, announced: int | None, ports: list[_PortAcc], end: str) -> None:
    """A CA block lists every port it announced (``Number of ports: N``), and at least one."""
    if announced is None and not ports:
        raise ParseError(FMT, line, f"a 'Port N:' block under CA '{name}' (State, Physical state, Rate ...)", end)
    if announced is not None and len(ports) != announced:
        expected = (
            f"{announced} port block(s) ('Port 1:' ... 'Port {announced}:') under CA '{name}', as its "
            f"'Number of ports: {announced}' announced"
        )
        raise ParseError(FMT, line, expected, f"{len(ports)} listed before {end}")


def _parse_ibstat(lines: list[str]) -> list[IbCa]:
    cas: list[IbCa] = []
    name: str | None = None
    ca_line = 0
    announced: int | None = None
    ca_vals: dict[str, str] = {}
    ports: list[_PortAcc] = []

    def close(end: str) -> None:
        if name is not None:
            _check_port_count(name, ca_line, announced, ports, end)
            cas.append(IbCa(name=name, ports=[p.build() for p in ports], **ca_vals))

    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if m := _CA.match(line):
            close(f"the next CA at line {i}")
            name, ca_vals, ports, ca_line, announced = m.group(1), {}, [], i, None
        elif name is None:
            raise ParseError(FMT, i, "CA 'name'", line)
        elif m := _PORT.match(line):
            ports.append(_PortAcc(int(m.group(1)), i))
        elif m := _KV.match(line):
            key = m.group(1).lower()
            if key in _PORT_KEYS:
                if not ports:
                    raise ParseError(FMT, i, "'Port N:' before port attributes", line)
                ports[-1].set(key, m.group(2), i)
            elif key in _CA_KEYS:
                ca_vals[_CA_KEYS[key]] = m.group(2)
            elif key == "number of ports":
                if not _NUM_PORTS.match(m.group(2)):
                    raise ParseError(FMT, i, "an integer for 'Number of ports'", line)
                announced = int(m.group(2))
        else:
            raise ParseError(FMT, i, "'Key: value', 'Port N:' or CA 'name'", line)
    close("the end of the output")
    return cas


def _parse_ibstatus(lines: list[str]) -> list[IbCa]:
    by_ca: dict[str, list[_PortAcc]] = {}
    cur: _PortAcc | None = None
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if m := _IBSTATUS_HEAD.match(line):
            cur = _PortAcc(int(m.group(2)), i)
            by_ca.setdefault(m.group(1), []).append(cur)
        elif cur is not None and (m := _KV.match(line)):
            cur.set(m.group(1), m.group(2), i)
        else:
            raise ParseError(
                FMT, i, "\"Infiniband device 'X' port N status:\" or an indented 'key: value'", line
            )
    return [IbCa(name=ca, ports=[p.build() for p in ports]) for ca, ports in by_ca.items()]


def _parse_sysfs(lines: list[str]) -> list[IbCa]:
    ca_vals: dict[str, dict[str, str]] = {}
    ports: dict[tuple[str, int], _PortAcc] = {}
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _SYSFS_LINE.match(line)
        if m is None:
            raise ParseError(FMT, i, "'/sys/class/infiniband/CA/[ports/N/]ATTR:VALUE'", line)
        ca, port, attr, value = m.group(1), m.group(2), m.group(3), m.group(4).strip()
        ca_vals.setdefault(ca, {})
        if port is None:
            if attr in _CA_KEYS:
                ca_vals[ca][_CA_KEYS[attr]] = value
        else:
            acc = ports.setdefault((ca, int(port)), _PortAcc(int(port), i))
            acc.set(attr, value, i)
    return [
        IbCa(name=ca, ports=[p.build() for (c, _), p in sorted(ports.items()) if c == ca], **vals)
        for ca, vals in ca_vals.items()
    ]


def detect_format(text: str) -> IbFormat:
    """Which of the three formats ``text`` is, from its first non-blank line.

    Raises:
        ParseError: the first line opens none of them.
    """
    first = next((ln for ln in text.splitlines() if ln.strip()), None)
    if first is None:
        raise ParseError(FMT, None, "ibstat, ibstatus or sysfs InfiniBand output (input is empty)")
    if _CA.match(first):
        return IbFormat.IBSTAT
    if _IBSTATUS_HEAD.match(first):
        return IbFormat.IBSTATUS
    if _SYSFS_LINE.match(first):
        return IbFormat.SYSFS
    raise ParseError(
        FMT, 1, "CA 'name', \"Infiniband device 'X' port N status:\" or a /sys/class/infiniband line", first
    )


def parse_ibstat(text: str) -> IbReport:
    """Parse ``ibstat``, ``ibstatus`` or the sysfs dump (see the module doc) into an :class:`IbReport`.

    Raises:
        ParseError: an unrecognised first line; a line of the wrong shape; a port with no state; an unknown
            state, physical state or link layer; a rate or LID that is not a number; a CA listed twice.
    """
    fmt = detect_format(text)
    lines = text.splitlines()
    parsers = {
        IbFormat.IBSTAT: _parse_ibstat,
        IbFormat.IBSTATUS: _parse_ibstatus,
        IbFormat.SYSFS: _parse_sysfs,
    }
    cas = parsers[fmt](lines)
    names = [ca.name for ca in cas]
    if len(set(names)) != len(names):
        raise ParseError(FMT, None, "each CA once", " ".join(names))
    for ca in cas:
        nums = [p.port for p in ca.ports]
        if len(set(nums)) != len(nums):
            raise ParseError(FMT, None, f"each port of {ca.name} once", str(nums))
    return IbReport(cas=cas, source_format=fmt)
