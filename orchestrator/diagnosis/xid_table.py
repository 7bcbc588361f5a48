"""NVIDIA XID codes -> fleetdx class -> finding severity.

Built from NVIDIA's XID catalog ("Analyzing Xid Errors with the Xid
Catalog", docs.nvidia.com/deploy/xid-errors/), NVIDIA NVSentinel's ``xiderrorsmapping.csv`` resolution
buckets, and how Meta GCM, the NVIDIA k8s device plugin and Azure NHC treat each code. Classes:

* ``APP``: an application fault, the GPU stays healthy (13, 31, 43, 68; the k8s device plugin's
  ``applicationErrorXids`` and GCM's non-critical set). Never condemns a node: severity INFO.
* ``INFO``: informational or early degradation (37/38, 44, 45, 63, 92, 94, 121, ...): track, reset at the next
  drain. Severity WARNING.
* ``RESET``: the GPU must be reset before reuse (46, 48, 62, 64, 74, 95, 119, 120, ...). CRITICAL.
* ``NODE``: the node must be rebooted or power-cycled (57, 79, 151, 160). CRITICAL.
* ``HW_INVESTIGATE``: hardware suspect needing diagnostics (32, 54, 56, 58, 61, 80, ...). CRITICAL. Codes the
  table lists as unused on A100/H100/B100/GB200, and codes absent from it, fall here too: NVIDIA's XID catalog, last
  row,
  "'Unused' means not expected on these products, not harmless: investigate".

Codes NVIDIA's XID catalog marks "APP -> RESET if repeats" (8, 69) and "APP -> HW-INVESTIGATE if repeats" (copy-engine
codes) are APP here for one event and escalate to RESET / HW_INVESTIGATE when the same GPU logs the code
:data:`REPEAT_ESCALATION` times or more. XID 154 carries the driver's own recovery action and is read from
its message (:func:`recovery_action_class`).

The NVLink XIDs carry their own fatality in the message: NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors,
XID 74 NVLINK_ERROR and the NVLink5 XIDs 144-150) shows ``NVLink: fatal error detected on link 14(0x0, ...)``
and ``<unit> Fatal|Nonfatal XC0 i0 Link 13 (0x...)``, e.g. ``145, RLW_RXPIPE Nonfatal XC0 i0 Link 13``. For the
families of :data:`FATALITY_IN_MESSAGE` a non-fatal event is INFO (a warning: watch the link), a fatal one keeps
the table's class; a message with neither word keeps it too (:func:`message_fatality`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

from fleetdx.probes.contracts import Contract, Severity

# the store's history as the XID rule reads it (NodeFacts.xid_history), re-exported
from fleetdx.probes.parsers.xid import XidHistory as XidHistory
from fleetdx.probes.parsers.xid import XidSighting as XidSighting


class XidClass(str, Enum):
    """fleetdx's action classes for XIDs (NVIDIA's XID catalog, "Severity (ours)")."""

    APP = "APP"
    INFO = "INFO"
    RESET = "RESET"
    NODE = "NODE"
    HW_INVESTIGATE = "HW-INVESTIGATE"

    @property
    def severity(self) -> Severity:
        return {
            XidClass.APP: Severity.INFO,
            XidClass.INFO: Severity.WARNING,
            XidClass.RESET: Severity.CRITICAL,
            XidClass.NODE: Severity.CRITICAL,
            XidClass.HW_INVESTIGATE: Severity.CRITICAL,
        }[self]


class XidInfo(Contract):
    """One row of the table."""

    code: int
    mnemonic: str
    meaning: str
    xid_class: XidClass
    action: str
    escalates_to: XidClass | None = None  #: class once the code repeats on one GPU


#: the same GPU logging an "escalates if repeats" code this many times is treated as the escalated class
REPEAT_ESCALATION = 2


def _rows() -> dict[int, XidInfo]:
    A, Inf, R, N, H = XidClass.APP, XidClass.INFO, XidClass.RESET, XidClass.NODE, XidClass.HW_INVESTIGATE
    spec: list[tuple[tuple[int, ...], str, str, XidClass, str, XidClass | None]] = [
        (
            (8,),
            "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
            "GPU stopped processing (channel idle timeout)",
            A,
            "restart the job; reset and re-probe if it recurs on the same GPU",
            R,
        ),
        (
            (13,),
            "ROBUST_CHANNEL_GR_EXCEPTION",
            "graphics engine exception: application fault (out of bounds)",
            A,
            "do not drain; report as an application bug (compute-sanitizer memcheck)",
            None,
        ),
        (
            (31,),
            "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
            "GPU memory page fault (illegal address)",
            A,
            "do not drain; report as an application bug",
            None,
        ),
        (
            (32,),
            "ROBUST_CHANNEL_PBDMA_ERROR",
            "invalid or corrupted push buffer stream (PCIe quality)",
            H,
            "check PCIe AER/replay counters and link width/gen; reseat/RMA if it recurs",
            None,
        ),
        ((37, 38), "FECS_ERR", "driver firmware error", Inf, "log; correlate with the driver version", None),
        (
            (39, 40, 41, 70, 71, 72, 75, 76, 77, 85, *range(126, 136)),
            "ROBUST_CHANNEL_CE_ERROR",
            "copy engine exception",
            A,
            "restart the job; if repeated on one GPU probe H2D/D2H and P2P copies",
            H,
        ),
        (
            (43,),
            "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
            "application hit a software-induced fault; GPU healthy",
            A,
            "do not drain; attribute to the job",
            None,
        ),
        (
            (44,),
            "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW",
            "graphics engine fault during context switch",
            Inf,
            "log; correlate",
            None,
        ),
        (
            (45,),
            "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
            "preemptive cleanup after a previous error (abort, kill)",
            Inf,
            "find the companion XID; alone on NVSwitch systems check Fabric Manager",
            None,
        ),
        (
            (46,),
            "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR",
            "GPU stopped processing (GPU timeout)",
            R,
            "drain; reset the GPU; re-probe",
            None,
        ),
        (
            (48,),
            "ROBUST_CHANNEL_GPU_ECC_DBE",
            "double-bit (uncorrectable) ECC error",
            R,
            "drain; reset; check remapped rows pending/failure and ECC counters; RMA on remap failure",
            None,
        ),
        (
            (54,),
            "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
            "power-reduced clocking",
            H,
            "check PSU/power cabling and clock event reasons; run the GEMM probe",
            None,
        ),
        ((56,), "DISPLAY_CHANNEL_EXCEPTION", "display engine error", H, "drain and open a vendor case", None),
        (
            (57,),
            "FB_LINK_TRAINING_FAILURE_ERROR",
            "error programming the video memory interface",
            N,
            "drain; reboot; vendor case if it recurs",
            None,
        ),
        (
            (58,),
            "FB_MEMORY_ERROR",
            "unstable video memory interface",
            H,
            "drain; DCGM memtest; RMA if reproducible",
            None,
        ),
        (
            (61,),
            "PMU_BREAKPOINT",
            "internal micro-controller breakpoint",
            H,
            "nvidia-bug-report; reset; vendor case",
            None,
        ),
        ((62,), "PMU_HALT_ERROR", "internal micro-controller halt", R, "drain; reset; re-probe", None),
        (
            (63,),
            "INFOROM_DRAM_RETIREMENT_EVENT",
            "row remapping / page retirement event recorded",
            Inf,
            "mark the GPU reset-pending and reset at the next drain",
            None,
        ),
        (
            (64,),
            "INFOROM_DRAM_RETIREMENT_FAILURE",
            "row remapper / page retirement recording failure",
            R,
            "drain; reset; RMA if remapped_rows.failure",
            None,
        ),
        ((65,), "ROBUST_CHANNEL_NVENC1_ERROR", "video processor exception", H, "investigate", None),
        ((68,), "ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder exception", A, "restart the job", None),
        (
            (69,),
            "ROBUST_CHANNEL_GR_CLASS_ERROR",
            "graphics engine class error",
            A,
            "restart the job; reset and re-probe if it recurs",
            R,
        ),
        ((73,), "ROBUST_CHANNEL_NVENC2_ERROR", "NVENC2 error (unused on A100/H100)", H, "vendor case", None),
        (
            (74,),
            "NVLINK_ERROR",
            "NVLink error (this GPU or the device at the remote end)",
            R,
            "correlate with peer GPUs' XIDs; nvidia-smi nvlink -s/-e; reset/reboot",
            None,
        ),
        (
            (79,),
            "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
            "GPU not accessible over PCIe",
            N,
            "drain; reboot/power-cycle; check PCIe AER, riser, slot; RMA if it recurs",
            None,
        ),
        (
            (80,),
            "PBDMA_PUSHBUFFER_CRC_MISMATCH",
            "corrupted data sent to the GPU",
            H,
            "check PCIe errors",
            None,
        ),
        ((81,), "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "VGA subsystem error", H, "vendor case", None),
        (
            (92,),
            "EXCESSIVE_SBE_INTERRUPTS",
            "high single-bit (corrected) ECC error rate",
            Inf,
            "track the rate; schedule a DCGM memory test",
            None,
        ),
        (
            (94,),
            "ROBUST_CHANNEL_CONTAINED_ERROR",
            "contained memory error: the affected application restarts",
            Inf,
            "reset the GPU at the next drain; check row remap pending",
            None,
        ),
        (
            (95,),
            "ROBUST_CHANNEL_UNCONTAINED_ERROR",
            "uncontained memory error: GPU reset required",
            R,
            "drain; reset; re-probe; RMA if it repeats",
            None,
        ),
        ((109,), "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", R, "reset the GPU", None),
        ((110,), "SEC_FAULT_ERROR", "security fault", R, "drain; reset", None),
        (
            (119,),
            "GSP_RPC_TIMEOUT",
            "timeout waiting for the GSP to answer an RPC",
            R,
            "drain; reset (power-cycle if it persists); check the driver version",
            None,
        ),
        ((120,), "GSP_ERROR", "error in code running on the GSP", R, "drain; reset", None),
        ((121,), "C2C_ERROR", "chip-to-chip link error", Inf, "track the rate", None),
        ((122, 123, 124), "SPI_PMU_RPC_FAIL", "SPI/PMU RPC failure", H, "vendor case", None),
        ((125,), "INFOROM_FS_ERROR", "InfoROM filesystem error", H, "vendor case", None),
        (
            (136,),
            "ALI_TRAINING_FAIL",
            "NVLink link training failure",
            R,
            "reset; check NVLink / Fabric Manager",
            None,
        ),
        ((137,), "NVLINK_FLA_PRIV_ERR", "NVLink FLA privilege error", Inf, "log", None),
        (
            (140,),
            "UNRECOVERABLE_ECC_ERROR_ESCAPE",
            "uncorrectable memory error escaped row remapping",
            R,
            "reset; vendor case if it persists",
            None,
        ),
        ((143,), "GPU_INIT_ERROR", "GPU initialisation failure", R, "reset/reboot; re-probe", None),
        (
            tuple(range(144, 151)),
            "NVLINK5_ERROR",
            "NVLink (5th gen) error",
            R,
            "follow NVIDIA's NVLink5 workflow",
            None,
        ),
        (
            (151,),
            "ROBUST_CHANNEL_KEY_ROTATION_ERROR",
            "confidential computing key rotation error",
            N,
            "restart the VM",
            None,
        ),
        ((155,), "NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error", R, "reset", None),
        ((156,), "RESOURCE_RETIREMENT_EVENT", "resource retirement event", R, "reset to apply", None),
        ((157,), "RESOURCE_RETIREMENT_FAILURE", "resource retirement failure", Inf, "log; watch", None),
        ((158,), "GPU_FATAL_TIMEOUT", "GPU fatal timeout", R, "reset", None),
        ((159,), "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI non-data error", Inf, "check UVM/driver", None),
        (
            (160,),
            "CHANNEL_RETIREMENT_EVENT",
            "memory marked for repair / channel retirement (sources differ)",
            N,
            "reboot to apply the repair",
            None,
        ),
        (
            (162,),
            "UNNAMED_162",
            "newer code, meaning not captured in NVIDIA's XID catalog",
            R,
            "reset; look the code up in the catalog for this driver",
            None,
        ),
        (
            (171, 172),
            "ECC_DBE_QUALIFIER",
            "qualifies XID 48: 171 DRAM, 172 SRAM uncorrectable error",
            R,
            "as XID 48",
            None,
        ),
    ]
    out: dict[int, XidInfo] = {}
    for codes, mnemonic, meaning, cls, action, esc in spec:
        for c in codes:
            out[c] = XidInfo(
                code=c, mnemonic=mnemonic, meaning=meaning, xid_class=cls, action=action, escalates_to=esc
            )
    return out


XID_TABLE: dict[int, XidInfo] = _rows()

#: XID 154 "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
_RECOVERY_RE = re.compile(r"recovery action changed from .*? to (0x[0-9a-fA-F]+)\s*\(([^)]*)\)")


def recovery_action_class(message: str) -> XidClass | None:
    """Class of an XID 154 message from the action it names (NVIDIA's XID catalog, cross-cutting rule 2); ``None``
    when the
    message names no action. "None" -> INFO; "Drain P2P" / "Drain and Reset" / "GPU Reset Required" / "Bus
    reset" -> RESET; "Node Reboot Required" / "System reboot" -> NODE."""
    m = _RECOVERY_RE.search(message)
    if m is None:
        return None
    action = m.group(2).strip().lower()
    if action == "none":
        return XidClass.INFO
    if "reboot" in action:
        return XidClass.NODE
    return XidClass.RESET


#: XID families whose message says itself whether the event is fatal (NVIDIA's XID catalog: 74, 144-150)
FATALITY_IN_MESSAGE: frozenset[int] = frozenset({74, *range(144, 151)})
_FATAL_WORD_RE = re.compile(r"\b(non[-_ ]?fatal|fatal)\b", re.IGNORECASE)
_PROCESS_RE = re.compile(r"\b(?:pid|name)=[^,]*,?")


def message_fatality(message: str) -> bool | None:
    """``True`` when an XID message says ``Fatal`` (any case), ``False`` when it says only ``Nonfatal`` /
    ``Non-fatal``, ``None`` when it says neither. The ``pid=`` and ``name=`` fields are left out (a process may be
    called anything)."""
    text = _PROCESS_RE.sub("", message)
    words = {re.sub(r"[-_ ]", "", w.lower()) for w in _FATAL_WORD_RE.findall(text)}
    if "fatal" in words:
        return True
    if "nonfatal" in words:
        return False
    return None


def lookup(code: int) -> XidInfo:
    """The table row of ``code``; a code the table does not list is HW_INVESTIGATE (NVIDIA's XID catalog, last row)."""
    info = XID_TABLE.get(code)
    if info is not None:
        return info
    return XidInfo(
        code=code,
        mnemonic="UNLISTED",
        meaning="not expected on A100/H100/B100/GB200 or not in NVIDIA's XID catalog",
        xid_class=XidClass.HW_INVESTIGATE,
        action="investigate: look the code up in NVIDIA's XID catalog",
    )


def classify(code: int, count_on_gpu: int, message: str = "") -> XidClass:
    """Class of ``code`` seen ``count_on_gpu`` times on one GPU (repeats escalate; XID 154 by action; a non-fatal
    event of a :data:`FATALITY_IN_MESSAGE` family is INFO)."""
    if code == 154:
        return recovery_action_class(message) or XidClass.INFO
    if code in FATALITY_IN_MESSAGE and message_fatality(message) is False:
        return XidClass.INFO
    info = lookup(code)
    if info.escalates_to is not None and count_on_gpu >= REPEAT_ESCALATION:
        return info.escalates_to
    return info.xid_class


_PREVIOUS_XID_RE = re.compile(r"caused by previous Xid (\d+)")
_RANK = {XidClass.APP: 0, XidClass.INFO: 1, XidClass.RESET: 2, XidClass.NODE: 3, XidClass.HW_INVESTIGATE: 3}


class XidJudgement(NamedTuple):
    """The one judgement of an XID (:func:`judge_xid`).

    ``xid_class`` is the code's own class on its GPU; ``cause`` the class of the XID its message says caused it
    (``... caused by previous Xid 79``: an XID 45 teardown after a fatal XID) when that class is worse, else
    ``None``; ``effective`` the worse of the two; ``note`` says so in words ("XID 45 follows XID 79 (...)").
    A pre-flight judges the GPU that logged the XID by ``xid_class`` (the root XID's own line judges its GPU); a
    postmortem names the failure by ``effective``."""

    xid_class: XidClass
    cause: XidClass | None
    note: str
    cause_xid: int | None = None  #: the previous XID when ``cause`` is set

    @property
    def effective(self) -> XidClass:
        return self.cause if self.cause is not None else self.xid_class


def judge_xid(code: int, messages: Sequence[str], count_on_gpu: int | None = None) -> XidJudgement:
    """Judge XID ``code`` logged on one GPU with ``messages`` (one per event; ``count_on_gpu`` defaults to their
    number): the worst :func:`classify` over its events, and the previous XID its messages name (NVIDIA's XID
    catalog: XID 45 "preemptive cleanup, due to previous errors"). Used by pre-flight, analyze and postmortem
    alike. Raises nothing."""
    count = count_on_gpu if count_on_gpu is not None else max(1, len(messages))
    classes = [classify(code, count, m) for m in messages] or [classify(code, count)]
    own = max(classes, key=lambda c: _RANK[c])
    for m in messages:
        prev = _PREVIOUS_XID_RE.search(m)
        if prev is None or own not in (XidClass.INFO, XidClass.APP):
            continue
        prior = int(prev.group(1))
        pcls = classify(prior, 1, "")
        if _RANK[pcls] > _RANK[XidClass.INFO]:
            return XidJudgement(own, pcls, f"XID {code} follows XID {prior} ({lookup(prior).meaning})", prior)
    return XidJudgement(own, None, "")


# --- policy over time: where an XID comes from, whether it drains, when its repeats escalate ----------------


class XidOrigin(str, Enum):
    """Where an XID's fault most likely lies (NVIDIA's XID catalog, docs.nvidia.com/deploy/xid-errors, lists per
    XID the possible causes: hardware error, driver error, user application error, ...; the catalog's
    "Resolution Bucket" names the first action). One origin per code: the one the first action treats."""

    HARDWARE = "hardware"  #: the GPU, its memory, its PCIe or NVLink links, its power
    APPLICATION = "application"  #: the job: the GPU stays healthy (the k8s device plugin's applicationErrorXids)
    DRIVER = "driver"  #: driver, firmware or GSP software: correlate with the driver version


class XidPolicy(Contract):
    """How fleetdx judges one XID over time.

    ``drains``: one event of the code, alone, makes the node critical (its class is RESET, NODE or
    HW-INVESTIGATE; 154: by the action its message names, :func:`classify`). ``repeat_jobs``: for a code that
    does not drain alone, how many distinct jobs (processes, by the XID line's ``pid``) raising it, or another
    code of its family, on the same GPU escalate it to
    ``escalates_to``; ``None``: never. ``repeat_window_s``: how far back earlier runs' findings count (the
    store's history, :class:`XidHistory`); the current kernel log counts whole (it is the current boot's).
    ``repeat_events``: the within-log repeat count on one GPU that escalates (:data:`REPEAT_ESCALATION`), for
    the catalog's "if it recurs" codes; ``None``: none."""

    code: int
    origin: XidOrigin
    drains: bool
    repeat_jobs: int | None = None
    repeat_window_s: float | None = None
    repeat_events: int | None = None
    escalates_to: XidClass | None = None
    source: str


#: XIDs that a fault before them causes (NVIDIA's XID catalog: 45 "preemptive cleanup, due to previous errors",
#: 43 "GPU stopped processing": the kernels of every GPU of the job end when one GPU is lost; ../shared/xid.md
#: cross-cutting rule 3): after a critical XID of the same node they fold into its finding (pre-flight and
#: postmortem alike)
CONSEQUENCE_XIDS: frozenset[int] = frozenset({43, 45})
#: application XIDs that escalate when several jobs raise them on one GPU (../shared/xid.md cross-cutting rule 6,
#: from NVIDIA's XID catalog: "escalate if the same GPU raises them for several unrelated jobs"); 68 is
#: application by the k8s device plugin and Meta GCM
CROSS_JOB_XIDS: frozenset[int] = frozenset({13, 31, 43, 68})
#: distinct jobs on one GPU that make an application XID the GPU's (fleetdx's reading of "several": 3)
CROSS_JOB_THRESHOLD = 3
#: how far back the store's earlier runs count for :data:`CROSS_JOB_THRESHOLD` (fleetdx's choice: one day)
CROSS_JOB_WINDOW_S = 24 * 3600.0
#: driver / firmware / GSP XIDs (NVIDIA's XID catalog: "driver error", investigatory bucket INVESTIGATE_SW;
#: 154 is the driver's own recovery action)
DRIVER_XIDS: frozenset[int] = frozenset({37, 38, 44, 119, 120, 154, 159})
#: application teardowns: never drain alone (NVSentinel's bucket for 45 "not solo: IGNORE, follow other Xid")
TEARDOWN_XIDS: frozenset[int] = frozenset({45})

#: XIDs whose message decides whether they drain: 154 names the recovery action (:func:`recovery_action_class`)
MESSAGE_JUDGED_XIDS: frozenset[int] = frozenset({154})

_POLICY_SOURCE = (
    "NVIDIA XID catalog (docs.nvidia.com/deploy/xid-errors, Analyzing Xid Errors with the Xid Catalog); "
    "NVIDIA NVSentinel xiderrorsmapping.csv; ../shared/xid.md"
)


def policy(code: int) -> XidPolicy:
    """The :class:`XidPolicy` of ``code`` (an unlisted code as :func:`lookup` gives it: HW-INVESTIGATE)."""
    info = lookup(code)
    if code in DRIVER_XIDS:
        origin = XidOrigin.DRIVER
    elif info.xid_class is XidClass.APP or code in TEARDOWN_XIDS:
        origin = XidOrigin.APPLICATION
    else:
        origin = XidOrigin.HARDWARE
    cross = code in CROSS_JOB_XIDS
    return XidPolicy(
        code=code,
        origin=origin,
        # 154 drains by the recovery action its message names (recovery_action_class), not by its code
        drains=info.xid_class.severity is Severity.CRITICAL and code not in MESSAGE_JUDGED_XIDS,
        repeat_jobs=CROSS_JOB_THRESHOLD if cross else None,
        repeat_window_s=CROSS_JOB_WINDOW_S if cross else None,
        repeat_events=REPEAT_ESCALATION if info.escalates_to is not None else None,
        escalates_to=XidClass.HW_INVESTIGATE if cross else info.escalates_to,
        source=_POLICY_SOURCE,
    )


def policy_table() -> list[XidPolicy]:
    """:func:`policy` of every code the table lists, by code (for docs and tests)."""
    return [policy(c) for c in sorted(XID_TABLE)]
