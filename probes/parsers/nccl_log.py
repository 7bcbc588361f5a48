"""Parser for ``NCCL_DEBUG=INFO`` logs: NCCL's own lines inside any captured output.

Lines read (formats of NCCL's log calls as they appear in the fixtures):

* ``host:pid:tid [dev] NCCL INFO <message>`` and ``... [dev] file.cc:line NCCL WARN <message>``, after
  launcher prefixes such as ``[1,0]<stdout>:`` (Open MPI ``--tag-output``), ``0: `` (``srun -l``) or
  ``(name, rank=N, pid=P)`` (Ray, job launchers), stacked in any order (:func:`clean_line`);
* ``NCCL version 2.18.3+cuda12.2`` (INFO, or the bare line nccl-tests prints), RCCL's ``RCCL version
  2.18.3+hip6.0 develop:7e1cbb4`` and ``RCCL version : 2.28.3-...`` alike;
* network selection: ``Using network IB|Socket|IBext_v8|AWS Libfabric``,
  ``NET/IB : Using [0]mlx5_0:1/IB/SHARP ...``, ``NET/Socket : Using [0]eth0:...``,
  ``NET/IB : No device found.``, ``Failed to initialize NET plugin IB``, ``NET/OFI Selected Provider is efa``;
* GPU Direct RDMA: ``GPU Direct RDMA Enabled|Disabled for HCA ...`` and the ``GDRDMA`` component of a
  connection, whatever flags follow it in newer NCCL (``/GDRDMA/Shared``, ``/GDRDMA(PCI)``, ``/GDRDMA/flush``);
* environment echoes ``NCCL_X set by environment to Y`` and launcher ``-x NCCL_X=Y`` options;
* connections: ``Channel 00/0 : 7[1] -> 0[0] [receive] via NET/IBext_v8/1/GDRDMA``,
  ``Channel 01 : 2[201c0] -> 7[a01d0] via P2P/IPC/read``,
  ``CollNet 00/0 : 4 [receive] via COLLNET/SHARP/0/GDRDMA``. A NIC written ``5(2)`` is PXN (NCCL 2.12+,
  ``NCCL_PXN_DISABLE``): the traffic goes through the NIC of the GPU of local rank 2, over NVLink first.

Errors: :class:`fleetdx.probes.errors.ParseError` (format ``"nccl-log"``) when the text holds no NCCL line at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Literal

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_tests import LIB_VERSION_RE, clean_line

FMT = "nccl-log"


class TransportKind(str, Enum):
    """The transport family of one connection (the first component of its ``via`` path)."""

    P2P = "P2P"  #: GPU peer-to-peer over NVLink/PCIe: P2P/IPC, P2P/CUMEM, P2P/direct pointer
    SHM = "SHM"  #: through host shared memory
    NET = "NET"  #: through a network plugin (IB verbs, Socket, OFI/EFA, ...)
    COLLNET = "COLLNET"  #: in-network reduction (SHARP)
    NVLS = "NVLS"  #: NVLink SHARP
    OTHER = "OTHER"


class Connection(Contract):
    """One ``Channel``/``CollNet`` connection line; ``transport`` is the ``via`` path as printed."""

    host: str | None
    channel: int
    src_rank: int
    dst_rank: int | None
    direction: Literal["send", "receive"] | None
    transport: str  #: e.g. "NET/IBext_v8/5(2)/GDRDMA", "P2P/CUMEM/read"
    kind: TransportKind
    net_name: str | None = None  #: NET/COLLNET: IB, IBext_v8, Socket, AWS Libfabric, SHARP
    nic: int | None = None  #: NET/COLLNET: NCCL's net device index
    pxn_proxy_rank: int | None = None  #: PXN: the local rank whose NIC carries the traffic
    gdrdma: bool = False


class NetDevice(Contract):
    """One device of a ``NET/<net> : Using [i]name:port/LINK/FLAGS ...`` line."""

    host: str | None
    net: str  #: "IB" or "Socket" (the NET/... prefix)
    index: int
    name: str  #: "mlx5_0:1", "rocep4s0f0:1", "eth0:192.0.2.2<0>"
    link_layer: str | None = None  #: "IB" or "RoCE"; None for sockets
    flags: list[str] = Field(default_factory=list)  #: e.g. ["SHARP"]


class NcclMessage(Contract):
    """One NCCL WARN line: the host that printed it, its 1-based line number, and its text."""

    host: str | None
    line: int
    text: str


class NcclLog(Contract):
    """What one capture tells about NCCL: versions, networks, devices, GDR, transports, warnings.

    ``transports`` is the sorted set of distinct ``via`` paths with the NIC index and PXN proxy removed
    (``NET/IBext_v8/GDRDMA``, ``P2P/CUMEM/read``); ``connections`` keeps every line. ``env`` holds the
    ``NCCL_*`` variables NCCL echoed, else the ones a launcher line passed with ``-x``.
    """

    nccl_versions: list[str] = Field(default_factory=list)
    networks: list[str] = Field(default_factory=list)  #: "Using network X" values, in order first seen
    net_devices: list[NetDevice] = Field(default_factory=list)
    ib_no_device: bool = False  #: "NET/IB : No device found." was printed
    ofi_provider: str | None = None  #: aws-ofi-nccl "NET/OFI Selected Provider is efa"
    net_plugin_failures: list[str] = Field(default_factory=list)
    gdr_enabled: list[str] = Field(default_factory=list)  #: HCAs of "GPU Direct RDMA Enabled for HCA"
    gdr_disabled: list[str] = Field(default_factory=list)  #: HCAs of "GPU Direct RDMA Disabled for HCA"
    env: dict[str, str] = Field(default_factory=dict)
    connections: list[Connection] = Field(default_factory=list)
    transports: list[str] = Field(default_factory=list)
    warnings: list[NcclMessage] = Field(default_factory=list)
    collnet_fallback: bool = False  #: "Cannot initialize CollNet, using point-to-point network instead"
    hosts: list[str] = Field(default_factory=list)
    info_lines: int = 0

    @property
    def uses_gdrdma(self) -> bool:
        """Some NET/COLLNET connection uses GPU Direct RDMA."""
        return any(c.gdrdma for c in self.connections)

    @property
    def uses_pxn(self) -> bool:
        """Some connection goes through another GPU's NIC (PXN)."""
        return any(c.pxn_proxy_rank is not None for c in self.connections)

    def kinds(self) -> set[TransportKind]:
        """The transport families seen in the connection lines."""
        return {c.kind for c in self.connections}


_LINE_RE = re.compile(
    r"^(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[\d+\]\s+)?(?:\S+:\d+\s+)?"
    r"NCCL (?P<lvl>INFO|WARN)\s?(?P<msg>.*)$"
)
#: the bare banner (``NCCL_DEBUG=VERSION``, nccl-tests): the version, then at most RCCL's ``branch:hash``
_BARE_VERSION_RE = re.compile(LIB_VERSION_RE.pattern + r"(?:\s+\S+:\S+)?\s*$")
_LAUNCH_ENV_RE = re.compile(r"(?:^|\s)-x\s+(NCCL_\w+)=(\S+)")
_NET_DEV_RE = re.compile(r"\[(\d+)\]([^\s\[\]]+)")
_CONN_RE = re.compile(
    r"^(?P<what>Channel|CollNet)\s+(?P<ch>\d+)(?:/\d+)?\s*:\s*(?P<src>\d+)(?:\[[0-9a-fA-F]+\])?"
    r"(?:\s*->\s*(?P<dst>\d+)(?:\[[0-9a-fA-F]+\])?)?\s*(?:\[(?P<dir>send|receive)\]\s*)?"
    r"via\s+(?P<via>.+?)\s*$"
)
_NIC_RE = re.compile(r"^(\d+)(?:\((\d+)\))?$")
#: the GPU Direct RDMA component of a ``via`` path: ``GDRDMA``, ``GDRDMA(PCI)`` (NCCL 2.2x, over PCIe)
_GDRDMA_RE = re.compile(r"^GDRDMA(?:\(\w+\))?$")
_COLLNET_FALLBACK = "Cannot initialize CollNet"


def _kind(first: str) -> TransportKind:
    try:
        return TransportKind(first.upper())
    except ValueError:
        return TransportKind.OTHER


def _direction(value: str | None) -> Literal["send", "receive"] | None:
    if value == "send":
        return "send"
    if value == "receive":
        return "receive"
    return None


def _connection(host: str | None, m: re.Match[str]) -> Connection:
    via = m.group("via")
    parts = via.split("/")
    kind = TransportKind.COLLNET if m.group("what") == "CollNet" else _kind(parts[0])
    net_name: str | None = None
    nic: int | None = None
    proxy: int | None = None
    if kind in (TransportKind.NET, TransportKind.COLLNET) and len(parts) >= 2:
        net_name = parts[1]
        nic_m = _NIC_RE.match(parts[2]) if len(parts) >= 3 else None
        if nic_m:
            nic = int(nic_m.group(1))
            proxy = int(nic_m.group(2)) if nic_m.group(2) is not None else None
    return Connection(
        host=host,
        channel=int(m.group("ch")),
        src_rank=int(m.group("src")),
        dst_rank=int(m.group("dst")) if m.group("dst") is not None else None,
        direction=_direction(m.group("dir")),
        transport=via,
        kind=kind,
        net_name=net_name,
        nic=nic,
        pxn_proxy_rank=proxy,
        gdrdma=kind in (TransportKind.NET, TransportKind.COLLNET) and any(_GDRDMA_RE.match(p) for p in parts[2:]),
    )


def _transport_key(c: Connection) -> str:
    if c.kind in (TransportKind.NET, TransportKind.COLLNET) and c.net_name is not None:
        return "/".join([c.kind.value, c.net_name] + (["GDRDMA"] if c.gdrdma else []))
    return c.transport


def _net_devices(host: str | None, net: str, rest: str) -> list[NetDevice]:
    out = []
    for idx, spec in _NET_DEV_RE.findall(rest.split(";")[0]):
        name, *tail = spec.split("/")
        is_ib = net == "IB"
        out.append(
            NetDevice(
                host=host,
                net=net,
                index=int(idx),
                name=name,
                link_layer=tail[0] if tail and is_ib else None,
                flags=tail[1:] if is_ib else [],
            )
        )
    return out


class _State:
    """Accumulates what the lines say; :meth:`result` freezes it into an :class:`NcclLog`."""

    def __init__(self) -> None:
        self.versions: list[str] = []
        self.networks: list[str] = []
        self.devices: list[NetDevice] = []
        self.ib_no_device = False
        self.ofi_provider: str | None = None
        self.plugin_failures: list[str] = []
        self.gdr_on: list[str] = []
        self.gdr_off: list[str] = []
        self.env: dict[str, str] = {}
        self.conns: list[Connection] = []
        self.warnings: list[NcclMessage] = []
        self.collnet_fallback = False
        self.hosts: list[str] = []
        self.info = 0
        self.seen = False

    def info_line(self, host: str | None, msg: str) -> None:
        self.info += 1
        for rx, handler in _INFO_HANDLERS:
            m = rx.search(msg)
            if m:
                handler(self, host, m)
                return

    def warn_line(self, host: str | None, lineno: int, msg: str) -> None:
        self.warnings.append(NcclMessage(host=host, line=lineno, text=msg.strip()))
        if _COLLNET_FALLBACK in msg:
            self.collnet_fallback = True

    def result(self) -> NcclLog:
        return NcclLog(
            nccl_versions=self.versions,
            networks=self.networks,
            net_devices=self.devices,
            ib_no_device=self.ib_no_device,
            ofi_provider=self.ofi_provider,
            net_plugin_failures=self.plugin_failures,
            gdr_enabled=self.gdr_on,
            gdr_disabled=self.gdr_off,
            env=self.env,
            connections=self.conns,
            transports=sorted({_transport_key(c) for c in self.conns}),
            warnings=self.warnings,
            collnet_fallback=self.collnet_fallback,
            hosts=self.hosts,
            info_lines=self.info,
        )


def _add_unique(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


def _on_version(s: _State, host: str | None, m: re.Match[str]) -> None:
    _add_unique(s.versions, m.group(1))


def _on_network(s: _State, host: str | None, m: re.Match[str]) -> None:
    _add_unique(s.networks, m.group(1))


def _on_no_ib(s: _State, host: str | None, m: re.Match[str]) -> None:
    s.ib_no_device = True


def _on_net_using(s: _State, host: str | None, m: re.Match[str]) -> None:
    for dev in _net_devices(host, m.group(1), m.group(2)):
        if dev not in s.devices:
            s.devices.append(dev)


def _on_gdr(s: _State, host: str | None, m: re.Match[str]) -> None:
    _add_unique(s.gdr_on if m.group(1) == "Enabled" else s.gdr_off, m.group(2))


def _on_env(s: _State, host: str | None, m: re.Match[str]) -> None:
    s.env[m.group(1)] = m.group(2)


def _on_conn(s: _State, host: str | None, m: re.Match[str]) -> None:
    s.conns.append(_connection(host, m))


def _on_plugin_fail(s: _State, host: str | None, m: re.Match[str]) -> None:
    _add_unique(s.plugin_failures, m.group(0).strip())


def _on_ofi(s: _State, host: str | None, m: re.Match[str]) -> None:
    s.ofi_provider = m.group(1)


_Handler = Callable[[_State, "str | None", "re.Match[str]"], None]

#: INFO message patterns, tried in order; the first that matches handles the line.
_INFO_HANDLERS: list[tuple[re.Pattern[str], _Handler]] = [
    (LIB_VERSION_RE, _on_version),
    (re.compile(r"^Using network\s+(.+?)\s*$"), _on_network),
    (re.compile(r"^NET/IB\s*:\s*No device found"), _on_no_ib),
    (re.compile(r"^NET/(\w+)\s*:\s*Using\s+(.*)$"), _on_net_using),
    (re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA\s+(.*?)\s*$"), _on_gdr),
    (re.compile(r"^(NCCL_\w+) set by environment to\s*(.*?)\.?\s*$"), _on_env),
    (_CONN_RE, _on_conn),
    (re.compile(r"^Failed to initialize NET plugin\s+\S+"), _on_plugin_fail),
    (re.compile(r"^NET/OFI Selected Provider is\s+(\S+)"), _on_ofi),
]


def parse_nccl_log(text: str) -> NcclLog:
    """Parse every NCCL INFO/WARN line of ``text`` into an :class:`NcclLog`.

    Other lines are ignored except bare ``NCCL version X`` lines and launcher ``-x NCCL_*=value`` options
    (kept in ``env`` unless NCCL itself echoed the variable). Raises :class:`ParseError` when no NCCL line
    is found.
    """
    state = _State()
    launch_env: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = clean_line(raw)
        m = _LINE_RE.match(line)
        if m is None:
            bare = _BARE_VERSION_RE.match(line)
            if bare:
                state.seen = True
                _add_unique(state.versions, bare.group(1))
            for name, value in _LAUNCH_ENV_RE.findall(line):
                launch_env[name] = value
            continue
        state.seen = True
        host = m.group("host")
        if host is not None:
            _add_unique(state.hosts, host)
        if m.group("lvl") == "WARN":
            state.warn_line(host, lineno, m.group("msg"))
        else:
            state.info_line(host, m.group("msg").strip())
    if not state.seen:
        raise ParseError(FMT, None, "NCCL INFO/WARN lines or an 'NCCL version' line")
    for name, value in launch_env.items():
        state.env.setdefault(name, value)
    return state.result()
