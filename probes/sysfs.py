"""Read-only collectors of sysfs facts: PCIe links of GPUs and NICs, InfiniBand port state, NUMA CPU lists.

Each collector returns the text of one bundle file, one ``PATH:VALUE`` line per sysfs attribute exactly as
``grep -H . FILES`` prints it (``/sys/bus/pci/devices/0000:1b:00.0/current_link_width:16``), so a person can
reproduce it with grep and the sysfs InfiniBand file is read by :func:`fleetdx.probes.parsers.ibstat.parse_ibstat`.
Paths in the text are always ``/sys/...``; ``root`` only relocates where they are read from (tests use a fake
tree). A collector whose sysfs directory does not exist returns ``None`` (the bundle records it ``skipped``);
an attribute that cannot be read (absent, EACCES, EIO) is left out.

Attributes (kernel ``Documentation/ABI/testing/sysfs-bus-pci`` and ``sysfs-class-infiniband``):
PCI ``vendor``, ``device``, ``class``, ``current_link_speed`` (e.g. ``16.0 GT/s PCIe``),
``current_link_width``,
``max_link_speed``, ``max_link_width``, ``numa_node`` (-1: none); InfiniBand CA ``hca_type``, ``fw_ver``,
``node_guid`` and per port ``state``, ``phys_state``, ``rate``, ``link_layer``, ``lid``, ``sm_lid``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path

from fleetdx.probes.catalog import SYSFS_INFINIBAND_FILE, SYSFS_NUMA_FILE, SYSFS_PCI_FILE
from fleetdx.probes.contracts import Contract
from fleetdx.probes.parsers.ib_counters import NETDEV_ATTRS

#: PCI vendor ids (pci.ids): NVIDIA, Mellanox (NVIDIA Networking)
VENDOR_NVIDIA = "0x10de"
VENDOR_MELLANOX = "0x15b3"
#: PCI base class 0x02 = network controller (Ethernet 0x0200, InfiniBand 0x0207), PCI Code and ID Assignment
#: spec
CLASS_NETWORK_PREFIX = "0x02"

PCI_ATTRS = (
    "vendor",
    "device",
    "class",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "numa_node",
)
IB_CA_ATTRS = ("hca_type", "fw_ver", "node_guid")
NUMA_MEMINFO_RE = re.compile(r"^Node [0-9]+ (MemTotal|MemFree):")
IB_PORT_ATTRS = ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid")


class SysfsSource(str, Enum):
    """The sysfs collectors; the value is the bundle file name."""

    PCI = SYSFS_PCI_FILE
    INFINIBAND = SYSFS_INFINIBAND_FILE
    NUMA = SYSFS_NUMA_FILE


class SysfsText(Contract):
    """What one collector read: the file text, or ``None`` with the reason it was not read."""

    source: SysfsSource
    text: str | None
    reason: str | None = None


def _read(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return value.splitlines()[0] if value else None


def _lines(root: Path, files: list[Path]) -> list[str]:
    out: list[str] = []
    for f in files:
        value = _read(f)
        if value is not None:
            out.append(f"/{f.relative_to(root).as_posix()}:{value}")
    return out


def _is_gpu_or_nic(dev: Path) -> bool:
    vendor, cls = _read(dev / "vendor"), _read(dev / "class") or ""
    return vendor in (VENDOR_NVIDIA, VENDOR_MELLANOX) or cls.startswith(CLASS_NETWORK_PREFIX)


def read_pci(root: Path) -> SysfsText:
    """PCIe link speed/width and NUMA node of every NVIDIA, Mellanox or network-class PCI function."""
    base = root / "sys/bus/pci/devices"
    if not base.is_dir():
        return SysfsText(source=SysfsSource.PCI, text=None, reason=f"/{base.relative_to(root)}: not present")
    devs = sorted(d for d in base.iterdir() if _is_gpu_or_nic(d))
    lines = _lines(root, [d / a for d in devs for a in PCI_ATTRS])
    if not lines:
        return SysfsText(
            source=SysfsSource.PCI, text=None, reason="no NVIDIA, Mellanox or network PCI device"
        )
    return SysfsText(source=SysfsSource.PCI, text="\n".join(lines) + "\n")


def read_infiniband(root: Path) -> SysfsText:
    """State, physical state, rate, link layer and LIDs of every RDMA port under /sys/class/infiniband."""
    base = root / "sys/class/infiniband"
    if not base.is_dir() or not any(base.iterdir()):
        return SysfsText(
            source=SysfsSource.INFINIBAND, text=None, reason="/sys/class/infiniband: no RDMA device"
        )
    files: list[Path] = []
    for ca in sorted(base.iterdir()):
        files += [ca / a for a in IB_CA_ATTRS]
        ports = ca / "ports"
        if ports.is_dir():
            for port in sorted(ports.iterdir(), key=lambda p: (len(p.name), p.name)):
                files += [port / a for a in IB_PORT_ATTRS]
    return SysfsText(source=SysfsSource.INFINIBAND, text="\n".join(_lines(root, files)) + "\n")


#: the port attributes read with the counters, so each sample says the port's state and rate at that moment
IB_COUNTER_PORT_ATTRS = ("state", "phys_state", "rate", "link_layer")
#: the counter directories of a port (kernel ABI sysfs-class-infiniband; ``counters_ext`` is mlx4's)
IB_COUNTER_DIRS = ("counters", "counters_ext", "hw_counters")


def read_infiniband_counters(root: Path) -> list[str] | None:
    """One sample of every RDMA port's counters: ``PATH:VALUE`` lines of ``state``, ``phys_state``, ``rate``,
    ``link_layer`` and every file of ``counters/``, ``counters_ext/`` and ``hw_counters/``, and of each network
    interface of the CA's PCI function (``device/net/<netdev>/``) its ``dev_port`` and ``carrier_down_count``
    (kernel ABI sysfs-class-net: RoCE ports have no IBTA ``link_downed``, their netdev counts the downs); read by
    :func:`fleetdx.probes.parsers.ib_counters.parse_ib_counters`. ``None`` when there is no RDMA device. Ports in
    numeric order, counters in name order; an unreadable file is left out."""
    base = root / "sys/class/infiniband"
    if not base.is_dir():
        return None
    files: list[Path] = []
    for ca in sorted(base.iterdir()):
        ports = ca / "ports"
        if not ports.is_dir():
            continue
        for port in sorted(ports.iterdir(), key=lambda p: (len(p.name), p.name)):
            files += [port / a for a in IB_COUNTER_PORT_ATTRS]
            for d in IB_COUNTER_DIRS:
                if (port / d).is_dir():
                    files += sorted(f for f in (port / d).iterdir() if f.is_file())
        netdevs = ca / "device" / "net"
        if netdevs.is_dir():
            files += [nd / a for nd in sorted(netdevs.iterdir()) for a in NETDEV_ATTRS]
    return _lines(root, files) or None


def _meminfo_lines(root: Path, node: Path) -> list[str]:
    """The ``MemTotal`` and ``MemFree`` lines of a node's meminfo (``Node 0 MemTotal:  7301336 kB``)."""
    try:
        text = (node / "meminfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    path = f"/{(node / 'meminfo').relative_to(root).as_posix()}"
    return [f"{path}:{ln.strip()}" for ln in text.splitlines() if NUMA_MEMINFO_RE.match(ln)]


def read_numa(root: Path) -> SysfsText:
    """Every NUMA node's ``cpulist``, ``distance`` (SLIT row) and ``meminfo`` MemTotal/MemFree: the facts of
    ``numactl -H``, read where numactl reads them, for nodes without numactl (parsed by
    :func:`fleetdx.probes.parsers.numactl.parse_numactl`)."""
    base = root / "sys/devices/system/node"
    nodes = sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])) if base.is_dir() else []
    lines: list[str] = []
    for n in nodes:
        lines += _lines(root, [n / "cpulist", n / "distance"]) + _meminfo_lines(root, n)
    if not lines:
        return SysfsText(source=SysfsSource.NUMA, text=None, reason="/sys/devices/system/node: no NUMA node")
    return SysfsText(source=SysfsSource.NUMA, text="\n".join(lines) + "\n")


#: the explicit list of collectors run by :func:`fleetdx.probes.bundle.collect`
COLLECTORS: tuple[Callable[[Path], SysfsText], ...] = (read_pci, read_infiniband, read_numa)
#: the bundle file each collector writes
COLLECTOR_SOURCES: dict[Callable[[Path], SysfsText], SysfsSource] = {
    read_pci: SysfsSource.PCI,
    read_infiniband: SysfsSource.INFINIBAND,
    read_numa: SysfsSource.NUMA,
}
