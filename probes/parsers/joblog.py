"""Parser for a distributed training job's own output (stdout/stderr of every rank, one file per rank or all
interleaved): the events a postmortem reads, each with the rank, host, time and line that printed it.

**Line normalisation**: :mod:`fleetdx.probes.parsers.logline` (:func:`normalise_line`), shared with the
other log parsers; hard wraps of up to :data:`MAX_WRAP` lines are joined here for the messages of
:data:`_WRAPPED`.

**Events** (:class:`EventKind`): ProcessGroupNCCL watchdog timeouts (``WorkNCCL(SeqNum=N, OpType=...,
NumelIn=..., Timeout(ms)=...) ran for ... milliseconds``) and the last enqueued / last completed work lines
(with the process group when printed), NCCL ``WARN``/``ERROR`` lines and torch's ``NCCL error in:`` (IB
completion errors with their status and vendor error, IB async events, sockets, ``Connection closed by remote
peer``, ``remote process exited or there was a network error``, ``unhandled system error``, ``internal
error``, ``invalid usage``, ``Cuda failure``), NCCL's ``NET/Socket : Using`` and ``NET/IB : No device found``
(transport evidence), CUDA errors, CUDA out-of-memory, the host OOM killer, torch.distributed.elastic's
``ChildFailedError`` summary entries (rank, local rank, host, exit code, pid, error file, signal, and whether
it is the root cause), Python exceptions, signals (a ``terminate called after throwing an instance of 'E'`` takes
the ``what():`` line of the same process that follows it within :data:`_WHAT_WINDOW` lines; when ``E`` is one
ProcessGroupNCCL's watchdog throws and the ``what()`` is the watchdog's, ``details["teardown_of"]`` says what the
watchdog reported, and the default group's ``Rank N`` of that text is the event's rank when no prefix gave one),
Slurm's ``*** JOB ... CANCELLED AT ... DUE TO TIME LIMIT
***`` and its other cancellations, ``srun: error: HOST: task N: ...``, ``NODE_FAIL``.

**Catalogued messages** (:mod:`fleetdx.probes.parsers.msgcatalog`, the table ``messages.yaml``): every line
also passes the catalog's literal gate, and its ``catalog`` rows add events the patterns above do not give:
ProcessGroupNCCL's ``watchdog got stuck`` (``watchdog-stuck``), Flight Recorder's ``Received a dump signal due to
a collective timeout from rank N`` / ``from this local rank`` (``flight-recorder-dump-signal``, with
``culprit_rank``; a rank's own "this local rank" line after its own watchdog timeout is not kept), NCCL/Gloo
finding no socket interface, NCCL's ``/dev/shm`` failures, collective mismatches, bus errors (SIGBUS), Gloo and
UCX errors, Slurm's ``oom_kill event(s) in StepId=`` wording and the HIP allocator's out of memory. Their
details carry ``catalog`` (the row id), ``failure_class`` and ``role``; a row's ``supersedes`` drops the
catch-all events (``nccl-warn``, ``python-exception``, ...) the patterns above gave the same line.

**GPUs** (:class:`GpuFact`, ``JobLog.gpus``): the lines that say which GPU a process used: NCCL's
communicator init line (``rank R nranks N cudaDev C nvmlDev M busId B``: the most reliable, with the PCI bus
id), a printed ``LOCAL_RANK=``/``local_rank:`` beside a known rank, and ``CUDA_VISIBLE_DEVICES`` (which makes
the CUDA index differ from the physical one). Which GPU an event is about is decided from these by
:mod:`fleetdx.orchestrator.postmortem.gpus`; nothing is inferred here from a rank number.

Memory is bounded: input is streamed line by line, a line is read up to :data:`MAX_LINE` characters, a wrapped
message holds at most :data:`MAX_WRAP` lines, and at most :data:`MAX_EVENTS_PER_KEY` events are kept per (kind,
rank, host) (the rest are counted in ``events_dropped``); once :data:`EVENT_BUDGET` events are kept, only the
first of each new (kind, rank, host) is (what says which rank failed first and which ranks timed out), so the
events of a log of any length fit in memory bounded by its ranks, not its lines; :data:`MAX_EVENTS` bounds them
whatever the log names.

Errors: :class:`~fleetdx.probes.errors.ParseError` (format ``"joblog"``) for binary input (a NUL byte); any
text, however damaged, is read.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from enum import Enum
from functools import lru_cache
from typing import NamedTuple, TypeVar

from pydantic import Field

from fleetdx.probes.contracts import Contract, JsonScalar
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.hardwrap import unwrapped
from fleetdx.probes.parsers.literals import Literals
from fleetdx.probes.parsers.logline import (
    MEMO_MAX_CHARS,
    RANK_HOST_PREFIX_RE,
    LogLine,
    after_prefix,
    host_of,
    is_host_prefix,
    normalise_line,
    normalise_prefixed,
    prefix_crossings,
    split_prefix,
    stamp_ts,
    year_of,
)
from fleetdx.probes.parsers.msgcatalog import catalog
from fleetdx.probes.parsers.nccl_tests import abort_signal

FMT = "joblog"
#: characters of a line kept as an event's evidence text
MAX_TEXT = 600
#: lines one hard-wrapped message may span
MAX_WRAP = 4
#: events kept per (kind, rank, host); more are counted, not kept
MAX_EVENTS_PER_KEY = 16
#: events kept before the per-key cap falls to 1 (about 1 KiB each: a few MiB; a 1,024-rank log with every
#: line an event kept 66,000 events, 200 MiB, at 256 MB without it)
EVENT_BUDGET = 8_192
#: events kept at most, first-of-key ones included (a log naming ever new hosts and ranks: bounded all the same)
MAX_EVENTS = 32_768
#: distinct hosts / rank->host pairs remembered
MAX_HOSTS = 65_536


class EventKind(str, Enum):
    """What one line (or wrapped message) of a job's output or a node's kernel log says happened."""

    WATCHDOG_TIMEOUT = "watchdog-timeout"  #: ProcessGroupNCCL: WorkNCCL(SeqNum=...) ran for ... ms
    WORK_PROGRESS = "work-progress"  #: ... at work: N, last enqueued NCCL work: E, last completed NCCL work: C
    NCCL_IB_COMPLETION = "nccl-ib-completion"  #: NET/IB : Got completion from peer ... with status/error N
    NCCL_IB_ASYNC = "nccl-ib-async-event"  #: NET/IB : Got async event : local catastrophic error
    NCCL_CONNECTION_CLOSED = "nccl-connection-closed"  #: Connection closed by remote peer (the observer)
    NCCL_SOCKET_ERROR = "nccl-socket-error"  #: Call to recv ... failed : Broken pipe; socket errors
    NCCL_REMOTE_ERROR = "nccl-remote-error"  #: remote process exited or there was a network error
    NCCL_SYSTEM_ERROR = "nccl-system-error"  #: unhandled system error
    NCCL_INTERNAL_ERROR = "nccl-internal-error"  #: internal error
    NCCL_INVALID_USAGE = "nccl-invalid-usage"  #: invalid usage / invalid argument
    NCCL_CUDA_FAILURE = "nccl-cuda-failure"  #: NCCL WARN Cuda failure '...' / unhandled cuda error
    NCCL_WARN = "nccl-warn"  #: any other NCCL WARN/ERROR line
    NCCL_NET_SOCKET = "nccl-net-socket"  #: NCCL chose sockets (NET/Socket : Using ...; NET/IB : No device found)
    CUDA_ERROR = "cuda-error"  #: CUDA error: an illegal memory access / uncorrectable ECC / launch failure ...
    OOM_GPU = "oom-gpu"  #: CUDA out of memory (torch.OutOfMemoryError)
    OOM_HOST = "oom-host"  #: the host's OOM killer (cgroup oom-kill, Out of memory: Killed process)
    CHILD_FAILED = "child-failed"  #: one entry of torch.distributed.elastic's ChildFailedError summary
    PYTHON_EXCEPTION = "python-exception"  #: ``SomeError: message`` at the start of a line
    SIGNAL = "signal"  #: a process died on a signal or aborted (Segmentation fault, core dumped, ...)
    SLURM_TIME_LIMIT = "slurm-time-limit"  #: *** JOB/STEP ... CANCELLED AT ... DUE TO TIME LIMIT ***
    SLURM_CANCELLED = "slurm-cancelled"  #: *** JOB/STEP ... CANCELLED AT ... *** (other reasons)
    SRUN_TASK_EXIT = "srun-task-exit"  #: srun: error: HOST: task N: Exited with exit code C / Out Of Memory
    NODE_FAIL = "node-fail"  #: NODE_FAIL, Node failure on HOST, DUE TO NODE FAILURE
    # kernel log (probes/parsers/joblog_kernel.py)
    XID = "xid"  #: NVRM: Xid (PCI:...): N, ...
    GPU_LOST = "gpu-lost"  #: NVRM lines losing a GPU without an XID (fallen off the bus, RmInitAdapter failed)
    IB_LINK_DOWN = "ib-link-down"  #: mlx5/IB netdev Link down
    IB_LINK_UP = "ib-link-up"  #: mlx5/IB netdev Link up
    IB_PORT_STATE = "ib-port-state"  #: port state change, port module event
    AER = "aer"  #: PCIe Advanced Error Reporting
    # read through the message catalog (probes/parsers/messages.yaml; role / failure class per row there)
    WATCHDOG_STUCK = "watchdog-stuck"  #: ProcessGroupNCCL's watchdog got stuck for N seconds (heartbeat monitor)
    #: Flight Recorder: Received a dump signal due to a collective timeout from rank N / this local rank
    #: (``details["culprit_rank"]``: the rank that timed out), First PG on this rank to signal dumping
    FLIGHT_RECORDER_DUMP = "flight-recorder-dump-signal"
    #: NCCL/Gloo found no usable socket interface (Bootstrap : no socket interface found, NET/Socket : no
    #: interface found, an NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME naming a missing interface)
    NCCL_NO_SOCKET_INTERFACE = "nccl-no-socket-interface"
    NCCL_SHM_ERROR = "nccl-shm-error"  #: NCCL could not create/extend its /dev/shm segment (too small a /dev/shm)
    #: ranks called different collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL's check, NCCL's Message truncated)
    COLLECTIVE_MISMATCH = "collective-mismatch"
    BUS_ERROR = "bus-error"  #: SIGBUS: Bus error (core dumped), UCX Caught signal 7, DataLoader's bus error (shm)
    GLOO_ERROR = "gloo-error"  #: Gloo: Connection closed by peer, Timed out waiting ...ms for recv
    UCX_ERROR = "ucx-error"  #: UCX completion errors (Transport retry count exceeded, Remote access error)
    #: torch's c10d store / rendezvous could not start or be reached: its port in use (the store's host), a
    #: client's connect refused or timed out, fewer clients joined than the world size, the store's link lost
    RENDEZVOUS_ERROR = "rendezvous-error"
    #: the scheduler could not start the job's tasks on a node (srun's ``Task launch for ... failed on node``)
    LAUNCH_FAILED = "launch-failed"
    #: an MPI library's network completion error (Cray MPICH's ``OFI poll failed``: libfabric's completion queue)
    FABRIC_ERROR = "fabric-error"
    #: a framework's report of a collective that some ranks never joined (Horovod's stall inspector, gloo's
    #: monitoredBarrier), ``culprit_rank`` the rank it names as missing when it names one
    STALL = "stall"
    #: two processes of one job initialised as the same global rank: Lightning's ``GLOBAL_RANK: N, MEMBER: M/W``
    #: line printed a second time for one N and W with no event between (``details``: ``global_rank``,
    #: ``world_size``, ``first_line``); the event names no rank, as no rank failed
    DUPLICATE_RANK = "duplicate-rank"


class JobEvent(Contract):
    """One event. ``rank`` is the torch/MPI global rank (never a Slurm task id: that is ``task``);
    ``local_rank`` the rank on its host (torchrun's ``[default3]:``, ChildFailedError's ``local_rank``);
    ``host`` the host the line names (a launcher/collector prefix, NCCL's ``host:pid:tid``, the entry's host),
    ``None`` when unknown or redacted; ``time`` the stamp as printed; ``ts`` Unix seconds when the stamp has a
    full date (zone-less stamps read as UTC); ``file`` and ``line`` (1-based, the first line of a wrapped
    message) where it was read; ``text`` the line(s) as read, ANSI codes removed; ``details`` the fields the
    message carries (``seq``, ``op``, ``timeout_ms``, ``ran_for_ms``, ``pg``, ``status``, ``exit_code``, ...)."""

    kind: EventKind
    rank: int | None = None
    local_rank: int | None = None
    task: int | None = None
    host: str | None = None
    time: str | None = None
    ts: float | None = None
    file: str
    line: int
    text: str
    details: dict[str, JsonScalar] = Field(default_factory=dict)


class GpuSource(str, Enum):
    """What told which GPU a rank used, most reliable first."""

    NCCL_INIT = "nccl-init"  #: NCCL INFO ... rank R nranks N cudaDev C [nvmlDev M] busId B (NCCL_DEBUG=INFO)
    NCCL_PREFIX = "nccl-prefix"  #: the ``[C]`` of an NCCL line's ``host:pid:tid [C]`` (the CUDA device)
    MESSAGE = "message"  #: the error names the CUDA device (``GPU 3 has a total capacity ...``)
    JOB_MODEL = "job-model"  #: the job model's rank placement (``Job.ranks[].gpu``)
    LOCAL_RANK = "local-rank"  #: the local rank (``LOCAL_RANK=3``, torchrun's ``[default3]:``): cuda:LOCAL_RANK
    KERNEL = "kernel"  #: the kernel log's PCI address (an XID)
    CUDA_VISIBLE_DEVICES = "cuda-visible-devices"  #: a printed ``CUDA_VISIBLE_DEVICES`` (a remap, not a GPU)


class GpuFact(Contract):
    """One line of a job's output telling which GPU a process uses, or how CUDA devices are remapped.

    ``rank`` is the global rank when a launcher prefix or a ``RANK=`` on the line says it; ``comm_rank`` and
    ``nranks`` are NCCL's rank within the communicator the line is about (the global rank only in a
    communicator of the whole job); ``host``/``pid`` the process (NCCL's ``host:pid:tid``, or the line's
    prefixes); ``index`` the CUDA device as the process sees it (after ``CUDA_VISIBLE_DEVICES``),
    ``physical_index`` NVML's index of it on the host (``nvmlDev``: nvidia-smi's order), ``bus_id`` its PCI
    address (``dddd:bb:dd.f``, NCCL's ``busId`` decoded); ``visible_devices`` a printed
    ``CUDA_VISIBLE_DEVICES`` value; ``file``/``line``/``text`` where it was read."""

    source: GpuSource
    rank: int | None = None
    local_rank: int | None = None
    comm_rank: int | None = None
    nranks: int | None = None
    host: str | None = None
    pid: int | None = None
    index: int | None = None
    physical_index: int | None = None
    bus_id: str | None = None
    visible_devices: str | None = None
    file: str
    line: int
    text: str


class JobLog(Contract):
    """The events of one job log in line order, and what the log told about ranks and hosts.

    ``hosts`` are the hosts the log names (events' hosts, and hosts seen as prefixes of the lines read further:
    those that may hold an event). ``rank_hosts`` maps a
    rank to the host that printed a line carrying both (a host prefix and a rank prefix,
    an NCCL ``host:pid:tid`` line under an Open MPI or torch rank prefix, a ChildFailedError entry), first seen
    wins.
    """

    file: str
    events: list[JobEvent] = Field(default_factory=list)
    lines_read: int = 0
    events_dropped: int = 0
    hosts: list[str] = Field(default_factory=list)
    rank_hosts: dict[int, str] = Field(default_factory=dict)
    #: Slurm task id -> torch rank, from lines that carry both (``3: [rank3]: ...`` under ``srun -l``): the
    #: layout the log itself shows, the only way a task id named by ``srun: error: HOST: task N`` becomes a rank
    task_ranks: dict[int, int] = Field(default_factory=dict)
    #: Slurm task id -> the host its lines name (an event of that task naming its host, or NCCL's own
    #: ``host:pid:tid`` prefix behind the task's ``N: `` prefix), first seen wins
    task_hosts: dict[int, str] = Field(default_factory=dict)
    #: the lines telling which GPU a rank/process uses (NCCL init lines, LOCAL_RANK, CUDA_VISIBLE_DEVICES), in
    #: line order, at most :data:`MAX_HOSTS`
    gpus: list[GpuFact] = Field(default_factory=list)


#: a Docker container's default hostname: the first 12 hex digits of its id (or the whole 64)
_CONTAINER_ID_RE = re.compile(r"^(?:[0-9a-f]{12}|[0-9a-f]{64})$")
#: glog's header: ``E0321 02:07:08.408271 1234 file.cc:12]`` or PyTorch's ``[E321 02:07:08.408271257 f.cpp:607]``
_GLOG_RE = re.compile(r"\[?(?P<stamp>[EWIF](\d{3,4}) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?)(?: +\d+)? [\w.\-/]+:\d+\]")

# --------------------------------------------------------------------------------------------- event patterns

_WATCHDOG_RE = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\((?P<args>.*?)\)\s*ran for (?P<ran>\d+) milliseconds"
)
_WORK_ARG_RE = re.compile(r"(SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))=([^,\s)]+)")
#: ``... at work: N, last enqueued NCCL work: E, last completed NCCL work: C`` and (torch 2.11) ``failure detected by
#: watchdog at work sequence id: N PG status: last enqueued work: E, last completed work: C``
_PROGRESS_RE = re.compile(
    r"(?:at work(?: sequence id)?|Timeout at NCCL work|work)\s*:\s*(?P<at>-?\d+),?\s*(?:PG status:\s*)?"
    r"last enqueued (?:NCCL )?work\s*:\s*(?P<enq>-?\d+),\s*last completed (?:NCCL )?work\s*:\s*(?P<done>-?\d+)"
)
_PG_RE = re.compile(
    r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>[^\s(\]]+))?(?: ?\((?P<desc>[^)]*)\))? Rank (?P<r>\d+)\]"
)
_RANK_RE = re.compile(r"\[Rank (\d+)\]")
#: NCCL's own prefix at the start of what follows a launcher's prefix (``g1002:2128869:2128880 [0] NCCL INFO ...``)
_NCCL_AT_START_RE = re.compile(r"(?P<host>[^\s:\[\]()]{1,255}):\d{1,10}:\d{1,10} \[\d{1,4}\] NCCL ")
_NCCL_LINE_RE = re.compile(r"(?:^|\s)(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]")
#: Xinference's actors (xoscar) put their address before the error they raise: "RuntimeError: [address=10.11.238.116:
#: 41643, pid=432] NCCL error: ...": the host of that line's error (0.0.0.0 names none)
_XO_ADDR_RE = re.compile(r"\[address=(?P<host>[\w.\-]{1,253}|[0-9A-Fa-f:]{2,45}):\d{1,5}, pid=\d{1,10}\]")
_NCCL_LEVEL_RE = re.compile(r"\bNCCL (?P<lvl>WARN|ERROR|INFO)\b:?\s?(?P<msg>.*)$")
#: torch's c10d ("NCCL error in: FILE:LINE, MSG, NCCL version V"), torch.cuda.nccl's older ``NCCL_CHECK``
#: ("NCCL Error 2: unhandled system error", torch/csrc/cuda/nccl.cpp: the status number before NCCL's string),
#: Paddle's ("(External) NCCL error(6), remote process exited ...", paddle/phi/core/enforce.h) and nccl-tests'
#: ("HOST: Test NCCL failure common.cu:961 'internal error - ...'", src/common.h NCCLCHECK)
_NCCL_TORCH_RE = re.compile(
    r"(?:NCCL|Nccl) (?:[Ee]rror|failure)(?: \d{1,3}|\(\d{1,3}\),?)?(?: in: \S+?,?)?[:,]?\s+(?P<msg>.*?)"
    r"(?:,? NCCL version [\d.]+.*)?$"
    r"|\bDistBackendError\b"
)
#: NCCL's own error text without its ``NCCL WARN`` marker: after torch's ``Last error:``, or on its own line
_NCCL_BARE_KEYS = (
    "Got completion from peer",
    "Got async event",
    "Connection closed by remote peer",
    "Call to ",
    # checks.h's CUDACHECK text on a line of its own (torch's "Last error:" put it on the line before, or the log
    # was cut above it)
    "Cuda failure ",
    "socketProgress",
    "socketStartConnect",
    "ncclRemoteError",
    "ncclSystemError",
    "ncclInternalError",
    "ncclInvalidUsage",
    "ncclUnhandledCudaError",
    "NET/OFI",
    "Last error:",
)
_NCCL_CLASSES: list[tuple[EventKind, re.Pattern[str]]] = [
    (
        EventKind.NCCL_IB_COMPLETION,
        re.compile(
            r"Got completion (?:from peer (?P<peer>\S+?)\s+)?with (?:status=|error )(?:\w+\()?(?P<status>\d+)"
            r"(?:.*?vendor err (?P<vendor>\d+))?(?:.*?\((?P<dir>Send|Recv)\))?"
        ),
    ),
    (
        EventKind.NCCL_IB_COMPLETION,
        re.compile(
            r"(?P<provider>NET/OFI) .*?(?:completed with error|[Ee]rror)(?:.*?RC: (?P<rc>\d+))?"
            r"(?:.*?Error: (?P<status>\d+) \((?P<status_name>\w+)\))?"
        ),
    ),
    (EventKind.NCCL_IB_ASYNC, re.compile(r"Got async event\s*:\s*(?P<event>.+?)\s*$")),
    (EventKind.NCCL_CONNECTION_CLOSED, re.compile(r"Connection closed by remote peer\s*(?P<peer>\S+)?")),
    # NCCL >= 2.19 prints the CUDA error's number before its text ("Cuda failure 2 'out of memory'"); nccl-tests'
    # CUDACHECK of 2017 its source's place ("Cuda failure common.cu:891 'invalid device ordinal'")
    (
        EventKind.NCCL_CUDA_FAILURE,
        re.compile(
            r"Cuda failure (?:[\w./\-]{1,200}:\d{1,6} )?(?:\d{1,4} )?'?(?P<error>[^']*)'?|unhandled cuda error", re.I
        ),
    ),
    (
        EventKind.NCCL_REMOTE_ERROR,
        re.compile(r"remote process exited or there was a network error|ncclRemoteError"),
    ),
    (
        EventKind.NCCL_SOCKET_ERROR,
        re.compile(
            r"Call to \w+ (?:from |to )?(?P<peer>\S+)? ?.*?failed\s*:\s*(?P<error>.+)$|Socket \w+ failed"
            r"|socket\w*: .*(?:failed|closed)|Broken pipe|Connection reset by peer|Connection refused"
            r"|Connection timed out",
        ),
    ),
    (EventKind.NCCL_SYSTEM_ERROR, re.compile(r"unhandled system error|ncclSystemError")),
    (EventKind.NCCL_INVALID_USAGE, re.compile(r"invalid usage|ncclInvalidUsage|invalid argument|ncclInvalidArgument")),
    (EventKind.NCCL_INTERNAL_ERROR, re.compile(r"internal error|ncclInternalError")),
]
#: per class of ``_NCCL_CLASSES``, lower-case substrings one of which every match holds (tested first)
_NCCL_CLASS_KEYS: list[tuple[str, ...]] = [
    ("got completion ",),
    ("net/ofi",),
    ("got async event",),
    ("connection closed by remote peer",),
    ("cuda failure", "unhandled cuda error"),
    ("remote process exited", "ncclremoteerror"),
    ("call to ", "socket", "broken pipe", "connection reset by peer", "connection refused", "connection timed out"),
    ("unhandled system error", "ncclsystemerror"),
    ("invalid usage", "ncclinvalidusage", "invalid argument", "ncclinvalidargument"),
    ("internal error", "ncclinternalerror"),
]
_NET_SOCKET_RE = re.compile(r"NET/Socket : Using (?P<dev>.+)$|NET/IB : No device found")
_CUDA_RE = re.compile(
    # c10's driver-API check (c10/cuda/driver_api.h) prints cuGetErrorString's text as "CUDA driver error: ...";
    # other libraries put the error's number before it ("CUDA error 2: out of memory", TFRA's CUDA_CHECK); torch's
    # first CUDA call (c10/cuda/CUDAFunctions.cpp) says "Unexpected error from cudaGetDeviceCount(). Did you run
    # some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: ..."
    r"(?:CUDA (?:driver )?error(?: \d{1,3})?|set an error\? Error \d{1,4}): (?P<error>[^.\n]+?)"
    r"(?:\s*$|\.|\s+CUDA kernel errors|\s+Compile with|\s+\(Triggered internally)"
    r"|(?P<code>CUDA_ERROR_[A-Z_]+|cudaError[A-Z]\w+)"
    r"|(?P<bare>uncorrectable ECC error encountered|unspecified launch failure|an illegal memory access was "
    r"encountered|misaligned address|device-side assert triggered)"
)
_OOM_GPU_RE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA (?:driver )?error(?: 2)?: out of memory|cudaErrorMemoryAllocation"
    r"|CUDA_ERROR_OUT_OF_MEMORY"
)
#: substrings one of which every match of ``_CUDA_RE`` holds
_CUDA_KEYS = (
    "CUDA",
    "set an error? Error ",
    "cudaError",
    "uncorrectable ECC",
    "launch failure",
    "illegal memory access",
    "misaligned address",
    "device-side assert",
)
_OOM_GPU_DETAIL_RE = re.compile(r"Tried to allocate (?P<alloc>[\d.]+ [KMGT]i?B).*?GPU (?P<gpu>\d+)")
_OOM_HOST_RE = re.compile(
    r"(?P<n>\d+) oom-kill event|oom-kill:|Out of memory: Kill(?:ed)? process (?P<pid>\d+)"
    r"|Memory cgroup out of memory|invoked oom-killer"
    r"|ray\.exceptions\.OutOfMemoryError|node running low on memory|due to memory pressure"
)
#: torch.distributed.elastic's agent: ``failed (exitcode: -9) local_rank: 0 (pid: 5180) of binary: /usr/bin/python``
_AGENT_FAILED_RE = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\)")
#: ProcessGroupNCCL's heartbeat monitor: the watchdog thread itself stopped (stuck in CUDA/NCCL)
_HEARTBEAT_RE = re.compile(r"Heartbeat monitor timed out")
_EXC_RE = re.compile(
    r"^(?:(?:Uncaught|Unhandled)[ \t])?"  # an excepthook's log line ("Uncaught OLMoThreadError: ...", OLMo's util)
    r"(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure))(?::\s?(?P<msg>.*))?$"
)
_SLURM_CANCEL_RE = re.compile(
    r"\*\*\* (?P<what>JOB|STEP) (?P<id>\S+) ON (?P<host>\S+) CANCELLED AT (?P<time>\S+)"
    r"(?: DUE TO (?P<reason>[A-Z][A-Z ]*?))?(?: \*\*\*|\s*$)"
)
_SRUN_TASK_RE = re.compile(r"srun: error: (?P<host>[^\s:]+): tasks? (?P<tasks>[\d,\-]+): (?P<reason>.+?)\s*$")
_EXIT_CODE_RE = re.compile(r"[Ee]xit(?:ed with exit)? code (-?\d+)")
_NODE_FAIL_RE = re.compile(r"\bNODE_FAIL\b|Node failure on (?P<host>[^\s,]+)|DUE TO NODE FAILURE")
_STEP_RE = re.compile(r"StepId=(\S+?)\.?(?:\s|$)|\bJOB (\d+)")
#: a C++ exception no one caught (libstdc++'s verbose terminate handler), its ``what():`` on the same line when pasted
_TERMINATE_RE = re.compile(
    r"terminate called after throwing an instance of '(?P<exc>[^']*)'?(?:\s*what\(\):\s*(?P<what>.*))?"
)
_WHAT_RE = re.compile(r"^what\(\):\s*(?P<what>.*)$")
#: torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (~ProcessGroupNCCL: the abort reason of its communicators)
_PG_DESTROYED = "Process Group destroyed on rank "
_PG_DESTROYED_RE = re.compile(r"Process Group destroyed on rank (\d{1,7})")
#: the exceptions ProcessGroupNCCL's watchdog throws to take the process down (c10/util/Exception.h; torch < 2.2
#: threw ``std::runtime_error``), and the text of its ``what()`` that says it is the watchdog's
_TEARDOWN_EXC = frozenset({"c10::DistBackendError", "c10::DistError", "c10::DistNetworkError", "std::runtime_error"})
#: ProcessGroupNCCL's line as its watchdog rethrows what it caught (torch 1.8-2.1 log it on a line of its own before
#: the ``terminate called``, whose ``what()`` a paste often cuts), and how many lines below it that ``terminate
#: called`` of the same process is read as the watchdog's teardown
_TAKING_DOWN = "we are taking the entire process down"
_TAKEN_DOWN_LINES = 4
#: a Ray exception's tab-indented ``ip:`` field as a paste that turned the tab into eight spaces shows it
_RAY_IP_SPACED = "        ip: "
_WATCHDOG_END_RE = re.compile(
    r"(?:Process group|NCCL) watchdog thread terminated with exception|Watchdog caught collective operation timeout"
)
#: Open MPI's "Signal 11 (SIGSEGV)", abseil's failure signal handler ("*** SIGSEGV received at time=...", older
#: "*** SIGSEGV (@(nil)), see ... received by PID N (TID M) on cpu C; stack trace: ***")
_SIGNAL_RE = re.compile(
    r"Signal (?P<num>\d+) \((?P<name>SIG[A-Z]+)\)"
    r"|\*\*\* (?P<name2>SIG[A-Z]+) (?:\(@[^)\n]{0,40}\)[^*\n]{0,160}?)?received"
)
#: the ChildFailedError summary (torch/distributed/elastic/multiprocessing/errors/__init__.py ``format_msg``)
_CF_FIELD_RE = re.compile(r"^(?P<k>time|host|rank|exitcode|error_file|traceback)\s*:\s?(?P<v>.*)$")
_CF_ENTRY_RE = re.compile(r"^\[(\d+)\]:$")
_CF_RANK_RE = re.compile(r"^(-?\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_CF_EXIT_RE = re.compile(r"^(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
#: NCCL's communicator init line (init.cc, NCCL_DEBUG=INFO): ``ncclCommInitRank comm 0x.. rank 4 nranks 8 cudaDev 0
#: nvmlDev 0 busId 4c000 commId 0x.. - Init START`` (``nvmlDev`` since NCCL 2.1x), ``comm 0x.. rank 2 nranks 16
#: cudaDev 2 busId 201c0 - Init COMPLETE`` (older), and the ``Destroy COMPLETE`` line
_NCCL_INIT_RE = re.compile(
    r"\brank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda>\d+)(?: nvmlDev (?P<nvml>\d+))?"
    r" busId (?P<bus>[0-9a-fA-F]{1,16})\b"
)
#: Linux's signal numbers (signal(7), x86 and ARM): a number a message prints, by the name the others print
LINUX_SIGNALS = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    5: "SIGTRAP",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    10: "SIGUSR1",
    11: "SIGSEGV",
    12: "SIGUSR2",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
}
_LOCAL_RANK_RE = re.compile(r"(?<![\w.])(?:LOCAL_RANK|local_rank)\s*[=:]\s*(\d{1,6})\b")
#: the ``--local_rank=N`` argument in the command list DeepSpeed's sigkill_handler and torch.distributed.launch's
#: CalledProcessError print (their last child's, not the failed one's)
_LOCAL_RANK_ARG_RE = re.compile(r"'-- ?local_rank=(\d{1,5})'")
#: a global rank printed beside it (``RANK=3 LOCAL_RANK=3 WORLD_SIZE=8``); lower-case ``rank`` is too common
_GLOBAL_RANK_RE = re.compile(r"(?<![\w.])(?:RANK|GLOBAL_RANK|global_rank)\s*[=:]\s*(\d{1,7})\b")
_CVD_RE = re.compile(r"\bCUDA_VISIBLE_DEVICES\s*[=:]\s*['\"]?(?P<v>[\w\-]+(?:,[\w\-]+)*)")


def nccl_bus_id(bus: str) -> str | None:
    """NCCL's ``busId`` (the PCI address as a hex int64, NCCL src/misc/utils.cc ``int64ToBusId``:
    ``domain<<20 | bus<<12 | device<<4 | function``) as ``dddd:bb:dd.f``: ``4c000`` -> ``0000:4c:00.0``,
    ``201c0`` -> ``0000:20:1c.0``. ``None`` when it is not hexadecimal, too large, or not a PCI address (a
    device above 31 or a function above 7, PCI's 5 and 3 bits)."""
    try:
        v = int(bus, 16)
    except ValueError:
        return None
    if v >> 36 or (v >> 4) & 0xFF > 0x1F or v & 0xF > 7:
        return None
    return f"{v >> 20:04x}:{(v >> 12) & 0xFF:02x}:{(v >> 4) & 0xFF:02x}.{v & 0xF:x}"


#: the cheap test every logical line passes through before the patterns above: substrings (``in`` is far
#: cheaper than a regex alternation on every line of a large log)
_TRIGGER_KEYS = (
    "Watchdog caught",
    "NCCL work",
    "enqueued work",
    "NCCL WARN",
    "NCCL ERROR",
    "NCCL error",
    "NET/Socket : Using",
    "NET/IB : No device",
    "CUDA",
    "cuda",
    "ut of memory",
    "ut Of Memory",
    "OutOfMemory",
    "oom-kill",
    "oom_kill",
    "oom-killer",
    "Error",
    "Exception",
    "Interrupt",
    "Failure",
    "*** ",
    "srun: error",
    "NODE_FAIL",
    "Signal ",
    "SIG",
    "Segmentation fault",
    "core dumped",
    "Aborted",
    "Bus error",
    "terminate called",
    "Fatal Python",
    "Exit",
    "MPI_ABORT",
    "Assertion",
    "exitcode",
    *_NCCL_BARE_KEYS,
    "Heartbeat monitor",
    "low on memory",
    "memory pressure",
)


#: what a physical line must hold to be read at all, beyond the trigger keys: the ChildFailedError summary's
#: headers and fields (its ``time``/``host`` fields are read once an entry has opened)
_RAW_KEYS = (
    *_TRIGGER_KEYS,
    "Root Cause",
    "Failures:",
    "exitcode",
    "local_rank",
    "error_file",
    # an entry's first fields, read even with its "[N]:" line and the header above it cut off (torch elastic's
    # _FAILURE_FORMAT_TEMPLATE pads each key to ten characters)
    "time      : ",
    "host      : ",
    "thread terminated with exception",  # may start a wrapped watchdog timeout (see _WRAPPED)
    "ProcessGroupNCCL'",  # may start a wrapped "ProcessGroupNCCL's watchdog got stuck" (see _WRAPPED)
    "sigkill_handler] [",  # may start DeepSpeed's launcher line, its command list wrapped (see _WRAPPED)
    "Workers (tasks /",  # may start Ray's raylet OOM report, wrapped before its node's IP (see _WRAPPED)
    "\tip: ",  # a Ray exception's ip field: the host of the actor whose death the next lines tell (_RAY_IP_RE)
    _RAY_IP_SPACED,  # the same field, its tab turned into spaces by a paste
    "ray::",  # a Ray task's header: the host of the worker whose traceback follows (_HEADER_RE)
    "MPICH ERROR [Rank ",  # Cray MPICH's error header: the rank and host of the error stack that follows
    ", RankID:",  # torch_npu's error header: the rank of the CANN error lines that follow (_HEADER_RE)
    "Scheduler hit an exception",  # SGLang's: the rank of the traceback that follows (_SGLANG_HEADER)
    "nvidia-smi",  # a shell prompt running it: the host of its output below (_NVSMI_PROMPT_RE)
    "terminated with the following error",  # mp.spawn's header: the local rank of the traceback that follows
    "hostname:  ",  # the node of an Open MPI help text, a few lines below it (_HOSTNAME_LINES)
    "Hostname:  ",
    "] Local abort ",  # Open MPI's [NODE:PID] line below its errors-are-fatal handler's text (_HOSTNAME_LINES)
    "Traceback (most recent",  # behind a rank prefix: the rank of the unprefixed lines above it (_UNRANKED_LINES)
    "GLOBAL_RANK: ",  # Lightning's rank initialisation: a rank initialised twice (_LIGHTNING_RANK_RE)
    _TAKING_DOWN,  # ProcessGroupNCCL's last words before its watchdog's exception ends the process (_TAKEN_DOWN_LINES)
    _PG_DESTROYED,  # the abort reason below an NCCL error's what(): its rank (_rank_from_abort_reason)
)
#: Lightning's line as each process initialises its process group (lightning/fabric/utilities/distributed.py
#: ``_init_dist_connection`` and its predecessors: "initializing ddp: GLOBAL_RANK: {}, MEMBER: {}/{}" in 1.0-1.2,
#: "initializing distributed: ..." then "Initializing distributed: ..." since): MEMBER is the rank plus one, W the
#: world size
_LIGHTNING_RANK_RE = re.compile(
    r"[Ii]nitializing (?:ddp|distributed): GLOBAL_RANK: (?P<rank>\d{1,7}), MEMBER: \d{1,7}/(?P<world>\d{1,7})"
)
#: a Ray actor exception's ``ip:`` field line (ActorDiedError's fields, python/ray/exceptions.py: class_name,
#: actor_id, pid, namespace, ip, each on a tab-indented line of its own) and how many lines below it the death
#: message it belongs to may be
_RAY_IP_RE = re.compile(r"^ip: (?P<ip>[0-9A-Fa-f.:]{3,45})$")
_RAY_IP_LINES = 3
#: how many lines above its ``ip:`` field an ActorDiedError's first sentence may be (its fields follow it:
#: class_name, actor_id, pid, namespace, ip)
_RAY_FIELDS_LINES = 8
#: the failures of an actor's node that a Ray exception's ``ip:`` field just above names the host of: the node's
#: death, and its worker's memory (a pod's memory limit)
_RAY_NODE_KINDS = frozenset({EventKind.NODE_FAIL, EventKind.OOM_HOST})
#: the header of a report whose lines below tell one process's failure: the header Ray prints for a failed task or
#: actor method (``ray::WorkerDict.generate() (pid=838798, ip=10.138.0.27, actor_id=..., repr=...)``,
#: python/ray/exceptions.py ``RayTaskError``, alone or after ``RayTaskError(...): ``: the worker's traceback
#: follows) and Cray MPICH's (``MPICH ERROR [Rank 8281] [job id 1410467.0] [DATE] [frontier01982] - Abort(...)
#: ...error stack:``: MPICH's error stack follows). The first event within :data:`_HEADER_LINES` lines below that
#: names no host itself is that process's (its host, and its rank where the header names one); lines behind a
#: launcher's rank or task prefix neither set nor take it (the report is printed unprefixed)
_HEADER_RE = re.compile(
    r"ray::[\w.:\-]{1,200}\(\) \(pid=\d{1,10}, ip=(?P<ip>[0-9A-Fa-f.:]{3,45})[,)]"
    r"|^-- Process (?P<local_rank>\d{1,5}) terminated with the following error:"
    r"|MPICH ERROR \[Rank (?P<rank>\d{1,9})\] \[job id [^\]\n]{1,60}\] \[[^\]\n]{1,60}\] \[(?P<host>[\w.\-]{1,255})\]"
    # torch_npu's error line (torch_npu/csrc/core/npu/NPUException.h): "[ERROR] TIME (PID:N, Device:D, RankID:R) ERR..."
    r"|\(PID:\d{1,10}, Device:-?\d{1,5}, RankID:(?P<npu_rank>\d{1,9})\) ERR\d"
)
_HEADER_LINES = 200
#: SGLang's scheduler logging its exception (sglang/srt/managers/scheduler.py ``run_scheduler_process``:
#: ``logger.error(f"Scheduler hit an exception: {traceback}")``): only its first line carries the logger's
#: ``[STAMP TP2]`` prefix (the rank, logline.py); the traceback below it is that rank's
_SGLANG_HEADER = "Scheduler hit an exception"
#: a shell prompt (``user@host:~$ ``, ``[user@host dir]# ``, zsh's ``user@host ~ % ``) before the command it ran,
#: pasted with the command's output: that output is the host's (nvidia-smi here, the kernel log in joblog_kernel)
SHELL_PROMPT = (
    r"^\[?[a-z_][\w.\-]{0,31}@(?P<host>[A-Za-z0-9][\w.\-]{0,62})(?::[^\s#$%]{0,200}| [^\]\s#$%]{1,200}\]?)? ?[#$%] "
    r"(?:sudo )?"
)
#: a shell prompt running nvidia-smi: a header (:data:`_HEADER_RE`) naming the host of what nvidia-smi prints below
_NVSMI_PROMPT_RE = re.compile(SHELL_PROMPT + r"nvidia-smi\b")
#: Open MPI's texts that name their node on a line at most this many lines below their first line: a help text's
#: ``  hostname:  NODE`` (``Hostname:``: the lost daemon's (ORTE), smcuda's failed cuIpcOpenMemHandle), and the
#: ``[NODE:PID] Local abort ...`` that follows the errors-are-fatal handler's ``*** The X() function was called
#: before MPI_INIT`` (ompi/runtime/ompi_mpi_abort.c)
_HOSTNAME_BELOW = frozenset(
    {
        "openmpi.errmgr.lost_daemon",
        "ompi.smcuda.cu_ipc_open_failed",
        "openmpi.runtime.call_outside_init",
        "slurm.stepd.execve_failed",
    }
)
#: slurmstepd's task whose execve() failed exits with the errno as its exit code (Slurm's exec_task:
#: ``exit(errno)``): srun's "HOST: task N: Exited with exit code C" just below, C that errno, is the same task
_EXECVE_ERRNO = {"No such file or directory": 2, "Permission denied": 13, "Exec format error": 8}
_SRUN_EXIT_RE = re.compile(
    r"^srun: error: (?P<host>[^\s:]{1,255}): tasks? [\d,\-]{1,200}: Exited with exit code (?P<code>\d{1,3})$"
)
_HOSTNAME_LINES = 4


def _execve_task_host(body: str, execve: JobEvent) -> str | None:
    """The host of srun's task exit ``body`` when its exit code is the errno of the execve() failure ``execve``
    (:data:`_EXECVE_ERRNO`): the same task; else None."""
    m = _SRUN_EXIT_RE.match(body)
    if m is None or _EXECVE_ERRNO.get(str(execve.details.get("error"))) != int(m.group("code")):
        return None
    return m.group("host")


#: lines a process prints past torch's ``[rankN]:`` prefix, before the traceback torch then raises in that rank
#: behind it (``[rank0]: Traceback ...``): a CUDA kernel's own assert lines (the GPU's printf) and NCCL's WARN
#: lines (NCCL writes them itself); how many lines below the last of them that traceback may open
_DEVICE_ASSERT = "cuda.device_assert_kernel_line"
_ACTOR_DIED = "ray.actor.died_unexpectedly"  #: ActorDiedError's first sentence (its ip field below it)
_UNRANKED_LINES = 40
_UNRANKED_EVENTS = 64  #: at most this many such events wait for their rank


#: the message catalog (messages.yaml), compiled once; every row's kind an EventKind (ValueError at import if not)
_CATALOG = catalog()
_CATALOG_KINDS = {r.id: EventKind(r.kind) for r in _CATALOG.rows}


#: one pass over a line for every trigger key and catalog literal (an Aho-Corasick automaton, :class:`Literals`:
#: 0.9 us a line on the event-dense benchmark against 3.3 us for the trie-shaped regex alternation before it)
_TRIGGER_GATE = Literals((*_TRIGGER_KEYS, *_CATALOG.literals))
_RAW_GATE = Literals((*_RAW_KEYS, *_CATALOG.literals))


def _triggered(body: str) -> bool:
    return _TRIGGER_GATE.any_in(body)


def _may_matter(raw: str) -> bool:
    if _RAW_GATE.any_in(raw):
        return True
    tail = raw[-16:].rstrip() or raw.rstrip()  # a line's end without copying the line
    return tail.endswith("]:")


#: what a physical line must hold to be read while a ChildFailedError summary is open (after its "Root Cause" or
#: "Failures:" header) beyond what opens any line to reading: an entry's field, the summary's frame, a failed
#: program's line (its ``[N]:`` entry line ends in "]:", which every line is read for)
_SUMMARY_RAW_RE = re.compile(
    r"(?:time|host|rank|exitcode|error_file|traceback)\s*:|=====|-----|FAILED|<NO_OTHER_FAILURES>"
)

#: messages a hard wrap may split, (start marker, the pattern that says the message is whole)
_WRAPPED: list[tuple[str, re.Pattern[str]]] = [
    ("Watchdog caught collective operation timeout", re.compile(r"milliseconds")),
    ("last enqueued NCCL work", re.compile(r"last completed NCCL work\s*:\s*-?\d+")),
    ("last enqueued work", re.compile(r"last completed work\s*:\s*-?\d+")),
    ("Exception (either an error or timeout) detected", re.compile(r"last completed NCCL work\s*:\s*-?\d+")),
    ("Timeout at NCCL work", re.compile(r"last completed NCCL work\s*:\s*-?\d+")),  # torch >= 2.4's wording
    # the watchdog's exception, cut after its [Rank N]: whole once the exception's text is there (a timeout's
    # up to its "milliseconds")
    ("watchdog thread terminated with exception", re.compile(r"exception: (?:\[Rank \d+\] ?)?[^W\[\s]|milliseconds")),
    ("Got completion from peer", re.compile(r"vendor err \d+|\((?:Send|Recv)\)")),
    (" CANCELLED AT ", re.compile(r"\*\*\*\s*$")),
    # a paste hard-wrapped inside "ProcessGroupNCCL's watchdog got stuck" (a fixed-width terminal, wild log 07)
    ("ProcessGroupNCCL'", re.compile(r"ProcessGroupNCCL's ")),
    # DeepSpeed's launcher line, its long command list wrapped by a terminal (wild log 45)
    ("sigkill_handler] [", re.compile(r"\] exits with return code = -?\d")),
    # Ray's raylet OOM report, wrapped by a terminal before the IP of its node (wild logs 117, 119, 120)
    ("Workers (tasks /", re.compile(r"IP: [0-9A-Fa-f.:]{3,45}\)")),
    ("killed due to memory pressure (OOM)", re.compile(r"IP: [0-9A-Fa-f.:]{3,45}\)")),
    # hydra's BAD TERMINATION box: the host's line, then the exit code's (wild log 189)
    (" RUNNING AT ", re.compile(r"EXIT CODE: \d")),
    # Open MPI's help text, wrapped at its own width before the signal (Open MPI 5's prterun, wild log 146)
    ("noticed that process rank", re.compile(r"exited on\s+signal \d")),
]


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


class _Found(NamedTuple):
    kind: EventKind
    details: dict[str, JsonScalar]
    rank: int | None = None
    host: str | None = None
    time: str | None = None


#: nccl-tests' own host field before its NCCLCHECK line (src/common.h: "%s: Test NCCL failure %s:%d '%s / %s'",
#: the host gethostname() gives): a host even where its name holds no digit and no launcher prefix is read
_NCCLTESTS_HOST_RE = re.compile(r"(?P<host>[\w.\-]{1,64}): Test NCCL failure ")


def _nccl_events(body: str) -> list[_Found]:
    out: list[_Found] = []
    lvl = _NCCL_LEVEL_RE.search(body) if "NCCL" in body else None
    msg: str | None = None
    if lvl is not None and lvl.group("lvl") in ("WARN", "ERROR"):
        msg = lvl.group("msg")
    elif lvl is None:
        # PaddlePaddle's enforce says "Nccl error, <ncclGetErrorString>" (paddle/fluid/platform/enforce.h)
        t = _NCCL_TORCH_RE.search(body) if "NCCL" in body or "DistBackendError" in body or "Nccl e" in body else None
        if t is not None:
            msg = t.group("msg") or body
        if "Last error:" in body:  # the error NCCL itself reported is more precise than torch's summary
            last = body.split("Last error:", 1)[1].strip()
            msg = last or msg
            if not last and msg is None:
                return out
        elif msg is None and any(k in body for k in _NCCL_BARE_KEYS):
            msg = body
    if lvl is not None and lvl.group("lvl") == "INFO":
        s = _NET_SOCKET_RE.search(lvl.group("msg")) if "NET/" in body else None
        if s is not None:
            out.append(_Found(EventKind.NCCL_NET_SOCKET, {"device": s.group("dev"), "level": "INFO"}))
        return out
    if msg is None:
        return out
    lower = msg.lower()
    for (kind, rx), keys in zip(_NCCL_CLASSES, _NCCL_CLASS_KEYS, strict=True):
        if not any(k in lower for k in keys):
            continue
        m = rx.search(msg)
        if m is None:
            continue
        det: dict[str, JsonScalar] = {"level": lvl.group("lvl") if lvl else "torch"}
        for k, v in m.groupdict().items():
            if v is not None:
                det[k] = int(v) if k in ("status", "vendor", "rc") else v
        tested = _NCCLTESTS_HOST_RE.match(body) if "Test NCCL failure" in body else None
        out.append(_Found(kind, det, host=host_of(tested.group("host"))[0] if tested else None))
        return out
    out.append(_Found(EventKind.NCCL_WARN, {"level": lvl.group("lvl") if lvl else "torch", "message": msg[:200]}))
    return out


#: bodies whose events are remembered (:func:`_events_of`): the same message printed by many ranks (an NCCL WARN
#: on 500 ranks, a shared traceback line) is read once; bounded, so memory stays flat on any log
EVENTS_MEMO_SIZE = 4096


def _events_of(body: str) -> tuple[_Found, ...]:
    """The events one normalised body says, at most one per kind (a pure function of ``body``, memoised up to
    :data:`MEMO_MAX_CHARS`: callers copy a ``_Found``'s details before changing them)."""
    return _events_memo(body) if len(body) <= MEMO_MAX_CHARS else tuple(_read_events(body))


@lru_cache(maxsize=EVENTS_MEMO_SIZE)
def _events_memo(body: str) -> tuple[_Found, ...]:
    return tuple(_read_events(body))


class _BodyFacts(NamedTuple):
    """What a triggered body says beyond its prefixes (:func:`_body_facts`)."""

    found: tuple[_Found, ...]
    glog_stamp: str | None  #: the process's own glog stamp
    pg: int | None  #: the process group a ProcessGroupNCCL message names
    pg_guid: str | None
    pg_desc: str | None
    msg_rank: int | None  #: the rank the message names ([PG ... Rank N], [Rank N])
    #: the host the message body names: an NCCL line's ``host:pid:tid [dev]`` or an xoscar actor's
    #: ``[address=HOST:PORT, pid=N]`` (``None`` when redacted)
    body_host: str | None
    body_host_redacted: bool  #: that host is redacted
    nccl_pid: int | None
    nccl_dev: int | None


#: a Python traceback's source lines (a ``raise`` statement, ``raise RuntimeError(f"NCCL error: {error_str}")`` in
#: vLLM's and SGLang's pynccl wrapper): the code that raised, not a message; the exception's own line follows
_SOURCE_LINES = ("raise ", "raise(")


def _body_facts(body: str) -> _BodyFacts | None:
    """The events of ``body`` and what else it names, ``None`` when it says no event (a pure function of
    ``body``, memoised up to :data:`MEMO_MAX_CHARS`)."""
    return _facts_memo(body) if len(body) <= MEMO_MAX_CHARS else _read_facts(body)


@lru_cache(maxsize=EVENTS_MEMO_SIZE)
def _facts_memo(body: str) -> _BodyFacts | None:
    return _read_facts(body)


def _message_rank(f: _Found, facts: _BodyFacts) -> int | None:
    """The rank of an event whose line's prefixes name none: a ``[Rank N]`` of the default process group is the
    global rank (of another group, only the group's), else the rank the message itself names."""
    if facts.msg_rank is not None and (facts.pg if facts.pg is not None else f.details.get("pg", 0)) == 0:
        return facts.msg_rank
    return f.rank


class _Plan(NamedTuple):
    """What a line reading ``rest`` after a launcher's rank or task prefix does to a scanner with nothing open (no
    wrapped message, no ChildFailedError summary): whether it is read at all, its events' keys, and what else it
    tells (:func:`_plan_of`)."""

    matters: bool  #: the line holds what opens it to reading (:func:`_may_matter`)
    gpu: bool  #: the line may say which GPU a process uses (:meth:`JobLogScanner._learn_gpu`)
    rank: int | None  #: the rank ``rest`` names itself (else the prefix's)
    task: int | None  #: the task ``rest`` names itself (else the prefix's)
    host: str | None  #: the host a prefix within ``rest`` names (the scanner learns it)
    year: int | None  #: the year its stamps name (it dates later stamps)
    #: (kind, rank when no prefix names one, host) of each event, in order (a node failure without a host takes
    #: the Ray actor exception's ``ip:`` field read just above, as the line's reading does)
    targets: tuple[tuple[EventKind, int | None, str | None], ...]


#: how a prefixed line's rest starts when a gate literal may cross its prefix (such lines are gated whole)
_REST_CROSSINGS = prefix_crossings(_RAW_GATE.literals)
#: what a line must hold to say which GPU a process uses (:meth:`JobLogScanner._learn_gpu`)
_GPU_KEYS = ("cudaDev", "LOCAL_RANK", "local_rank", "CUDA_VISIBLE_DEVICES")
_GPU_CROSSINGS = prefix_crossings(_GPU_KEYS)
#: the plans of a line no event can start on
_UNREAD = _Plan(False, False, None, None, None, None, ())
_UNREAD_GPU = _UNREAD._replace(gpu=True)


def _gpu_line(raw: str) -> bool:
    """Whether a physical line may say which GPU a process uses (tested inline: this runs on every line)."""
    return "cudaDev" in raw or "LOCAL_RANK" in raw or "local_rank" in raw or "CUDA_VISIBLE_DEVICES" in raw


@lru_cache(maxsize=EVENTS_MEMO_SIZE)
def _plan_of(rest: str) -> _Plan | None:
    """The :class:`_Plan` of ``rest`` (a pure function of it, memoised), ``None`` when reading it depends on more
    than the prefix's rank and the caps: it is no single logical line of events, may belong to a ChildFailedError
    summary or a hard wrap, is a Ray ``ip:`` field or a ``what():`` line, or has an event that depends on the
    lines before it (a Flight Recorder "this local rank" line, a Lightning rank initialisation) or sets what the
    lines after it mean (ProcessGroupNCCL taking the process down); also when a gate
    literal may cross the prefix, or ``rest`` is blank (the gate then reads the whole line). A line that says no
    event has no targets."""
    if not rest.strip() or rest.startswith(_REST_CROSSINGS) or "\r" in rest or "%|" in rest:
        return None
    gpu = _gpu_line(rest) or rest.startswith(_GPU_CROSSINGS)
    if not _may_matter(rest):
        return _UNREAD_GPU if gpu else _UNREAD
    lines = after_prefix(rest)
    if len(lines) != 1:
        return None
    ll = lines[0]
    body = ll.body
    if _shape(body) != (False, False) or body.startswith(("ip: ", "what():")) or _CF_ENTRY_RE.match(body):
        return None
    if "GLOBAL_RANK: " in body or _TAKING_DOWN in body:
        return None
    facts = _body_facts(body)
    if facts is None:
        return _Plan(True, gpu, ll.rank, ll.task, ll.host, None, ())  # no event: its task's rank and host to learn
    host = ll.host or facts.body_host
    targets = []
    for f in facts.found:
        if f.details.get("culprit_self") is True:
            return None
        targets.append((f.kind, _message_rank(f, facts), f.host or host))
    outer = (ll.outer_time or ll.time) if facts.glog_stamp is not None else ll.outer_time
    time = facts.glog_stamp or ll.time
    year = (year_of(outer) or year_of(time)) if outer is not None or time is not None else None
    return _Plan(True, gpu, ll.rank, ll.task, ll.host, year, tuple(targets))


def _read_shape(body: str) -> tuple[bool, bool]:
    """(whether ``body`` may be a line of torch elastic's ChildFailedError summary that opens or frames it on its
    own, whether it starts a message a hard wrap cut short: :data:`_WRAPPED`)."""
    summary = (
        body.startswith(("Root Cause", "=====", "-----"))
        or body == "Failures:"
        or body.endswith(" FAILED")
        or "<NO_OTHER_FAILURES>" in body
        or (":" in body and _CF_FIELD_RE.match(body) is not None)
    )
    return summary, any(start in body and not whole.search(body) for start, whole in _WRAPPED)


@lru_cache(maxsize=EVENTS_MEMO_SIZE)
def _shape(body: str) -> tuple[bool, bool]:
    """:func:`_read_shape`, memoised (the same words on many ranks)."""
    return _read_shape(body)


def _read_facts(body: str) -> _BodyFacts | None:
    if body.startswith(_SOURCE_LINES) or not _triggered(body):
        return None
    found = _events_of(body)
    if not found:
        return None
    glog = _GLOG_RE.search(body, 0, 120) if "]" in body[:120] else None
    pg_m = _PG_RE.search(body) if "[PG " in body else None
    msg_rank = int(pg_m.group("r")) if pg_m else None
    if msg_rank is None and "[Rank " in body:
        r = _RANK_RE.search(body)
        msg_rank = int(r.group(1)) if r else None
    # NCCL before 2.3 printed "host:pid:tid [dev] file.cu:N WARN ..." without the word NCCL
    nccl = _NCCL_LINE_RE.search(body) if "NCCL" in body or " WARN " in body else None
    xo = _XO_ADDR_RE.search(body) if nccl is None and "[address=" in body else None
    named = nccl or xo
    body_host, body_red = host_of(named.group("host")) if named is not None else (None, False)
    return _BodyFacts(
        found=found,
        glog_stamp=glog.group("stamp") if glog is not None else None,
        pg=int(pg_m.group("pg")) if pg_m is not None else None,
        pg_guid=pg_m.group("guid") if pg_m is not None else None,
        pg_desc=pg_m.group("desc") if pg_m is not None else None,
        msg_rank=msg_rank,
        body_host=body_host,
        body_host_redacted=body_red,
        nccl_pid=int(nccl.group("pid")) if nccl is not None else None,
        nccl_dev=int(nccl.group("dev")) if nccl is not None else None,
    )


def _read_events(body: str) -> list[_Found]:
    found: list[_Found] = []
    # each pattern runs only on a body holding a fixed substring it needs (``in`` costs a tenth of a search)
    m = _WATCHDOG_RE.search(body) if "Watchdog caught" in body else None
    if m is not None:
        args = dict(_WORK_ARG_RE.findall(m.group("args")))
        det: dict[str, JsonScalar] = {
            "seq": _int(args.get("SeqNum")),
            "op": args.get("OpType"),
            "timeout_ms": _int(args.get("Timeout(ms)")),
            "ran_for_ms": int(m.group("ran")),
        }
        if "NumelIn" in args:
            det["numel_in"] = _int(args["NumelIn"])
        found.append(_Found(EventKind.WATCHDOG_TIMEOUT, det))
    elif "Watchdog caught collective operation timeout" in body:  # a wrap cut short: what it says so far
        args = dict(_WORK_ARG_RE.findall(body))
        found.append(_Found(EventKind.WATCHDOG_TIMEOUT, {"seq": _int(args.get("SeqNum")), "op": args.get("OpType")}))
    if "Heartbeat monitor" in body and _HEARTBEAT_RE.search(body) and not found:
        found.append(_Found(EventKind.WATCHDOG_TIMEOUT, {"heartbeat": True}))
    m = _AGENT_FAILED_RE.search(body) if "(exitcode:" in body else None
    if m is not None:
        code = int(m.group("code"))
        det = {"root_cause": None, "exit_code": code, "pid": int(m.group("pid")), "local_rank": int(m.group("lr"))}
        if code < 0:
            det["signal_number"] = -code
        found.append(_Found(EventKind.CHILD_FAILED, det))
    m = _PROGRESS_RE.search(body) if "last enqueued" in body else None
    if m is not None:
        found.append(
            _Found(
                EventKind.WORK_PROGRESS,
                {
                    "at_work": int(m.group("at")),
                    "last_enqueued": int(m.group("enq")),
                    "last_completed": int(m.group("done")),
                },
            )
        )
    if "NCCL" in body or "Nccl e" in body or any(k in body for k in _NCCL_BARE_KEYS):
        found += _nccl_events(body)
    memory = "emory" in body or "oom" in body or "MEMORY" in body  # every OOM pattern holds one of these
    host_oom = _OOM_HOST_RE.search(body) if memory else None
    gpu_oom = memory and host_oom is None and _OOM_GPU_RE.search(body) is not None
    if gpu_oom and not any(f.kind is EventKind.NCCL_CUDA_FAILURE for f in found):
        det = {}
        d = _OOM_GPU_DETAIL_RE.search(body)
        if d is not None:
            det = {"tried_to_allocate": d.group("alloc"), "gpu": int(d.group("gpu"))}
        found.append(_Found(EventKind.OOM_GPU, det))
    elif any(k in body for k in _CUDA_KEYS) and not any(f.kind is EventKind.NCCL_CUDA_FAILURE for f in found):
        m = _CUDA_RE.search(body)
        if m is not None:
            found.append(
                _Found(EventKind.CUDA_ERROR, {"error": (m.group("error") or m.group("code") or m.group("bare"))})
            )
    m = host_oom
    if m is not None:
        det = {}
        if m.group("n"):
            det["oom_kill_events"] = int(m.group("n"))
        if m.group("pid"):
            det["pid"] = int(m.group("pid"))
        s = _STEP_RE.search(body)
        if s is not None:
            det["step"] = s.group(1) or s.group(2)
        found.append(_Found(EventKind.OOM_HOST, det))
    m = _SLURM_CANCEL_RE.search(body) if "CANCELLED AT" in body else None
    if m is not None:
        reason = (m.group("reason") or "").strip()
        kind = (
            EventKind.SLURM_TIME_LIMIT
            if reason == "TIME LIMIT"
            else EventKind.NODE_FAIL
            if reason == "NODE FAILURE"
            else EventKind.SLURM_CANCELLED
        )
        h, _ = host_of(m.group("host"))
        det = {"job": m.group("id"), "scope": m.group("what"), "reason": reason or None}
        if kind is EventKind.NODE_FAIL and h is not None:
            # "ON HOST" names the node whose slurmstepd printed the cancellation, not the node that failed (srun's
            # "Node failure on HOST" names that one): it must not be blamed
            det["printed_on"], h = h, None
        found.append(_Found(kind, det, host=h, time=m.group("time")))
    elif "NODE_FAIL" in body or "Node failure" in body or "NODE FAILURE" in body:
        m = _NODE_FAIL_RE.search(body)
        if m is not None:
            h = host_of(m.group("host"))[0] if m.group("host") else None
            found.append(_Found(EventKind.NODE_FAIL, {}, host=h))
    m = _SRUN_TASK_RE.search(body) if "srun: error: " in body else None
    if m is not None:
        reason = m.group("reason")
        det = {"tasks": m.group("tasks"), "reason": reason}
        tasks = m.group("tasks")
        if tasks.isdigit():
            det["task"] = int(tasks)
        e = _EXIT_CODE_RE.search(reason)
        if e is not None:
            det["exit_code"] = int(e.group(1))
        sig = abort_signal(body)
        if sig:
            det["signal"] = sig
        found.append(_Found(EventKind.SRUN_TASK_EXIT, det, host=host_of(m.group("host"))[0]))
    else:
        sig_m = _SIGNAL_RE.search(body) if "Signal " in body or "*** SIG" in body else None
        sig = abort_signal(body)
        if sig_m is not None:
            name = sig_m.group("name") or sig_m.group("name2")
            found.append(_Found(EventKind.SIGNAL, {"signal": name, "number": _int(sig_m.group("num"))}))
        elif sig is not None and "Fatal Python error" not in body:
            det = {"signal": sig or None}
            t = _TERMINATE_RE.search(body)
            if t is not None:
                det["exception"] = t.group("exc")[:120]
                if t.group("what"):
                    det.update(_what_details(t.group("exc"), t.group("what")))
            found.append(_Found(EventKind.SIGNAL, det))
        elif "Fatal Python error: " in body:
            found.append(_Found(EventKind.SIGNAL, {"signal": body.split("Fatal Python error: ", 1)[1][:60]}))
    m = _EXC_RE.match(body) if not found else None
    if m is not None:  # "RuntimeError: CUDA error: ..." is the CUDA error, already found
        found.append(
            _Found(EventKind.PYTHON_EXCEPTION, {"type": m.group("type"), "message": (m.group("msg") or "")[:300]})
        )
    return _catalog_events(body, found)


def _catalog_events(body: str, found: list[_Found]) -> list[_Found]:
    """``found`` (the hand-written patterns' events of ``body``) with the message catalog's: each matching
    ``catalog`` row (:mod:`fleetdx.probes.parsers.msgcatalog`) adds an event of its kind, unless one of that kind
    is already there, which then takes what the row read and it lacks (:func:`_filled`); a row's ``supersedes``
    kinds (the catch-alls: ``nccl-warn``, ``python-exception``, ...) found by the hand-written patterns are
    dropped. The event's details are the row's named groups and ``catalog`` (the row id), ``failure_class`` and
    ``role``."""
    matches = _CATALOG.scan(body)
    if not matches:
        return found
    out = list(found)
    legacy = {f.kind for f in found}
    drop: set[str] = set()
    for cm in matches:
        row = cm.row
        kind = _CATALOG_KINDS[row.id]
        det = dict(cm.details)
        h = det.pop("host", None)
        host = host_of(h)[0] if isinstance(h, str) else None
        r = det.get("rank")
        rank = r if isinstance(r, int) else None
        t = det.pop("time", None)
        sig = det.get("signal")
        if isinstance(sig, int) or (isinstance(sig, str) and sig.isdigit()):  # UCX's "Caught signal 11 (...)"
            det["signal"] = LINUX_SIGNALS.get(int(sig), str(sig))
        det.update({"catalog": row.id, "failure_class": row.failure_class, "role": row.role})
        same = next((i for i, f in enumerate(out) if f.kind is kind), None)
        if same is not None:
            out[same] = _filled(out[same], det, host, rank)
            continue
        out.append(_Found(kind, det, rank=rank, host=host, time=t if isinstance(t, str) else None))
        drop.update(row.supersedes)
    if drop:
        out = [f for f in out if not (f.kind.value in drop and f.kind in legacy)]
    return _checked_error(out)


#: catalog rows of a C++ CHECK that failed (the process logs it at FATAL and aborts)
_CHECK_ROWS = frozenset({"glog.check_failed"})


def _checked_error(found: list[_Found]) -> list[_Found]:
    """A CHECK that failed on an error its own line names (BytePS's ``Check failed: r == ncclSuccess NCCL error:
    unhandled system error``): the abort that follows is that error's end, not a crash of its own, and the CHECK's
    event says so (``teardown_of``: the error's kind, as after ProcessGroupNCCL's watchdog)."""
    if not any(f.details.get("catalog") in _CHECK_ROWS for f in found):
        return found
    own = (EventKind.PYTHON_EXCEPTION, EventKind.SIGNAL)
    inner = [f.kind for f in found if f.kind not in own and f.details.get("catalog") not in _CHECK_ROWS]
    if not inner:
        return found
    return [
        f._replace(details={**f.details, "teardown_of": inner[0].value})
        if f.details.get("catalog") in _CHECK_ROWS
        else f
        for f in found
    ]


def _filled(found: _Found, det: Mapping[str, JsonScalar], host: str | None, rank: int | None) -> _Found:
    """The event ``found`` (a hand-written pattern's, or an earlier row's, of the same kind) with what a catalog
    row read of the same line and it lacks: where it happened (host, rank), and each detail it has no value for
    (the row's named groups such as the peer NCCL could not connect to, ``pid`` for ranks.py's (host, pid) join,
    and the row's id, class and role when no row named it yet, so that the rules of that row apply)."""
    extra = {k: v for k, v in det.items() if k not in found.details}
    return found._replace(
        host=found.host if found.host is not None else host,
        rank=found.rank if found.rank is not None else rank,
        details={**found.details, **extra} if extra else found.details,
    )


def _nccl_warned(kind: EventKind, det: Mapping[str, object]) -> bool:
    """An event read from an NCCL WARN line of a process (its ``host:pid:tid [dev]`` prefix named the pid)."""
    return kind.value.startswith("nccl-") and kind is not EventKind.NCCL_NET_SOCKET and "pid" in det


def _what_details(exc: str, what: str) -> dict[str, JsonScalar]:
    """What the ``what():`` of an uncaught C++ exception ``exc`` adds to its ``terminate called`` event: the text,
    and ``teardown_of`` when it is ProcessGroupNCCL's watchdog taking the process down
    (``TORCH_NCCL_ASYNC_ERROR_HANDLING``: "To avoid data inconsistency, we are taking the entire process down"):
    the kind of the event its text reports (``watchdog-timeout``, ``cuda-error``, ...), else ``"watchdog"``."""
    det: dict[str, JsonScalar] = {"what": what.strip()[:300]}
    if exc in _TEARDOWN_EXC and _WATCHDOG_END_RE.search(what):
        if "Watchdog caught" in what:  # also when a hard wrap cut the timeout's own text short
            det["teardown_of"] = EventKind.WATCHDOG_TIMEOUT.value
        else:
            inner = [f.kind for f in _events_of(what) if f.kind is not EventKind.PYTHON_EXCEPTION]
            det["teardown_of"] = inner[0].value if inner else "watchdog"
    return det


def _default_pg_rank(body: str) -> int | None:
    """The rank a ProcessGroupNCCL message names (``[PG ID 0 ... Rank 3]``, ``[Rank 3]``) when it is the global
    one: the default group's (another group's rank is only the rank within that group)."""
    m = _PG_RE.search(body)
    if m is not None:
        return int(m.group("r")) if m.group("pg") == "0" else None
    r = _RANK_RE.search(body)
    return int(r.group(1)) if r else None


def _agree(a: object, b: object) -> bool:
    """Two prefixes of lines may be the same process's: equal, or one of them absent."""
    return a is None or b is None or a == b


#: physical lines after a ``terminate called`` line within which its ``what():`` line is looked for (several
#: processes aborting at once interleave theirs)
_WHAT_WINDOW = 16


class _ChildBlock:
    """The entry of a ChildFailedError summary being read (``[0]:`` then ``  time : ...`` field lines)."""

    def __init__(self, root: bool | None, start: int) -> None:
        self.root = root
        self.start = start
        self.fields: dict[str, str] = {}
        self.lines: list[str] = []


def _child_place(block: _ChildBlock) -> tuple[int | None, str | None, bool] | None:
    """(rank, host, whether the host is redacted) of the event :func:`_child_event` makes of ``block`` (its rank
    and host are the key of the caps, known before the event is built); ``None`` when it makes none (no rank and
    no exit code)."""
    f = block.fields
    if "rank" not in f and "exitcode" not in f:
        return None
    rm = _CF_RANK_RE.match(f.get("rank", ""))
    host, red = host_of(f["host"]) if f.get("host") else (None, False)
    return int(rm.group(1)) if rm and int(rm.group(1)) >= 0 else None, host, red


def _child_event(
    block: _ChildBlock, place: tuple[int | None, str | None, bool], file: str, year: int | None
) -> JobEvent:
    """The CHILD_FAILED event of ``block``, whose :func:`_child_place` is ``place``."""
    rank, host, red = place
    f = block.fields
    rm = _CF_RANK_RE.match(f.get("rank", ""))
    em = _CF_EXIT_RE.match(f.get("exitcode", ""))
    det: dict[str, JsonScalar] = {"root_cause": block.root}
    exit_code = int(em.group(1)) if em else None
    det["exit_code"] = exit_code
    if em and em.group(2):
        det["pid"] = int(em.group(2))
    if f.get("error_file") and f["error_file"] != "<N/A>":
        det["error_file"] = f["error_file"]
    tb = f.get("traceback", "")
    if tb:
        det["traceback"] = tb[:300]
    sig = _SIGNAL_RE.search(tb)
    if sig is not None:
        det["signal"] = sig.group("name") or sig.group("name2")
    elif exit_code is not None and exit_code < 0:
        det["signal_number"] = -exit_code
    if red:
        det["host_redacted"] = True
    t = f.get("time")
    return JobEvent(
        kind=EventKind.CHILD_FAILED,
        rank=rank,
        local_rank=int(rm.group(2)) if rm and rm.group(2) else None,
        host=host,
        time=t,
        ts=stamp_ts(t, year) if t else None,
        file=file,
        line=block.start,
        text="\n".join(block.lines)[: MAX_TEXT * 2],
        details=det,
    )


#: an event key of a scanner's caps
_Key = TypeVar("_Key", bound=Hashable)


def over_cap(per_key: Mapping[_Key, int], key: _Key, kept: int) -> bool:
    """Whether one more event of ``key`` is over the caps (the module doc), ``kept`` events being kept and
    ``per_key`` counting them by key: past :data:`EVENT_BUDGET` the first of each key only, never more than
    :data:`MAX_EVENTS`. The job-log and kernel-log scanners' one test."""
    return kept >= MAX_EVENTS or per_key.get(key, 0) >= (MAX_EVENTS_PER_KEY if kept < EVENT_BUDGET else 1)


class JobLogScanner:
    """Streams a job log: :meth:`feed` one physical line at a time, then :meth:`result`. Memory is bounded as
    the module doc says. ``year`` dates stamps that print none (glog, syslog) until the log prints a full
    date."""

    def __init__(self, file: str, year: int | None = None, year_assumed: bool = False) -> None:
        self.file = file
        self.year = year
        #: ``year`` is a guess (e.g. the file's modification time): events dated with it say so
        #: (``details["year_assumed"]``) until the log prints a full date
        self.year_assumed = year_assumed and year is not None
        self.lines = 0
        self.events: list[JobEvent] = []
        self.dropped = 0
        self._per_key: dict[tuple[EventKind, int | None, str | None], int] = {}
        self._hosts: dict[str, None] = {}
        self._prefix_hosts: set[str] = set()
        #: a launcher's name of a host (pdsh's or mpirun's prefix: the hostfile's IP or alias) -> the host's own
        #: name, NCCL's ``host:pid:tid`` on the same line (NCCL's getHostName: gethostname() up to its first dot),
        #: unless that is a container's generated name (Docker's: its id's first 12 hex digits), which says less
        #: than the launcher's; ``None`` once the prefix is seen with two own names
        self._own_names: dict[str, str | None] = {}
        self._rank_hosts: dict[int, str] = {}
        #: Slurm task -> the host its lines name (an event's, or NCCL's own prefix behind the task's prefix)
        self._task_hosts: dict[int, str] = {}
        #: (rank, host) of the ranks whose own watchdog timeout was read: a later Flight Recorder line saying
        #: that this same rank timed out ("from this local rank") adds nothing and is not kept
        self._timed_out: set[tuple[int, str | None]] = set()
        self._task_ranks: dict[int, int] = {}
        self._gpus: list[GpuFact] = []
        self._pending: list[tuple[int, str, LogLine]] = []
        self._block: _ChildBlock | None = None
        self._root_next: bool | None = None
        #: indexes in ``events`` of summary entries read under no header since the summary's frame
        self._headless: list[int] = []
        self._ray_ip: tuple[int, str] | None = None  #: (line, ip) of the last Ray exception's ip field
        #: (line, host, rank, local rank) of the last report header (_HEADER_RE), until an event takes it
        self._header: tuple[int, str | None, int | None, int | None] | None = None
        #: (line, index in ``events``) of an Open MPI help text's event (:data:`_HOSTNAME_BELOW`), until its
        #: ``hostname:`` line names the node
        self._hostname_below: tuple[int, int] | None = None
        #: (line, event index, host) of an execve() failure named by the srun task exit below it (_EXECVE_ERRNO)
        self._execve_named: tuple[int, int, str] | None = None
        #: ``terminate called`` events whose ``what():`` line has not been read: (event index, line, the line's
        #: rank, local rank and host prefixes)
        self._terminates: list[tuple[int, int, int | None, int | None, str | None]] = []
        #: (line of the last, event indexes, their (host, pid)s) of device-side assert and NCCL WARN events read
        #: with no rank, waiting for the traceback of their process behind its rank prefix (_UNRANKED_LINES)
        self._unranked: tuple[int, list[int], set[tuple[str | None, object]]] | None = None
        #: (line, rank, host) of the last ProcessGroupNCCL "we are taking the entire process down" line
        self._taking_down: tuple[int, int | None, str | None] | None = None
        #: (global rank, world size) -> line of the Lightning rank initialisations read since the last event (an
        #: event between two starts a new attempt: a restart prints every rank again)
        self._claims: dict[tuple[int, int], int] = {}

    # ---- bookkeeping
    def _full(self, key: tuple[EventKind, int | None, str | None]) -> bool:
        """Whether an event of ``key`` (kind, rank, host) is over its cap (see the module doc)."""
        return over_cap(self._per_key, key, len(self.events))

    def _keep(self, ev: JobEvent) -> None:
        key = (ev.kind, ev.rank, ev.host)
        if self._full(key):
            self.dropped += 1
            return
        n = self._per_key.get(key, 0)
        self._per_key[key] = n + 1
        self.events.append(ev)
        if self._claims and ev.kind is not EventKind.DUPLICATE_RANK:
            self._claims.clear()
        if ev.kind is EventKind.WATCHDOG_TIMEOUT and ev.rank is not None and len(self._timed_out) < MAX_HOSTS:
            self._timed_out.add((ev.rank, ev.host))
        if ev.host is not None and len(self._hosts) < MAX_HOSTS:
            self._hosts.setdefault(ev.host, None)
        if ev.rank is not None and ev.host is not None and len(self._rank_hosts) < MAX_HOSTS:
            self._rank_hosts.setdefault(ev.rank, ev.host)
        if ev.task is not None and ev.host is not None and len(self._task_hosts) < MAX_HOSTS:
            self._task_hosts.setdefault(ev.task, ev.host)

    def _note_year(self, ll: LogLine) -> None:
        """Remember the year a line's stamps name (it dates later stamps printed without one)."""
        if ll.time is None and ll.outer_time is None:
            return
        y = year_of(ll.outer_time) or year_of(ll.time)
        if y is not None:
            self.year, self.year_assumed = y, False

    # ---- lines
    def feed(self, raw: str, span: int = 1) -> None:
        """Read one line (with or without its newline): a physical line, or ``span`` physical lines a hard wrap
        cut and :mod:`~fleetdx.probes.parsers.hardwrap` joined again (its events cite the first of them).

        Raises:
            ParseError: the line holds a NUL byte (binary input).
        """
        n = self.lines + 1
        self.lines += span
        if "\x00" in raw:
            raise ParseError(FMT, n, "text", "binary data (NUL byte) in input")
        # a launcher-prefixed line is judged by what follows its prefix, once for every rank that prints it
        split = split_prefix(raw)
        plan = _plan_of(split[2]) if split is not None and len(split[2]) <= MEMO_MAX_CHARS else None
        if plan is None and split is not None and ("\r" in split[2] or "%|" in split[2]):
            split = None  # a line a carriage return or a progress bar cuts is normalised whole (prefixed())
        if plan.gpu if plan is not None else _gpu_line(raw):
            self._learn_gpu(n, raw)
        if self._terminates and n - self._terminates[0][1] > _WHAT_WINDOW:
            self._terminates = [t for t in self._terminates if n - t[1] <= _WHAT_WINDOW]
        if (
            plan is None
            or split is None
            or self._pending
            or (self._terminates and "what():" in raw)
            or (self._unranked is not None and n - self._unranked[0] <= _UNRANKED_LINES)
            or (not plan.matters and (self._block is not None or self._root_next is not None))
        ):
            self._gate(n, raw, split)
        elif plan.matters:
            # an open ChildFailedError summary does not change how such a line is read (its plan says it is no
            # line of the summary: _child ends the open block and gives the line back); this is most of an
            # event-dense log's lines after its first summary
            if self._block is not None:
                self._end_block()
            if not self._saturated(n, plan, split[0], split[1]):
                self._read(n, raw, split)
        else:
            # a "[rankN]:" line names no task, nor a line without "[rank" where _learn_task looks; no prefixed
            # line names a host (_learn_host)
            if split[1] is not None and "[rank" in raw[:16]:
                self._learn_task(raw)
            self._learn_nccl_host(split)

    def _gate(self, n: int, raw: str, split: tuple[int | None, int | None, str] | None) -> None:
        """Read ``raw`` (``split`` by :func:`prefixed`) if an event can start on it (or it can belong to what is
        open), else learn the host and task its first words name: most lines of a large log are not normalised."""
        if (
            self._pending
            or self._block is not None
            or (self._root_next is not None and _SUMMARY_RAW_RE.search(raw) is not None)
            or _may_matter(raw)
            or (self._terminates and "what():" in raw)
        ):
            self._read(n, raw, split)
        else:
            self._learn_host(raw)
            self._learn_task(raw)
            if split is not None:
                self._learn_nccl_host(split)

    def _learn_nccl_host(self, split: tuple[int | None, int | None, str]) -> None:
        """Remember the host NCCL's own ``host:pid:tid [dev] NCCL ...`` prefix names for the rank or Slurm task whose
        launcher prefix the line carries (``0: g1002:2128869:2128880 [0] NCCL INFO ...``: task 0 ran on g1002), the
        first such line of each (a cheap look: one dictionary lookup once it is known)."""
        rank, task, rest = split
        known, key = (self._task_hosts, task) if task is not None else (self._rank_hosts, rank)
        if key is None or key in known or len(known) >= MAX_HOSTS or " NCCL " not in rest[:200]:
            return
        m = _NCCL_AT_START_RE.match(rest)
        if m is not None:
            host, redacted = host_of(m.group("host"))
            if host is not None and not redacted:
                known[key] = host

    def _read(self, n: int, raw: str, split: tuple[int | None, int | None, str] | None) -> None:
        """Read line ``n`` (``split``: its rank or task prefix and rest, as :func:`prefixed` gives)."""
        for ll in normalise_prefixed(split) if split is not None else normalise_line(raw):
            if ll.host is not None and raw[:1] not in " \t" and len(self._prefix_hosts) < MAX_HOSTS:
                self._prefix_hosts.add(ll.host)
            self._logical(n, raw, ll)

    def _saturated(self, n: int, plan: _Plan, prefix_rank: int | None, prefix_task: int | None) -> bool:
        """Whether launcher-prefixed line ``n``, read with nothing open, of ``plan`` (:func:`_plan_of`) after its
        prefix, has every event over its cap (:meth:`_full`): it is then counted as dropped and what else it tells
        is kept (its host, its task's rank, the year) without reading it further: the same outcome as reading it,
        at a fraction of the cost once a large log's events are capped (most of an event-dense log)."""
        rank = plan.rank if plan.rank is not None else prefix_rank
        kept = len(self.events)
        if kept < MAX_EVENTS:  # else every key is full (:meth:`_full`, its test inlined: this runs on most lines)
            cap = MAX_EVENTS_PER_KEY if kept < EVENT_BUDGET else 1
            for kind, message_rank, host in plan.targets:
                if host is None and kind in _RAY_NODE_KINDS:
                    host = self._ray_host(n)
                if self._per_key.get((kind, rank if rank is not None else message_rank, host), 0) < cap:
                    return False
        self.dropped += len(plan.targets)
        if plan.host is not None and len(self._prefix_hosts) < MAX_HOSTS:
            self._prefix_hosts.add(plan.host)
        task = plan.task if plan.task is not None else prefix_task
        if task is not None and rank is not None and len(self._task_ranks) < MAX_HOSTS:
            self._task_ranks.setdefault(task, rank)
        if plan.year is not None:
            self.year, self.year_assumed = plan.year, False
        return True

    def _ray_host(self, n: int) -> str | None:
        """The host of a node failure or a host OOM told on line ``n`` without one: the Ray actor exception's
        ``ip:`` field read just above (the actor's node), if any."""
        return self._ray_ip[1] if self._ray_ip and n - self._ray_ip[0] <= _RAY_IP_LINES else None

    def _learn_host(self, raw: str) -> None:
        """Remember the ``host: `` prefix of a line not read further, and the rank a ``host: [rankN]:`` line
        (or ESPnet's ``[host:rank/world] ``) places on it (a cheap look at its first words)."""
        if raw[:1] == "[" and (m := RANK_HOST_PREFIX_RE.match(raw)) is not None:  # ESPnet's "[lion15:0/4] "
            host, redacted = host_of(m.group("host"))
            if host is not None and not redacted and len(self._rank_hosts) < MAX_HOSTS:
                self._rank_hosts.setdefault(int(m.group("rank")), host)
            return
        i = raw.find(": ", 0, 100)
        if i <= 0 or len(self._prefix_hosts) >= MAX_HOSTS:
            return
        word = raw[:i]
        if word not in self._prefix_hosts:
            if " " in word or "\t" in word:
                return
            if not is_host_prefix(raw, word):
                return
            self._prefix_hosts.add(word)
        if raw.startswith("[rank", i + 2) and len(self._rank_hosts) < MAX_HOSTS:  # "host: [rank7]:": rank 7's host
            j = raw.find("]", i + 7, i + 16)
            if j > 0 and raw[i + 7 : j].isdigit():
                self._rank_hosts.setdefault(int(raw[i + 7 : j]), word)

    def _learn_gpu(self, n: int, raw: str) -> None:
        """Remember what a line says of a process's GPU (see :class:`GpuFact`)."""
        for ll in normalise_line(raw):
            if len(self._gpus) >= MAX_HOSTS:
                return
            body = ll.body
            text = raw.strip()[:MAX_TEXT]
            m = _NCCL_INIT_RE.search(body)
            if m is not None:
                nccl = _NCCL_LINE_RE.search(body)
                host = ll.host
                red = ll.host_redacted
                if nccl is not None and host is None:
                    host, red = host_of(nccl.group("host"))
                self._gpus.append(
                    GpuFact(
                        source=GpuSource.NCCL_INIT,
                        rank=ll.rank,
                        local_rank=ll.local_rank,
                        comm_rank=int(m.group("rank")),
                        nranks=int(m.group("nranks")),
                        host=None if red else host,
                        pid=int(nccl.group("pid")) if nccl is not None else ll.pid,
                        index=int(m.group("cuda")),
                        physical_index=_int(m.group("nvml")),
                        bus_id=nccl_bus_id(m.group("bus")),
                        file=self.file,
                        line=n,
                        text=text,
                    )
                )
                continue
            g = _GLOBAL_RANK_RE.search(body)
            rank = ll.rank if ll.rank is not None else (int(g.group(1)) if g is not None else None)
            c = _CVD_RE.search(body)
            if c is not None:
                self._gpus.append(
                    GpuFact(
                        source=GpuSource.CUDA_VISIBLE_DEVICES,
                        rank=rank,
                        local_rank=ll.local_rank,
                        host=ll.host,
                        pid=ll.pid,
                        visible_devices=c.group("v"),
                        file=self.file,
                        line=n,
                        text=text,
                    )
                )
            lr = _LOCAL_RANK_RE.search(body)
            if lr is not None and rank is not None:
                self._gpus.append(
                    GpuFact(
                        source=GpuSource.LOCAL_RANK,
                        rank=rank,
                        local_rank=int(lr.group(1)),
                        host=ll.host,
                        pid=ll.pid,
                        file=self.file,
                        line=n,
                        text=text,
                    )
                )

    def _learn_task(self, raw: str) -> None:
        """Remember the rank a ``srun -l`` line ``N: [rankR]: ...`` shows for task ``N`` (a cheap look)."""
        i = raw.find(": ", 0, 9)
        if i <= 0 or not raw.startswith("[rank", i + 2) or len(self._task_ranks) >= MAX_HOSTS:
            return
        task, j = raw[:i].strip(), raw.find("]", i + 7, i + 16)
        if task.isdigit() and j > 0 and raw[i + 7 : j].isdigit():
            self._task_ranks.setdefault(int(task), int(raw[i + 7 : j]))

    def _rank_from_abort_reason(self, n: int, body: str) -> None:
        """ProcessGroupNCCL's destructor aborts its communicators with the reason "Process Group destroyed on rank
        N" (its own rank), which torch < 2.2 puts on the line after the ``what():`` of the NCCL error the abort
        raised: the unranked events of the line above it (and the ``terminate called`` that ``what():`` belongs
        to) are rank N's. The group's rank is the global one for the default group, the one a process destroys
        last."""
        m = _PG_DESTROYED_RE.fullmatch(body.strip())
        if m is None or not self.events or self.events[-1].line != n - 1:
            return
        lines = {n - 1, n - 2} if self.events[-1].text.startswith("what():") else {n - 1}
        for i in range(len(self.events) - 1, max(-1, len(self.events) - 4), -1):
            ev = self.events[i]
            if ev.line in lines and ev.rank is None:
                det = {**ev.details, "rank_from_line": n}
                self.events[i] = ev.model_copy(update={"rank": int(m.group(1)), "details": det})

    def _rank_unranked(self, n: int, ll: LogLine, body: str) -> None:
        """The first line with a rank after unranked device-side assert or NCCL WARN lines of one process: when it
        opens a traceback within :data:`_UNRANKED_LINES` lines of the last of them, they are that rank's (the kernel
        it launched asserted, its NCCL warned, then torch raised in it); they take its rank (and host), and
        ``rank_from_line`` says which line gave it. Lines of several processes (NCCL's pids differ) take none."""
        assert self._unranked is not None and ll.rank is not None
        last, idxs, procs = self._unranked
        self._unranked = None
        if n - last > _UNRANKED_LINES or len(procs) > 1 or not body.startswith("Traceback (most recent call last)"):
            return
        for i in idxs:
            ev = self.events[i]
            update: dict[str, object] = {"rank": ll.rank, "details": {**ev.details, "rank_from_line": n}}
            if ev.host is None and ll.host is not None:
                update["host"] = ll.host
            self.events[i] = ev.model_copy(update=update)

    def _logical(self, n: int, raw: str, ll: LogLine) -> None:
        body = ll.body
        if self._unranked is not None and ll.rank is not None:
            self._rank_unranked(n, ll, body)
        if self._terminates and body.startswith("what():"):
            self._what(ll, body)
        if body.startswith(_PG_DESTROYED) and ll.rank is None:
            self._rank_from_abort_reason(n, body)
        if ll.task is not None and ll.rank is not None and len(self._task_ranks) < MAX_HOSTS:
            self._task_ranks.setdefault(ll.task, ll.rank)
        if self._pending:
            prev_n, prev_raw, prev = self._pending[-1]
            starts_new = ll.rank not in (None, prev.rank) or ll.host not in (None, prev.host) or body[:1] == "["
            if not starts_new and body:
                self._pending.append((n, raw, ll))
                joined = self._joined()
                if joined is not None or len(self._pending) >= MAX_WRAP:
                    self._flush_pending(joined)
                return
            self._flush_pending(None)
        summary, wrapped = _shape(body) if len(body) <= MEMO_MAX_CHARS else _read_shape(body)
        if (summary or self._block is not None or self._root_next is not None) and self._child(n, raw, ll):
            return
        if ("ray::" in body or "MPICH ERROR" in body or "-- Process " in body or ", RankID:" in body) and (
            t := _HEADER_RE.search(body)
        ):
            if split_prefix(raw) is None:
                host = host_of(t.group("ip") or t.group("host") or "")[0]
                rank = _int(t.group("rank") or t.group("npu_rank"))
                self._header = (n, host, rank, _int(t.group("local_rank")))
        elif "nvidia-smi" in body and "@" in body and (p := _NVSMI_PROMPT_RE.match(body)) and split_prefix(raw) is None:
            self._header = (n, host_of(p.group("host"))[0], None, None)
        elif body.startswith(_SGLANG_HEADER) and ll.rank is not None:
            self._header = (n, ll.host, ll.rank, None)
        if self._hostname_below is not None:
            if body.startswith(("hostname: ", "Hostname: ")):
                self._name_from_hostname(
                    n, body.split(None, 1)[1].strip() if " " in body else "", *self._hostname_below
                )
                return
            if body.startswith("Local abort ") and ll.host is not None:
                self._name_from_hostname(n, ll.host, *self._hostname_below)
            elif body.startswith("srun: error: "):
                line, idx = self._hostname_below
                if (task_host := _execve_task_host(body, self.events[idx])) is not None:
                    self._name_from_hostname(n, task_host, line, idx)
                    self._execve_named = (line, idx, task_host)
        elif self._execve_named is not None and body.startswith("srun: error: "):
            self._unname_execve(n, body)
        if body.startswith("ip: ") and ("\tip: " in raw or _RAY_IP_SPACED in raw) and (m := _RAY_IP_RE.match(body)):
            self._ray_ip = (n, m.group("ip"))
            self._ip_below(n, m.group("ip"))
            return
        if _TAKING_DOWN in body:
            self._taking_down = (n, ll.rank, ll.host)
        if "GLOBAL_RANK: " in body and (m := _LIGHTNING_RANK_RE.search(body)) is not None:
            self._claim(n, raw, ll, int(m.group("rank")), int(m.group("world")))
            return
        if wrapped:
            self._pending = [(n, raw, ll)]
            return
        self._emit(n, raw.strip(), ll, body)

    def _taken_down(self, n: int, det: Mapping[str, JsonScalar], rank: int | None, host: str | None) -> bool:
        """Whether line ``n``'s ``terminate called`` (``det``: its details) is ProcessGroupNCCL's watchdog taking its
        process down: an exception it throws, at most :data:`_TAKEN_DOWN_LINES` lines below its "we are taking the
        entire process down" of the same process (rank and host agree)."""
        down = self._taking_down
        return (
            down is not None
            and 0 < n - down[0] <= _TAKEN_DOWN_LINES
            and det.get("exception") in _TEARDOWN_EXC
            and _agree(down[1], rank)
            and _agree(down[2], host)
        )

    def _ip_below(self, n: int, ip: str) -> None:
        """Give the ``ip:`` field on line ``n`` to the Ray actor death read just above it with no host: the first
        sentence of an ActorDiedError, whose fields (the ip last) follow it."""
        if not self.events:
            return
        ev = self.events[-1]
        if ev.host is None and 0 < n - ev.line <= _RAY_FIELDS_LINES and ev.details.get("catalog") == _ACTOR_DIED:
            host, redacted = host_of(ip)
            if host is not None and not redacted:
                self.events[-1] = ev.model_copy(update={"host": host})

    def _claim(self, n: int, raw: str, ll: LogLine, rank: int, world: int) -> None:
        """Note line ``n``'s Lightning rank initialisation; a second one of the same rank and world size with no
        event between is a :attr:`EventKind.DUPLICATE_RANK` (two processes took one rank: the launch started
        each node's processes as if it were node 0, or more processes than the world size). The event names
        neither rank nor task: no rank failed, and the task is only one of the two."""
        first = self._claims.get((rank, world))
        if first is None:
            if len(self._claims) < MAX_HOSTS:
                self._claims[(rank, world)] = n
            return
        self._keep(
            JobEvent(
                kind=EventKind.DUPLICATE_RANK,
                host=ll.host,
                time=ll.time,
                file=self.file,
                line=n,
                text=raw.strip()[:MAX_TEXT],
                details={"global_rank": rank, "world_size": world, "first_line": first},
            )
        )

    def _what(self, ll: LogLine, body: str) -> None:
        """Give the earliest pending ``terminate called`` event of the same process (rank and host prefixes
        agree) the ``what():`` line that follows it: its text, ``teardown_of`` (see :func:`_what_details`) and,
        when no prefix named the rank, the default group's rank the text names."""
        m = _WHAT_RE.match(body)
        if m is None:
            return
        for i, (idx, _, rank, local_rank, host) in enumerate(self._terminates):
            if not (_agree(rank, ll.rank) and _agree(local_rank, ll.local_rank) and _agree(host, ll.host)):
                continue
            del self._terminates[i]
            ev = self.events[idx]
            det = {**ev.details, **_what_details(str(ev.details.get("exception") or ""), m.group("what"))}
            new_rank = ev.rank if ev.rank is not None else ll.rank
            if new_rank is None and det.get("teardown_of"):
                new_rank = _default_pg_rank(m.group("what"))
                if new_rank is not None:
                    det["rank_from_what"] = True
            self.events[idx] = ev.model_copy(update={"details": det, "rank": new_rank})
            return

    def _joined(self) -> str | None:
        """The pending wrapped message whole, if some way of joining its lines completes it."""
        bodies = [p[2].body for p in self._pending]
        first = bodies[0]
        whole = next(w for s, w in _WRAPPED if s in first)
        # a line that ended in a blank, or one that starts with one, was cut between words; else mid-word, or either
        said = bodies[0] + "".join(
            (" " if prev[1].rstrip("\r\n").endswith((" ", "\t")) or nxt[1][:1] in (" ", "\t") else "") + nxt[2].body
            for prev, nxt in zip(self._pending, self._pending[1:], strict=False)
        )
        for text in (said, "".join(bodies), " ".join(bodies)):
            if whole.search(text):
                return text
        return None

    def _flush_pending(self, joined: str | None) -> None:
        pend, self._pending = self._pending, []
        if not pend:
            return
        n, _, ll = pend[0]
        if joined is None:  # not completed: the first line on its own, the others read afresh
            self._emit(n, pend[0][1].strip(), ll, ll.body)
            for m, raw, other in pend[1:]:
                self._logical(m, raw, other)
            return
        self._emit(n, "\n".join(p[1].strip() for p in pend), ll, joined)

    def _child(self, n: int, raw: str, ll: LogLine) -> bool:
        """Reads the ChildFailedError summary; True when the line belonged to it."""
        body = ll.body
        if body.startswith("Root Cause"):
            self._end_block()
            self._root_next = True
            self._demote_headless()
            return True
        if body == "Failures:":
            self._end_block()
            self._root_next = False
            self._headless.clear()
            return True
        m = _CF_ENTRY_RE.match(body)
        if m is not None and (self._root_next is not None or self._block is not None):
            self._end_block()
            self._block = _ChildBlock(self._root_next, n)
            self._block.lines.append(raw.rstrip())
            return True
        f = _CF_FIELD_RE.match(body) if ":" in body else None
        opens = f is not None and (f.group("k") in ("time", "rank") or raw[:1] in " \t")
        if f is not None and (opens or self._block is not None or self._root_next is not None):
            k = f.group("k")
            if self._block is None or k in self._block.fields:
                self._end_block()
                self._block = _ChildBlock(self._root_next, n)
            self._block.fields[k] = f.group("v").strip()
            self._block.lines.append(raw.rstrip())
            return True
        if self._block is not None:
            self._end_block()
        if body.startswith("====="):  # the summary's frame: what follows is no longer the summary
            self._root_next = None
            self._headless.clear()
            return True
        if body.startswith("-----") or body.endswith(" FAILED") or "<NO_OTHER_FAILURES>" in body:
            return True
        return False

    def _end_block(self) -> None:
        b, self._block = self._block, None
        if b is None:
            return
        place = _child_place(b)
        if place is None:
            return
        if self._full((EventKind.CHILD_FAILED, place[0], place[1])):
            self.dropped += 1  # as _keep would, before paying for the event
            return
        if b.root is None and len(self._headless) < MAX_HOSTS:
            self._headless.append(len(self.events))
        self._keep(_child_event(b, place, self.file, self.year))

    def _unname_execve(self, n: int, body: str) -> None:
        """A second task below an execve() failure exiting with the same errno on another host (line ``n``,
        ``body``): the failure was on several nodes and its one line names none of them, so its host is taken back."""
        line, idx, host = self._execve_named or (0, 0, "")
        if n - line > _HOSTNAME_LINES:
            self._execve_named = None
            return
        ev = self.events[idx]
        if (task_host := _execve_task_host(body, ev)) is not None and task_host != host:
            self.events[idx] = ev.model_copy(update={"host": None})
            self._execve_named = None

    def _name_from_hostname(self, n: int, name: str, line: int, idx: int) -> None:
        """The node ``name`` an Open MPI text (read on ``line``, its event ``events[idx]``) names on line ``n`` below
        it (:data:`_HOSTNAME_BELOW`), given to that event."""
        self._hostname_below = None
        host, _ = host_of(name) if name else (None, False)
        ev = self.events[idx]
        if n - line <= _HOSTNAME_LINES and host is not None and ev.host is None:
            self.events[idx] = ev.model_copy(update={"host": host})

    def _demote_headless(self) -> None:
        """The summary's entries read under no header (its "Failures:" line cut off the log) before its "Root
        Cause" header are its other failures: torch's summary prints them there (``torch.distributed.elastic.
        multiprocessing.errors.ChildFailedError.format_msg``), so they are not root causes."""
        for idx in self._headless:
            ev = self.events[idx]
            if ev.kind is EventKind.CHILD_FAILED and ev.details.get("root_cause") is None:
                self.events[idx] = ev.model_copy(update={"details": {**ev.details, "root_cause": False}})
        self._headless.clear()

    def _emit(self, n: int, raw: str, ll: LogLine, body: str) -> None:
        facts = _body_facts(body)
        if facts is None:
            return
        if facts.glog_stamp is not None:  # the process's own glog stamp is the innermost
            ll = ll._replace(time=facts.glog_stamp, outer_time=ll.outer_time or ll.time)
        self._note_year(ll)
        host = ll.host or facts.body_host
        red = ll.host_redacted or facts.body_host_redacted
        own = facts.body_host
        if ll.host is not None and own is not None and ll.host != own and not red and not _CONTAINER_ID_RE.match(own):
            if self._own_names.setdefault(ll.host, own) != own:
                self._own_names[ll.host] = None
        ts: float | None = None
        timed = False
        for f in facts.found:
            ev_rank = ll.rank if ll.rank is not None else _message_rank(f, facts)
            ev_host = f.host or host
            header_local: int | None = None
            if ev_host is None and f.kind in _RAY_NODE_KINDS:
                ev_host = self._ray_host(n)
            # the header's own line (mp.spawn's header is a fallback event itself) leaves it to the lines below
            if ev_host is None and self._header is not None and self._header[0] != n and split_prefix(raw) is None:
                if n - self._header[0] <= _HEADER_LINES:
                    _, ev_host, header_rank, header_local = self._header
                    ev_rank = header_rank if ev_rank is None else ev_rank
                self._header = None
            culprit_self = f.details.get("culprit_self") is True and ev_rank is not None
            if culprit_self and (ev_rank, ev_host) in self._timed_out:
                continue  # this rank's own watchdog-timeout event already says it, with the collective
            if self._full((f.kind, ev_rank, ev_host)):
                self.dropped += 1  # as _keep would, before paying for the event
                continue
            if not timed:
                ts, timed = (stamp_ts(ll.time, self.year) if ll.time is not None else None), True
            det = self._details(f, facts, ll, red, body)
            if self.year_assumed and ts is not None and not f.time:
                det["year_assumed"] = True
            if culprit_self:  # "from this local rank": it timed out
                det.setdefault("culprit_rank", ev_rank)
            if header_local is not None:
                det.setdefault("local_rank", header_local)
            if f.kind is EventKind.SIGNAL and self._taken_down(n, det, ev_rank, ev_host):
                det.setdefault("teardown_of", "watchdog")
            kept = len(self.events)
            self._keep(
                JobEvent(
                    kind=f.kind,
                    rank=ev_rank,
                    local_rank=ll.local_rank if ll.local_rank is not None else _int(str(det.get("local_rank"))),
                    task=ll.task if f.kind is not EventKind.SRUN_TASK_EXIT else _int(str(det.get("task"))),
                    host=ev_host,
                    time=f.time or ll.time,
                    ts=stamp_ts(f.time, self.year) if f.time else ts,
                    file=self.file,
                    line=n,
                    text=raw[: MAX_TEXT * 2] if "\n" in raw else raw[:MAX_TEXT],
                    details=det,
                )
            )
            if f.kind is EventKind.SIGNAL and "exception" in det and "what" not in det and len(self.events) > kept:
                self._terminates.append((kept, n, ll.rank, ll.local_rank, host))
            if det.get("catalog") in _HOSTNAME_BELOW and ev_host is None and len(self.events) > kept:
                self._hostname_below = (n, kept)
            waits = ev_rank is None and ll.task is None  # a task's rank is the job's layout's (ranks.py)
            if waits and (det.get("catalog") == _DEVICE_ASSERT or _nccl_warned(f.kind, det)):
                idxs, procs = (self._unranked[1], self._unranked[2]) if self._unranked is not None else ([], set())
                if len(self.events) > kept and len(idxs) < _UNRANKED_EVENTS:
                    idxs.append(kept)
                procs.add((ev_host, det.get("pid")))
                self._unranked = (n, idxs, procs)

    @staticmethod
    def _details(f: _Found, facts: _BodyFacts, ll: LogLine, red: bool, body: str) -> dict[str, JsonScalar]:
        """An event's details: the message's own, and what the line's prefixes and the body's other words say."""
        det = dict(f.details)
        if facts.pg is not None:
            det["pg"] = facts.pg
            if facts.pg_guid:
                det["pg_guid"] = facts.pg_guid
            if facts.pg_desc:
                det["pg_desc"] = facts.pg_desc
        if facts.msg_rank is not None:
            det["pg_rank"] = facts.msg_rank
        if facts.nccl_dev is not None:
            det["cuda_device"] = facts.nccl_dev
            det["pid"] = facts.nccl_pid
        elif ll.pid is not None:
            det["pid"] = ll.pid
        if ll.task is not None:
            det["task"] = ll.task
        if ll.uptime_s is not None:
            det["uptime_s"] = ll.uptime_s
        if ll.outer_time is not None:
            det["collector_time"] = ll.outer_time
        if red:
            det["host_redacted"] = True
        if "local_rank=" in body and "local_rank" not in det and ll.local_rank is None:
            # DeepSpeed's sigkill_handler (deepspeed/launcher/launch.py: ``[..., '--local_rank=3', ...] exits with
            # return code = -7``) and torch.distributed.launch's CalledProcessError (``Command '[..., '--local_rank=1'
            # ...]' died with <Signals.SIGSEGV: 11>``) print ``cmd``, the loop variable of their spawning: the LAST
            # child started, not the one that failed. '--local_rank=0' there means one child, which then is the one
            lr = _LOCAL_RANK_ARG_RE.search(body)
            if lr is not None and int(lr.group(1)) == 0:
                det["local_rank"] = 0
        return det

    def flush(self) -> None:
        """Close what waits for more lines (a wrapped message, a ChildFailedError entry) as if the log ended here:
        a live reader (``fleetdx watch``) calls it when a log has paused, so its last events are not held back."""
        self._flush_pending(None)
        self._end_block()

    def result(self) -> JobLog:
        """Finish the log (a pending wrapped message, an open ChildFailedError entry) and return it: every host
        called by the name NCCL's own prefix gives it where a launcher's prefix on the same line named it
        otherwise (the event keeps the launcher's name in ``details["host_as_prefixed"]``)."""
        self.flush()
        log = JobLog(
            file=self.file,
            events=self.events,
            lines_read=self.lines,
            events_dropped=self.dropped,
            hosts=list(dict.fromkeys([*self._hosts, *sorted(self._prefix_hosts)])),
            rank_hosts=self._rank_hosts,
            task_ranks=self._task_ranks,
            task_hosts=self._task_hosts,
            gpus=self._gpus,
        )
        own = {k: v for k, v in self._own_names.items() if v is not None}
        return _own_names(log, own) if own else log


def _own_names(log: JobLog, own: Mapping[str, str]) -> JobLog:
    """``log`` with each host of ``own``'s keys called by its own name (:meth:`JobLogScanner.result`)."""

    events = [
        e.model_copy(update={"host": own[e.host], "details": {**e.details, "host_as_prefixed": e.host}})
        if e.host is not None and e.host in own
        else e
        for e in log.events
    ]
    return log.model_copy(
        update={
            "events": events,
            "hosts": list(dict.fromkeys(own.get(h, h) for h in log.hosts)),
            "rank_hosts": {r: own.get(h, h) for r, h in log.rank_hosts.items()},
            "task_hosts": {t: own.get(h, h) for t, h in log.task_hosts.items()},
            "gpus": [
                g.model_copy(update={"host": own[g.host]}) if g.host is not None and g.host in own else g
                for g in log.gpus
            ],
        }
    )


def parse_joblog(lines: Iterable[str] | str, file: str = "<log>", year: int | None = None) -> JobLog:
    """The events of a job log given as text or as an iterable of lines (a file object streams).

    Raises:
        ParseError: binary input (a NUL byte).
    """
    scanner = JobLogScanner(file, year)
    for raw, span in unwrapped(lines.splitlines() if isinstance(lines, str) else (s.rstrip("\n") for s in lines)):
        scanner.feed(raw, span)
    return scanner.result()
