"""Correlation: every event of every log on one timeline, the first failure, and the ranked causes. Pure.

**Timeline and clock skew.** Events with a full date (``ts``) are ordered by it; events without one (glog
stamps without a year, dmesg seconds since boot, lines with no stamp) keep their file's line order and come
after the dated ones. Hosts' clocks, and the stamps of a collector and of the process, never agree exactly,
so two events less than :data:`SKEW_TOLERANCE_S` apart are treated as simultaneous: between them the more
*decisive* one (:data:`PRIORITY`) counts as first, never merely the one whose clock ran ahead. Stamps without a
zone are read as UTC; when a line carries both a collector's and the process's stamp, the process's own is
used (fixture 06 shows the two eight hours apart: a zone, not a delay).

**The first failure is the earliest decisive event, not the loudest.** Every event kind has a priority; kinds
below :data:`DECISIVE` are *observers*: they report that something else failed (a ProcessGroupNCCL watchdog
timeout, ``Connection closed by remote peer``, a socket error, ``remote process exited``, another rank's exit
after the root cause). A watchdog timeout printed by 511 ranks usually means one rank never reached the
collective: within one process group (its GUID, else its id) the rank whose last enqueued work is below the
SeqNum the others time out on never enqueued it, and a rank that timed out on a lower SeqNum than the others
is behind them (:func:`timeout_analysis`); when all reporting ranks agree, the rank that hung is one that did
not report, and the postmortem says so instead of naming a reporter. The host that prints ``Connection closed
by remote peer`` is the observer: the cause names the peer. ProcessGroupNCCL taking the process down after what its
watchdog caught (``terminate called after throwing an instance of 'c10::DistBackendError'`` whose ``what()`` is the
watchdog's: ``TORCH_NCCL_ASYNC_ERROR_HANDLING``'s "we are taking the entire process down") is no crash of its own:
after a timeout it is evidence of the timeout, after another error that error's line is the cause.

Causes carry the codes of :class:`~fleetdx.orchestrator.judgement.FindingCode`; XIDs are judged with the XID table
of :mod:`fleetdx.orchestrator.diagnosis.xid_table` (NVIDIA's XID catalog) and IB work-completion statuses are
named after ``enum ibv_wc_status`` of rdma-core's ``libibverbs/verbs.h``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fleetdx.orchestrator.diagnosis.xid_table import CONSEQUENCE_XIDS, judge_xid, lookup
from fleetdx.orchestrator.judgement import EvidenceLine, Finding, FindingCode
from fleetdx.orchestrator.postmortem.contracts import TimelineEntry, gpu_details
from fleetdx.orchestrator.postmortem.contracts import cause as cause_of
from fleetdx.orchestrator.postmortem.gpus import GpuMap, Resolved, describe, label
from fleetdx.orchestrator.postmortem.ranks import LogPairs, rank_map
from fleetdx.orchestrator.postmortem.rules import DECISIVE, Judged, judge, render

__all__ = ["DECISIVE", "Judged", "judge"]
from fleetdx.probes.contracts import EvidenceValue, Job, Severity
from fleetdx.probes.parsers.joblog import EventKind, GpuFact, JobEvent
from fleetdx.probes.parsers.logline import iso
from fleetdx.probes.parsers.smi_values import bus_key
from fleetdx.topology.binding import cpu_list

#: seconds within which events of different sources are treated as simultaneous (clock skew, see module doc)
SKEW_TOLERANCE_S = 5.0
#: evidence lines kept per cause
MAX_EVIDENCE = 12
#: timeline entries kept (decisive events first, then observers, in time order)
MAX_TIMELINE = 1000

#: ``enum ibv_wc_status`` (rdma-core libibverbs/verbs.h): the status NCCL prints in ``Got completion from peer``
IBV_WC_STATUS = {
    1: "IBV_WC_LOC_LEN_ERR (local length error)",
    2: "IBV_WC_LOC_QP_OP_ERR (local QP operation error)",
    4: "IBV_WC_LOC_PROT_ERR (local protection error: memory registration, e.g. GPUDirect RDMA)",
    5: "IBV_WC_WR_FLUSH_ERR (work request flushed: the queue pair was already in error)",
    7: "IBV_WC_BAD_RESP_ERR (bad response)",
    8: "IBV_WC_LOC_ACCESS_ERR (local access error)",
    9: "IBV_WC_REM_INV_REQ_ERR (remote invalid request)",
    10: "IBV_WC_REM_ACCESS_ERR (remote access error)",
    11: "IBV_WC_REM_OP_ERR (remote operation error)",
    12: "IBV_WC_RETRY_EXC_ERR (transport retry counter exceeded: the peer did not answer)",
    13: "IBV_WC_RNR_RETRY_EXC_ERR (receiver-not-ready retry counter exceeded)",
    19: "IBV_WC_FATAL_ERR (fatal error)",
    20: "IBV_WC_RESP_TIMEOUT_ERR (response timeout)",
    21: "IBV_WC_GENERAL_ERR (general error)",
}

_PEER_RE = re.compile(r"^(?P<peer>[^<\s]+?)(?:<\d+>)?$")
_IPV4_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def _peer_host(e: JobEvent) -> str | None:
    """The host name of the peer a connection/socket event names (``h2.domain<4711>`` -> ``h2``); an IP
    address stays as printed; ``None`` when none is named."""
    peer = e.details.get("peer")
    if not isinstance(peer, str):
        return None
    m = _PEER_RE.match(peer)
    if m is None:
        return None
    name = m.group("peer")
    if _IPV4_RE.match(name) or ":" in name:
        return name
    return name.split(".", 1)[0]


def _loopback(peer: str) -> bool:
    """A loopback address or name (127.0.0.0/8, ::1, localhost): the printing host itself."""
    return peer.startswith("127.") or peer in ("::1", "localhost")


#: suffixes of a host's own interface names (``gpu07-ib``: gpu07's InfiniBand/IPoIB name)
IB_NAME_SUFFIXES = ("-ib", "-ib0", "-ib1", "-ipoib", "-rdma", "-hsn", "-roce")


def _own_name(name: str, known: set[str]) -> str:
    """``name`` as a host of ``known``: ``gpu07-ib`` is ``gpu07`` when ``gpu07`` is known (and not itself);
    ``172.31.34.232`` is ``ip-172-31-34-232`` when that is known (Amazon EC2's private DNS names spell the
    instance's private IPv4 address: docs.aws.amazon.com, "Amazon EC2 instance hostname types")."""
    if name in known:
        return name
    if _IPV4_RE.match(name) and (ec2 := "ip-" + name.replace(".", "-")) in known:
        return ec2
    for suffix in IB_NAME_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in known:
            return name[: -len(suffix)]
    return name


def _peers_as_hosts(events: Sequence[JobEvent], known: set[str]) -> list[JobEvent]:
    """``events`` with a peer named by a host's own interface name (``HOST-ib``) renamed to ``HOST`` (a loopback
    address to the printing host's name), and a peer that is the printing host itself marked
    ``details["peer_same_host"]`` (another process of that host: the advice sends the reader to that host's other
    ranks, never to the observer as if it were another node)."""
    out = []
    for e in events:
        peer = _peer_host(e)
        if peer is not None:
            host = (e.host or peer) if _loopback(peer) else _own_name(peer, known)
            same = _loopback(peer) or (e.host is not None and host == _own_name(e.host, known))
            if host != peer or same:
                e = e.model_copy(update={"details": {**e.details, "peer": host, "peer_same_host": same}})
        out.append(e)
    return out


#: a link that came back up within this many seconds, before the job's first failure, flapped
FLAP_RECOVERY_S = 60.0


def mark_flaps(ordered: Sequence[JobEvent]) -> list[JobEvent]:
    """``ordered`` with each ``Link down`` that its own ``Link up`` (same host and device) followed within
    :data:`FLAP_RECOVERY_S`, before any decisive job event, marked ``details["recovered_after_s"]``: a flap that
    recovered before the job failed is not the failure (a link still down when the job failed is)."""
    ups: dict[tuple[str | None, object], list[float]] = defaultdict(list)
    for e in ordered:
        if e.kind is EventKind.IB_LINK_UP and e.ts is not None:
            ups[(e.host, e.details.get("device"))].append(e.ts)
    if not ups:  # no link came back up: nothing to mark (and the decisive events need not be judged here)
        return list(ordered)
    job_fail = min(
        (
            e.ts
            for e in ordered
            if e.ts is not None
            and e.kind not in _KERNEL_LINK
            and (j := judge(e)) is not None
            and j.priority >= DECISIVE
            and e.kind is not EventKind.IB_LINK_DOWN
        ),
        default=None,
    )
    out = []
    for e in ordered:
        if e.kind is EventKind.IB_LINK_DOWN and e.ts is not None:
            back = [t for t in ups.get((e.host, e.details.get("device")), []) if e.ts <= t <= e.ts + FLAP_RECOVERY_S]
            if back and (job_fail is None or back[0] < job_fail):
                e = e.model_copy(update={"details": {**e.details, "recovered_after_s": round(back[0] - e.ts, 3)}})
        out.append(e)
    return out


_KERNEL_LINK = frozenset({EventKind.IB_LINK_DOWN, EventKind.IB_LINK_UP, EventKind.IB_PORT_STATE})


_UNDATED = float("inf")  #: where an event without a stamp sorts: after the dated ones


def _order_key(e: JobEvent, index: int) -> tuple[float, int]:
    return (_ts_or_last(e), index)


def timeline(events: Sequence[JobEvent]) -> list[JobEvent]:
    """``events`` ordered as the module doc says (dated first by ``ts``, then the rest in input order)."""
    return sorted(events, key=_ts_or_last)  # a stable sort: the undated, and equal stamps, keep their order


def _ts_or_last(e: JobEvent) -> float:
    return e.ts if e.ts is not None else _UNDATED


def _is_fallback(e: JobEvent) -> bool:
    """Fallback evidence (catalog role ``fallback``): a C++ frame of the function that threw, NCCL's ``FILE:LINE ->
    N`` return trail, read where the paste lost the message."""
    return e.details.get("role") == "fallback"


def _without_fallback(events: Sequence[JobEvent], judged: list[Judged | None]) -> list[Judged | None]:
    """``judged`` with the fallback evidence (:func:`_is_fallback`) left out when any other event of the log is
    judged: it speaks only alone."""
    fallback = [_is_fallback(e) for e in events]
    if any(j is not None and not f for j, f in zip(judged, fallback, strict=True)):
        return [None if f else j for j, f in zip(judged, fallback, strict=True)]
    return judged


def first_decisive(events: Sequence[JobEvent], judged: Sequence[Judged | None] | None = None) -> JobEvent | None:
    """The first failure: among decisive events, the earliest dated one, a more decisive one within
    :data:`SKEW_TOLERANCE_S` of it winning; an undated event wins only if more decisive than that. ``judged``:
    each event's :func:`judge`, when the caller has them."""
    if judged is None:
        judged = [judge(e) for e in events]
    scored = [(e, j) for e, j in zip(events, judged, strict=True) if j is not None and j.priority >= DECISIVE]
    if not scored:
        return None
    dated = [(e, j) for e, j in scored if e.ts is not None]
    best: tuple[JobEvent, Judged] | None = None
    if dated:
        t0 = min(e.ts for e, _ in dated if e.ts is not None)
        close = [(e, j) for e, j in dated if e.ts is not None and e.ts <= t0 + SKEW_TOLERANCE_S]
        best = max(close, key=lambda p: (p[1].priority, -(p[0].ts or 0.0)))
    undated = [(e, j) for e, j in scored if e.ts is None]
    if undated:
        u = max(undated, key=lambda p: p[1].priority)  # max keeps the first of equals: the earliest line
        if best is None or u[1].priority > best[1].priority:
            best = u
    return best[0] if best else None


@dataclass
class TimeoutAnalysis:
    """What the watchdog timeouts and work-progress lines say (see :func:`timeout_analysis`)."""

    reporters: list[int] = field(default_factory=list)  #: ranks that reported a timeout
    suspects: list[int] = field(default_factory=list)  #: ranks shown to be behind the others
    reason: str = ""
    seq: int | None = None  #: the SeqNum most reporters waited on
    op: str | None = None
    last_completed: int | None = None
    groups_differ: bool = False  #: the reporters' timeouts are in different process groups
    #: ranks whose watchdog got stuck (ProcessGroupNCCL's heartbeat monitor: a CUDA/NCCL call hung in them)
    stuck: list[int] = field(default_factory=list)
    #: ranks that printed a Flight Recorder dump signal (torch 2.5+: "Received a dump signal due to a collective
    #: timeout from rank N / this local rank")
    signalled: list[int] = field(default_factory=list)
    #: the decisive event of each suspect that failed before the others timed out (``failed`` of the analysis)
    failed_first: list[JobEvent] = field(default_factory=list)


def _before(a: JobEvent, b: JobEvent) -> bool:
    """Whether ``a`` is known to come before ``b``: both dated (``a`` earlier by more than the clock skew's
    tolerance is not required: a rank that failed is rarely within it of the others' timeouts, which come
    minutes later), else both in one file and ``a`` on an earlier line."""
    if a.ts is not None and b.ts is not None:
        return a.ts < b.ts
    return a.file == b.file and a.line < b.line


_READY_RE = re.compile(r"\[ready ranks: (\d{1,7}(?:, \d{1,7}){0,8191})\]")


def _unready(text: str) -> set[int]:
    """The ranks a Horovod ``[ready ranks: ...]`` list leaves out inside its own range (``0, 1, 3`` -> ``{2}``):
    ranks run from 0 to the world size less one, so a rank below the highest ready one that is not ready is in
    the world and never submitted the tensor. Empty when the text holds no such list (or it has no gap)."""
    m = _READY_RE.search(text) if "[ready ranks: " in text else None
    if m is None:
        return set()
    ready = {int(x) for x in m.group(1).split(", ")}
    return set(range(max(ready))) - ready


def timeout_analysis(
    events: Sequence[JobEvent], world: Iterable[int] = (), failed: Sequence[JobEvent] = ()
) -> TimeoutAnalysis:
    """Which rank hung a collective, from the watchdog timeouts, the last enqueued/completed work (work-progress
    lines and Flight Recorder dump signals, whose ``culprit_rank`` is a rank that timed out), and the decisive
    events of other ranks (``failed``: OOM, crash, CUDA error, each with its rank).

    A rank a framework's stall report names as missing (Horovod's stall inspector, gloo's monitoredBarrier:
    ``EventKind.STALL``) never joined the collective. A rank whose decisive event comes before the first timeout
    and which reported none is the rank that never reached the collective (it failed first). Else, per process
    group (GUID, else id, else the one default group when every rank reports a single SeqNum): a rank whose last
    enqueued work is below the SeqNum the others time out on never enqueued that collective; a rank timing out on
    a lower SeqNum than the others is behind them. When all reporters agree, the suspects are the ranks of
    ``world`` (the job's ranks, when known) that did not report.
    """
    stalls = [e for e in events if e.kind is EventKind.STALL]
    missing = sorted(
        {int(c) for e in stalls if isinstance(c := e.details.get("culprit_rank"), int)}
        | {r for e in stalls for r in _unready(e.text)}
    )
    if missing:  # the framework's own report names them: no need to infer them from SeqNums
        return TimeoutAnalysis(
            reporters=sorted({e.rank for e in stalls if e.rank is not None}),
            suspects=missing,
            reason="the stall report names them as the ranks that never joined the collective",
        )
    wd = [e for e in events if e.kind is EventKind.WATCHDOG_TIMEOUT and e.rank is not None]
    dumps = [e for e in events if e.kind is EventKind.FLIGHT_RECORDER_DUMP and e.rank is not None]
    prog = [e for e in events if e.kind is EventKind.WORK_PROGRESS and e.rank is not None]
    culprits = {int(c) for e in dumps if isinstance(c := e.details.get("culprit_rank"), int)}
    out = TimeoutAnalysis(
        reporters=sorted({e.rank for e in wd + prog if e.rank is not None} | culprits),
        stuck=sorted({e.rank for e in events if e.kind is EventKind.WATCHDOG_STUCK and e.rank is not None}),
        signalled=sorted({e.rank for e in dumps if e.rank is not None}),
    )
    if not out.reporters:
        return out
    timeouts = wd + prog + dumps
    first_timeout = min(timeouts, key=lambda e: (e.ts if e.ts is not None else float("inf"), e.line))
    early: dict[int, JobEvent] = {}
    for f in failed:
        if f.rank is not None and f.rank not in out.reporters and _before(f, first_timeout):
            early.setdefault(f.rank, f)
    if early:
        out.suspects = sorted(early)
        out.failed_first = [early[r] for r in out.suspects]
        out.reason = (
            "failed first, before the others timed out ("
            + "; ".join(
                f"rank {r}: {early[r].kind.value} at {early[r].file.rsplit('/', 1)[-1]}:{early[r].line}"
                for r in out.suspects[:4]
            )
            + ")"
        )
    prog = prog + [e for e in dumps if isinstance(e.details.get("last_enqueued"), int)]
    seqs: dict[int, set[int]] = defaultdict(set)
    for e in wd:
        if isinstance(e.details.get("seq"), int) and e.rank is not None:
            seqs[e.rank].add(int(e.details["seq"]))  # type: ignore[arg-type]
    group_of: dict[int, object] = {}
    for e in prog:
        if e.rank is not None:
            group_of.setdefault(e.rank, e.details.get("pg_guid", e.details.get("pg")))
    seq_counts: dict[int, int] = defaultdict(int)
    for s in seqs.values():
        for x in s:
            seq_counts[x] += 1
    if seq_counts:
        out.seq = max(seq_counts, key=lambda s: (seq_counts[s], s))
        first = next(e for e in wd if e.details.get("seq") == out.seq)
        out.op = str(first.details.get("op")) if first.details.get("op") else None
    done = [int(v) for e in prog if isinstance(v := e.details.get("last_completed"), int)]
    out.last_completed = min(done) if done else None
    if out.suspects:
        return out
    groups = set(group_of.values())
    single_group = (len(groups) <= 1 and all(len(s) == 1 for s in seqs.values())) or (
        len(groups) == 1 and set(group_of) >= set(seqs)
    )
    if not single_group:
        out.groups_differ = True
        out.reason = "SeqNums of different process groups do not compare"
        return out
    enq: dict[int, int] = {}
    for e in prog:
        if e.rank is not None and isinstance(v := e.details.get("last_enqueued"), int):
            enq[e.rank] = min(v, enq.get(e.rank, v))
    # the SeqNum waited on: the timeouts', else (dump signals only) the highest work any rank enqueued
    target = out.seq if out.seq is not None else (max(enq.values()) if len(set(enq.values())) > 1 else None)
    behind_enq = sorted(r for r, v in enq.items() if target is not None and v < target)
    if behind_enq:
        out.suspects = sorted(set(behind_enq))
        out.seq = target
        out.reason = f"their last enqueued work is below SeqNum {out.seq}: they never reached that collective"
        return out
    lows = {r: min(s) for r, s in seqs.items() if s}
    if lows and len(set(lows.values())) > 1:
        low = min(lows.values())
        out.suspects = sorted(r for r, s in lows.items() if s == low)
        out.reason = f"they timed out on SeqNum {low}, behind the others' {max(lows.values())}"
        return out
    silent = sorted(set(world) - set(out.reporters))
    if silent:
        out.suspects = silent
        out.reason = "every reporting rank waited on the same collective; these ranks of the job never reported"
    return out


def _with_gpu(cause: Finding, res: Resolved | None) -> Finding:
    """``cause`` with its GPU (``gpu``, ``details["gpu_ref"]``) and the line that says which GPU it is among its
    evidence (second, after the leading event's line), or unchanged when nothing says it."""
    if res is None:
        return cause
    evidence = list(cause.evidence)
    if res.line is not None and not any(e.file == res.line.file and e.line == res.line.line for e in evidence):
        evidence = [*evidence[:1], res.line, *evidence[1:]][:MAX_EVIDENCE]
    gpu = label(res.ref)
    update: dict[str, object] = {"gpu": gpu, "details": {**cause.details, **gpu_details(res.ref)}, "evidence": evidence}
    if cause.rank is None and gpu:
        update["subject"] = gpu
    return cause.model_copy(update=update)


def _with_line(cause: Finding, line: EvidenceLine) -> Finding:
    """``cause`` with ``line`` (the line naming its host) second among its evidence, unless already there."""
    evidence = list(cause.evidence)
    if any(e.file == line.file and e.line == line.line for e in evidence):
        return cause
    return cause.model_copy(update={"evidence": [*evidence[:1], line, *evidence[1:]][:MAX_EVIDENCE]})


def _xid_rank(cause: Finding, lead: JobEvent, res: Resolved | None, gmap: GpuMap) -> Finding:
    """A kernel GPU cause (XID, GPU lost) tied to the rank whose NCCL init line printed its bus id on its host:
    the rank, and a sentence saying so; when other ranks' GPUs on that host are known and none is this one,
    the sentence says that instead."""
    ref = res.ref if res is not None else None
    if ref is not None and ref.kernel_match and ref.rank is not None:
        return cause.model_copy(
            update={
                "rank": ref.rank,
                "message": f"{cause.message}; it is rank {ref.rank}'s GPU: {describe(ref)} printed bus id "
                f"{ref.bus_id} on {lead.host}",
            }
        )
    on_host = gmap.ranks_on(lead.host) if lead.host else []
    if on_host and lead.details.get("pci"):
        known = ", ".join(f"rank {r} {f.bus_id}" for r, f in on_host[:8])
        return cause.model_copy(
            update={"message": f"{cause.message}; not the GPU of a rank whose bus id NCCL printed ({known})"}
        )
    return cause


def _rank_ref(gmap: GpuMap, rank: int, host: str | None, lead: JobEvent) -> Resolved | None:
    """The GPU of ``rank`` (on ``host``), from its own event ``lead`` when it is one, else from what the logs
    printed about the rank alone."""
    if lead.rank == rank:
        return gmap.for_event(lead)
    probe = JobEvent(kind=EventKind.WATCHDOG_TIMEOUT, rank=rank, host=host, file=lead.file, line=lead.line, text="")
    return gmap.for_event(probe)


def _device(d: Mapping[str, object]) -> object:
    """The device an OOM names: NCCL's ``[C]``, torch's ``GPU N`` (``gpu``), HIP's (``dev``)."""
    return next((d[k] for k in ("cuda_device", "gpu", "dev") if d.get(k) is not None), None)


def _time(e: JobEvent) -> str | None:
    """ISO 8601 UTC when the stamp's date is known, else the stamp as printed (a yearless stamp dated only by a
    guess keeps its printed form)."""
    return iso(e.ts) if e.ts is not None and not e.details.get("year_assumed") else e.time


def _evidence(events: Sequence[JobEvent]) -> list[EvidenceLine]:
    """The events' lines, each once, at most :data:`MAX_EVIDENCE`."""
    lines = {(e.file, e.line): e for e in reversed(events)}
    return [EvidenceLine(file=e.file, line=e.line, text=e.text) for e in list(reversed(lines.values()))[:MAX_EVIDENCE]]


def _where(rank: int | None, host: str | None) -> str:
    parts = ([f"rank {rank}"] if rank is not None else []) + ([f"on {host}"] if host else [])
    return " ".join(parts) or "on an unnamed host"


def _teardown_of(e: JobEvent, root_xid: int) -> bool:
    """``e`` is an XID 43/45 teardown folded into a root XID of another code (:func:`_fold_xid_root`)."""
    code = int(e.details.get("xid") or 0)
    return root_xid not in CONSEQUENCE_XIDS and code in CONSEQUENCE_XIDS


def _teardowns_said(root_xid: int, group: Sequence[JobEvent]) -> str:
    """The root XID's words for the teardowns and the driver's own lines of the same fall folded into it."""
    downs = [e for e in group if e.kind is EventKind.XID and _teardown_of(e, root_xid)]
    falls = [e for e in group if e.kind is EventKind.GPU_LOST]
    said = ""
    if downs:
        codes = "/".join(str(c) for c in sorted({int(e.details.get("xid") or 0) for e in downs}))
        gpus = len({str(e.details.get("pci")) for e in downs})
        said += (
            f"; then XID {codes} on {gpus} other GPU(s) of this host ({len(downs)} lines): teardowns this fault "
            "caused, not faults of their own"
        )
    if falls:
        said += f"; the driver's own 'fallen off the bus' line(s) for this GPU: {len(falls)}, the same fall"
    return said


#: who reported a child's failure, by the message catalog row's project (the first part of its id); the
#: ChildFailedError summary torchrun prints is read without a catalog row
_LAUNCHER_SAYS = {
    "ray": "Ray reported its worker dead (its message lists OOM, ray stop and a crash as possible reasons)",
    "deepspeed": "DeepSpeed's launcher saw it exit",
    "cpython": "its launcher's command failed",
    "lightning": "Lightning's launcher saw it end",
    "pytorch": "torch's launcher saw it exit",
    "pdsh": "pdsh saw its ssh end",
    "bash": "its shell reported it killed",
    "openmpi": "mpirun named it the first process to exit",
    "mpich": "mpiexec (hydra) reported its bad termination",
}


#: the device an out-of-memory line names, by the words it prints (CUDA when none of these)
_OOM_DEVICES = (("HIP out of memory", "HIP"), ("XLA:TPU", "XLA:TPU"), ("nrt_tensor_allocate", "Neuron device"))


def _describe(code: FindingCode, lead: JobEvent, group: Sequence[JobEvent], j: Judged) -> tuple[str, str]:
    """(message, action) of one cause, from its leading event and its group."""
    d, where, host = lead.details, _where(lead.rank, lead.host), lead.host or "the host"
    k = lead.kind
    hosts = sorted({e.host for e in group if e.host})
    if j.rule is not None and j.rule.message:  # the rule's own words (rules.RULES)
        text = lead.text.split("\n", 1)[0].strip()[:200]
        if lead.rank is None and lead.task is not None:
            where = f"Slurm task {lead.task} " + (f"on {lead.host}" if lead.host else "")
        msg = render(j.rule.message, where=where, host=host, text=text, details=d)
        return msg, render(j.rule.action, where=where, host=host, text=text, details=d)
    if k in (EventKind.XID,):
        xid = int(d.get("xid") or 0)
        info = lookup(xid)
        extra = f"; {j.note}" if j.note else ""
        aer = [e for e in group if e.kind is EventKind.AER and (e.details.get("error") or e.details.get("received"))]
        if aer:
            named = [e for e in aer if e.details.get("first")] or [e for e in aer if e.details.get("error")] or aer
            what = str(named[0].details.get("error") or named[0].details.get("received"))
            extra += f"; after PCIe AER {what} at {aer[0].details.get('pci')}"
        prior = judge_xid(int(d.get("xid") or 0), [str(d.get("message") or "")]).cause_xid
        act = lookup(prior).action if prior is not None else info.action
        verb = {Severity.CRITICAL: f"drain {host}", Severity.WARNING: f"watch {host}"}.get(j.severity, "")
        if code is FindingCode.CUDA_ERROR:
            verb = "an application fault, the GPU stays healthy"
        if verb.startswith("drain") and act.startswith("drain"):
            act = act.removeprefix("drain").lstrip("; ,")
        extra += _teardowns_said(xid, group)
        alike = [e for e in group if e.kind is EventKind.XID and not _teardown_of(e, xid)]
        pcis = list(dict.fromkeys(str(e.details.get("pci")) for e in alike))
        if len(pcis) > 1:
            extra += f"; {len(pcis)} GPUs of this host alike ({', '.join(pcis[:8])}), {len(alike)} lines"
        return (
            f"XID {xid} ({info.mnemonic}: {info.meaning}) {where} GPU {d.get('pci')}{extra}",
            f"{verb}: {act}",
        )
    if k is EventKind.GPU_LOST:
        return (
            f"a GPU {where} was lost by the driver ({d.get('event')}"
            + (f", {d['pci']})" if d.get("pci") else f": {lead.text.splitlines()[0][:120]})"),
            f"drain {host}: {lookup(119 if d.get('event') == 'gsp-timeout' else 79).action}",
        )
    if k is EventKind.AER:
        aer_what = d.get("error") or d.get("received") or d.get("severity")
        return (
            f"PCIe AER {aer_what} {where} at {d.get('pci')}",
            f"drain {host}: check the PCIe slot/riser and link of {d.get('pci')} (AER history, lspci -vv); "
            "reseat, RMA if it recurs",
        )
    if code is FindingCode.NODE_FAILURE:
        slurm = any(w in lead.text for w in ("NODE_FAIL", "Node failure", "NODE FAILURE"))
        return (
            f"{f'the node {lead.host}' if lead.host else 'a node'} failed "
            f"({'Slurm NODE_FAIL' if slurm else lead.text.strip()[:120]})",
            f"drain {host}, read its BMC event log; resubmit with --exclude={host}"
            if lead.host
            else "find the node in the job's record (sacct -j JOB -o NodeList), drain it and read its BMC event log; "
            "resubmit excluding it",
        )
    if code is FindingCode.OOM_HOST:
        if j.note == "SIGKILL":
            return (
                f"{where} was killed by SIGKILL (exit code -9): most often the kernel's OOM killer",
                "confirm with the node's kernel log (oom-kill); request more host memory (--mem), fewer data-loader "
                "workers or smaller host buffers; the node is not at fault",
            )
        return (
            f"the host ran out of memory {where} ({lead.text.strip()[:120]})",
            "request more host memory (--mem), fewer data-loader workers or smaller host buffers, then resubmit; "
            "the node is not at fault",
        )
    if code is FindingCode.OOM_GPU:
        said = next((name for key, name in _OOM_DEVICES if key in lead.text), "CUDA")
        return (
            f"{said} out of memory {where}" + (f" (device {dev})" if (dev := _device(d)) is not None else ""),
            "reduce the per-GPU batch or sequence length, enable activation checkpointing or sharding; check that "
            "no other process holds the GPU (fleetdx preflight: GPU_FOREIGN_PROCESS); the GPU is not at fault",
        )
    if code is FindingCode.GPU_HW_FAULT:
        return (
            f"uncorrectable ECC error {where}",
            f"drain {host}: {lookup(48).action}",
        )
    if code is FindingCode.CUDA_ERROR:
        err = d.get("error") or lead.text[:80]
        return (
            f"CUDA error {where}: {err}",
            "an application fault unless the same GPU repeats it across jobs: rerun with CUDA_LAUNCH_BLOCKING=1 "
            "under compute-sanitizer; if it recurs on this GPU, probe it (fleetdx preflight --level standard)",
        )
    if k is EventKind.NCCL_IB_COMPLETION:
        status = d.get("status")
        name = IBV_WC_STATUS.get(int(status), f"status {status}") if isinstance(status, int) else "?"
        if d.get("provider") == "NET/OFI":  # libfabric (AWS EFA): its own error numbers, not ibv_wc_status
            said = "".join(
                part
                for part, value in (
                    (f" {status}", status),
                    (f" ({d.get('status_name')})", d.get("status_name")),
                    (f", RC {d.get('rc')}", d.get("rc")),
                )
                if value is not None
            )
            return (
                f"libfabric (NET/OFI) completion error{said}, {where}",
                f"check the EFA/libfabric path of {host} and its peers (fi_info, the instance's EFA health); if one "
                "host is in every error, resubmit with --exclude=<it>",
            )
        return (
            f"InfiniBand work completion error {name}, vendor error {d.get('vendor')}"
            + (f" ({d['dir']})" if d.get("dir") else "")
            + f" seen {where}"
            + (f" from peer {d['peer']}" if d.get("peer") else " (NCCL < 2.10 names no peer)")
            + (f"; also on {', '.join(hosts)}" if len(hosts) > 1 else ""),
            f"check the IB path between {host} and its peer (ibstat, mlx5 Link down in dmesg, switch port error "
            f"counters); if one host is in every error, resubmit with --exclude=<it> and drain it",
        )
    if k is EventKind.NCCL_IB_ASYNC:
        return (
            f"the HCA {where} raised an async event: {d.get('event')}",
            f"drain {host}: reset the HCA (reboot) and check its firmware and cable; resubmit with --exclude={host}",
        )
    if k is EventKind.IB_LINK_DOWN and d.get("recovered_after_s") is not None:
        return (
            f"InfiniBand link {d.get('device')} {where} went down and came back up {d.get('recovered_after_s')} s "
            "later, before the job failed (a flap)",
            f"watch {host}'s link (cable, transceiver, switch port error counters); drain it if it flaps again",
        )
    if k in (EventKind.IB_LINK_DOWN, EventKind.IB_PORT_STATE):
        return (
            f"InfiniBand link {d.get('device') or d.get('module') or ''} {where} went down "
            f"({d.get('state') or d.get('event') or 'Link down'})",
            f"check the cable, transceiver and switch port of {host}; drain it if the link flaps; resubmit with "
            f"--exclude={host}",
        )
    if code is FindingCode.NCCL_NETWORK_ERROR:  # observers only
        peers = list(dict.fromkeys(p for e in group if (p := _peer_host(e))))
        seen_by = ", ".join(hosts) or "a host"
        peer_names = ", ".join(peers[:4]) or "a peer"
        if peers and all(e.details.get("peer_same_host") for e in group if _peer_host(e)):
            return (
                f"{seen_by} lost NCCL connections to another process of the same host ({peer_names}; "
                f"{', '.join(sorted({e.kind.value for e in group}))}): that process most likely exited first",
                f"read the logs of the other ranks on {peer_names} for the first failure (an OOM, a crash)",
            )
        return (
            f"{seen_by} lost NCCL connections to {peer_names} ({', '.join(sorted({e.kind.value for e in group}))}): "
            "the printer is the observer; the peer's process most likely exited, or the network between them "
            "failed, first",
            f"read {peer_names}'s own log and kernel log for the first failure",
        )
    if code is FindingCode.PROCESS_CRASH:
        sig = d.get("signal")
        ec = d.get("exit_code")
        if k is EventKind.PYTHON_EXCEPTION:
            what = f"{d.get('type')}: {d.get('message')}"
        elif k is EventKind.CHILD_FAILED and d.get("root_cause") is not False:
            said = _LAUNCHER_SAYS.get(
                str(d.get("catalog") or "").split(".", 1)[0], "the root cause of torchrun's ChildFailedError"
            )
            what = said + (f", exit code {ec}" if ec is not None else "") + (f" ({sig})" if sig else "")
        else:
            what = f"exit code {ec}" if ec is not None else (str(sig) if sig else lead.text[:100])
            if d.get("what"):
                what += f" (what(): {str(d['what'])[:160]})"
        return (
            f"{where} died: {what}",
            "read this rank's traceback or core dump; a segfault inside NCCL/CUDA libraries can be a "
            "driver/library mismatch"
            if sig
            else "read this rank's traceback (the first exception of the rank)",
        )
    if code is FindingCode.CONFIG_ERROR:
        said_exc = d.get("message") or d.get("error")
        what = f"{d.get('type')}: {said_exc}" if d.get("type") and said_exc else lead.text[:160]
        return (f"configuration error {where}: {what}", "fix the job's configuration or environment and resubmit")
    if code is FindingCode.NCCL_INTERNAL_ERROR:
        ranks = sorted({e.rank for e in group if e.rank is not None})
        also = f" (and {_ranks(ranks[1:])} of {host}: {len(ranks)} ranks)" if len(ranks) > 1 else ""
        return (
            f"NCCL {k.value.replace('nccl-', '').replace('-', ' ')} {where}{also}",
            "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; a system error is often a failed socket or a "
            "too small /dev/shm",
        )
    at = f" at {lead.time}" if lead.time else ""
    if code is FindingCode.SLURM_TIME_LIMIT:
        return (
            f"Slurm cancelled job {d.get('job') or '(id not printed)'}{at}: it reached its time limit",
            "raise --time, or checkpoint and resume; no node is at fault",
        )
    if code is FindingCode.SLURM_PREEMPTED:
        why = "preempted it" if d.get("reason") != "JOB REQUEUE" else "requeued it"
        job = f" (job {d['job']})" if d.get("job") else ""
        # Slurm's own line names the reason; a launcher's (submitit, Lightning, SkyPilot) relays a preemption
        who = "Slurm" if d.get("reason") else "the scheduler"
        return (
            f"{who} {why}{at}{job}: another job took its nodes; the errors of the ranks after it are its echoes",
            "nothing is broken: submit with --requeue and checkpoint often (save at SIGTERM with --signal) so the "
            "job resumes, or use a partition or QOS that is not preemptible; no node is at fault",
        )
    if code is FindingCode.NCCL_TRANSPORT_FALLBACK:
        return (
            f"NCCL uses TCP sockets ({d.get('device') or 'no IB device found'}) {where}",
            "if the nodes have InfiniBand/RoCE, NCCL fell back: check NCCL_IB_DISABLE, NCCL_NET, NCCL_IB_HCA and "
            "the IB plugin; a single-node job is unaffected",
        )
    return (lead.text[:200], "")


#: what a timeout is called when every event of it was read by catalog rows of one other library (by id prefix)
_TIMEOUT_NAMES = {
    "cann.": "HCCL timeout (Ascend CANN)",
    "nccl.ras.": "a hang NCCL's RAS client (ncclras) reported",
    "pytorch.pgnccl.abort_future": "a hang: ProcessGroupNCCL's abort (ncclCommAbort) did not return",
    "sglang.scheduler.watchdog": "a hang SGLang's scheduler watchdog reported (no forward pass)",
    "vllm.executor.rpc_timed_out": "a hang: vLLM's engine timed out waiting for its workers",
}


def _timeout_name(group: Sequence[JobEvent]) -> str:
    """What the timeout ``group`` is called: an NCCL watchdog timeout, or the other library's timeout that every
    event of it reports (Ascend's HCCL: its EI0002 Notify wait, a runtime task timeout)."""
    ids = {str(e.details.get("catalog") or "") for e in group}
    return next(
        (name for prefix, name in _TIMEOUT_NAMES.items() if all(i.startswith(prefix) for i in ids)),
        "NCCL watchdog timeout",
    )


def _timeout_cause(
    group: Sequence[JobEvent], analysis: TimeoutAnalysis, gmap: GpuMap, rank_hosts: dict[int, str]
) -> tuple[Finding, list[str]]:
    missing: list[str] = []
    name = _timeout_name(group)
    reporters = analysis.reporters
    op = f"{analysis.op} SeqNum {analysis.seq}" if analysis.seq is not None else "a collective"
    done = f", last completed work {analysis.last_completed}" if analysis.last_completed is not None else ""
    rank = host = None
    nodes: list[str] = []
    lead = group[0]
    own_host = {e.rank: e.host for e in analysis.failed_first if e.host}
    if analysis.suspects:
        rank = analysis.suspects[0]
        host = own_host.get(rank) or rank_hosts.get(rank)
        nodes = sorted({h for r in analysis.suspects if (h := own_host.get(r) or rank_hosts.get(r))})
        verb = "never reached it" if analysis.failed_first else "hung it"
        msg = f"{name}: {_ranks(reporters)} waited in {op}{done}; {_ranks(analysis.suspects)} {verb}: {analysis.reason}"
        lead = next((e for e in [*analysis.failed_first, *group] if e.rank == rank), lead)
    elif analysis.groups_differ:
        per_rank = "; ".join(
            f"rank {e.rank}: {e.details.get('op')} SeqNum {e.details.get('seq')}"
            for e in _first_per_rank(group, EventKind.WATCHDOG_TIMEOUT)[:8]
        )
        msg = f"NCCL watchdog timeouts in several process groups ({per_rank}): {analysis.reason}"
        missing.append(
            f"which rank hung the collectives: {_ranks(reporters)} reported timeouts in different process groups; "
            "give every rank's log, or Flight Recorder dumps (--fr)"
        )
    elif not reporters and analysis.stuck:
        # only "watchdog got stuck" lines: the hung call is in that process (its watchdog could not run)
        rank = analysis.stuck[0]
        host = rank_hosts.get(rank)
        nodes = sorted({h for r in analysis.stuck if (h := rank_hosts.get(r))})
        msg = (
            f"ProcessGroupNCCL's watchdog of {_ranks(analysis.stuck)} got stuck: a CUDA or NCCL call (or a thread "
            "holding the GIL inside one) hung in that process, so no collective timeout could even be reported"
        )
        missing.append("a stack of the stuck process (py-spy dump --native) or its Flight Recorder dump (--fr)")
    elif not reporters and (barrier := next((e for e in group if e.kind is EventKind.RENDEZVOUS_ERROR), None)):
        # the XLA coordination service's barrier of the program's own (rules.py): no NCCL watchdog took part
        msg = (
            f"the coordination service's barrier {barrier.details.get('op')} timed out after the processes had "
            "connected: a process hung or died before reaching it"
        )
        missing.append(
            "which process never reached the barrier: the tasks the coordinator names as timed out, their own logs"
        )
    else:
        waited = f"{_ranks(reporters)} waited in {op}{done}" if reporters else f"ranks waited in {op}{done}"
        msg = f"{name}: {waited}; " + (analysis.reason or "the rank that never reached it is not among the logs given")
        missing.append(
            f"which rank never reached {op}: {waited} and no log shows the rank they waited on; "
            "give every rank's log, or Flight Recorder dumps (--fr)"
        )
    if analysis.signalled:
        msg += f"; Flight Recorder dump signals printed by {_ranks(analysis.signalled)}"
    if analysis.stuck and reporters:  # (without reporters the message is about the stuck watchdog already)
        msg += f"; the watchdog of {_ranks(analysis.stuck)} got stuck (a CUDA or NCCL call hung in that process)"
    timeout = next((e.details.get("timeout_ms") for e in group if e.details.get("timeout_ms")), None)
    action = (
        "look at the suspect rank's own log and node for what stopped it (a hang, a crash, a slow data loader)"
        if analysis.suspects
        else "find the rank that never reached the collective (every rank's log, or --fr)"
    )
    if timeout:
        action += f"; raise the timeout ({timeout} ms) only if the collective is legitimately that slow"
    ordered = [
        *analysis.failed_first[:1],
        *sorted(group, key=lambda e: (e.rank != rank, e.kind is not EventKind.WATCHDOG_TIMEOUT)),
    ]
    cause = cause_of(
        code=FindingCode.NCCL_TIMEOUT,
        severity=Severity.CRITICAL,
        rank=rank,
        host=host,
        nodes=nodes,
        time=_time(lead),
        message=msg,
        action=action,
        evidence=_evidence(ordered),
    )
    if rank is not None:
        cause = _with_gpu(cause, _rank_ref(gmap, rank, host, lead))
    return cause, missing


def _first_per_rank(events: Sequence[JobEvent], kind: EventKind) -> list[JobEvent]:
    seen: dict[int | None, JobEvent] = {}
    for e in events:
        if e.kind is kind:
            seen.setdefault(e.rank, e)
    return list(seen.values())


def _ranks(ranks: Sequence[int]) -> str:
    """``"rank 3"`` or ``"ranks 0-2,5"``."""
    return ("rank " if len(set(ranks)) == 1 else "ranks ") + (cpu_list(ranks) or "-")


@dataclass
class Correlation:
    """The causes (most likely first), the timeline entries and what evidence is missing."""

    causes: list[Finding]
    timeline: list[TimelineEntry]
    missing: list[str]
    priorities: list[int] = field(default_factory=list)  #: per cause, its most decisive event's priority


def correlate(
    events: Sequence[JobEvent],
    job: Job | None = None,
    rank_hosts: dict[int, str] | None = None,
    hosts: Iterable[str] = (),
    task_ranks: dict[int, int] | None = None,
    gpus: Sequence[GpuFact] = (),
    task_hosts: dict[int, str] | None = None,
) -> Correlation:
    """Rank the causes of a failure from all its events (job logs and kernel logs, any order). ``hosts`` are
    the host names the logs showed (a peer is named as a node only when it is one of them or of the job's);
    ``task_ranks`` the Slurm task -> rank pairs the logs showed (an event naming only a task gets its rank);
    ``task_hosts`` the Slurm task -> host pairs they showed (an event naming only a task gets its host);
    ``gpus`` the logs' GPU facts (NCCL init lines, LOCAL_RANK, CUDA_VISIBLE_DEVICES): each cause's GPU, and
    the rank of a kernel XID whose PCI address a rank's NCCL init line printed on the same host
    (:mod:`fleetdx.orchestrator.postmortem.gpus`)."""
    gmap = GpuMap(gpus, job)
    known_hosts = set(hosts)
    # a line read by both parsers (an OOM-killer line in a job log) is one event
    seen: set[tuple[str, int, EventKind]] = set()
    unique: list[JobEvent] = []
    for e in events:
        if (e.file, e.line, e.kind) not in seen:
            seen.add((e.file, e.line, e.kind))
            unique.append(e)
    ordered = timeline(unique)
    # an event naming one Slurm task in its details only (srun's bus-error line: "tasks") takes it as its task
    ordered = [
        e.model_copy(update={"task": int(str(e.details["tasks"]))})
        if e.task is None and str(e.details.get("tasks") or "").isdigit()
        else e
        for e in ordered
    ]
    # rank and task placement (ranks.py): task-only events take their rank, host-less ones their host
    pairs = LogPairs(rank_hosts or {}, task_ranks or {}, task_hosts or {})
    placement = rank_map(ordered, pairs, gmap.by_rank(), job)
    ordered, host_lines = placement.place(ordered)
    rank_hosts = placement.hosts
    ordered = mark_flaps(ordered)
    every_host = {e.host for e in ordered if e.host} | known_hosts | set(job.nodes if job else [])
    ordered = _peers_as_hosts(ordered, every_host)
    judged = _without_fallback(ordered, [judge(e) for e in ordered])  # once each: judged three times below
    groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]] = defaultdict(list)
    for e, j in zip(ordered, judged, strict=True):
        if j is not None:
            groups[(j.code,) + j.key].append((e, j))
    _fold(groups)
    _fold_last_errors(groups)
    _fold_warned_system_errors(groups)
    host_lines.update(_fold_process_ends(groups, ordered))
    _fold_exception_exits(groups)
    _fold_outside_kills(groups)
    first = first_decisive(ordered, judged)
    # the decisive events naming a rank (OOM, crash, CUDA error): the rank that failed before the others timed out
    failed = [e for e, j in (p for m in groups.values() for p in m) if j.priority >= DECISIVE and e.rank is not None]
    failed.sort(key=lambda e: _order_key(e, e.line))
    missing: list[str] = []
    causes: list[tuple[tuple[int, int, int], Finding]] = []
    world = [p.rank for p in job.ranks] if job is not None else []
    for key, members in groups.items():
        code = key[0]
        assert isinstance(code, FindingCode)
        evs = [e for e, _ in members]
        # the lead is of the group's own code: a cause that absorbed others (a setup error and the abort it ended
        # in) is told by its own line, however decisive the absorbed ones are
        own = [p for p in members if p[1].code is code] or members
        best_e, best_j = max(own, key=lambda p: p[1].priority)
        lead = origin = next((e for e, j in own if j.priority == best_j.priority), best_e)
        named_hosts = {e.host for e, j in members if e.host and j.priority >= DECISIVE}
        if lead.host is None and len(named_hosts) == 1:  # e.g. slurmstepd's line beside srun's for one host
            lead = lead.model_copy(update={"host": named_hosts.pop()})
        # one rank named in the group (srun's "task 4" beside slurmstepd's oom-kill; torch's "[Rank 1] NCCL watchdog
        # thread terminated with exception: CUDA error" after the same error without a prefix): the lead's rank
        named_ranks = {e.rank for e in evs if e.rank is not None}
        if lead.rank is None and len(named_ranks) == 1:
            lead = lead.model_copy(update={"rank": named_ranks.pop()})
        if code is FindingCode.NCCL_TIMEOUT:
            analysis = timeout_analysis(evs, world, failed)
            cause, miss = _timeout_cause(evs, analysis, gmap, rank_hosts)
            if cause.rank is not None and (said := placement.lines.get(cause.rank)) is not None:
                cause = _with_line(cause, said)
            missing += miss
        else:
            msg, action = _describe(code, lead, evs, best_j)
            ev_hosts = list(dict.fromkeys(e.host for e in evs if e.host))
            subject: str | None = None
            details: dict[str, EvidenceValue] | None = None
            if key[1] == "observed":
                # the culprit is a peer: a peer known as a host of the job is named as a node, and so is the one
                # host every observer names (the end that closed the connection: its process exited, or its
                # link failed); several unknown peers are named as the subject only: they condemn nothing
                peers = list(
                    dict.fromkeys(ph for e in evs if (ph := _peer_host(e)) and not ph.isdigit() and not _loopback(ph))
                )
                nodes = [ph for ph in peers if ph in every_host] or (peers if len(peers) == 1 else [])
                host = nodes[0] if nodes else None
                peer = peers[0] if peers and not nodes else None
                lead = lead.model_copy(update={"details": {}})  # the observer's device is not the culprit's
                subject, details = peer, ({"peer": peer} if peer else None)
            elif code in (FindingCode.SLURM_TIME_LIMIT, FindingCode.SLURM_PREEMPTED):  # job-wide: no node at fault
                nodes, host = [], None
                details = {"printed_on": lead.host} if lead.host else None
            else:
                nodes, host = ev_hosts, lead.host
            if len(evs) > 1:  # a burst folded into one cause: how many lines, ranks and GPUs it stands for
                n_ranks = len({e.rank for e in evs if e.rank is not None})
                n_gpus = len({e.details.get("pci") for e in evs if e.kind is EventKind.XID})
                details = {**(details or {}), "count": len(evs)}
                details.update({k: n for k, n in (("ranks", n_ranks), ("gpus", n_gpus)) if n > 1})
            cause = cause_of(
                code=code,
                severity=best_j.severity,
                rank=lead.rank if key[1] != "observed" else None,
                host=host,
                nodes=nodes,
                time=_time(lead),
                message=msg,
                action=action,
                evidence=_evidence([lead] + [e for e in evs if e is not origin]),
                subject=subject,
                details=details,
            )
            if (said := host_lines.get((lead.file, lead.line))) is not None and host is not None:
                cause = _with_line(cause, said)  # the line that named the host
            if key[1] != "observed":  # the observer's GPU is not the culprit's
                res = gmap.for_event(lead)
                cause = _with_gpu(cause, res)
                if lead.kind in (EventKind.XID, EventKind.GPU_LOST):
                    cause = _xid_rank(cause, lead, res, gmap)
        is_first = first is not None and any(e is first for e in evs)
        severity_rank = 0 if cause.severity is Severity.CRITICAL else 1
        causes.append(((severity_rank, 0 if is_first else 1, -best_j.priority), cause))
    causes.sort(key=lambda p: p[0])
    entries = _timeline_entries(ordered, judged)
    return Correlation(
        causes=[c for _, c in causes], timeline=entries, missing=missing, priorities=[-k[2] for k, _ in causes]
    )


def _is_abort(e: JobEvent) -> bool:
    """A process taken down by an abort: SIGABRT (``Aborted``, signal 6; torch elastic's ``exitcode: -6``, a
    shell's 134 = 128 + 6), or a c10d error no one caught (what ProcessGroupNCCL's watchdog throws after a
    timeout, torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp)."""
    d = e.details
    said = f"{d.get('signal') or ''} {d.get('reason') or ''}"
    return (
        "Aborted" in said
        or "SIGABRT" in said
        or d.get("exit_code") in (-6, 134)
        or str(d.get("exception") or "").startswith("c10::Dist")
    )


#: the causes an uncaught C++ exception's ``what()`` can name (the process then aborts), a watchdog timeout's too
_THROWN = frozenset(
    {
        FindingCode.NCCL_TIMEOUT,
        FindingCode.CUDA_ERROR,
        FindingCode.OOM_GPU,
        FindingCode.CONFIG_ERROR,
        FindingCode.NCCL_INTERNAL_ERROR,
        FindingCode.NCCL_NETWORK_ERROR,
        FindingCode.GPU_HW_FAULT,
    }
)
#: lines after ``terminate called`` within which the same process's abort or fatal signal is printed (the
#: ``what()``, a c10::Error's ``Exception raised from`` and its frames, other threads' ``terminate called
#: recursively``)
TERMINATE_WINDOW = 60

_Groups = dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]


def _agrees(a: object, b: object) -> bool:
    return a is None or b is None or a == b


def _thrown_causes(groups: _Groups, ordered: Sequence[JobEvent]) -> list[tuple[JobEvent, tuple[object, ...]]]:
    """The ``terminate called after throwing`` events (libstdc++'s verbose terminate handler) whose ``what()``
    names a cause: each with the key of the :data:`_THROWN` group that holds an event on its ``what()`` line or
    the 3 after it, in log order."""
    terminates = [t for t in ordered if t.kind is EventKind.SIGNAL and "what" in t.details and "exception" in t.details]
    if not terminates:
        return []
    by_line = _members_by_line(groups, _THROWN)
    out = []
    for t in terminates:
        target = next((k for n in range(4) for _, k in by_line.get((t.file, t.line + n), [])), None)
        if target is not None:
            out.append((t, target))
    return out


def _members_by_line(
    groups: _Groups, codes: frozenset[FindingCode]
) -> dict[tuple[str, int], list[tuple[JobEvent, tuple[object, ...]]]]:
    """The events of the groups of ``codes`` by (file, line), each with its group's key, in the groups' order."""
    by_line: dict[tuple[str, int], list[tuple[JobEvent, tuple[object, ...]]]] = defaultdict(list)
    for k, members in groups.items():
        if k[0] in codes:
            for e, _ in members:
                by_line[(e.file, e.line)].append((e, k))
    return by_line


def _below(later: JobEvent, earlier: JobEvent, lines: int, *, rank_of_later: bool = True) -> bool:
    """Whether ``later`` is printed at most ``lines`` lines below ``earlier`` in the same file, by the same rank and
    host where both name one (the same process's next lines); ``rank_of_later`` False leaves ``later``'s rank out
    of the comparison."""
    return (
        later.file == earlier.file
        and 0 <= later.line - earlier.line <= lines
        and (not rank_of_later or _agrees(later.rank, earlier.rank))
        and _agrees(later.host, earlier.host)
    )


def _ends_after(e: JobEvent, t: JobEvent) -> bool:
    """Whether crash event ``e`` is the end of the process whose ``terminate called`` is ``t``: a signal or exit
    :func:`_below` it within :data:`TERMINATE_WINDOW` lines. A rank the placement took from a launcher's local rank
    (ranks.py: the one-node reading) does not contradict the terminate's own rank: on several nodes, local rank 0
    is another global rank."""
    if e.kind not in (EventKind.SIGNAL, EventKind.CHILD_FAILED):
        return False
    return _below(e, t, TERMINATE_WINDOW, rank_of_later=not e.details.get("rank_from_local_rank"))


#: lines below torch's NCCL error within which its ``Last error:`` text is printed (torch >= 2.2: the error, the
#: ncclResult's description, ``Last error:``, then NCCL's own last WARN on the line after)
LAST_ERROR_LINES = 4


def _fold_last_errors(groups: _Groups) -> None:
    """An NCCL system or internal error whose ``Last error:`` (NCCL's own last WARN, which torch prints on the
    lines below its ``DistBackendError``) is a network observer's (a socket that could not connect, a connection
    closed by the peer) is that network error, wrapped: its events join the network cause's, as the same error
    read on one line does (the ``Last error:`` text decides its kind). A group of which any event is not so
    followed stays a cause of its own."""
    by_line = _members_by_line(groups, frozenset({FindingCode.NCCL_NETWORK_ERROR}))
    if not by_line:
        return

    def wrapped_in(e: JobEvent) -> tuple[object, ...] | None:
        below = (p for d in range(1, LAST_ERROR_LINES + 1) for p in by_line.get((e.file, e.line + d), ()))
        return next((k for n, k in below if _below(n, e, LAST_ERROR_LINES)), None)

    for key in [k for k in groups if k[0] is FindingCode.NCCL_INTERNAL_ERROR]:
        targets = [wrapped_in(e) for e, _ in groups[key]]
        if targets and None not in targets and (into := targets[0]) in groups:
            _join_as_evidence(groups, key, into)


#: the network observers whose NCCL WARN names the failed socket call that NCCL then returns as ncclSystemError
_SOCKET_KINDS = frozenset({EventKind.NCCL_SOCKET_ERROR, EventKind.NCCL_CONNECTION_CLOSED})


def _fold_warned_system_errors(groups: _Groups) -> None:
    """A bare NCCL system error (``unhandled system error``, ncclSystemError: the generic rule, no row naming its
    reason) printed below the log's one socket observer (NCCL's ``Call to connect failed``, ``Net : Connection
    closed by remote peer``), in the same file and not contradicting its host or rank, is that socket failure
    returned: NCCL before 2.19 prints no ``Last error:`` (:func:`_fold_last_errors`), only its WARN and then the
    ``-> 2`` trail up to the caller, whose exception names the result alone. Its events join the network cause.
    Two socket observers of different keys leave it a cause of its own (which one it wraps is not said)."""
    sockets = [
        k
        for k, members in groups.items()
        if k[0] is FindingCode.NCCL_NETWORK_ERROR and all(e.kind in _SOCKET_KINDS for e, _ in members)
    ]
    if len(sockets) != 1:
        return
    warns = [e for e, _ in groups[sockets[0]]]
    for key in [k for k in groups if k[0] is FindingCode.NCCL_INTERNAL_ERROR]:
        members = groups[key]
        bare = all(e.kind is EventKind.NCCL_SYSTEM_ERROR and j.rule is not None and j.rule.generic for e, j in members)
        if bare and all(
            any(
                w.file == e.file and w.line < e.line and _agrees(w.host, e.host) and _agrees(w.rank, e.rank)
                for w in warns
            )
            for e, _ in members
        ):
            _join_as_evidence(groups, key, sockets[0])


def _fold_process_ends(groups: _Groups, ordered: Sequence[JobEvent]) -> dict[tuple[str, int], EvidenceLine]:
    """A process's end (its crash lines: a signal, an abort, a launcher's exit report) joins the cause that ended
    it, below every decisive event, instead of standing as a crash of its own. The cause is found

    - by the terminate line, where there is one: an uncaught C++ exception (``terminate called after throwing an
      instance of 'std::runtime_error'`` / ``what(): NCCL error: unhandled system error``) aborts the process
      (``Fatal Python error: Aborted``, ``Aborted (core dumped)``, UCX's ``Caught signal 6``, a signal caught
      while other threads terminate); the crash lines that follow it (:func:`_ends_after`) join the cause its
      ``what()`` names (:func:`_thrown_causes`). When that cause names no host and the crash lines name one
      (UCX's ``[host:pid:...]`` prefix), the cause takes it, and the line that named it is returned ((file, line)
      of the cause's events -> that line);
    - else by rank, when the log has one watchdog timeout cause: a rank that reported the timeout and then aborted
      died of it (the watchdog tears the process down, TORCH_NCCL_ASYNC_ERROR_HANDLING): ``srun: error: HOST:
      task N: Aborted``, ``terminate called after throwing an instance of 'c10::DistBackendError'`` and the same
      terminate line whose ``what()`` the log lost when others' name the timeout; a launcher's report of any rank's
      abort (torch elastic's ``exitcode: -6``) printed below the timeout. A rank whose monitoredBarrier
      raised (torch's gloo barrier: the RuntimeError ends the process, exit code 1) died of that barrier the same
      way."""
    named: dict[tuple[str, int], EvidenceLine] = {}
    thrown = _thrown_causes(groups, ordered)
    timeout_keys = [k for k in groups if k[0] is FindingCode.NCCL_TIMEOUT]
    tkey = timeout_keys[0] if len(timeout_keys) == 1 else None
    waited = (EventKind.WATCHDOG_TIMEOUT, EventKind.WORK_PROGRESS)
    tmembers = groups[tkey] if tkey is not None else []
    reporters = {e.rank for e, _ in tmembers if e.kind in waited and e.rank is not None}
    raised = {e.rank for e, _ in tmembers if _barrier_raised(e) and e.rank is not None}
    # the C++ exception type the watchdog's teardowns threw: the same terminate line whose what() was lost (cut, or
    # too far below) is one more teardown
    torn = {
        e.details.get("exception") for e, _ in tmembers if e.kind is EventKind.SIGNAL and "teardown_of" in e.details
    }

    # an abort printed below a timeout in the same file is the watchdog's teardown as well when no line gives the
    # timeout a rank (a poster's excerpt, an unprefixed log: a rank that crashed first would have printed it before
    # the timeout), and whatever rank a launcher's report of an abort names (another rank's watchdog tore it down
    # the same way; the launcher reports last anyway)
    timed_out = [e for e, _ in tmembers if e.kind in waited]
    unranked = timed_out if not reporters else []

    def timeout_teardown(e: JobEvent) -> bool:
        above = timed_out if e.kind is EventKind.CHILD_FAILED else unranked
        return (
            (e.rank in reporters and _is_abort(e))
            or (_is_abort(e) and any(t.file == e.file and t.line < e.line for t in above))
            or (e.rank in raised and e.kind is EventKind.CHILD_FAILED and e.details.get("exit_code") == 1)
            or (e.kind is EventKind.SIGNAL and "what" not in e.details and e.details.get("exception") in torn)
        )

    for key in [k for k in groups if k[0] is FindingCode.PROCESS_CRASH]:
        members = groups[key]
        if not members:
            continue
        by_terminate = next(
            (target for t, target in thrown if target in groups and all(_ends_after(e, t) for e, _ in members)), None
        )
        if by_terminate is not None:
            crash_hosts = {e.host for e, _ in members if e.host}
            hostless = not any(e.host for e, _ in groups[by_terminate])
            _join_as_evidence(groups, key, by_terminate)
            if len(crash_hosts) == 1 and hostless:
                host = crash_hosts.pop()
                said = next(e for e, _ in members if e.host == host)
                line = EvidenceLine(file=said.file, line=said.line, text=said.text)
                groups[by_terminate][:] = [
                    (e.model_copy(update={"host": host}), j) if e.host is None else (e, j)
                    for e, j in groups[by_terminate]
                ]
                named.update({(e.file, e.line): line for e, _ in groups[by_terminate]})
        elif tkey is not None and all(timeout_teardown(e) for e, _ in members):
            _join_as_evidence(groups, key, tkey)
    return named


#: the causes a rank's own traceback tells (its exception, its CUDA error or OOM, an NCCL error it raised): a
#: launcher's "exited with code 1" of that rank is their echo
_OWN_FAILURES = frozenset(
    {FindingCode.CONFIG_ERROR, FindingCode.OOM_GPU, FindingCode.CUDA_ERROR, FindingCode.NCCL_INTERNAL_ERROR}
)


def _own_failure(key: tuple[object, ...]) -> bool:
    """Whether the cause group ``key`` is one a rank's own traceback tells (:data:`_OWN_FAILURES`, or an exception's
    crash)."""
    return key[0] in _OWN_FAILURES or (key[0] is FindingCode.PROCESS_CRASH and len(key) > 1 and key[1] == "exception")


def _fold_exception_exits(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """A launcher's report that a rank exited with a code of its own (:func:`_own_exit`: torchrun's ChildFailedError
    root cause, DeepSpeed's and Composer's launcher lines, mpirun's first process to exit) where that rank's own
    failure is in the logs (a configuration error, a CUDA error or OOM, an exception): that failure is why it
    exited; the report joins its evidence instead of standing beside it as a crash of its own. Where no failure
    names a rank and the log holds one such failure, such an exit printed below it is its end (the failure takes
    that rank)."""
    own: dict[int, tuple[object, ...]] = {}
    for k, m in groups.items():
        if _own_failure(k):
            for e, _ in m:
                if e.rank is not None:
                    own.setdefault(e.rank, k)
    # the log's one failure that names no rank (pasted without its rank prefix, or one process's): an exit of its
    # own printed after it in the same file is that failure's end too
    rankless = [k for k, m in groups.items() if _own_failure(k) and all(e.rank is None for e, _ in m)]
    for key in [k for k in groups if k[0] is FindingCode.PROCESS_CRASH and (len(k) < 2 or k[1] != "exception")]:
        members = groups[key]
        if not all(e.kind is EventKind.CHILD_FAILED and _own_exit(e) for e, _ in members):
            continue
        ranks = {e.rank for e, _ in members}
        if len(ranks) == 1 and (rank := next(iter(ranks))) is not None and (target := own.get(rank)) is not None:
            _join_as_evidence(groups, key, target)
        elif not own and len(rankless) == 1 and _all_after(members, groups[rankless[0]]):
            _join_as_evidence(groups, key, rankless[0])


def _own_exit(e: JobEvent) -> bool:
    """A launcher's report of a process that exited with a code of its own after reporting its error (1: Python's
    after an uncaught exception; nccl-tests' 2 after a failed check), not by a signal (negative, or a shell's
    128 + N). Open MPI's 'first process to exit' summary is such a report whatever its code (on the line below it):
    its help text for a signal is another (orte/mca/errmgr/base/help-errmgr-base.txt, normal-termination-but)."""
    code = e.details.get("exit_code")
    if code is None:
        return e.details.get("catalog") == "openmpi.mpirun.first_process_failed"
    return isinstance(code, int) and 0 < code < 128


def _all_after(later: Sequence[tuple[JobEvent, Judged]], earlier: Sequence[tuple[JobEvent, Judged]]) -> bool:
    """Whether every event of ``later`` is printed below the first event of ``earlier`` in the same file."""
    first = min(((e.file, e.line) for e, _ in earlier), key=lambda p: p[1])
    return all(e.file == first[0] and e.line > first[1] for e, _ in later)


def _barrier_raised(e: JobEvent) -> bool:
    """A timeout raised in this rank's own Python (a RuntimeError that ends it, exit code 1): torch's
    monitoredBarrier (ProcessGroupGloo.cpp), or a collective's wait() in NCCL_BLOCKING_WAIT mode
    (ProcessGroupNCCL.cpp's ``Caught collective operation timeout``)."""
    catalog = str(e.details.get("catalog") or "")
    return (e.kind is EventKind.STALL and catalog.startswith("pytorch.gloo.monitored")) or (
        catalog == "pytorch.pgnccl.blocking_wait_timeout"
    )


#: the scheduler's own kills of a job: what the ranks print after them is their echo
_OUTSIDE_KILLS = (FindingCode.SLURM_PREEMPTED, FindingCode.SLURM_TIME_LIMIT)


def _fold_outside_kills(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """A job Slurm preempted or stopped at its time limit: the crashes (SIGTERM, ``Terminated``, a communicator
    aborted) and the observers' lost connections that its logs print after the cancellation line join the
    cancellation's evidence, below its own event, instead of standing as failures ranked above it. What a log
    printed before the cancellation stays a cause of its own."""
    kills = [k for k in groups if k[0] in _OUTSIDE_KILLS]
    if len(kills) != 1:
        return
    first = min(((e.file, e.line) for e, _ in groups[kills[0]]), key=lambda p: p[1])
    for key in [k for k in groups if k[0] is FindingCode.PROCESS_CRASH or (len(k) > 1 and k[1] == "observed")]:
        members = groups[key]
        if members and all(e.file == first[0] and e.line > first[1] for e, _ in members):
            _join_as_evidence(groups, key, kills[0])


def _join_as_evidence(
    groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]], key: tuple[object, ...], into: tuple[object, ...]
) -> None:
    """Move group ``key``'s events into group ``into`` as its evidence: judged as ``into``'s code, below every
    decisive event (an echo of that cause, not a cause of its own)."""
    code = into[0]
    assert isinstance(code, FindingCode)
    groups[into].extend((e, replace(j, code=code, priority=min(j.priority, 10))) for e, j in groups.pop(key))


def _fold(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """Merge groups that tell one story: a fatal PCIe AER into the lost GPU (XID 79, fallen off the bus) of
    the same host; a group with no host into the only group of the same code that names one (``slurmstepd``'s
    oom-kill line beside ``srun``'s ``node107: task 0: Out Of Memory``)."""
    for key in [k for k in groups if k[1] == "pcie"]:
        if not any(j.severity is Severity.CRITICAL for _, j in groups[key]):
            continue
        target = next(
            (
                k
                for k in groups
                if k[1] == "gpu"
                and k[2] == key[2]
                and any(e.kind is EventKind.GPU_LOST or e.details.get("xid") == 79 for e, _ in groups[k])
            ),
            None,
        )
        if target is not None:
            groups[target] += groups.pop(key)
    _fold_ctxsw_after_app_fault(groups)
    _fold_trap_after_kernel_timeout(groups)
    _fold_xid_root(groups)
    _fold_bursts(groups)
    # a configuration error explains the "internal error" NCCL wraps it in, on the same host and rank
    by_place: dict[tuple[object, ...], list[tuple[object, ...]]] = defaultdict(list)  # in the groups' order
    for k in groups:
        by_place[k[2:]].append(k)
    for key in [k for k in groups if any(j.rule is not None and j.rule.absorbs for _, j in groups[k])]:
        absorbs = {c for _, j in groups[key] if j.rule is not None for c in j.rule.absorbs}
        for other in [k for k in by_place[key[2:]] if k[0] in absorbs and k != key and k in groups]:
            groups[key] += groups.pop(other)
    # a group that names no place (no host, rank, task...) into the only group of the same code that names one:
    # slurmstepd's oom-kill line beside srun's line of one host; an unprefixed CUDA error beside the same error
    # behind a rank's prefix
    named: dict[tuple[int, tuple[object, ...]], list[tuple[object, ...]]] = defaultdict(list)
    for k in groups:  # the groups that name a place, by length and (code, kind): this loop moves none of them
        if any(p is not None for p in k[2:]):
            named[(len(k), k[:2])].append(k)
    for key in [k for k in groups if len(k) >= 3 and all(p is None for p in k[2:]) and k[1] != "observed"]:
        same = named.get((len(key), key[:2]), [])
        if len(same) == 1:  # the merged group in log order: its first line of the best rule leads it
            merged = groups.pop(key) + groups[same[0]]
            groups[same[0]] = sorted(merged, key=lambda p: (_ts_or_last(p[0]), p[0].file, p[0].line))


def _own_critical_xid(e: JobEvent) -> bool:
    """An XID critical by its own class (not by the XID its message says caused it)."""
    return (
        e.kind is EventKind.XID
        and judge_xid(int(e.details.get("xid") or 0), [str(e.details.get("message") or "")]).xid_class.severity
        is Severity.CRITICAL
    )


def _after(e: JobEvent, root: JobEvent) -> bool:
    """``e`` comes after ``root``: by line in the same file, else by time when both are dated; undated events
    of another file are taken as after (the kernel log of the same host)."""
    if e.file == root.file:
        return e.line > root.line
    if e.ts is not None and root.ts is not None:
        return e.ts >= root.ts
    return True


def _same_fall(e: JobEvent, root: JobEvent) -> bool:
    """The driver's own "fallen off the bus" line of the GPU whose XID 79 ``root`` is (NVSentinel issue #155:
    the same fall printed twice)."""
    if e.kind is not EventKind.GPU_LOST or e.details.get("event") != "fallen-off-bus" or root.details.get("xid") != 79:
        return False
    a, b = bus_key(str(e.details.get("pci") or "")), bus_key(str(root.details.get("pci") or ""))
    return a is not None and a == b


def _fold_xid_root(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """As the pre-flight's XID rule does (:func:`fleetdx.orchestrator.diagnosis.rules_gpu.xid_rule`): on each
    host, the first XID critical by its own class is the root; the XID 43/45 teardowns of any GPU of that host
    after it (:data:`~fleetdx.orchestrator.diagnosis.xid_table.CONSEQUENCE_XIDS`, with or without "caused by
    previous Xid N"), and the driver's "fallen off the bus" lines of the root's GPU when it is an XID 79, join
    the root's evidence instead of standing as causes of their own."""
    roots: dict[object, tuple[tuple[object, ...], JobEvent]] = {}
    for k, members in groups.items():
        if len(k) < 3 or k[1] != "gpu":
            continue
        for e, _ in members:
            if _own_critical_xid(e) and (k[2] not in roots or _after(roots[k[2]][1], e)):
                roots[k[2]] = (k, e)
    for rkey, root in roots.values():
        for k in [k for k in groups if k != rkey and len(k) >= 3 and k[1] == "gpu" and k[2] == rkey[2]]:
            members = groups[k]
            teardown = all(
                e.kind is EventKind.XID and int(e.details.get("xid") or 0) in CONSEQUENCE_XIDS and _after(e, root)
                for e, _ in members
            )
            if teardown or all(_same_fall(e, root) for e, _ in members):
                _join_as_evidence(groups, k, rkey)


#: application XIDs (xid.md: 13 graphics engine exception, 31 MMU fault, 43 the app's software-induced stop) and
#: the context-switch timeout (109) that follows one on the same GPU, and within how long (s)
_APP_XIDS = frozenset({13, 31, 43})
_CTXSW_XID = 109
_CTXSW_AFTER_APP_S = 60.0


def _ctxsw_of_app_fault(e: JobEvent, app: JobEvent) -> bool:
    """``e`` is an XID 109 the application fault ``app`` (an XID 13/31/43) of the same GPU caused: after it, within
    :data:`_CTXSW_AFTER_APP_S` when both are dated, else on a later line of the same file."""
    if e.kind is not EventKind.XID or e.details.get("xid") != _CTXSW_XID:
        return False
    if e.ts is not None and app.ts is not None:
        return 0 <= e.ts - app.ts <= _CTXSW_AFTER_APP_S
    return e.file == app.file and e.line > app.line


def _fold_ctxsw_after_app_fault(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """A context-switch timeout (XID 109) right after an application fault (XID 13/31/43) on the same GPU is that
    fault's consequence (xid.md, XID 109: "if isolated and job-specific, treat as APP"): the kernel that faulted
    hung its context, the GPU did not fail; the 109 joins the application fault's evidence."""
    apps = {
        k[2:]: (k, min((e for e, _ in m if e.details.get("xid") in _APP_XIDS), key=lambda e: (e.file, e.line)))
        for k, m in groups.items()
        if len(k) >= 3
        and k[1] == "gpu"
        and any(e.kind is EventKind.XID and e.details.get("xid") in _APP_XIDS for e, _ in m)
    }
    for k in [k for k in groups if len(k) >= 3 and k[1] == "gpu" and k[2:] in apps]:
        akey, app = apps[k[2:]]
        if k != akey and all(_ctxsw_of_app_fault(e, app) for e, _ in groups[k]):
            _join_as_evidence(groups, k, akey)


#: catalog rows of a GPU kernel's own timeout, printed by the kernel just before it calls trap()
_KERNEL_TIMEOUT_ROWS = frozenset({"deepep.kernels.receiver_timeout"})
#: the CUDA error a kernel's trap() leaves its process (cudaErrorLaunchFailure)
_TRAP_ERROR = "unspecified launch failure"


def _fold_trap_after_kernel_timeout(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """A CUDA 'unspecified launch failure' printed after a kernel's own timeout in the same log is that timeout's
    end: DeepEP's kernels print their timeout and call trap() (csrc/kernels: printf, then trap()), which the host
    sees as cudaErrorLaunchFailure; the CUDA error joins the timeout's evidence instead of standing as a crash."""
    first: dict[str, tuple[int, tuple[object, ...]]] = {}
    for k, m in groups.items():
        if k[0] is not FindingCode.NCCL_TIMEOUT:
            continue
        for e, _ in m:
            if e.details.get("catalog") in _KERNEL_TIMEOUT_ROWS and (e.file not in first or e.line < first[e.file][0]):
                first[e.file] = (e.line, k)
    if not first:
        return
    for k in [k for k in groups if k[0] is FindingCode.CUDA_ERROR]:
        m = groups[k]
        after = [first[e.file] for e, _ in m if e.file in first and e.line > first[e.file][0]]
        if len(after) == len(m) and all(str(e.details.get("error") or "") == _TRAP_ERROR for e, _ in m):
            _join_as_evidence(groups, k, after[0][1])


#: families whose causes of one host are one cause with a count (the same NCCL error printed by every rank)
BURST_FAMILIES = frozenset({"nccl-internal"})


def _consequence(e: JobEvent) -> bool:
    """An XID that says another XID caused it (XID 45's preemptive cleanup "caused by previous Xid N")."""
    return (
        e.kind is EventKind.XID
        and judge_xid(int(e.details.get("xid") or 0), [str(e.details.get("message") or "")]).cause_xid is not None
    )


def _fold_bursts(groups: dict[tuple[object, ...], list[tuple[JobEvent, Judged]]]) -> None:
    """One cause per host for a burst: consequence XIDs (45 after a root XID) on several GPUs of one host, and
    the ranks of one host printing the same NCCL error (:data:`BURST_FAMILIES`); the first group (in time)
    leads, the others' events join it (their count is in the cause's message and ``details["count"]``)."""
    bursts: dict[tuple[object, ...], list[tuple[object, ...]]] = defaultdict(list)
    for k, members in groups.items():
        if k[1] == "gpu" and all(_consequence(e) for e, _ in members):
            bursts[(k[0], "xid", k[2])].append(k)
        elif k[1] in BURST_FAMILIES:
            bursts[(k[0], k[1], k[2])].append(k)
    for keys in bursts.values():
        if len(keys) > 1:
            lead = min(keys, key=lambda k: min(_order_key(e, e.line) for e, _ in groups[k]))
            for k in keys:
                if k != lead:
                    groups[lead] += groups.pop(k)


def _timeline_entries(ordered: Sequence[JobEvent], judged: Sequence[Judged | None]) -> list[TimelineEntry]:
    # fallback evidence (C++ frames, NCCL's return trails) is on the timeline only where it made the cause
    pairs = [(e, j) for e, j in zip(ordered, judged, strict=True) if j is not None or not _is_fallback(e)]
    ordered, judged = [e for e, _ in pairs], [j for _, j in pairs]
    keep = list(ordered)
    if len(keep) > MAX_TIMELINE:  # the decisive events first, then the others, each in order
        decisive = [(j is not None and j.priority >= DECISIVE) for j in judged]
        chosen = [i for i, d in enumerate(decisive) if d][:MAX_TIMELINE]
        chosen += [i for i, d in enumerate(decisive) if not d][: MAX_TIMELINE - len(chosen)]
        keep = [keep[i] for i in sorted(chosen)]
    return [
        TimelineEntry(time=_time(e), host=e.host, rank=e.rank, kind=e.kind.value, text=e.text.split("\n", 1)[0][:300])
        for e in keep
    ]
