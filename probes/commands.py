"""The explicit registry of node commands: what ``fleetdx collect`` runs on a node and the bundle file each
writes.

File names follow the captured bundles in ``tests/fixtures/hosts/`` (the command with spaces turned into
``_``; long ``--query-*`` commands shortened to ``nvidia-smi_query-<what>.csv``). Timeouts are per command, in
seconds, about 20-100x the times measured on an H100 node (PLATFORM.md: ``nvidia-smi -q -x`` 0.12 s, ``topo
-m`` 0.05 s, ``lscpu -J`` 0.006 s) because a wedged driver makes ``nvidia-smi`` hang for tens of seconds,
which is itself the finding (``PROBE_TIMEOUT``).

Levels: ``quick`` reads state only (no GPU work, target <= 10 s per node); ``standard`` adds the GPU
micro-benchmark and the intra-node nccl-tests sweep; ``full`` is ``standard`` on a node (the cross-node
collectives are orchestrated by the orchestrator, not here).
"""

from __future__ import annotations

import re
from enum import Enum

from fleetdx.probes.contracts import Contract
from fleetdx.probes.nccl_tests_runner import Features, NcclTest, NcclTestsOptions, build_argv


class Level(str, Enum):
    """How much a collection does (see the module doc)."""

    QUICK = "quick"
    STANDARD = "standard"
    FULL = "full"


class ParserKind(str, Enum):
    """The parser that reads a raw file; the value is the ``fleetdx parse KIND`` argument."""

    TOPO = "topo"
    P2P = "p2p"
    SMI_XML = "smi-xml"
    SMI_CSV = "smi-csv"
    NCCL_TESTS = "nccl-tests"
    NCCL_LOG = "nccl-log"
    NUMACTL = "numactl"
    LSCPU = "lscpu"
    IBSTAT = "ibstat"
    XID = "xid"
    MICROBENCH = "microbench"


class OutputFilter(str, Enum):
    """A filter applied to stdout before it is written (the only one: kernel log lines about the GPU/PCIe)."""

    XID_LINES = "xid-lines"  #: keep lines matching NVRM / Xid / AER, as ``dmesg | grep -i -E "xid|nvrm|aer"``


#: the lines ``dmesg_nvrm.txt`` keeps (same pattern as the captured fixture: ``grep -i -E "xid|nvrm|aer"``)
XID_LINE_RE = re.compile(r"xid|nvrm|aer", re.IGNORECASE)


class NodeCommand(Contract):
    """One command of the registry.

    ``skip_exit_code``: an exit code meaning "not applicable here" (the micro-benchmark exits 4 without CUDA);
    such a run is recorded ``skipped``, not ``failed``.
    """

    file: str
    argv: list[str]
    level: Level
    kind: ParserKind | None = None
    timeout_s: float
    output_filter: OutputFilter | None = None
    skip_exit_code: int | None = None


# --- bundle file names: the single source; every other module names a bundle file through these ----------
SMI_LIST_FILE = "nvidia-smi_-L.txt"
SMI_XML_FILE = "nvidia-smi_-q_-x.xml"
QUERY_GPU_FILE = "nvidia-smi_query-gpu.csv"
COMPUTE_APPS_FILE = "nvidia-smi_query-compute-apps.csv"
REMAPPED_ROWS_FILE = "nvidia-smi_query-remapped-rows.csv"
TOPO_FILE = "nvidia-smi_topo_-m.txt"
P2P_FILE = "nvidia-smi_topo_-p2p_r.txt"
LSCPU_FILE = "lscpu_-J.json"
NUMACTL_FILE = "numactl_-H.txt"
IBSTAT_FILE = "ibstat.txt"
DMESG_FILE = "dmesg_nvrm.txt"
UNAME_FILE = "uname_-a.txt"
MICROBENCH_FILE = "torch_microbench.json"
#: sysfs dumps written by :mod:`fleetdx.probes.sysfs` (its ``SysfsSource`` values), the fallbacks of numactl/ibstat
SYSFS_PCI_FILE = "sysfs_pci.txt"
SYSFS_INFINIBAND_FILE = "sysfs_infiniband.txt"
SYSFS_NUMA_FILE = "sysfs_numa.txt"
#: files ``fleetdx collect`` does not write but captured bundles hold and :mod:`fleetdx.probes.facts` reads
IBSTATUS_FILE = "ibstatus.txt"
LSCPU_TEXT_FILE = "lscpu.txt"

#: ``--query-gpu`` fields, exactly the list of the captured fixture (tests/fixtures/hosts/README.md)
QUERY_GPU_FIELDS = (
    "index,name,uuid,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
    "pcie.link.width.max,clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,temperature.gpu,power.draw,"
    "power.limit,memory.total,memory.used,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
    "driver_version"
)
QUERY_APPS_FIELDS = "pid,process_name,used_memory,gpu_bus_id"
QUERY_REMAP_FIELDS = (
    "gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,"
    "remapped_rows.failure"
)

#: the micro-benchmark's "not applicable" exit code (no CUDA device), agreed with probes/microbench.py
MICROBENCH_SKIP_EXIT = 4
MICROBENCH_TIMEOUT_S = 180.0
#: intra-node nccl-tests sweep: 8 B to 1 GiB, doubling (nccl-tests README usage example)
NCCL_SWEEP_TEST = NcclTest.ALL_REDUCE
NCCL_SWEEP_TIMEOUT_S = 300.0

_Q = Level.QUICK
QUICK_COMMANDS: tuple[NodeCommand, ...] = (
    NodeCommand(file=SMI_LIST_FILE, argv=["nvidia-smi", "-L"], level=_Q, timeout_s=15),
    NodeCommand(
        file=SMI_XML_FILE,
        argv=["nvidia-smi", "-q", "-x"],
        level=_Q,
        kind=ParserKind.SMI_XML,
        timeout_s=30,
    ),
    NodeCommand(
        file=QUERY_GPU_FILE,
        argv=["nvidia-smi", f"--query-gpu={QUERY_GPU_FIELDS}", "--format=csv"],
        level=_Q,
        kind=ParserKind.SMI_CSV,
        timeout_s=15,
    ),
    NodeCommand(
        file=COMPUTE_APPS_FILE,
        argv=["nvidia-smi", f"--query-compute-apps={QUERY_APPS_FIELDS}", "--format=csv"],
        level=_Q,
        kind=ParserKind.SMI_CSV,
        timeout_s=15,
    ),
    NodeCommand(
        file=REMAPPED_ROWS_FILE,
        argv=["nvidia-smi", f"--query-remapped-rows={QUERY_REMAP_FIELDS}", "--format=csv"],
        level=_Q,
        kind=ParserKind.SMI_CSV,
        timeout_s=15,
    ),
    NodeCommand(
        file=TOPO_FILE,
        argv=["nvidia-smi", "topo", "-m"],
        level=_Q,
        kind=ParserKind.TOPO,
        timeout_s=15,
    ),
    NodeCommand(
        file=P2P_FILE,
        argv=["nvidia-smi", "topo", "-p2p", "r"],
        level=_Q,
        kind=ParserKind.P2P,
        timeout_s=15,
    ),
    NodeCommand(file=LSCPU_FILE, argv=["lscpu", "-J"], level=_Q, kind=ParserKind.LSCPU, timeout_s=10),
    NodeCommand(
        file=NUMACTL_FILE, argv=["numactl", "-H"], level=_Q, kind=ParserKind.NUMACTL, timeout_s=10
    ),
    NodeCommand(file=IBSTAT_FILE, argv=["ibstat"], level=_Q, kind=ParserKind.IBSTAT, timeout_s=15),
    NodeCommand(
        file=DMESG_FILE,
        argv=["dmesg"],
        level=_Q,
        kind=ParserKind.XID,
        timeout_s=10,
        output_filter=OutputFilter.XID_LINES,
    ),
    NodeCommand(file=UNAME_FILE, argv=["uname", "-a"], level=_Q, timeout_s=5),
)


def microbench_command(python: str) -> NodeCommand:
    """The GPU micro-benchmark, run as ``python -m fleetdx.probes.microbench`` in a child process so torch (3.4 s to
    import, PLATFORM.md) never loads in the collecting process."""
    return NodeCommand(
        file=MICROBENCH_FILE,
        argv=[python, "-m", "fleetdx.probes.microbench"],
        level=Level.STANDARD,
        kind=ParserKind.MICROBENCH,
        timeout_s=MICROBENCH_TIMEOUT_S,
        skip_exit_code=MICROBENCH_SKIP_EXIT,
    )


def nccl_sweep_options(gpus: int) -> NcclTestsOptions:
    """The sweep's nccl-tests options: 8 B to 1 GiB doubling on ``gpus`` GPUs of one process, nccl-tests'
    default data check (no ``-c``), under :data:`NCCL_SWEEP_TIMEOUT_S`. Raises ``ValueError`` for
    ``gpus < 1``."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    return NcclTestsOptions(
        min_bytes="8", max_bytes="1G", step_factor=2, gpus=gpus, check=None, timeout_s=NCCL_SWEEP_TIMEOUT_S
    )


def nccl_sweep_command(binary: str, gpus: int) -> NodeCommand:
    """``all_reduce_perf -b 8 -e 1G -f 2 -g <gpus>`` (one process driving every GPU of the node), written to
    ``all_reduce_perf_-b8_-e1G_-f2_-g<gpus>.txt``; the argv is :func:`fleetdx.probes.nccl_tests_runner.build_argv`'s
    for :func:`nccl_sweep_options` with no optional feature (the binary's ``-h`` is not probed here)."""
    opts = nccl_sweep_options(gpus)
    return NodeCommand(
        file=(
            f"{NCCL_SWEEP_TEST.value}_-b{opts.min_bytes}_-e{opts.max_bytes}_-f{opts.step_factor}"
            f"_-g{opts.gpus}.txt"
        ),
        argv=build_argv(binary, opts, Features()),
        level=Level.STANDARD,
        kind=ParserKind.NCCL_TESTS,
        timeout_s=opts.timeout_s,
    )


def quick_commands() -> list[NodeCommand]:
    """The quick-level commands (every level runs them)."""
    return list(QUICK_COMMANDS)


def command_for_argv(argv: list[str]) -> NodeCommand | None:
    """The registry entry whose argv is exactly ``argv`` (the micro-benchmark whatever the interpreter path),
    or ``None``."""
    if argv[1:] == ["-m", "fleetdx.probes.microbench"]:
        return microbench_command(argv[0])
    return next((c for c in QUICK_COMMANDS if c.argv == argv), None)


def file_name_for_argv(argv: list[str]) -> str:
    """Bundle file name stem for an argv not in the registry: the program's base name, then each argument,
    a flag glued to the value after it, joined by ``_`` (``all_reduce_perf -b 8 -g 1`` ->
    ``all_reduce_perf_-b8_-g1``), the naming of the captured fixtures."""
    parts = [argv[0].rsplit("/", 1)[-1]]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            parts.append(arg + argv[i + 1])
            i += 2
        else:
            parts.append(arg)
            i += 1
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", "_".join(parts))
