"""Cause rules: how one event of a job counts, as one table (:data:`RULES`). Pure.

Each :class:`Rule` row says, for one :class:`~fleetdx.probes.parsers.joblog.EventKind` (and, where one kind
means two things, a ``when`` test on the event's details), the :class:`~fleetdx.orchestrator.judgement.FindingCode`
of the cause it makes, its severity, its **priority** (higher: more decisive; at or above :data:`DECISIVE` the
event can be a root cause, below it the event only *observes* one, see
:mod:`fleetdx.orchestrator.postmortem.correlate`), its ``role`` (``decisive``, ``observer``; ``context`` rows
make no cause), the **grouping key** (a family name, then the event fields whose values separate one cause from
another: ``host``, ``rank``, ``task``, ``pci``, ``device``; events with equal keys are one cause) and, for rows
whose words need no computation, the cause's message and action as templates (``{where}``: ``rank R on HOST``;
``{host}``; ``{text}``: the leading line; ``{d[FIELD]}``: a detail of the event). Rows without templates are
described by :func:`fleetdx.orchestrator.postmortem.correlate.describe`.

A new message is one row of ``probes/parsers/messages.yaml`` (its event kind) and its fixture line; a new cause is
one row here. The first row whose kind matches and whose ``when`` holds decides; an event no row matches is
context only (an NCCL INFO trace, an ``nccl-warn`` catch-all). XIDs are judged by the XID table of
:mod:`fleetdx.orchestrator.diagnosis.xid_table` (NVIDIA's XID catalog): their row's ``judge`` does that.

The /dev/shm advice of the SIGBUS and shared-memory rows: Docker mounts a 64 MiB ``/dev/shm`` unless
``docker run --shm-size`` says otherwise; Kubernetes pods get the container runtime's unless an ``emptyDir``
volume with ``medium: Memory`` is mounted at ``/dev/shm``; NCCL (``src/misc/shmutils.cc``) and PyTorch's
DataLoader workers put their buffers there, and a write past a full tmpfs is a SIGBUS.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from fleetdx.orchestrator.diagnosis.xid_table import XidClass, judge_xid
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.contracts import Severity
from fleetdx.probes.parsers.joblog import EventKind, JobEvent

#: kinds at or above this priority can be a root cause; below it they observe one
DECISIVE = 50

Role = Literal["decisive", "observer", "context"]

C, W = Severity.CRITICAL, Severity.WARNING

#: the advice of a too small shared-memory mount (SIGBUS, NCCL's /dev/shm segment)
SHM_ACTION = (
    "a SIGBUS or a failed /dev/shm segment in a training job usually means /dev/shm is too small (check `df -h "
    "/dev/shm` where it ran): give the container more (docker run --shm-size=16g; in Kubernetes an emptyDir volume "
    "with medium: Memory mounted at /dev/shm), or set NCCL_SHM_DISABLE=1 / fewer DataLoader workers; the node is "
    "not at fault"
)


@dataclass(frozen=True)
class Judged:
    """An event as a cause sees it: its code, severity, priority (higher: more decisive), grouping key, the note
    a rule adds to the message, and the rule that judged it."""

    code: FindingCode
    severity: Severity
    priority: int
    key: tuple[object, ...]
    note: str = ""
    rule: Rule | None = None


@dataclass(frozen=True)
class Rule:
    """One row of :data:`RULES` (see the module doc). ``code`` ``None`` (role ``context``) makes no cause;
    ``absorbs`` are codes whose causes of the same host and rank this one's explains (NCCL wrapping a
    configuration error as ``internal error``); ``judge`` replaces the row's code, severity and priority by a
    computation (the XID table)."""

    kind: EventKind
    code: FindingCode | None
    severity: Severity = C
    priority: int = 0
    role: Role = "decisive"
    key: tuple[str, ...] = ()
    when: Callable[[JobEvent], bool] | None = None
    message: str = ""
    action: str = ""
    note: str = ""
    absorbs: frozenset[FindingCode] = frozenset()
    judge: Callable[[JobEvent, Rule], Judged] | None = None

    def applies(self, e: JobEvent) -> bool:
        return e.kind is self.kind and (self.when is None or self.when(e))

    @property
    def generic(self) -> bool:
        """The kind's catch-all row: no condition, so the event matched no row that names its reason."""
        return self.when is None


_CRASH_SIGNALS = (
    "SIGSEGV",
    "SIGBUS",
    "SIGABRT",
    "SIGILL",
    "SIGFPE",
    "Segmentation",
    "Bus error",
    "Aborted",
    "Illegal",
    "Floating",
)
_CONFIG_EXC = frozenset(
    {
        "ImportError",
        "ModuleNotFoundError",
        "FileNotFoundError",
        "FileExistsError",  # a path another rank or an earlier run made: the program's layout of its files
        "IsADirectoryError",
        "NotADirectoryError",
        "PermissionError",
        "KeyError",
        "ValueError",
        "TypeError",
        "AttributeError",
        "NameError",
        "UnboundLocalError",  # a NameError: the program read a variable before assigning it
        "SyntaxError",
        "IndentationError",
        "ArgumentError",
        "ConfigError",
        "ConfigAttributeError",
        "MissingMandatoryValue",
        "ValidationError",
        "InstantiationException",  # Hydra: the config's _target_ cannot be located or built
        "MisconfigurationException",  # Lightning's exception for a Trainer set up wrongly (devices, strategy, nodes)
    }
)


def _d(e: JobEvent, name: str) -> str:
    return str(e.details.get(name) or "")


def _xid(e: JobEvent, rule: Rule) -> Judged:
    """An XID as a cause: the shared judgement (:func:`~fleetdx.orchestrator.diagnosis.xid_table.judge_xid`) by
    its effective class (an XID 45 by the XID it says caused it): an application XID is the job's CUDA_ERROR,
    an informational one a GPU_HW_FAULT warning, the rest a critical GPU_HW_FAULT."""
    j = judge_xid(int(e.details.get("xid") or 0), [_d(e, "message")])
    key = ("gpu", e.host, e.details.get("pci"))
    if j.effective is XidClass.APP:
        return Judged(FindingCode.CUDA_ERROR, C, 60, key, j.note, rule)
    if j.effective is XidClass.INFO:
        return Judged(FindingCode.GPU_HW_FAULT, W, 30, key, j.note, rule)
    return Judged(FindingCode.GPU_HW_FAULT, C, 100, key, j.note, rule)


def _fatal_aer(e: JobEvent) -> bool:
    return "Uncorrected" in (_d(e, "received") or _d(e, "severity")) or e.details.get("first") is True


def _link_context(e: JobEvent) -> bool:
    return e.details.get("state") in ("ACTIVE", "ARMED", "INIT") and not e.details.get("module")


def _flap(e: JobEvent) -> bool:
    return e.details.get("recovered_after_s") is not None


def _oom_reason(e: JobEvent) -> bool:
    return "Out Of Memory" in _d(e, "reason")


def _crash_reason(e: JobEvent) -> bool:
    reason = _d(e, "reason")
    return any(s in reason for s in _CRASH_SIGNALS)


def _not_root(e: JobEvent) -> bool:
    return e.details.get("root_cause") is False


def _ray_vanished(e: JobEvent) -> bool:
    """The raylet's report of a worker whose connection ended with no exit of its own (connection error code 2,
    End of file: the worker-died text of Ray's src/ray/raylet/node_manager.cc)."""
    return e.details.get("catalog") == "ray.worker.died_system_error" and _d(e, "error").endswith(
        "connection error code 2"
    )


def _sigkill(e: JobEvent) -> bool:
    return _d(e, "signal") == "SIGKILL" or e.details.get("exit_code") == -9


def _mpi_sigkill(e: JobEvent) -> bool:
    """Open MPI's 'noticed that process rank N ... exited on signal 9 (Killed)' (its catalog row,
    ``openmpi.errmgr.noticed_signal``, names the rank and host; the signal is read as for any line)."""
    return "noticed that process rank" in e.text and _d(e, "signal").split(" ")[0] in ("9", "Killed", "SIGKILL")


def _signalled(e: JobEvent) -> bool:
    code = e.details.get("exit_code")
    return bool(_d(e, "signal")) or (isinstance(code, int) and code < 0)


def _exited(e: JobEvent) -> bool:
    """A launcher's report of a child that exited with a positive code (``exitcode: 1``), not on a signal."""
    code = e.details.get("exit_code")
    return isinstance(code, int) and code > 0 and not _d(e, "signal")


def _usage_exit(e: JobEvent) -> bool:
    """A launcher's report of a child that exited with code 2 (torchrun's, mp.spawn's, DeepSpeed's: argparse's
    usage error exits 2). Ray's 'connection error code 2' is read as the raylet's ``error``, not an exit code."""
    return _exited(e) and e.details.get("exit_code") == 2


def _teardown_of_timeout(e: JobEvent) -> bool:
    return e.details.get("teardown_of") == EventKind.WATCHDOG_TIMEOUT.value


def _teardown_of_error(e: JobEvent) -> bool:
    t = e.details.get("teardown_of")
    return t is not None and t != "watchdog"


def _c10d_teardown(e: JobEvent) -> bool:
    return e.details.get("teardown_of") == "watchdog" or _d(e, "exception").startswith("c10::Dist")


def _crash_signal(e: JobEvent) -> bool:
    return any(s in _d(e, "signal") for s in _CRASH_SIGNALS)


def _exc_type(e: JobEvent) -> str:
    return _d(e, "type").rsplit(".", 1)[-1]


def _summarised_exc(e: JobEvent) -> bool:
    return _exc_type(e) in ("ChildFailedError", "DistBackendError", "OutOfMemoryError")


def _spawn_wrapper(e: JobEvent) -> bool:
    """torch.multiprocessing.spawn's ProcessRaisedException: the parent's wrapper of a child's exception, whose
    own traceback and exception follow under "-- Process N terminated with the following error:"."""
    return _exc_type(e) == "ProcessRaisedException"


def _store_wait_timeout(e: JobEvent) -> bool:
    """A rank's wait for rank 0's ncclUniqueId in the store that timed out (``got error: wait timeout after ...``,
    ``Socket Timeout``), or any store read that waited the store's whole timeout (socket.cpp's ``waitForInput:
    ... timed out after Nms``): the rank that was to write never got there, a hang like a collective's; other
    errors of the same wait are the store's connection lost (a network observer)."""
    catalog = e.details.get("catalog")
    return catalog == "pytorch.c10d.socket_wait_timed_out" or (
        catalog == "pytorch.c10d.unique_id_store_get_failed" and "imeout" in _d(e, "error")
    )


def _interrupted(e: JobEvent) -> bool:
    """``KeyboardInterrupt``: someone stopped the process (Ctrl-C, or a launcher forwarding SIGINT), often after it
    stopped making progress: no failure of its own, and never above the hang the log may show."""
    return _exc_type(e) == "KeyboardInterrupt"


def _comm_aborted(e: JobEvent) -> bool:
    """torch's "NCCL communicator was aborted." with no reason (ProcessGroupNCCL, torch 1.5-1.8: the work of a
    communicator the watchdog aborted after an NCCL error or a timeout, here or signalled by another rank): the
    echo of a failure the line does not name (with "Original reason for failure was: ..." the reason is read)."""
    return _d(e, "message").strip().startswith("NCCL communicator was aborted") and "reason" not in _d(e, "message")


def _config_row(e: JobEvent) -> bool:
    """A catalog row of class config_error read the event's line."""
    return e.details.get("failure_class") == "config_error"


def _config_exc(e: JobEvent) -> bool:
    """An exception of the job's setup: its type (:data:`_CONFIG_EXC`), or a catalog row of class config_error read
    its message (torch's "No backend type associated with device type cpu" is a RuntimeError)."""
    return _exc_type(e) in _CONFIG_EXC or _config_row(e)


def _ecc(e: JobEvent) -> bool:
    """cudaErrorECCUncorrectable (the catalog's hw_fault row the job log's own CUDA pattern reads)."""
    return "ECC" in _d(e, "error")


def _nvlink(e: JobEvent) -> bool:
    """cudaErrorNvlinkUncorrectable (the catalog's hw_fault row the job log's own CUDA pattern reads)."""
    return "NVLink error" in _d(e, "error")


def _held_device(e: JobEvent) -> bool:
    """The accelerator is held by another process: CUDA's busy GPU (cudaErrorDevicesUnavailable, read by the job
    log's own CUDA pattern), CANN's HCCP that would not start beside an earlier run's process."""
    return e.details.get("catalog") == "cann.hccp.ej0001_init_failed" or "busy or unavailable" in _d(e, "error")


def _nccl_oom(e: JobEvent) -> bool:
    return "out of memory" in _d(e, "error")


#: CUDA errors that say the job asked the node for what it cannot give (a GPU index it does not see, an
#: architecture the build has no code for, a driver older than the build): the launch or the environment, not the
#: GPU (cudaGetErrorString's and hipGetErrorString's wording, as the catalog's config_error rows read it)
_CONFIG_CUDA_ERRORS = frozenset(
    {
        "invalid device ordinal",
        "no kernel image is available for execution on the device",
        "CUDA driver version is insufficient for CUDA runtime version",
        "forward compatibility was attempted on non supported HW",
        "system has unsupported display driver / cuda driver combination",  # cudaErrorSystemDriverMismatch (803)
        "invalid device function",
        "hipErrorNoBinaryForGpu",
        "CUDA_ERROR_INVALID_DEVICE",  # the driver API's names (cuGetErrorName)
        "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "CUDA driver is a stub library",  # cudaErrorStubLibrary: the toolkit's stub libcuda.so, no driver here
    }
)


def _cuda_config(e: JobEvent) -> bool:
    """A CUDA error of the job's setup: a catalog row of class config_error, or one of :data:`_CONFIG_CUDA_ERRORS`
    read by the job log's own CUDA pattern or in NCCL's ``Cuda failure '...'``."""
    return _config_row(e) or _d(e, "error") in _CONFIG_CUDA_ERRORS


def _system_not_ready(e: JobEvent) -> bool:
    return _d(e, "error") == "system not yet initialized"


#: CUDA's cudaErrorSystemNotReady (802) on an NVSwitch node: its fabric manager, not the program. A CUDA error of
#: the node's software state, not a fault of its hardware: the code is CUDA_ERROR, the action drains the node
_NOT_READY_MSG = "CUDA says the GPUs of {host} are not ready ({text}): the node's NVIDIA Fabric Manager is not running"
_NOT_READY_ACT = (
    "drain {host}: start or repair nvidia-fabricmanager (its version must equal the driver's; `systemctl status "
    "nvidia-fabricmanager`, its log), then resubmit with --exclude={host} until it is fixed"
)


def _from(*ids: str) -> Callable[[JobEvent], bool]:
    """A ``when`` test: the event was read by one of these message-catalog rows (``details["catalog"]``)."""
    wanted = frozenset(ids)
    return lambda e: e.details.get("catalog") in wanted


#: torchrun's agent's own death-signal line, and the signal it forwards to its workers
_AGENT_SIGNALLED = _from("pytorch.elastic.agent_death_signal", "pytorch.elastic.closing_signal_sighup")


def _hangup(e: JobEvent) -> bool:
    """torchrun's agent signalled SIGHUP (torch/distributed/elastic/agent/server/api.py's death signal, or the
    SIGHUP it forwards to its workers: elastic/multiprocessing/api.py's closing signal)."""
    return e.details.get("signal") == "SIGHUP" and _AGENT_SIGNALLED(e)


_WHERE = ("host", "rank")
_INTERNAL = frozenset({FindingCode.NCCL_INTERNAL_ERROR})
_F = FindingCode


_XLA_BARRIERS = frozenset({"xla.coordination.barrier_timed_out", "xla.coordination.barrier_timed_out_id"})


def _startup_barrier(e: JobEvent) -> bool:
    """XLA's coordination-service barrier timeout of the barrier every process passes at start-up
    (``PjRT_Client_Connect``; ``[Init]Wait_for_all_tasks_to_register`` in the wording of 2024 on): some
    processes never joined."""
    op = _d(e, "op")
    return e.details.get("catalog") in _XLA_BARRIERS and ("Connect" in op or op.startswith("[Init]"))


def _own_barrier(e: JobEvent) -> bool:
    """XLA's coordination-service barrier timeout of a barrier other than the start-up one
    (:func:`_startup_barrier`): the program's own."""
    return e.details.get("catalog") in _XLA_BARRIERS and not _startup_barrier(e)


#: RFC 1122's "this network" block: no host is reached at one of its addresses (Linux takes 0.0.0.0 alone as this
#: host, so a store on 0.0.0.0 still works on one node)
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


def _unroutable_store(e: JobEvent) -> bool:
    """A store client's failed connect to an address of 0.0.0.0/8 other than 0.0.0.0 (``[::ffff:0.0.0.5]:40323``):
    a numeric host name given as MASTER_ADDR (``05``, ``6841231``) that the resolver read as an IPv4 number."""
    if e.details.get("catalog") != "pytorch.c10d.client_connect_failed":
        return False
    peer = _d(e, "peer")
    host = peer.rsplit(":", 1)[0].removeprefix("[::ffff:").removesuffix("]") if ":" in peer else peer
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.version == 4 and ip in _THIS_NETWORK and int(ip) != 0


def _store_address_not_valid(e: JobEvent) -> bool:
    """A store client on Windows refused its address by WinSock (10049, WSAEADDRNOTAVAIL: "The requested address is
    not valid in its context"): the store's host name resolves to an address this machine cannot connect to (a
    Docker or Hyper-V alias such as kubernetes.docker.internal)."""
    return e.details.get("catalog") == "pytorch.c10d.client_connect_failed" and e.details.get("status") == 10049


def _over_world(e: JobEvent) -> bool:
    """torch's store-barrier progress line counting more processes than the world size: another run shares the
    store (distributed_c10d.py's _store_based_barrier waits for exactly world_size)."""
    if e.details.get("catalog") != "pytorch.c10d.store_based_barrier_waiting":
        return False
    count, world = _d(e, "count"), _d(e, "world_size")
    return count.isdigit() and world.isdigit() and int(count) > int(world)


def _never_joined(when: Callable[[JobEvent], bool], message: str, action: str) -> Rule:
    """The rule of a rendezvous that some processes never joined (an observer's report: the processes that did
    join print it) for the events ``when`` picks (a catalog row's: :func:`_from`), with the row's own words."""
    return Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.CONFIG_ERROR,
        C,
        40,
        "observer",
        ("rendezvous-join",),
        when=when,
        message=message,
        action=action,
    )


def _mismatch(message: str, action: str, *rows: str) -> Rule:
    """The rule of ranks that disagree on a collective (a program or configuration error that absorbs the NCCL
    internal error it is wrapped in) for the events of some catalog rows, or for any such event (no ``rows``)."""
    return Rule(
        EventKind.COLLECTIVE_MISMATCH,
        _F.CONFIG_ERROR,
        priority=63,
        key=("mismatch", *_WHERE),
        when=_from(*rows) if rows else None,
        message=message,
        action=action,
        absorbs=_INTERNAL,
    )


def _launch(message: str, action: str, *rows: str) -> Rule:
    """A launch failure's rule (the job or its tasks never ran: :attr:`EventKind.LAUNCH_FAILED`) for the events of
    some catalog rows, in their own words."""
    return Rule(
        EventKind.LAUNCH_FAILED,
        _F.CONFIG_ERROR,
        priority=60,
        key=("launch", "host"),
        when=_from(*rows),
        message=message,
        action=action,
    )


def _ray_death(key: str, when: Callable[[JobEvent], bool], message: str, action: str) -> Rule:
    """The rule of a Ray report that a worker or actor died without saying why: the death and its node are facts,
    its cause is not in the log (UNKNOWN on that node, an observer's report below the worker's own error)."""
    return Rule(
        EventKind.CHILD_FAILED,
        _F.UNKNOWN,
        Severity.UNKNOWN,
        30,
        "observer",
        (key, "host"),
        when=when,
        message=message,
        action=action,
    )


def _gpu_lost(rows: tuple[str, ...], device: str, message: str, action: str) -> Rule:
    """The rule of a GPU lost to a hardware fault as catalog ``rows`` word it, grouped per host and per the GPU
    they name (``device``: its PCI bus id, or its CUDA device index)."""
    return Rule(
        EventKind.GPU_LOST,
        _F.GPU_HW_FAULT,
        priority=100,
        key=("gpu", "host", device),
        when=_from(*rows),
        message=message,
        action=action,
    )


def _reg_mr(row: str, message: str) -> Rule:
    """The rule of a NIC that could not register memory (ibv_reg_mr, through NCCL's verbs wrapper or
    aws-ofi-nccl: NCCL's system error) as one catalog row words it: above a bare system error (55 to 54), whose
    reason it names."""
    return Rule(
        EventKind.NCCL_SYSTEM_ERROR,
        _F.NCCL_INTERNAL_ERROR,
        priority=55,
        key=("nccl-internal", *_WHERE),
        when=_from(row),
        message=message,
        action="on {host}: check the locked-memory limit (ulimit -l unlimited in the job and in slurmd's or the "
        "container's limits) and, for GPU buffers, that GPUDirect RDMA is loaded (nvidia-peermem or dma-buf)",
    )


def _trail(kind: EventKind, code: FindingCode, priority: int, result: str) -> Rule:
    """NCCL_DEBUG=INFO's return trail (``FILE:LINE -> N``, catalog ``nccl.trail.*``, role fallback: judged only
    in a log with nothing else) of NCCL result ``result``: the error's kind, not its cause."""
    return Rule(
        kind,
        code,
        priority=priority,
        role="decisive" if priority >= DECISIVE else "observer",
        key=("nccl-trail", "host"),
        when=lambda e: str(e.details.get("catalog", "")).startswith("nccl.trail."),
        message=f"NCCL returned {result} {{where}} ({{text}}): only NCCL_DEBUG=INFO's return trail is in the log, no "
        "WARN line naming the error",
        action="find the NCCL WARN line above the trail in that process's full output (NCCL_DEBUG=WARN or INFO), or "
        "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see where it fails",
    )


def _cuda_setup(kind: EventKind, priority: int, absorbs: frozenset[FindingCode] = frozenset()) -> Rule:
    """A CUDA error of the job's setup (:func:`_cuda_config`), as the CUDA runtime's own error or NCCL's ``Cuda
    failure`` tells it: a configuration error of the launch or the environment, not of the GPU."""
    return Rule(
        kind,
        _F.CONFIG_ERROR,
        priority=priority,
        key=("config", *_WHERE),
        when=_cuda_config,
        message="the job's CUDA setup failed {where}: {d[error]} ({text})",
        action="a launch or environment error, not the GPU: check the GPUs each process may see and asks for "
        "(CUDA_VISIBLE_DEVICES, --gpus-per-task, LOCAL_RANK or local_device_ids below the visible GPUs), and that "
        "the driver, the build's CUDA version and its GPU architectures fit the node; then resubmit",
        absorbs=absorbs,
    )


#: the cause rules, first match wins (see the module doc)
RULES: tuple[Rule, ...] = (
    # NCCL's return trails, before the kinds' own rules (fallback evidence, see _trail)
    _trail(EventKind.NCCL_CUDA_FAILURE, _F.CUDA_ERROR, 86, "ncclUnhandledCudaError (1)"),
    _trail(EventKind.NCCL_SYSTEM_ERROR, _F.NCCL_INTERNAL_ERROR, 54, "ncclSystemError (2)"),
    _trail(EventKind.NCCL_INTERNAL_ERROR, _F.NCCL_INTERNAL_ERROR, 54, "ncclInternalError (3)"),
    _trail(EventKind.NCCL_INVALID_USAGE, _F.CONFIG_ERROR, 62, "ncclInvalidArgument (4) or ncclInvalidUsage (5)"),
    _trail(EventKind.NCCL_REMOTE_ERROR, _F.NCCL_NETWORK_ERROR, 44, "ncclRemoteError (6)"),
    # GPUs, PCIe, nodes
    Rule(EventKind.XID, _F.GPU_HW_FAULT, priority=100, key=("gpu", "host", "pci"), judge=_xid),
    _gpu_lost(
        ("nvidia_smi.gpu_is_lost", "nvidia_smi.device_handle_unknown_error"),
        "bus_id",
        "nvidia-smi lost a GPU {where} ({d[bus_id]}): {text}",
        "drain {host}: reboot it to recover the GPU, read its kernel log for the XID that lost it (79: fallen "
        "off the bus, 48/94/95: ECC); reseat or RMA the GPU if it repeats; resubmit with --exclude={host}",
    ),
    _gpu_lost(
        ("nccl.nvml.gpu_is_lost",),
        "cuda_device",
        "NVML lost a GPU {where} (CUDA device {d[cuda_device]}; NCCL: {text})",
        "drain {host}: reboot it to recover the GPU, read its kernel log for the XID that lost it; reseat or "
        "RMA the GPU if it repeats; resubmit with --exclude={host}",
    ),
    _gpu_lost(
        ("linux.amdgpu.ras_uncorrectable",),
        "bus_id",
        "the amdgpu driver reported an uncorrectable hardware error ({d[error]}) {where} on GPU {d[bus_id]} ({text})",
        "drain {host}: its GPU {d[bus_id]} lost its work to a RAS-fatal error; read the ACA/'[Hardware Error]' "
        "lines and amdgpu's RAS error counts, reset or reboot, RMA if it repeats; resubmit with --exclude={host}",
    ),
    _gpu_lost(
        ("linux.amdgpu.asic_reset_failed",),
        "bus_id",
        "the amdgpu driver could not reset the hung GPU {d[bus_id]} {where} (error {d[error]}): {text}",
        "drain {host}: the GPU stays lost until the node reboots; read the kernel log above the reset for what hung "
        "it (a RAS error, a page fault, a ring timeout), reboot, RMA the GPU if it repeats; resubmit with "
        "--exclude={host}",
    ),
    Rule(EventKind.GPU_LOST, _F.GPU_HW_FAULT, priority=100, key=("gpu", "host", "pci")),
    Rule(EventKind.AER, _F.GPU_HW_FAULT, C, 95, key=("pcie", "host", "pci"), when=_fatal_aer),
    Rule(EventKind.AER, _F.GPU_HW_FAULT, W, 15, "observer", ("pcie", "host", "pci")),
    Rule(
        EventKind.NODE_FAIL,
        _F.NODE_FAILURE,
        priority=90,
        key=("node", "host"),
        when=_from("linux.watchdog.soft_lockup", "linux.watchdog.hard_lockup"),
        message="the kernel {where} reported a CPU lockup ({text}): the node's kernel or a driver (GPU, NIC, "
        "filesystem) stopped a CPU; the process named on the line is the one it stopped, not the cause",
        action="drain {host}: read its kernel log around the lockup (the stack the watchdog printed names the driver "
        "or filesystem), reboot it; resubmit with --exclude={host}",
    ),
    Rule(EventKind.NODE_FAIL, _F.NODE_FAILURE, priority=98, key=("node", "host")),
    # host memory, Slurm's view of a task
    # the launcher's sigkill_handler alone (catalog role fallback): a child ended without a word, then the rest were
    # killed; the likeliest silent death is the OOM killer's SIGKILL, which the kernel log confirms or refutes
    Rule(
        EventKind.OOM_HOST,
        _F.OOM_HOST,
        C,
        30,
        "observer",
        ("oom-host",),
        when=_from("launcher.sigkill_handler.killing_subprocess"),
        message="the launcher killed the job's processes after one of them ended ({text}) and no process printed "
        "why: a process that dies without a traceback was most often SIGKILLed by the kernel's OOM killer (host "
        "memory), which writes only to the kernel log",
        action="read the node's kernel log (dmesg -T, journalctl -k) for 'Out of memory: Killed process' with one of "
        "the launcher's pids; if it is not there, find the launcher's 'exits with return code' line in the full output",
    ),
    Rule(EventKind.OOM_HOST, _F.OOM_HOST, priority=92, key=("oom-host", "host")),
    Rule(EventKind.SRUN_TASK_EXIT, _F.OOM_HOST, priority=91, key=("oom-host", "host"), when=_oom_reason),
    Rule(EventKind.SRUN_TASK_EXIT, _F.PROCESS_CRASH, priority=79, key=("crash", "host", "task"), when=_crash_reason),
    Rule(EventKind.SRUN_TASK_EXIT, _F.PROCESS_CRASH, C, 35, "observer", ("exit", "host", "task")),
    # GPU memory and CUDA
    Rule(EventKind.OOM_GPU, _F.OOM_GPU, priority=88, key=("oom-gpu", *_WHERE)),
    Rule(
        EventKind.CUDA_ERROR,
        _F.CUDA_ERROR,
        priority=96,
        key=("fabric", "host"),
        when=_system_not_ready,
        message=_NOT_READY_MSG,
        action=_NOT_READY_ACT,
    ),
    Rule(
        EventKind.NCCL_CUDA_FAILURE,
        _F.CUDA_ERROR,
        priority=96,
        key=("fabric", "host"),
        when=_system_not_ready,
        message=_NOT_READY_MSG,
        action=_NOT_READY_ACT,
    ),
    Rule(EventKind.CUDA_ERROR, _F.GPU_HW_FAULT, priority=97, key=("gpu", "host", "rank"), when=_ecc),
    Rule(
        EventKind.CUDA_ERROR,
        _F.GPU_HW_FAULT,
        priority=97,
        key=("gpu", "host", "rank"),
        when=_nvlink,
        message="an uncorrectable NVLink error {where} ({text}): a GPU's NVLink, or the NVSwitch it reaches, failed",
        action="drain {host}: read its kernel log for Xid 74 around the failure and `nvidia-smi nvlink -e` for the "
        "link's error counters; reset the GPUs or reboot, and RMA if the same link fails again",
    ),
    # a device another process holds (CUDA's exclusive-process busy GPU, CANN's HCCP that will not start while an
    # earlier run's process lives): the node's state at launch, not the device's health
    Rule(
        EventKind.CUDA_ERROR,
        _F.CONFIG_ERROR,
        priority=62,
        key=("config", *_WHERE),
        when=_held_device,
        message="another process holds the accelerator of the process {where}: {d[error]} ({text})",
        action="a process of an earlier run or another job still holds the device on {host}: find it (nvidia-smi, "
        "npu-smi info), end it and wait for it to exit, then resubmit; a scheduler epilog that ends a job's "
        "processes keeps it from happening again",
    ),
    # the setup's CUDA error explains the abort it ends in (XLA's LOG(FATAL) raises SIGABRT) on the same place
    _cuda_setup(EventKind.CUDA_ERROR, 62, absorbs=frozenset({FindingCode.PROCESS_CRASH})),
    Rule(
        EventKind.CUDA_ERROR,
        _F.CUDA_ERROR,
        priority=87,
        key=("cuda", *_WHERE),
        when=_from("pytorch.frames.c10_cuda_check"),
        message="a CUDA call failed {where}: the log keeps only the C++ frames of the check that threw "
        "(c10_cuda_check_implementation), not the error's message ({text})",
        action="find the 'CUDA error: ...' line above these frames in the rank's full output; then as for any CUDA "
        "error: rerun with CUDA_LAUNCH_BLOCKING=1 under compute-sanitizer, and probe the GPU if it recurs there",
    ),
    Rule(EventKind.CUDA_ERROR, _F.CUDA_ERROR, priority=87, key=("cuda", *_WHERE)),
    Rule(
        EventKind.NCCL_CUDA_FAILURE,
        _F.CONFIG_ERROR,
        priority=87,
        key=("nvls", *_WHERE),
        when=_from("nccl.nvls.bind_multicast_failed", "nccl.nvls.cuda_failure"),
        message="NCCL could not set up NVLink SHARP (NVLS) multicast memory {where} ({text}): a system or "
        "configuration error of the Fabric Manager or the NVSwitches (NCCL's own words)",
        action="on {host}: check nvidia-fabricmanager (running, its version the driver's; restarted while processes "
        "held GPUs needs a reboot) and, in a container, the IMEX channel; or run with NCCL_NVLS_ENABLE=0",
        absorbs=frozenset({FindingCode.CUDA_ERROR}),
    ),
    Rule(EventKind.NCCL_CUDA_FAILURE, _F.OOM_GPU, priority=88, key=("oom-gpu", *_WHERE), when=_nccl_oom),
    # NCCL's "Cuda failure" of the job's setup (the stub libcuda.so, a driver too old): above the unhandled cuda
    # errors NCCL then returns on every rank, which it explains
    _cuda_setup(EventKind.NCCL_CUDA_FAILURE, 87, absorbs=frozenset({FindingCode.CUDA_ERROR})),
    Rule(EventKind.NCCL_CUDA_FAILURE, _F.CUDA_ERROR, priority=86, key=("cuda", *_WHERE)),
    # CUDA itself refused peer access between two GPUs of the node (cudaErrorPeerAccessUnsupported, 217): the
    # PCIe path between them allows no P2P; NCCL returns ncclUnhandledCudaError, not a usage error
    Rule(
        EventKind.NCCL_INVALID_USAGE,
        _F.CUDA_ERROR,
        priority=86,
        key=("cuda", *_WHERE),
        when=lambda e: (
            e.details.get("catalog") == "nccl.p2p.ipc_handle_failed"
            and "peer access is not supported" in _d(e, "error")
        ),
        message="CUDA refused peer access between two GPUs {where} ({text}): NCCL's P2P transport cannot map the "
        "other GPU's memory over their PCIe path",
        action="on {host}: check nvidia-smi topo -m and topo -p2p r (ACS or the IOMMU on the PCIe switches, GPUs "
        "under different CPUs, a virtual machine's passthrough); run with NCCL_P2P_DISABLE=1 until P2P works",
    ),
    # InfiniBand
    Rule(EventKind.IB_PORT_STATE, None, role="context", when=_link_context),
    Rule(EventKind.IB_LINK_DOWN, _F.NCCL_NETWORK_ERROR, W, 40, "observer", ("flap", "host", "device"), when=_flap),
    Rule(EventKind.IB_PORT_STATE, _F.NCCL_NETWORK_ERROR, W, 40, "observer", ("flap", "host", "device"), when=_flap),
    Rule(
        EventKind.IB_LINK_DOWN,
        _F.NCCL_NETWORK_ERROR,
        priority=90,
        key=("hca", "host", "bus_id"),
        when=_from("linux.mlx5.health_compromised", "linux.mlx5.cmd_timeout"),
        message="the HCA {d[bus_id]} {where} stopped answering its driver (mlx5): every RDMA connection through it "
        "fails ({text})",
        action="drain {host}: the adapter's firmware is hung or the card failed; reboot to reset it, check its "
        "firmware (mlxfwmanager) and the kernel log for a health syndrome, RMA if it repeats; resubmit with "
        "--exclude={host}",
    ),
    Rule(EventKind.IB_LINK_DOWN, _F.NCCL_NETWORK_ERROR, priority=90, key=("link", "host", "device")),
    Rule(EventKind.IB_PORT_STATE, _F.NCCL_NETWORK_ERROR, priority=90, key=("link", "host", "device")),
    Rule(EventKind.NCCL_IB_ASYNC, _F.NCCL_NETWORK_ERROR, priority=84, key=("hca", "host")),
    Rule(
        EventKind.NCCL_IB_COMPLETION,
        _F.NCCL_NETWORK_ERROR,
        priority=83,
        key=("ib", "host"),
        when=_from("nccl.ib.modify_qp_failed"),
        message="NCCL could not bring an InfiniBand/RoCE queue pair up {where} ({text})",
        action="a RoCE/IB setting or path: check NCCL_IB_GID_INDEX (the same RoCE v2 GID on every node), NCCL_IB_HCA "
        "and that the remote GID is routable from {host}; if only {host} fails, check its link and resubmit with "
        "--exclude={host}",
    ),
    Rule(
        EventKind.NCCL_IB_COMPLETION,
        _F.NCCL_NETWORK_ERROR,
        priority=83,
        key=("ib", "host"),
        when=_from("nvshmem.ibrc.modify_qp_failed"),
        message="NVSHMEM (DeepEP's inter-node transport) could not bring an InfiniBand/RoCE queue pair up {where} "
        "(errno {d[status]}: {text})",
        action="a RoCE/IB setting or path: check NVSHMEM_IB_GID_INDEX (the same RoCE v2 GID on every node), "
        "NVSHMEM_HCA_LIST and that the peers' GIDs are routable from {host}; if only {host} fails, check its link "
        "and resubmit with --exclude={host}",
    ),
    Rule(EventKind.NCCL_IB_COMPLETION, _F.NCCL_NETWORK_ERROR, priority=83, key=("ib", "host")),
    Rule(
        EventKind.FABRIC_ERROR,
        _F.NCCL_NETWORK_ERROR,
        priority=83,
        key=("ib", "host"),
        message="the network (libfabric) failed a message {where}, read by MPI: {d[error]} ({text})",
        action="check the fabric path of {host} and its peers (the provider's counters, link state, the switch "
        "ports); if one host is in every error, resubmit with --exclude=<it> and drain it",
    ),
    # UCX's mlx5 transport printing a completion with error (the CQE syndrome: 0x15 transport retry counter
    # exceeded, 0x13 remote access error, 0x4 local protection, ...): the same work completion error as NCCL's
    # NET/IB one, read by UCX
    Rule(
        EventKind.UCX_ERROR,
        _F.NCCL_NETWORK_ERROR,
        priority=83,
        key=("ib", "host"),
        when=_from("ucx.mlx5.transport_retry_exceeded", "ucx.mlx5.remote_access_error", "ucx.mlx5.completion_error"),
        message="InfiniBand work completion error on {d[device]} {where}, read by UCX (mlx5 syndrome 0x{d[status]}, "
        "vendor error 0x{d[vendor_err]}) ({text})",
        action="check the IB path of {host}'s {d[device]} and its peer (ibstat, mlx5 Link down in dmesg, switch port "
        "error counters); if one host is in every error, resubmit with --exclude=<it> and drain it",
    ),
    # Open MPI's UCX layer failing to reach a peer rank at wire-up: the process cannot run (the crash or abort
    # that follows is its consequence); the path between the two hosts or the interfaces UCX chose
    Rule(
        EventKind.UCX_ERROR,
        _F.NCCL_NETWORK_ERROR,
        priority=83,
        key=("ucx-wireup", "host"),
        when=_from("openmpi.pml_ucx.resolve_endpoint_failed", "openmpi.pml_ucx.ep_create_failed"),
        message="MPI's UCX layer could not reach rank {d[peer]} {where} ({text})",
        action="check the path from {host} to rank {d[peer]}'s host and the interfaces UCX uses (UCX_NET_DEVICES, "
        "UCX_TLS; a 169.254.x.x address in UCX's connect error is a link-local virtual NIC, not the fabric); if one "
        "host is in every error, resubmit with --exclude=<it>",
    ),
    # the bus errors of a too small /dev/shm (SIGBUS: srun's "Bus error", UCX's "Caught signal 7")
    Rule(
        EventKind.BUS_ERROR,
        _F.PROCESS_CRASH,
        priority=81,
        key=("crash", "host", "task"),
        message="{where} died on SIGBUS (bus error): usually a write to a full /dev/shm ({text})",
        action=SHM_ACTION,
    ),
    # torchrun / elastic
    # Ray's raylet: a worker process that vanished (no exit of its own). Ray's own text lists three causes (the OOM
    # killer, `ray stop --force`, a crash) and knows none of them: the death and its node are facts, its cause is
    # not in the log, and naming the host's memory would condemn it on Ray's guess
    _ray_death(
        "ray-vanished",
        _ray_vanished,
        "a Ray worker {where} vanished (pid {d[pid]}; Ray: 'Worker unexpectedly exits with a connection "
        "error code 2'): the log does not say why (Ray lists the host's OOM killer, `ray stop --force`, a crash)",
        "read {host}'s kernel log (dmesg -T, journalctl -k) for 'Out of memory: Killed process {d[pid]}' "
        "and the worker's own log (the Ray session's logs/worker-*-{d[pid]}.err) for its crash",
    ),
    # a Ray actor that died, told by the task that called it or by its own creation task's end: the death is a
    # fact, its cause (an OOM kill, a crash, its node's death, the __init__'s exception) is in other lines or not
    # in the log at all
    _ray_death(
        "ray-actor-died",
        _from("ray.actor.died_unexpectedly", "ray.task_error.wrapped_actor_died", "ray.actor.creation_task_failed"),
        "a Ray actor died {where} ({text}): the log does not say why",
        "read the actor's own lines (its pid and ip) and its node's kernel log for its first error: an OOM "
        "kill, a crash, its node's death, or the exception of its __init__",
    ),
    # exit code 2 is a usage error: Python's argparse exits 2 on arguments it does not know (torch >= 2.0's
    # --local-rank for a script that reads --local_rank), as the interpreter does on a script it cannot open
    Rule(
        EventKind.CHILD_FAILED,
        _F.CONFIG_ERROR,
        priority=51,
        key=("config", *_WHERE),
        when=_usage_exit,
        message="{where} exited with code 2, a usage error ({text}): Python's argparse exits 2 on an argument it does "
        "not know, as the interpreter does on a script it cannot open",
        action="read the rank's first lines for 'error: unrecognized arguments' or 'can't open file': torchrun >= 2.0 "
        "passes --local-rank (read LOCAL_RANK from the environment, or accept both spellings), or fix the script's "
        "path, then resubmit",
    ),
    # torchrun lists beside its root cause the other workers it found exited at the same poll (it stops the rest
    # with SIGTERM after): a SIGKILL among them came from outside, most often the OOM killer
    Rule(
        EventKind.CHILD_FAILED,
        _F.OOM_HOST,
        C,
        30,
        "observer",
        ("oom-host", "host"),
        when=lambda e: _not_root(e) and _sigkill(e),
        note="SIGKILL",
    ),
    Rule(EventKind.CHILD_FAILED, _F.PROCESS_CRASH, C, 30, "observer", ("child", *_WHERE), when=_not_root),
    Rule(EventKind.CHILD_FAILED, _F.OOM_HOST, priority=70, key=("oom-host", "host"), when=_sigkill, note="SIGKILL"),
    Rule(EventKind.CHILD_FAILED, _F.PROCESS_CRASH, priority=80, key=("crash", *_WHERE), when=_signalled),
    # Paddle's launchers name the trainer that failed and the log that holds its own error: a trainer's error line
    # the log shows (its workerlog pasted beside) is more decisive than the launcher's report
    Rule(
        EventKind.CHILD_FAILED,
        _F.PROCESS_CRASH,
        priority=51,
        key=("crash", *_WHERE),
        when=_from("paddle.launch.container_failed", "paddle.launch_utils.trainer_aborted"),
        message="{where}'s trainer process failed, as Paddle's launcher reports ({text})",
        action="read that trainer's own log (log/workerlog.<rank> beside the launch) for its first error",
    ),
    # a child that exited with a code of its own (no signal) ended on an error it printed: any line naming that
    # error is more decisive than the launcher's summary, which alone still tells a crash
    Rule(EventKind.CHILD_FAILED, _F.PROCESS_CRASH, priority=51, key=("crash", *_WHERE), when=_exited),
    Rule(EventKind.CHILD_FAILED, _F.PROCESS_CRASH, priority=65, key=("crash", *_WHERE)),
    # a process ending: ProcessGroupNCCL's teardown after its watchdog's timeout is evidence of the timeout; after
    # another error, that error's own line is the cause; a c10d error's end is below any failure the log shows
    Rule(EventKind.SIGNAL, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",), when=_teardown_of_timeout),
    Rule(EventKind.SIGNAL, None, role="context", when=_teardown_of_error),
    Rule(EventKind.SIGNAL, _F.PROCESS_CRASH, C, 15, "observer", ("signal", *_WHERE), when=_c10d_teardown),
    # mpirun/prterun naming the first process killed by signal 9: a SIGKILL, most often the host's OOM killer
    Rule(EventKind.SIGNAL, _F.OOM_HOST, priority=70, key=("oom-host", "host"), when=_mpi_sigkill, note="SIGKILL"),
    Rule(EventKind.SIGNAL, _F.PROCESS_CRASH, priority=80, key=("crash", *_WHERE), when=_crash_signal),
    Rule(EventKind.SIGNAL, _F.PROCESS_CRASH, C, 25, "observer", ("signal", *_WHERE)),
    # Python exceptions (the summary block, the NCCL or OOM event on the same line say more for some)
    Rule(EventKind.PYTHON_EXCEPTION, None, role="context", when=_summarised_exc),
    Rule(EventKind.PYTHON_EXCEPTION, None, role="context", when=_comm_aborted),
    Rule(EventKind.PYTHON_EXCEPTION, None, role="context", when=_interrupted),
    # the child's own exception below it is the cause; the wrapper alone (the child's lines cut) still tells a crash
    Rule(
        EventKind.PYTHON_EXCEPTION,
        _F.PROCESS_CRASH,
        C,
        25,
        "observer",
        ("spawn-wrapper", *_WHERE),
        when=_spawn_wrapper,
        message="a process {where} started by torch.multiprocessing.spawn raised an exception ({text}); its own "
        "traceback follows the wrapper",
    ),
    Rule(
        EventKind.PYTHON_EXCEPTION,
        _F.PROCESS_CRASH,
        priority=55,
        key=("exception", *_WHERE),
        when=_from("ray.task_error.wrapped"),
        message="a Ray worker {where} failed with {d[error]} (Ray's RayTaskError: {text})",
        action="read that worker's own lines (prefixed with its pid and ip) for its first error; an ActorDiedError "
        "means the worker process itself died (an OOM kill, a crash): look for it on {host}",
    ),
    # the checkpoint does not fit the model the job built: every rank fails the same way at load
    Rule(
        EventKind.PYTHON_EXCEPTION,
        _F.CONFIG_ERROR,
        priority=62,
        key=("config", *_WHERE),
        when=_from("pytorch.module.load_state_dict_failed", "pytorch.module.load_state_dict_size_mismatch"),
        message="the checkpoint does not fit the model {where} ({text})",
        action="load it into the model configuration it was saved from (vocabulary size, layers, a PEFT wrapper); "
        "a shape of torch.Size([0]) is a ZeRO-3 or FSDP partitioned parameter: load the checkpoint before the "
        "engine partitions the model, or through the engine's own loader; then resubmit",
    ),
    Rule(EventKind.PYTHON_EXCEPTION, _F.CONFIG_ERROR, priority=62, key=("config", *_WHERE), when=_config_exc),
    Rule(EventKind.PYTHON_EXCEPTION, _F.PROCESS_CRASH, priority=55, key=("exception", *_WHERE)),
    # configuration errors NCCL or torch detects (above the "internal error" NCCL wraps some of them in)
    Rule(
        EventKind.NCCL_NO_SOCKET_INTERFACE,
        _F.CONFIG_ERROR,
        priority=64,
        key=("config", *_WHERE),
        message="configuration error {where}: NCCL/Gloo found no usable network interface ({text})",
        action="set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to an interface every node has (ip -br addr), or "
        "unset them; a container needs the host's network (or its interfaces) to reach the other nodes",
        absorbs=_INTERNAL,
    ),
    _mismatch(
        "TensorFlow's collective ops disagree on their group's size {where}: {d[count]} members expected, the group "
        "has {d[world_size]} ({text})",
        "a configuration error, not a node's: start every worker with the same cluster spec (TF_CONFIG's worker "
        "list) and the same number of GPUs each",
        "tensorflow.collective.group_size_mismatch",
    ),
    _mismatch(
        "a device joined a TensorFlow collective group it does not fit {where}: {text}",
        "a configuration error, not a node's: every worker must see the same number and type of devices (a worker "
        "whose GPU is missing, hidden by CUDA_VISIBLE_DEVICES or without CUDA joins as CPU) and run the same "
        "strategy with the same cluster spec (TF_CONFIG)",
        "tensorflow.collective.device_group_size_mismatch",
        "tensorflow.collective.device_type_mismatch",
    ),
    _mismatch(
        "a gloo peer sent {d[count]} bytes where this rank expected {d[world_size]} {where}: the ranks called a "
        "collective or send/recv with different sizes ({text})",
        "a program error, not a node's: every rank must pass tensors of the same size to each collective (a "
        "rank-dependent shape, an uneven last batch); TORCH_DISTRIBUTED_DEBUG=DETAIL names the collective",
        "pytorch.gloo.preamble_length",
    ),
    _mismatch(
        "ranks called different collectives {where} (torch's collective check): {text}",
        "a program error, not a node's: every rank must call the same collectives in the same order with the same "
        "shapes (a rank-dependent branch, an uneven last batch); TORCH_DISTRIBUTED_DEBUG=DETAIL names them",
    ),
    Rule(
        EventKind.NCCL_SHM_ERROR,
        _F.CONFIG_ERROR,
        priority=66,
        key=("config", *_WHERE),
        message="NCCL could not create or grow its shared-memory segment {where} ({text}): /dev/shm is too small",
        action=SHM_ACTION,
        absorbs=_INTERNAL,
    ),
    Rule(
        EventKind.NCCL_INVALID_USAGE,
        _F.CONFIG_ERROR,
        priority=62,
        key=("config", *_WHERE),
        when=_from("nccl.enqueue.no_algorithm_protocol"),
        message="NCCL found no algorithm and protocol it may use for a collective {where} ({text}): the job's NCCL "
        "settings, though NCCL reports an internal error",
        action="unset NCCL_ALGO and NCCL_PROTO (or force only what the collective, its datatype and the topology "
        "support: CollNet needs SHARP, LL128 is not built for every GPU and datatype), then resubmit",
        absorbs=_INTERNAL,
    ),
    Rule(
        EventKind.NCCL_INVALID_USAGE,
        _F.CONFIG_ERROR,
        priority=62,
        key=("config", *_WHERE),
        when=_from("nccl.nvml.bus_id_not_found"),
        message="NCCL's topology search met a GPU that NVML cannot see {where} ({text}): the node's ranks see "
        "different GPUs",
        action="run the ranks of one node in one container (or give every container on it the same GPUs) and check "
        "that CUDA_VISIBLE_DEVICES and the container's devices agree; then resubmit",
    ),
    Rule(EventKind.NCCL_INVALID_USAGE, _F.CONFIG_ERROR, priority=62, key=("config", *_WHERE)),
    # torch's c10d store (the rendezvous of init_process_group / torchrun): its host could not listen, or fewer
    # processes reached it than the world size, or a client could not reach it
    Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.CONFIG_ERROR,
        priority=61,
        key=("config", *_WHERE),
        when=_from(
            "pytorch.c10d.server_bind_failed",
            "pytorch.c10d.tcpstore_address_in_use",
            "pytorch.c10d.server_bind_address_warning",
            "accelerate.launch.port_in_use",
        ),
        message="the rendezvous store could not listen {where}: its port is taken ({text})",
        action="another job or a leftover process of an earlier run holds MASTER_PORT on {host}: choose a free port "
        "(MASTER_PORT, torchrun --master-port / --rdzv-endpoint, accelerate --main_process_port) or end the leftover "
        "processes, then resubmit",
    ),
    _never_joined(
        _from("pytorch.c10d.clients_not_joined"),
        "the rendezvous store {where} saw only {d[count]} of {d[world_size]} processes join within "
        "{d[seconds]} s ({text})",
        "the missing processes never started or could not reach MASTER_ADDR: check that the launch starts the "
        "world size (srun --ntasks, torchrun --nnodes/--nproc-per-node on every node) and read the other nodes' logs "
        "for an earlier failure",
    ),
    _never_joined(
        _from("pytorch.c10d.store_based_barrier_timeout"),
        "the process group's store barrier {where} counted {d[count]} processes for a world of "
        "{d[world_size]} ({text})",
        "more than the world size: processes of an earlier run (a requeue or restart) still use the same "
        "MASTER_ADDR:MASTER_PORT, give each run its own port; fewer: some processes never started, read their "
        "nodes' logs",
    ),
    Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.CONFIG_ERROR,
        C,
        40,
        "observer",
        ("rendezvous-join",),
        when=_over_world,
        message="the process group's store barrier {where} counted {d[count]} processes for a world of "
        "{d[world_size]} and kept waiting ({text})",
        action="processes of another run (a second launch, a requeue or restart) use the same MASTER_ADDR:"
        "MASTER_PORT: give each run its own port (torchrun --master-port, --rdzv-id) and end the leftover processes",
    ),
    # a client that cannot reach a store address of 0.0.0.0/8: the store's host name was a number
    Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.CONFIG_ERROR,
        priority=61,
        key=("config", "store-address"),
        when=_unroutable_store,
        message="the rendezvous store's address {d[peer]} is in 0.0.0.0/8, where no host is ({text}): a numeric "
        "host name given as the store's host reads as an IPv4 number (05 is 0.0.0.5)",
        action="set MASTER_ADDR (torchrun --master-addr, --rdzv-endpoint) to the store host's resolvable name or its "
        "IP address, then resubmit",
    ),
    # the same refusal on Windows: printed by runs that go on to work too (another address is tried), so an observer
    # a decisive cause outranks
    Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.CONFIG_ERROR,
        C,
        40,
        "observer",
        ("config", "store-address"),
        when=_store_address_not_valid,
        message="the rendezvous store's address {d[peer]} is not valid here ({text}): WinSock refused it (10049)",
        action="set MASTER_ADDR to 127.0.0.1 on one machine, or to the store host's reachable IP address (not a name "
        "that resolves to a Docker or Hyper-V alias), then resubmit",
    ),
    # the same progress line within the world size: processes still joining, no cause
    Rule(EventKind.RENDEZVOUS_ERROR, None, role="context", when=_from("pytorch.c10d.store_based_barrier_waiting")),
    # two processes initialised as one rank: the launch started every node's processes as node 0's (srun without
    # --ntasks-per-node under Lightning, a NODE_RANK not set), or more processes than the world size; the job hangs
    Rule(
        EventKind.DUPLICATE_RANK,
        _F.CONFIG_ERROR,
        priority=61,
        key=("duplicate-rank",),
        message="two processes initialised as global rank {d[global_rank]} of {d[world_size]} (first on line "
        "{d[first_line]}, again: {text}): the launch started the same ranks more than once",
        action="start one task per GPU with each its own rank: under Slurm, srun --ntasks-per-node equal to the GPUs "
        "per node (Lightning reads SLURM_PROCID), else set NODE_RANK per node; the trainer's num_nodes and devices "
        "must match the allocation",
    ),
    Rule(EventKind.RENDEZVOUS_ERROR, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",), when=_store_wait_timeout),
    # a barrier of the program's own (multihost_utils.sync_global_devices, a framework's broadcast) that timed out
    # after every process had connected: a process hung or died on the way there, a hang like a collective's
    Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.NCCL_TIMEOUT,
        C,
        20,
        "observer",
        ("timeout",),
        when=_own_barrier,
    ),
    _never_joined(
        _startup_barrier,
        "the coordination service's barrier {d[op]} {where} expired before every process reached it ({text})",
        "the missing tasks never started or could not reach the coordinator: check that the launch starts "
        "num_processes processes (one per task of jax.distributed.initialize) and read their nodes' logs for an "
        "earlier failure",
    ),
    # the scheduler would not allocate or place what the job asked for, or its program could not be executed
    _launch(
        "the program called {d[op]}() {d[error]} was invoked {where} ({text}): the MPI standard forbids it, and "
        "Open MPI aborted the job",
        "a program error: call MPI only between MPI_Init and MPI_Finalize (with mpi4py, import it before the "
        "libraries that use MPI, and free communicators before finalize)",
        "openmpi.runtime.call_outside_init",
    ),
    _launch(
        "NCCL's network plugin (aws-ofi-nccl) could not {d[op]} {where}: {d[error]} (libfabric RC {d[status]}; {text})",
        "check the EFA setup of {host}: the aws-ofi-nccl and libfabric versions the EFA installer pairs, FI_PROVIDER "
        "and FI_EFA_* settings, /dev/infiniband exposed to the container, and the locked-memory limit (ulimit -l)",
        "awsofi.endpoint_setup_failed",
    ),
    _launch(
        "NCCL's network plugin (aws-ofi-nccl) found no libfabric provider it can use {where} ({text})",
        "make EFA usable on {host}: the EFA installer's libfabric first on LD_LIBRARY_PATH, /dev/infiniband exposed "
        "to the container, FI_PROVIDER=efa naming a provider fi_info lists",
        "awsofi.no_optimal_provider",
    ),
    _launch(
        "Slurm's client could not authenticate its request (munge) {where}: {d[error]} ({text})",
        "start munged on {host} (systemctl start munge) and check that its key and clock match the "
        "controller's; the job or step was never submitted",
        "slurm.auth_munge.encode_failed",
    ),
    _launch(
        "DeepSpeed's launcher could not reach {host} over ssh ({text})",
        "check passwordless ssh from the launching node to {host} (keys, sshd, the hostfile name's DNS), or "
        "run one node without a hostfile; then resubmit",
        "deepspeed.runner.host_not_reachable_ssh",
    ),
    _launch(
        "DeepSpeed's launcher could not reach {host} over ssh (exit status {d[exit_code]}): {text}",
        "check passwordless ssh from the launching node to {host} (keys, sshd, the hostfile name's DNS), or "
        "run one node without a hostfile; then resubmit",
        "deepspeed.runner.ssh_check_failed",
    ),
    _launch(
        "the launcher's ssh could not resolve the host name {d[peer]} ({text})",
        "the hostfile (or the job's host list) names a host DNS does not know: a pod's service name not yet "
        "published, a typo, a missing /etc/hosts entry; fix the name or the DNS, check 'getent hosts NAME' from the "
        "launching node, then resubmit",
        "openssh.ssh.could_not_resolve_hostname",
    ),
    _launch(
        "the launcher's ssh could not connect to {d[peer]} ({d[error]}: {text})",
        "the node (or pod) runs no sshd on that port, or a firewall blocks it: start sshd there (mpi-operator and "
        "DeepSpeed's pdsh need it), fix the port in ~/.ssh/config or the hostfile, then resubmit",
        "openssh.ssh.connect_refused",
    ),
    _launch(
        "mpirun could not start its daemon on every node ({text})",
        "read the line above it: ssh's own error (an unresolvable name, keys), 'orted: command not found' (Open "
        "MPI not on the remote PATH: --prefix or --enable-orterun-prefix-by-default) or no route back to mpirun "
        "(firewall, the interface: --mca oob_tcp_if_include); then resubmit",
        "openmpi.errmgr.failed_daemon_launch",
    ),
    _launch(
        "the step's container did not start {where} (pyxis/enroot, error code {d[exit_code]}): {text}",
        "read pyxis' log lines that follow (the image, its entrypoint: --container-image, "
        "--no-container-entrypoint, enroot's configuration), fix the image or the options and resubmit",
        "pyxis.container_start_failed",
    ),
    _launch(
        "Slurm refused the job's allocation: {d[error]} ({text})",
        "the request cannot be met by the partition, the account or its QOS (nodes, GPUs per node, memory, "
        "time): read 'scontrol show partition' and 'sinfo -o %N %G %m', fix the request and resubmit",
        "slurm.srun.unable_to_allocate",
    ),
    _launch(
        "Ray Train could not start its {d[world_size]} workers within {d[seconds]} s: {text}",
        "the cluster cannot give ScalingConfig's resources now (too few free GPUs, the autoscaler still adding "
        "nodes) or cannot at all (a resource no node has), or the workers' runtime_env install outlasts the timeout: "
        "read 'ray status', fix the request, or raise RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S",
        "ray.train.worker_group_startup_timeout",
    ),
    _launch(
        "Slurm could not create the job step: {d[error]} ({text})",
        "the step asks for more than the job's allocation (tasks, CPUs, memory or GPUs per task): make "
        "srun's request fit the sbatch allocation and resubmit",
        "slurm.srun.unable_to_create_step",
    ),
    _launch(
        "the step's program could not be executed {where}: {d[error]} ({text})",
        "check the program's path and execute permission, its #! interpreter, and that its file system is "
        "mounted on {host}; then resubmit",
        "slurm.stepd.execve_failed",
    ),
    _launch(
        "the interpreter could not open the script it was to run {where}: {d[op]}, {d[error]} ({text})",
        "the script is not at that path on {host}: check the launch's working directory (a launcher starts the "
        "ranks of other nodes in their home or its own directory) and that the code is on a file system every node "
        "mounts, or give its absolute path; then resubmit",
        "cpython.main.cant_open_file",
    ),
    # the scheduler could not start the tasks on a node: that node's slurmd (or its munge, clock, prolog)
    _launch(
        "Slurm could not launch the step's tasks {where}: {d[error]} ({text})",
        "check slurmd on {host} (running, reachable on its port, the same munge key and clock as the "
        "controller, its prolog); resubmit with --exclude={host} if only it fails",
        "slurm.srun.task_launch_failed",
        "slurm.srun.task_launch_failed_task",
    ),
    _launch(
        "{d[error]} could not find or open a component the run asked for, {where} ({text})",
        "the 'Host:', 'Framework:' and 'Component:' lines below it name it: install it in the node's or the "
        "container's MPI/PMIx (Slurm's PMIx needs its munge psec plugin where the tasks run), or drop the --mca "
        "selection that names it; then resubmit",
        "openmpi.mca.component_not_found",
    ),
    _launch(
        "Open MPI could use none of its {d[error]} components {where} ({text})",
        "the transports it was built with are not usable here (UCX without this transport, no IB device, "
        "pml_ucx_tls disjoint from UCX_TLS): read the UCX or component errors above it, select a usable one with "
        "--mca (e.g. --mca pml ob1) or fix the install; then resubmit",
        "openmpi.mca.no_components",
    ),
    _launch(
        "a gloo process group could not bind its socket {where}: {d[error]} ({text})",
        "the address gloo uses is not this host's (GLOO_SOCKET_IFNAME, a hostname resolving to another address) "
        "or its ports are used up: set GLOO_SOCKET_IFNAME to the interface the ranks reach each other on and "
        "resubmit",
        "gloo.pair.bind_failed",
    ),
    _launch(
        "a C++/CUDA extension the job compiles at start-up did not build {where} ({text})",
        "read the compiler's errors above it (nvcc or gcc, the CUDA toolkit and the compiler torch was built "
        "with, CUDA_HOME); install the matching toolkit or a prebuilt wheel (DeepSpeed: DS_BUILD_OPS=1 at "
        "install) and resubmit",
        "pytorch.cpp_extension.build_failed",
        "pytorch.cpp_extension.ninja_failed",
    ),
    _launch(
        "a process joining the Ray cluster runs another Ray or Python version than the cluster's head ({text})",
        "the 'This process on node' line below it names the node that differs: give every node (and the driver) "
        "the head's Ray and Python, in the same image or environment, and resubmit",
        "ray.worker.version_mismatch",
    ),
    _launch(
        "NVSHMEM found no transport that reaches another PE {where} ({text})",
        "across nodes its remote transport did not load: check nvidia-peermem (lsmod), libibverbs and "
        "NVSHMEM_REMOTE_TRANSPORT (NVSHMEM_DEBUG=INFO lists the transports it loaded); within a node, check P2P "
        "between the GPUs (nvidia-smi topo -p2p r); then resubmit",
        "nvshmem.topo.peer_not_accessible",
    ),
    _launch(
        "the NIC refused the queue pair NVSHMEM's IBGDA transport set up {where} ({d[op]}, syndrome {d[status]}: "
        "{text})",
        "the port's attributes do not suit IBGDA: on RoCE set the GID index and traffic class NVSHMEM uses "
        "(NVSHMEM_IB_GID_INDEX, NVSHMEM_IB_TRAFFIC_CLASS) to the fabric's, check the NIC's firmware supports IBGDA, "
        "or use the IBRC transport (NVSHMEM_IB_ENABLE_IBGDA=0); then resubmit",
        "nvshmem.ibgda.devx_modify_qp_failed",
    ),
    _launch(
        "the NVIDIA driver's kernel module and libraries differ {where} ({text})",
        "reboot {host} (a driver upgraded without a reboot) or make the container use the host's driver "
        "libraries (the NVIDIA container runtime); drain it until nvidia-smi answers, then resubmit",
        "nvidia_smi.nvml_driver_library_mismatch",
    ),
    _launch(
        "a process {where} saw no GPU when it created its NCCL process group ({text})",
        "give the processes their GPUs: the step's or pod's GPU request (--gpus, --gres=gpu:N, resources.limits), "
        "CUDA_VISIBLE_DEVICES, a CUDA build of torch; or use the gloo backend for CPU-only runs; then resubmit",
        "pytorch.c10d.nccl_no_gpus",
    ),
    # the node Ray's version check names (its warning prints the line too: an observer's)
    Rule(
        EventKind.LAUNCH_FAILED,
        _F.CONFIG_ERROR,
        priority=40,
        role="observer",
        key=("launch", "host"),
        when=_from("ray.worker.version_mismatch_node"),
        message="a process {where} runs another Ray or Python version than the cluster's head ({text})",
        action="give every node (and the driver) the head's Ray and Python, in the same image or environment, "
        "and resubmit",
    ),
    # any other launch failure: the launcher's or library's own words say what is missing
    Rule(
        EventKind.LAUNCH_FAILED,
        _F.CONFIG_ERROR,
        priority=60,
        key=("launch", "host"),
        message="the job's processes could not start {where} ({text})",
        action="read this line and the ones above it: the launcher's or the library's own words name what is "
        "missing or refused (a program, a library, a component, a version the others run, a resource); fix the "
        "environment or the launch and resubmit",
    ),
    Rule(
        EventKind.RENDEZVOUS_ERROR,
        _F.NCCL_NETWORK_ERROR,
        C,
        44,
        "observer",
        ("rendezvous",),
        message="a process {where} could not reach, or lost, the rendezvous store ({text})",
        action="the store's host (MASTER_ADDR, rank 0's node) had not started, had exited or is unreachable: read its "
        "log for the first failure; check MASTER_ADDR/MASTER_PORT and that the port is open between the nodes",
    ),
    Rule(
        EventKind.NCCL_INTERNAL_ERROR,
        _F.NCCL_INTERNAL_ERROR,
        priority=54,
        key=("nccl-internal", *_WHERE),
        when=_from("nccl.shm.attach_failed"),
        message="NCCL could not attach to the shared-memory segment another process of the node made {where} "
        "({text}): that process is gone, or it does not share this /dev/shm, or NCCL named the segment wrongly",
        action="run one node's ranks in one container or share its IPC namespace (docker --ipc=host; one pod); "
        "NCCL_SHM_DISABLE=1 works around it; an empty segment name or size 0 is NCCL's own fault: change its version",
    ),
    Rule(
        EventKind.NCCL_INTERNAL_ERROR,
        _F.NCCL_INTERNAL_ERROR,
        priority=54,
        key=("nccl-internal", *_WHERE),
        when=_from("torch-npu.hccl.function_error"),
        message="HCCL (the Ascend NPUs' collective library) failed {where}: {d[op]} returned HcclResult {d[status]} "
        "({text})",
        action="read HCCL's own [ERROR] lines and CANN's EIxxxx code in that process's output or plog (~/ascend/log): "
        "1 is a parameter (ranks, devices or the root info differ between processes), 7 a resource in use (the "
        "HCCL port another process holds: an earlier run still alive), 5 a feature the NPU or CANN lacks",
    ),
    Rule(EventKind.NCCL_INTERNAL_ERROR, _F.NCCL_INTERNAL_ERROR, priority=54, key=("nccl-internal", *_WHERE)),
    _reg_mr(
        "aws_ofi_nccl.register_mr_failed",
        "NCCL's network plugin (aws-ofi-nccl) could not register memory with the NIC {where} "
        "(RC {d[vendor_err]}: {d[error]}; NCCL system error): {text}",
    ),
    _reg_mr(
        "libfabric.efa.mr_reg_failed",
        "libfabric's EFA provider could not register memory with the EFA device {where} ({d[error]}; NCCL's network "
        "plugin returns a system error): {text}",
    ),
    _reg_mr(
        "nccl.ibvwrap.reg_mr_failed",
        "NCCL could not register memory with the InfiniBand HCA {where} ({d[op]}: {d[error]}; NCCL system error): "
        "{text}",
    ),
    Rule(EventKind.NCCL_SYSTEM_ERROR, _F.NCCL_INTERNAL_ERROR, priority=54, key=("nccl-internal", *_WHERE)),
    Rule(EventKind.SLURM_TIME_LIMIT, _F.SLURM_TIME_LIMIT, priority=52, key=("time-limit",)),
    # the scheduler took the nodes: an outside kill like the time limit (a plain CANCELLED line is no cause: srun
    # prints one for every step it ends after a task failed)
    Rule(
        EventKind.SLURM_CANCELLED,
        _F.SLURM_PREEMPTED,
        C,
        52,
        key=("preempted",),
        when=lambda e: (
            str(e.details.get("reason") or "") in ("PREEMPTION", "JOB REQUEUE")
            or e.details.get("failure_class") == "preempted"
        ),
    ),
    # torchrun's agent hung up on (SIGHUP: the terminal or ssh session that started it closed) stops its workers:
    # nothing failed in them, the launch outlived its session
    Rule(
        EventKind.SLURM_CANCELLED,
        _F.PROCESS_CRASH,
        C,
        50,
        key=("hangup", "host"),
        when=_hangup,
        message="torchrun's agent {where} received SIGHUP and shut its workers down: the terminal or ssh session "
        "that started it closed ({text})",
        action="start the job so that it outlives the session: sbatch/srun, nohup, or inside tmux/screen; then "
        "resume it from its last checkpoint",
    ),
    # observers of a failure elsewhere
    Rule(EventKind.NCCL_CONNECTION_CLOSED, _F.NCCL_NETWORK_ERROR, C, 44, "observer", ("observed",)),
    # NCCL could not bind its bootstrap socket: the port it was given (NCCL_COMM_ID) or chose is taken
    Rule(
        EventKind.NCCL_SOCKET_ERROR,
        _F.CONFIG_ERROR,
        priority=61,
        key=("config", *_WHERE),
        when=lambda e: _d(e, "error") == "Address already in use" and "bind" in e.text,
        message="NCCL could not bind its socket {where}: the port is taken ({text})",
        action="another process (a second run, a leftover of an earlier one) holds the port: end it, or give each run "
        "its own NCCL_COMM_ID / MASTER_PORT; then resubmit",
    ),
    # a socket call refused with EMFILE: the process ran out of file descriptors (each peer connection is one), its
    # open-file limit too low for the job's size; the network is not at fault
    Rule(
        EventKind.NCCL_SOCKET_ERROR,
        _F.CONFIG_ERROR,
        priority=61,
        key=("config", *_WHERE),
        when=lambda e: _d(e, "error").startswith("Too many open files"),
        message="NCCL ran out of file descriptors {where} ({text}): the process's open-file limit is too low for "
        "the connections the job opens",
        action="raise the open-file limit where the ranks start (ulimit -n 1048576; the container's or the Slurm "
        "node's limits, PropagateResourceLimits), then resubmit",
    ),
    Rule(EventKind.NCCL_SOCKET_ERROR, _F.NCCL_NETWORK_ERROR, C, 44, "observer", ("observed",)),
    # NCCL's proxy service failing a peer's operation with ncclInternalError (retcode 3, src/proxy.cc): NCCL's own
    # check failed there, not the peer or the network (retcode 2, a system call's, stays the network's)
    Rule(
        EventKind.NCCL_REMOTE_ERROR,
        _F.NCCL_INTERNAL_ERROR,
        C,
        44,
        "observer",
        ("nccl-internal", "host"),
        when=lambda e: e.details.get("catalog") == "nccl.proxy.failed_to_execute" and e.details.get("status") == 3,
        message="NCCL's proxy service {where} failed a {d[op]} operation for rank {d[peer]} with ncclInternalError "
        "(3) ({text})",
        action="read the NCCL WARN lines just above it in that process's output (NCCL_DEBUG=WARN) for what failed; "
        "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROXY,NET if none is there",
    ),
    Rule(EventKind.NCCL_REMOTE_ERROR, _F.NCCL_NETWORK_ERROR, C, 44, "observer", ("observed",)),
    Rule(EventKind.GLOO_ERROR, _F.NCCL_NETWORK_ERROR, C, 44, "observer", ("observed",)),
    Rule(EventKind.UCX_ERROR, _F.NCCL_NETWORK_ERROR, C, 44, "observer", ("observed",)),
    Rule(EventKind.WATCHDOG_TIMEOUT, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",)),
    Rule(EventKind.WORK_PROGRESS, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",)),
    Rule(EventKind.WATCHDOG_STUCK, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",)),
    Rule(EventKind.STALL, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",)),
    Rule(EventKind.FLIGHT_RECORDER_DUMP, _F.NCCL_TIMEOUT, C, 20, "observer", ("timeout",)),
    Rule(EventKind.NCCL_NET_SOCKET, _F.NCCL_TRANSPORT_FALLBACK, W, 5, "observer", ("socket", "host")),
)

_BY_KIND: dict[EventKind, tuple[Rule, ...]] = {}
for _r in RULES:
    _BY_KIND[_r.kind] = (*_BY_KIND.get(_r.kind, ()), _r)


def rule_of(e: JobEvent) -> Rule | None:
    """The first row of :data:`RULES` that applies to ``e``, ``None`` when none does."""
    return next((r for r in _BY_KIND.get(e.kind, ()) if r.applies(e)), None)


def _field(e: JobEvent, name: str) -> object:
    if name == "host":
        return e.host
    if name == "rank":
        return e.rank
    if name == "task":
        return e.task
    return e.details.get(name)


def judge(e: JobEvent) -> Judged | None:
    """How one event counts (its rule's code, severity, priority and grouping key), or ``None`` when it is
    context only."""
    r = rule_of(e)
    if r is None or r.code is None:
        return None
    if r.judge is not None:
        return r.judge(e, r)
    key = (r.key[0], *(_field(e, f) for f in r.key[1:])) if r.key else (r.kind.value,)
    return Judged(r.code, r.severity, r.priority, key, r.note, r)


class _Details(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "?"


def render(template: str, *, where: str, host: str, text: str, details: Mapping[str, object]) -> str:
    """``template`` with ``{where}``, ``{host}``, ``{text}`` and ``{d[FIELD]}`` filled (an absent field: ``?``)."""
    values = {"where": where, "host": host, "text": text, "d": _Details(details)}
    return string.Formatter().vformat(template, (), values)
