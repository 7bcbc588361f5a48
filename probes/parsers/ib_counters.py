"""Parsers for InfiniBand / RoCE port counters and fabric checks, and the arithmetic of two counter samples.

Three inputs, each a pure function of its text:

* :func:`parse_ib_counters` -- a sysfs dump of ``/sys/class/infiniband/<CA>/ports/<N>/`` as ``PATH:VALUE``
  lines (``grep -r . /sys/class/infiniband/*/ports/*/counters`` prints them so; fleetdx's collector
  :func:`fleetdx.probes.sysfs.read_infiniband_counters` writes the same lines): ``counters/`` (the IBTA
  PortCounters the kernel reads from the port's PMA), ``counters_ext/`` (mlx4's 64-bit data counters),
  ``hw_counters/`` (driver counters such as mlx5's ``local_ack_timeout_err``) and the port's ``state``,
  ``phys_state``, ``rate`` and ``link_layer``. Several samples may share one file, each opened by a
  ``# fleetdx ib-counters sample N t=<Unix time>`` line; a dump without such lines is one sample with no time.
  Any path prefix before ``class/infiniband/`` is accepted (a tree copied elsewhere).
* :func:`parse_perfquery` -- ``perfquery`` and ``perfquery -x`` (infiniband-diags): ``# Port counters: Lid 1
  port 1 (CapMask: 0x5200)`` or ``# Port extended counters: ...`` blocks of ``Name:.....value`` lines, in
  today's names (``SymbolErrorCounter``, ``PortXmitData``) or the old ones (``SymbolErrors``, ``XmtData``),
  mapped to the sysfs names so both read alike. ``PortXmitData``/``PortRcvData`` are in 4-octet words, as in
  sysfs (perfquery(8)).
* :func:`parse_ibdiagnet` -- an ``ibdiagnet`` (ibdiagnet2) console output: its closing ``Summary`` table
  (``-I- Stage  Warnings  Errors  Comment``), its ``-E-`` lines and the ``Fabric Summary`` link counts.

Counter meanings: Linux ``Documentation/ABI/stable/sysfs-class-infiniband`` (``counters/``: "symbol_error:
(RO) Total number of minor link errors detected on one or more physical lanes", "link_downed: (RO) Total
number of times the Port Training state machine has failed the link error recovery process and downed the
link", ...) and the IBTA PortCounters attribute they come from; mlx5's ``hw_counters`` as NVIDIA's
"Understanding mlx5 Linux Counters and Status Parameters" describes them.

Two samples give rates (:func:`port_deltas`). IBTA PortCounters error counters are 8 to 32 bits wide and stop
at their maximum rather than wrap; they go *down* only when someone resets them (``perfquery -R``, a driver
reload). A counter lower in the second sample is therefore a reset, never a negative count: its delta is the
second value (what was counted since the reset, a lower bound) and ``reset`` says so.

Errors: :class:`~fleetdx.probes.errors.ParseError` for input with no counter line, no counter block, or no
Summary table; values that are not counts (``N/A (no PMA)``) are kept as text in ``unavailable``.
"""

from __future__ import annotations

import re
from collections import Counter as _Tally
from enum import Enum

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.ibstat import LinkLayer, PhysState, PortState

FMT_SYSFS = "ib-counters"
FMT_PERFQUERY = "perfquery"
FMT_IBDIAGNET = "ibdiagnet"

#: lines kept of an ibdiagnet output's ``-E-`` errors (a broken fabric prints thousands)
MAX_IBDIAG_ERRORS = 200
#: the longest line read as a Summary table row (its rows are under 100 columns; the row pattern never scans a
#: longer one: bounded time on hostile input)
MAX_IBDIAG_ROW = 512
#: the sample header fleetdx writes between two sysfs samples
SAMPLE_HEADER = "# fleetdx ib-counters sample {n} t={t:.3f}"
_SAMPLE_RE = re.compile(r"^# fleetdx ib-counters sample (\d+) t=([0-9]+(?:\.[0-9]+)?)\s*$")
_SYSFS_RE = re.compile(
    r"^(?:.*/)?class/infiniband/(?P<ca>[^/\s]+)/ports/(?P<port>[0-9]{1,3})/"
    r"(?:(?P<group>counters|counters_ext|hw_counters)/)?(?P<name>[A-Za-z0-9_]+):(?P<value>.*)$"
)
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec(?:\s*\(([0-9]+)X(?:\s+([A-Za-z0-9]+))?\))?")
_COUNT_RE = re.compile(r"^\s*([0-9]{1,20})\s*$")
#: the port's netdev (``/sys/class/infiniband/mlx5_0/device/net/ens1f0np0/carrier_down_count``): the PCI
#: function's network interfaces, ``dev_port`` (0-based) naming the port; kernel ABI
#: ``Documentation/ABI/testing/sysfs-class-net``
_NETDEV_RE = re.compile(
    r"^(?:.*/)?class/infiniband/(?P<ca>[^/\s]+)/device/net/(?P<nd>[^/\s]+)/"
    r"(?P<name>dev_port|carrier_down_count):(?P<value>.*)$"
)
#: the netdev files read with a port's counters
NETDEV_ATTRS = ("dev_port", "carrier_down_count")
_NUM_PREFIX = re.compile(r"^\s*[0-9]+:\s*")


class CounterGroup(str, Enum):
    """The sysfs directory a counter was read from."""

    COUNTERS = "counters"  #: IBTA PortCounters (and mlx4's counters_ext, folded in)
    HW_COUNTERS = "hw_counters"  #: driver counters (mlx5: RoCE retransmission, sequence errors, CNPs)
    NETDEV = "netdev"  #: the port's network device (``device/net/<netdev>/``): ``carrier_down_count``


#: IBTA PortCounters error counters fleetdx judges (``IB_PORT_ERRORS``): each counts a physical or link-level
#: fault (kernel ABI ``sysfs-class-infiniband``). Left out: ``port_xmit_wait`` (congestion, not an error),
#: ``port_{rcv,xmit}_constraint_errors`` (partition enforcement), ``port_rcv_switch_relay_errors`` (a switch's
#: routing), ``VL15_dropped`` (subnet management packets), and ``link_downed`` (``IB_LINK_FLAP``).
ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
)
#: mlx5 ``hw_counters`` that count transport retransmissions caused by packets lost on the wire (NVIDIA,
#: "Understanding mlx5 Linux Counters": ``local_ack_timeout_err`` "the number of times QP's ack timer expired",
#: ``packet_seq_err`` NAK-sequence-error packets received, ``implied_nak_seq_err`` sequence errors implied by a
#: later read response): on RoCE, where the IBTA error counters stay 0, these are the grey-failure signal.
#: Left out: ``out_of_sequence`` (adaptive routing delivers out of order by design), ``out_of_buffer`` and
#: ``rnr_nak_retry_err`` (the receiving application's buffers, not the link)
HW_ERROR_COUNTERS = ("local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err")
LINK_DOWNED = "link_downed"
CARRIER_DOWN = "carrier_down_count"
#: files of ``hw_counters/`` that are settings, not counts (``lifespan``: how many ms the driver caches the
#: counters: the ``lifespan`` attribute of drivers/infiniband/core/sysfs.c)
HW_SETTINGS = ("lifespan",)

#: perfquery names (today's and infiniband-diags' older short ones) -> the sysfs counter names
PERFQUERY_NAMES: dict[str, str] = {
    "SymbolErrorCounter": "symbol_error",
    "SymbolErrors": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkRecovers": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "LinkDowned": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "RcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "RcvRemotePhysErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "RcvSwRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "XmtDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "XmtConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "RcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "LinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "ExcBufOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitWait": "port_xmit_wait",
    "XmtWait": "port_xmit_wait",
    "PortXmitData": "port_xmit_data",
    "XmtData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
    "RcvData": "port_rcv_data",
    "PortXmitPkts": "port_xmit_packets",
    "XmtPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets",
    "RcvPkts": "port_rcv_packets",
    "PortUnicastXmitPkts": "unicast_xmit_packets",
    "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets",
    "PortMulticastRcvPkts": "multicast_rcv_packets",
    "QP1Dropped": "QP1_dropped",
}
#: perfquery lines that are selectors, not counts
_PERFQUERY_SKIP = {"PortSelect", "CounterSelect", "CounterSelect2"}
_PQ_HEAD_RE = re.compile(
    r"^# (?P<kind>Port (?:extended )?counters|\w+ counters): Lid (?P<lid>[0-9]+) "
    r"(?:port (?P<port>[0-9]+)|all ports)"
)
#: the value may not start with a dot, so the dots are matched one way only (linear on a line of dots)
_PQ_LINE_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*):\.*(?P<value>[^.\s]\S*)\s*$")

_STATE_WORDS = {
    "down": PortState.DOWN,
    "init": PortState.INIT,
    "initializing": PortState.INIT,
    "armed": PortState.ARMED,
    "active": PortState.ACTIVE,
    "activedefer": PortState.ACTIVE_DEFER,
    "active_defer": PortState.ACTIVE_DEFER,
}
_PHYS_WORDS = {p.value.lower(): p for p in PhysState} | {"phytest": PhysState.PHY_TEST}
_LAYER_WORDS = {x.value.lower(): x for x in LinkLayer}


class IbPortSample(Contract):
    """One port's counters at one moment. ``rate_gbps`` is the signalling rate (Gb/s, 1e9 bit/s) and
    ``width`` the lane count (4 for ``4X``) of the sysfs ``rate`` string (``"400 Gb/sec (4X NDR)"``);
    ``speed`` its per-lane speed name (``NDR``). ``counters`` and ``hw_counters`` map counter name -> count;
    ``unavailable`` maps a counter whose value is not a count to its raw text (``"N/A (no PMA)"``).
    perfquery ports are named by LID: ``ca`` is ``"lid:<LID>"``."""

    ca: str
    port: int
    lid: int | None = None
    state: PortState | None = None
    phys_state: PhysState | None = None
    link_layer: LinkLayer | None = None
    rate_gbps: float | None = None
    width: int | None = None
    speed: str | None = None
    counters: dict[str, int] = Field(default_factory=dict)
    hw_counters: dict[str, int] = Field(default_factory=dict)
    unavailable: dict[str, str] = Field(default_factory=dict)
    #: the port's network interface (RoCE's Ethernet netdev, IPoIB's ``ib0``) and its counters
    #: (``carrier_down_count``: "the number of times the link has been down", sysfs-class-net)
    netdev: str | None = None
    netdev_counters: dict[str, int] = Field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.ca, self.port)


class IbCounterSample(Contract):
    """Every port read at one moment; ``t_s`` is its Unix time (``None``: the dump did not say)."""

    t_s: float | None = None
    ports: list[IbPortSample]


class IbCounters(Contract):
    """A counter dump: ``format`` is ``"sysfs"`` or ``"perfquery"``; ``samples`` in file order."""

    format: str
    samples: list[IbCounterSample]


def parse_rate(text: str) -> tuple[float | None, int | None, str | None]:
    """``"100 Gb/sec (4X EDR)"`` -> ``(100.0, 4, "EDR")``; parts the string lacks are ``None``."""
    m = _RATE_RE.match(text)
    if m is None:
        return None, None, None
    return float(m.group(1)), int(m.group(2)) if m.group(2) else None, m.group(3)


def _word(text: str) -> str:
    return _NUM_PREFIX.sub("", text).strip().lower().replace(" ", "")


class _PortBuilder:
    def __init__(self, ca: str, port: int) -> None:
        self.ca, self.port = ca, port
        self.attrs: dict[str, str] = {}
        self.counters: dict[str, int] = {}
        self.hw: dict[str, int] = {}
        self.unavailable: dict[str, str] = {}
        self.netdev: str | None = None
        self.netdev_counters: dict[str, int] = {}

    def add(self, group: str | None, name: str, value: str) -> None:
        if group is None:
            self.attrs[name] = value.strip()
            return
        if group == CounterGroup.HW_COUNTERS.value and name in HW_SETTINGS:
            return
        m = _COUNT_RE.match(value)
        if m is None:
            self.unavailable[name] = value.strip()[:80]
        elif group == CounterGroup.HW_COUNTERS.value:
            self.hw[name] = int(m.group(1))
        else:
            self.counters[name] = int(m.group(1))

    def build(self) -> IbPortSample:
        rate, width, speed = parse_rate(self.attrs.get("rate", ""))
        return IbPortSample(
            ca=self.ca,
            port=self.port,
            state=_STATE_WORDS.get(_word(self.attrs.get("state", ""))),
            phys_state=_PHYS_WORDS.get(_word(self.attrs.get("phys_state", ""))),
            link_layer=_LAYER_WORDS.get(_word(self.attrs.get("link_layer", ""))),
            rate_gbps=rate,
            width=width,
            speed=speed,
            counters=dict(sorted(self.counters.items())),
            hw_counters=dict(sorted(self.hw.items())),
            unavailable=dict(sorted(self.unavailable.items())),
            netdev=self.netdev,
            netdev_counters=self.netdev_counters,
        )


class _SysfsReader:
    """One sample's ports and netdevs, line by line."""

    def __init__(self, t_s: float | None) -> None:
        self.t_s = t_s
        self.ports: dict[tuple[str, int], _PortBuilder] = {}
        self.netdevs: dict[tuple[str, str], dict[str, str]] = {}

    def line(self, line: str) -> bool:
        """Read one line; whether it was a port or netdev line."""
        m = _SYSFS_RE.match(line)
        if m is not None:
            key = (m.group("ca"), int(m.group("port")))
            b = self.ports.get(key) or self.ports.setdefault(key, _PortBuilder(*key))
            b.add(m.group("group"), m.group("name"), m.group("value"))
            return True
        n = _NETDEV_RE.match(line)
        if n is not None:
            self.netdevs.setdefault((n.group("ca"), n.group("nd")), {})[n.group("name")] = n.group("value").strip()
            return True
        return False

    def sample(self) -> IbCounterSample:
        """The ports, each with its netdev (the one whose ``dev_port`` + 1 is the port number; first by name)."""
        for (ca, nd), attrs in sorted(self.netdevs.items()):
            dev_port = attrs.get("dev_port", "0")
            b = self.ports.get((ca, int(dev_port) + 1 if dev_port.isdigit() else 1))
            count = _COUNT_RE.match(attrs.get("carrier_down_count", ""))
            if b is not None and b.netdev is None:
                b.netdev = nd
                if count is not None:
                    b.netdev_counters["carrier_down_count"] = int(count.group(1))
        keys = sorted(self.ports, key=lambda k: (k[0], k[1]))
        return IbCounterSample(t_s=self.t_s, ports=[self.ports[k].build() for k in keys])


def _finish(ports: dict[tuple[str, int], _PortBuilder], t_s: float | None) -> IbCounterSample:
    return IbCounterSample(t_s=t_s, ports=[ports[k].build() for k in sorted(ports, key=lambda k: (k[0], k[1]))])


def parse_ib_counters(text: str) -> IbCounters:
    """A sysfs counter dump (see the module doc) -> :class:`IbCounters` (``format="sysfs"``).

    Lines that are neither a sample header nor a port or netdev attribute are ignored (a CA's ``fw_ver``,
    blank lines). Raises :class:`ParseError` when no port attribute line is found at all."""
    samples: list[IbCounterSample] = []
    reader = _SysfsReader(None)
    for line in text.splitlines():
        line = line.rstrip("\r")
        head = _SAMPLE_RE.match(line)
        if head is not None:
            if reader.ports:
                samples.append(reader.sample())
            reader = _SysfsReader(float(head.group(2)))
            continue
        reader.line(line)
    if reader.ports:
        samples.append(reader.sample())
    if not samples:
        raise ParseError(FMT_SYSFS, None, "a /sys/class/infiniband/<CA>/ports/<N>/<file>:<value> line", text[:80])
    return IbCounters(format="sysfs", samples=samples)


def parse_perfquery(text: str) -> IbCounters:
    """``perfquery`` / ``perfquery -x`` output (one or more blocks, basic and extended blocks of one port
    merged) -> one sample, ports named ``lid:<LID>``. Counter names are mapped to sysfs names
    (:data:`PERFQUERY_NAMES`; an unknown name is kept as printed). Raises :class:`ParseError` for text with
    no counter block, or a block header without one counter line."""
    ports: dict[tuple[str, int], _PortBuilder] = {}
    cur: _PortBuilder | None = None
    empty_head: int | None = None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        head = _PQ_HEAD_RE.match(line)
        if head is not None:
            if cur is not None and empty_head is not None:
                raise ParseError(FMT_PERFQUERY, empty_head, "a counter line after the block header", "")
            port = int(head.group("port")) if head.group("port") else 255  # 255: "all ports" (perfquery(8))
            key = (f"lid:{head.group('lid')}", port)
            cur = ports.get(key) or ports.setdefault(key, _PortBuilder(*key))
            empty_head = n
            continue
        m = _PQ_LINE_RE.match(line)
        if m is None or cur is None or m.group("name") in _PERFQUERY_SKIP:
            continue
        empty_head = None
        name = PERFQUERY_NAMES.get(m.group("name"), m.group("name"))
        cur.add(CounterGroup.COUNTERS.value, name, m.group("value"))
    if not ports:
        raise ParseError(FMT_PERFQUERY, None, "a '# Port counters: Lid N port N' block", text[:80])
    if empty_head is not None:
        raise ParseError(FMT_PERFQUERY, empty_head, "a counter line after the block header", "")
    sample = _finish(ports, None)
    lids = {k: int(k[0].split(":", 1)[1]) for k in ports}
    named = [p.model_copy(update={"lid": lids[p.key]}) for p in sample.ports]
    return IbCounters(
        format="perfquery",
        samples=[sample.model_copy(update={"ports": named})],
    )


# --------------------------------------------------------------------------------------------- two samples
class CounterDelta(Contract):
    """One counter between two samples: ``delta`` counted in between (``after - before``, or ``after`` when
    ``reset``: the counter went down, so it was reset and ``after`` is a lower bound); ``per_s`` the delta over
    the samples' time apart (``None`` when a sample has no time)."""

    name: str
    group: CounterGroup
    before: int
    after: int
    delta: int
    reset: bool = False
    per_s: float | None = None


class PortDelta(Contract):
    """A port's counters that changed between two samples, and its state (and netdev) in the second."""

    ca: str
    port: int
    netdev: str | None = None
    link_layer: LinkLayer | None = None
    state: PortState | None = None
    elapsed_s: float | None = None
    changed: list[CounterDelta] = Field(default_factory=list)

    def get(self, name: str) -> CounterDelta | None:
        return next((c for c in self.changed if c.name == name), None)


def _delta(name: str, group: CounterGroup, before: int, after: int, elapsed: float | None) -> CounterDelta:
    reset = after < before
    d = after if reset else after - before
    per_s = d / elapsed if elapsed is not None and elapsed > 0 else None
    return CounterDelta(name=name, group=group, before=before, after=after, delta=d, reset=reset, per_s=per_s)


def port_deltas(before: IbCounterSample, after: IbCounterSample) -> list[PortDelta]:
    """Per port present in both samples, every counter whose value differs (a reset included). Ports or
    counters present in one sample only are left out (a port that vanished is ``IB_PORT_DOWN``'s)."""
    elapsed = after.t_s - before.t_s if after.t_s is not None and before.t_s is not None else None
    first = {p.key: p for p in before.ports}
    out: list[PortDelta] = []
    for p in after.ports:
        q = first.get(p.key)
        if q is None:
            continue
        changed: list[CounterDelta] = []
        for group, now, then in (
            (CounterGroup.COUNTERS, p.counters, q.counters),
            (CounterGroup.HW_COUNTERS, p.hw_counters, q.hw_counters),
            (CounterGroup.NETDEV, p.netdev_counters, q.netdev_counters),
        ):
            for name, v in now.items():
                w = then.get(name)
                if w is not None and w != v:
                    changed.append(_delta(name, group, w, v, elapsed))
        out.append(
            PortDelta(
                ca=p.ca,
                port=p.port,
                netdev=p.netdev,
                link_layer=p.link_layer,
                state=p.state,
                elapsed_s=elapsed,
                changed=changed,
            )
        )
    return out


# --------------------------------------------------------------------------------------------- ibdiagnet
class IbdiagnetStage(Contract):
    """One row of ibdiagnet's closing Summary table."""

    stage: str
    warnings: int
    errors: int
    comment: str | None = None


class IbdiagnetSummary(Contract):
    """What an ibdiagnet run concluded: ``version`` (the ``IBDIAGNET x.y`` string), the Summary table, the
    ``-E-`` lines (at most :data:`MAX_IBDIAG_ERRORS`, ``errors_dropped`` more), and the Fabric Summary's node
    total and ``Links at 4x25 : 21`` counts (width x per-lane Gb/s -> links)."""

    version: str | None = None
    stages: list[IbdiagnetStage]
    error_lines: list[str] = Field(default_factory=list)
    errors_dropped: int = 0
    total_nodes: int | None = None
    links_at: dict[str, int] = Field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.stages)

    @property
    def warnings(self) -> int:
        return sum(s.warnings for s in self.stages)


_IBD_VERSION_RE = re.compile(r'Running version:\s*"(IBDIAGNET [^"]+)"')
_IBD_STAGE_RE = re.compile(r"^-I- (?P<stage>\S.*?)\s{2,}(?P<w>[0-9]+)\s+(?P<e>[0-9]+)(?:\s+(?P<c>\S.*?))?\s*$")
_IBD_LINKS_RE = re.compile(r"^Links at (\S+)\s*:\s*([0-9]+)\s*$")
_IBD_TOTAL_RE = re.compile(r"^Total Nodes\s*:\s*([0-9]+)\s*$")


def _ibdiag_stages(lines: list[str]) -> list[IbdiagnetStage]:
    """The rows of the ``-I- Stage  Warnings  Errors  Comment`` table (the last one, if printed twice)."""
    stages: list[IbdiagnetStage] = []
    inside = False
    for line in lines:
        if line.startswith("-I- Stage") and "Warnings" in line and "Errors" in line:
            inside, stages = True, []
            continue
        s = _IBD_STAGE_RE.match(line) if inside and len(line) <= MAX_IBDIAG_ROW else None
        if s is None:
            inside = inside and not (line == "" or line.startswith(("-I- You can", "---")))
            continue
        w, e = int(s.group("w")), int(s.group("e"))
        stages.append(IbdiagnetStage(stage=s.group("stage"), warnings=w, errors=e, comment=s.group("c")))
    return stages


def parse_ibdiagnet(text: str) -> IbdiagnetSummary:
    """An ibdiagnet console output (or its Summary part alone) -> :class:`IbdiagnetSummary`. CRLF line ends
    are accepted. Raises :class:`ParseError` when there is no ``-I- Stage  Warnings  Errors`` table."""
    lines = [raw.rstrip("\r").rstrip() for raw in text.splitlines()]
    stages = _ibdiag_stages(lines)
    if not stages:
        raise ParseError(FMT_IBDIAGNET, None, "a '-I- Stage  Warnings  Errors' Summary table", text[:80])
    errors = [ln[4:].strip() for ln in lines if ln.startswith("-E- ")]
    version = next((v.group(1) for ln in lines if (v := _IBD_VERSION_RE.search(ln))), None)
    total = next((int(t.group(1)) for ln in lines if (t := _IBD_TOTAL_RE.match(ln))), None)
    links = {m.group(1): int(m.group(2)) for ln in lines if (m := _IBD_LINKS_RE.match(ln))}
    return IbdiagnetSummary(
        version=version,
        stages=stages,
        error_lines=errors[:MAX_IBDIAG_ERRORS],
        errors_dropped=max(0, len(errors) - MAX_IBDIAG_ERRORS),
        total_nodes=total,
        links_at=links,
    )


def fabric_mode(values: list[float] | list[int]) -> float | int | None:
    """The most common value (ties: the highest, so a degraded half of a split fleet is the one flagged);
    ``None`` for no value."""
    if not values:
        return None
    tally = _Tally(values)
    best = max(tally.values())
    return max(v for v, c in tally.items() if c == best)
