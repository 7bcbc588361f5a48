"""The probe catalog: every probe fleetdx knows, one typed row each, in one explicit tuple (:data:`CATALOG`).

A row says which bundle file the probe writes or reads, the command that produces it (if fleetdx runs one),
the level that collects it, its timeout, the parser that reads it and the :class:`~fleetdx.probes.facts.NodeFacts`
field it fills. Everything else reads this table: ``fleetdx collect`` and the pre-flight run the rows of their
level (:mod:`fleetdx.probes.bundle`), :func:`fleetdx.probes.facts.node_facts` parses a bundle's files with their
rows' parsers, ``fleetdx parse KIND`` offers every row's parser, replayed nodes find a command's raw file by
its row. Adding a probe = a parser module + one row here + one ``NodeFacts`` field.

File names follow the captured bundles in ``tests/fixtures/hosts/`` (the command with spaces turned into
``_``; long ``--query-*`` commands shortened to ``nvidia-smi_query-<what>.csv``). Timeouts are per command, in
seconds, 20-100x the times measured on an H100 node (``nvidia-smi -q -x`` 0.12 s, ``topo -m`` 0.05 s,
``lscpu -J`` 0.006 s) because a wedged driver makes ``nvidia-smi`` hang for tens of seconds, which is itself
the finding (``PROBE_TIMEOUT``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic import BaseModel

from fleetdx.probes.contracts import Collective, Contract, Level
from fleetdx.probes.nccl_tests_cmd import Features, NcclTestsOptions, build_argv
from fleetdx.probes.parsers.dcgm import DcgmDiag, DcgmHealth, parse_dcgm_diag, parse_dcgm_health
from fleetdx.probes.parsers.ib_counters import parse_ib_counters, parse_ibdiagnet, parse_perfquery
from fleetdx.probes.parsers.ibstat import parse_ibstat
from fleetdx.probes.parsers.lscpu import parse_lscpu
from fleetdx.probes.parsers.microbench import MicrobenchReport, parse_microbench
from fleetdx.probes.parsers.nccl_log import NcclLog, parse_nccl_log
from fleetdx.probes.parsers.nccl_tests import NcclTestsReport, collective_from_name, parse_nccl_tests
from fleetdx.probes.parsers.numactl import parse_numactl
from fleetdx.probes.parsers.p2p import parse_p2p
from fleetdx.probes.parsers.smi_csv import parse_smi_csv
from fleetdx.probes.parsers.smi_xml import parse_smi_xml
from fleetdx.probes.parsers.topo import parse_topo
from fleetdx.probes.parsers.xid import parse_xid
from fleetdx.probes.rawfile import DEFAULT_MAX_BYTES


class ProbeSource(str, Enum):
    """Where a bundle file comes from."""

    COMMAND = "command"  #: a process run through the runner
    SYSFS = "sysfs"  #: read from /sys by :mod:`fleetdx.probes.sysfs`
    FILE = "file"  #: a raw file fleetdx does not produce but reads when a bundle holds it (captured by hand)


class OutputFilter(str, Enum):
    """A filter applied to stdout before it is written (the only one: kernel log lines about the GPU/PCIe)."""

    XID_LINES = "xid-lines"  #: keep lines matching NVRM / Xid / AER, as ``dmesg | grep -i -E "xid|nvrm|aer"``


#: the lines ``dmesg_nvrm.txt`` keeps (same pattern as the captured fixture: ``grep -i -E "xid|nvrm|aer"``), and a
#: successful GPU reset's line, which closes an XID episode (:class:`~fleetdx.probes.parsers.xid.GpuReset`)
XID_LINE_RE = re.compile(r"xid|nvrm|aer|successfully reset|GPU reset executed", re.IGNORECASE)


@dataclass(frozen=True)
class Parser:
    """A pure parser of one kind of tool output. ``kind`` is the ``fleetdx parse KIND`` argument; ``parse``
    takes the raw text and returns a model, raising only :class:`~fleetdx.probes.errors.ParseError`;
    ``hint``, when given, reads keyword arguments for ``parse`` from the raw file's name (older nccl-tests
    outputs never print which collective they ran: the binary name in ``all_gather_perf_-b8.txt`` does).
    ``max_bytes`` is the largest input read (:func:`fleetdx.probes.rawfile.read_raw`); ``keep``, when given,
    streams the file keeping only the lines it accepts (kernel logs), ``max_bytes`` then bounding what is kept."""

    kind: str
    parse: Callable[..., BaseModel]
    hint: Callable[[str], dict[str, Any]] | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: Callable[[str], bool] | None = None

    def for_file(self, file_name: str | None) -> Callable[[str], BaseModel]:
        """The parse function for a raw file named ``file_name`` (hints applied)."""
        kwargs = self.hint(file_name) if (self.hint is not None and file_name is not None) else {}
        return functools.partial(self.parse, **kwargs) if kwargs else self.parse


def _collective_hint(file_name: str) -> dict[str, Any]:
    hint = collective_from_name(file_name)
    return {"collective_hint": hint} if hint is not None else {}


TOPO = Parser("topo", parse_topo)
P2P = Parser("p2p", parse_p2p)
SMI_XML = Parser("smi-xml", parse_smi_xml)
SMI_CSV = Parser("smi-csv", parse_smi_csv)
NCCL_TESTS = Parser("nccl-tests", parse_nccl_tests, _collective_hint)
#: NCCL_DEBUG=INFO logs of many ranks run to tens of MB
NCCL_LOG = Parser("nccl-log", parse_nccl_log, max_bytes=4 * DEFAULT_MAX_BYTES)
NUMACTL = Parser("numactl", parse_numactl)
LSCPU = Parser("lscpu", parse_lscpu)
IBSTAT = Parser("ibstat", parse_ibstat)
XID = Parser("xid", parse_xid, keep=lambda line: XID_LINE_RE.search(line) is not None)
MICROBENCH = Parser("microbench", parse_microbench)
IB_COUNTERS = Parser("ib-counters", parse_ib_counters)
PERFQUERY = Parser("perfquery", parse_perfquery)
IBDIAGNET = Parser("ibdiagnet", parse_ibdiagnet)
DCGM_DIAG = Parser("dcgm-diag", parse_dcgm_diag)
DCGM_HEALTH = Parser("dcgm-health", parse_dcgm_health)

#: in an argv, replaced by the Python interpreter that runs the node's probes (the micro-benchmark row)
PYTHON = "{python}"


@dataclass(frozen=True)
class ProbeSpec:
    """One row of the catalog.

    Attributes:
        file: the bundle file name the probe writes (or, with ``match``, a name describing its family).
        argv: the command fleetdx runs (``()``: none; :data:`PYTHON` stands for the interpreter).
        level: the collection level that runs it (``None``: never run, read when a bundle holds it).
        source: command, sysfs collector, or a file only read.
        timeout_s: the command's deadline, seconds.
        parser: what reads the file (``None``: kept as evidence, not parsed, e.g. ``uname -a``).
        fact: the :class:`~fleetdx.probes.facts.NodeFacts` field the parsed model fills. Several rows may
            fill one field: the first row, in catalog order, whose file is present and parses wins.
        each: for a list field, how one parsed file becomes its items (``(file name, model) -> items``);
            ``None``: the field holds the one model.
        match: a family of files (every nccl-tests output, every NCCL_DEBUG log) rather than one name.
        output_filter: a filter applied to stdout before it is written.
        skip_exit_code: an exit code meaning "not applicable here" (the micro-benchmark exits 4 without
            CUDA): recorded ``skipped``, not ``failed``.
    """

    file: str
    argv: tuple[str, ...] = ()
    level: Level | None = None
    source: ProbeSource = ProbeSource.COMMAND
    timeout_s: float = 15.0
    parser: Parser | None = None
    fact: str | None = None
    each: Callable[[str, BaseModel], list[Any]] | None = None
    match: re.Pattern[str] | None = None
    output_filter: OutputFilter | None = None
    skip_exit_code: int | None = None
    notes: str = field(default="", compare=False)

    def reads(self, file_name: str) -> bool:
        """Whether this row reads the bundle file ``file_name``."""
        return self.match.search(file_name) is not None if self.match is not None else file_name == self.file

    def argv_for(self, python: str) -> list[str]:
        """The argv with :data:`PYTHON` replaced by ``python``."""
        return [python if a == PYTHON else a for a in self.argv]


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
SYSFS_PCI_FILE = "sysfs_pci.txt"
SYSFS_INFINIBAND_FILE = "sysfs_infiniband.txt"
SYSFS_NUMA_FILE = "sysfs_numa.txt"
IBSTATUS_FILE = "ibstatus.txt"
LSCPU_TEXT_FILE = "lscpu.txt"
#: two samples of every RDMA port's counters, taken around the standard level's GPU work (fleetdx.probes.sysfs)
SYSFS_IB_COUNTERS_FILE = "sysfs_infiniband_counters.txt"
PERFQUERY_FILE = "perfquery_-x.txt"
IBDIAGNET_FILE = "ibdiagnet.txt"
DCGM_HEALTH_FILE = "dcgmi_health_-c.txt"
#: ``dcgmi diag -r <level> -j`` outputs (``dcgmi_diag_-r2_-j.json``); text outputs captured by hand too
DCGM_DIAG_MATCH = re.compile(r"^dcgmi_diag_-r[1-4].*\.(json|txt)$")
#: DCGM run levels fleetdx runs (``collect --dcgm N``): 1 seconds, 2 about two minutes, 3 about 30 minutes (DCGM
#: user guide, "Run Levels"); level 4 (hours) is left to the operator
DCGM_LEVELS = (1, 2, 3)
#: per run level, the hard deadline of ``dcgmi diag`` in seconds: several times the guide's durations, because
#: a hung plugin (DCGM issues #136, #247: the pcie test hanging on H100/B200) is itself the finding
DCGM_DIAG_TIMEOUT_S = {1: 180.0, 2: 900.0, 3: 3600.0}
DCGM_HEALTH_TIMEOUT_S = 60.0

#: ``--query-gpu`` fields, exactly the list of the captured fixture (tests/fixtures/hosts/README.md)
QUERY_GPU_FIELDS = (
    "index,name,uuid,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
    "pcie.link.width.max,clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,temperature.gpu,power.draw,"
    "power.limit,memory.total,memory.used,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
    "driver_version"
)
QUERY_APPS_FIELDS = "pid,process_name,used_memory,gpu_bus_id"
QUERY_REMAP_FIELDS = (
    "gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure"
)

#: the micro-benchmark's "not applicable" exit code (no CUDA device), agreed with probes/microbench.py
MICROBENCH_SKIP_EXIT = 4
MICROBENCH_MODULE = "fleetdx.probes.microbench"
#: intra-node nccl-tests sweep: 8 B to 1 GiB, doubling (nccl-tests README usage example)
NCCL_SWEEP_COLLECTIVE = Collective.ALL_REDUCE
NCCL_SWEEP_TIMEOUT_S = 300.0

#: nccl-tests outputs: ``<collective>_perf...`` (NVIDIA/nccl-tests src/*.cu); ``-h`` help is not a run
NCCL_TESTS_MATCH = re.compile(rf"^({'|'.join(c.value for c in Collective)})_perf(?!.*_-h\.txt$).*\.(txt|json)$")
NCCL_LOG_MATCH = re.compile(r"(nccl_debug|NCCL_DEBUG).*\.(txt|log)$")


class NamedNcclTests(Contract):
    """One nccl-tests output of a bundle: its file name and parsed report (an item of ``NodeFacts.nccl_tests``)."""

    file: str
    report: NcclTestsReport


class NamedNcclLog(Contract):
    """One NCCL_DEBUG=INFO log of a bundle: its file name and parsed log (an item of ``NodeFacts.nccl_logs``)."""

    file: str
    log: NcclLog


class NamedDcgmDiag(Contract):
    """One ``dcgmi diag`` output of a bundle: its file name and parsed run (an item of ``NodeFacts.dcgm_diag``)."""

    file: str
    diag: DcgmDiag


class NamedDcgmHealth(Contract):
    """One ``dcgmi health -c`` output of a bundle (an item of ``NodeFacts.dcgm_health``)."""

    file: str
    health: DcgmHealth


def _named(named: type[Contract], parsed: type[BaseModel], key: str) -> Callable[[str, BaseModel], list[Any]]:
    """A parser's ``each``: one ``named(file=FILE, key=PARSED)`` item (the bundle's list of outputs of one kind)."""

    def each(file_name: str, value: BaseModel) -> list[Any]:
        assert isinstance(value, parsed)
        return [named.model_validate({"file": file_name, key: value})]

    return each


def _microbench_each(file_name: str, report: BaseModel) -> list[Any]:
    assert isinstance(report, MicrobenchReport)
    return list(report.gpus)


_Q, _S, _SYS, _FILE = Level.QUICK, Level.STANDARD, ProbeSource.SYSFS, ProbeSource.FILE

#: every probe, in priority order per ``fact`` (see :class:`ProbeSpec`)
CATALOG: tuple[ProbeSpec, ...] = (
    ProbeSpec(SMI_LIST_FILE, ("nvidia-smi", "-L"), _Q),
    ProbeSpec(SMI_XML_FILE, ("nvidia-smi", "-q", "-x"), _Q, timeout_s=30, parser=SMI_XML, fact="smi"),
    ProbeSpec(
        QUERY_GPU_FILE,
        ("nvidia-smi", f"--query-gpu={QUERY_GPU_FIELDS}", "--format=csv"),
        _Q,
        parser=SMI_CSV,
        fact="query_gpu",
    ),
    ProbeSpec(
        COMPUTE_APPS_FILE,
        ("nvidia-smi", f"--query-compute-apps={QUERY_APPS_FIELDS}", "--format=csv"),
        _Q,
        parser=SMI_CSV,
        fact="compute_apps",
    ),
    ProbeSpec(
        REMAPPED_ROWS_FILE,
        ("nvidia-smi", f"--query-remapped-rows={QUERY_REMAP_FIELDS}", "--format=csv"),
        _Q,
        parser=SMI_CSV,
        fact="remapped_rows",
    ),
    ProbeSpec(TOPO_FILE, ("nvidia-smi", "topo", "-m"), _Q, parser=TOPO, fact="topo"),
    ProbeSpec(P2P_FILE, ("nvidia-smi", "topo", "-p2p", "r"), _Q, parser=P2P, fact="p2p"),
    ProbeSpec(LSCPU_FILE, ("lscpu", "-J"), _Q, timeout_s=10, parser=LSCPU, fact="cpu"),
    ProbeSpec(LSCPU_TEXT_FILE, source=_FILE, parser=LSCPU, fact="cpu"),
    ProbeSpec(NUMACTL_FILE, ("numactl", "-H"), _Q, timeout_s=10, parser=NUMACTL, fact="numa"),
    ProbeSpec(SYSFS_NUMA_FILE, level=_Q, source=_SYS, parser=NUMACTL, fact="numa"),
    ProbeSpec(IBSTAT_FILE, ("ibstat",), _Q, parser=IBSTAT, fact="ib"),
    ProbeSpec(IBSTATUS_FILE, source=_FILE, parser=IBSTAT, fact="ib"),
    ProbeSpec(SYSFS_INFINIBAND_FILE, level=_Q, source=_SYS, parser=IBSTAT, fact="ib"),
    ProbeSpec(SYSFS_PCI_FILE, level=_Q, source=_SYS),
    ProbeSpec(
        SYSFS_IB_COUNTERS_FILE,
        level=_S,
        source=_SYS,
        parser=IB_COUNTERS,
        fact="ib_counters",
        notes="two samples, before and after the standard level's GPU work (at least IB_SAMPLE_MIN_S apart)",
    ),
    ProbeSpec(PERFQUERY_FILE, source=_FILE, parser=PERFQUERY, fact="ib_perfquery"),
    ProbeSpec(IBDIAGNET_FILE, source=_FILE, parser=IBDIAGNET, fact="ibdiagnet"),
    ProbeSpec(
        DCGM_HEALTH_FILE,
        source=_FILE,
        timeout_s=DCGM_HEALTH_TIMEOUT_S,
        parser=DCGM_HEALTH,
        fact="dcgm_health",
        each=_named(NamedDcgmHealth, DcgmHealth, "health"),
        notes="run with dcgm_probes() when collect is given a DCGM level",
    ),
    ProbeSpec(
        "dcgmi_diag_-r<level>_-j.json",
        source=_FILE,
        parser=DCGM_DIAG,
        fact="dcgm_diag",
        each=_named(NamedDcgmDiag, DcgmDiag, "diag"),
        match=DCGM_DIAG_MATCH,
        notes="opt-in (collect --dcgm LEVEL, the retest path): dcgm_probes() builds the argv",
    ),
    ProbeSpec(DMESG_FILE, ("dmesg",), _Q, timeout_s=10, parser=XID, fact="xids", output_filter=OutputFilter.XID_LINES),
    ProbeSpec(UNAME_FILE, ("uname", "-a"), _Q, timeout_s=5),
    ProbeSpec(
        MICROBENCH_FILE,
        (PYTHON, "-m", MICROBENCH_MODULE),
        _S,
        timeout_s=180.0,
        parser=MICROBENCH,
        fact="microbench",
        each=_microbench_each,
        skip_exit_code=MICROBENCH_SKIP_EXIT,
        notes="a child process, so torch (3.4 s to import) never loads in the collecting process",
    ),
    ProbeSpec(
        "<collective>_perf_*.txt",
        level=_S,
        timeout_s=NCCL_SWEEP_TIMEOUT_S,
        parser=NCCL_TESTS,
        fact="nccl_tests",
        each=_named(NamedNcclTests, NcclTestsReport, "report"),
        match=NCCL_TESTS_MATCH,
        notes="the intra-node sweep's argv depends on the node: nccl_sweep_probe() builds it",
    ),
    ProbeSpec(
        "*NCCL_DEBUG*.txt",
        source=_FILE,
        parser=NCCL_LOG,
        fact="nccl_logs",
        each=_named(NamedNcclLog, NcclLog, "log"),
        match=NCCL_LOG_MATCH,
    ),
)


def parsers() -> list[Parser]:
    """Every parser of the catalog, once each, in catalog order (the kinds of ``fleetdx parse``)."""
    return list({spec.parser.kind: spec.parser for spec in CATALOG if spec.parser is not None}.values())


def parser_named(kind: str) -> Parser:
    """The catalog's parser of ``kind``. Raises ``KeyError`` for an unknown kind."""
    for p in parsers():
        if p.kind == kind:
            return p
    raise KeyError(kind)


def rows_reading(file_name: str) -> list[ProbeSpec]:
    """The rows that read the bundle file ``file_name`` (exact names before families); ``[]`` for a file
    fleetdx keeps but does not parse (``nvidia-smi.txt``, NCCL XML dumps). A nccl-tests run with
    ``NCCL_DEBUG`` in its name is read by both the nccl-tests and the NCCL log rows."""
    exact = [s for s in CATALOG if s.match is None and s.file == file_name]
    return exact or [s for s in CATALOG if s.match is not None and s.reads(file_name)]


def commands(level: Level) -> Iterator[ProbeSpec]:
    """The rows whose command is run at collection level ``level`` (``quick`` rows run at every level)."""
    levels = {Level.QUICK} if level is Level.QUICK else {Level.QUICK, level, Level.STANDARD}
    for spec in CATALOG:
        if spec.source is ProbeSource.COMMAND and spec.argv and spec.level in levels:
            yield spec


def nccl_sweep_options(gpus: int) -> NcclTestsOptions:
    """The sweep's nccl-tests options: 8 B to 1 GiB doubling on ``gpus`` GPUs of one process, nccl-tests'
    default data check (no ``-c``), under :data:`NCCL_SWEEP_TIMEOUT_S`. Raises ``ValueError`` for
    ``gpus < 1``."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    return NcclTestsOptions(
        min_bytes="8", max_bytes="1G", step_factor=2, gpus=gpus, check=None, timeout_s=NCCL_SWEEP_TIMEOUT_S
    )


def nccl_sweep_probe(binary: str, gpus: int) -> ProbeSpec:
    """The catalog's nccl-tests row made concrete for a node: ``all_reduce_perf -b 8 -e 1G -f 2 -g <gpus>``
    (one process driving every GPU of the node), written to ``all_reduce_perf_-b8_-e1G_-f2_-g<gpus>.txt``;
    the argv is :func:`fleetdx.probes.nccl_tests_cmd.build_argv`'s with no optional feature."""
    opts = nccl_sweep_options(gpus)
    family = next(s for s in CATALOG if s.fact == "nccl_tests")
    return ProbeSpec(
        f"{NCCL_SWEEP_COLLECTIVE.binary}_-b{opts.min_bytes}_-e{opts.max_bytes}_-f{opts.step_factor}_-g{opts.gpus}.txt",
        tuple(build_argv(binary, opts, Features())),
        Level.STANDARD,
        timeout_s=opts.timeout_s,
        parser=family.parser,
        fact=family.fact,
        each=family.each,
    )


def dcgm_probes(level: int) -> list[ProbeSpec]:
    """The DCGM rows made concrete for run level ``level``: ``dcgmi diag -r <level> -j`` under
    :data:`DCGM_DIAG_TIMEOUT_S` (written to ``dcgmi_diag_-r<level>_-j.json``), then ``dcgmi health -c``.
    Levels 2 and 3 take minutes: they belong to a retest, never to a prolog. Raises ``ValueError`` for a level
    not in :data:`DCGM_LEVELS`."""
    if level not in DCGM_LEVELS:
        raise ValueError(f"DCGM run level must be one of {DCGM_LEVELS}, got {level}")
    diag = next(s for s in CATALOG if s.fact == "dcgm_diag")
    health = next(s for s in CATALOG if s.fact == "dcgm_health")
    return [
        ProbeSpec(
            f"dcgmi_diag_-r{level}_-j.json",
            ("dcgmi", "diag", "-r", str(level), "-j"),
            Level.STANDARD,
            timeout_s=DCGM_DIAG_TIMEOUT_S[level],
            parser=diag.parser,
            fact=diag.fact,
            each=diag.each,
        ),
        ProbeSpec(
            health.file,
            ("dcgmi", "health", "-c"),
            Level.STANDARD,
            timeout_s=DCGM_HEALTH_TIMEOUT_S,
            parser=health.parser,
            fact=health.fact,
            each=health.each,
        ),
    ]


#: the micro-benchmark's module as older releases named it, so their bundles still replay
_OLD_MICROBENCH_MODULES = ("probes.microbench",)


def spec_for_argv(argv: list[str]) -> ProbeSpec | None:
    """The row whose command is exactly ``argv`` (the micro-benchmark whatever the interpreter path), or
    ``None``."""
    for spec in CATALOG:
        if not spec.argv:
            continue
        if spec.argv[0] == PYTHON:
            if (
                len(argv) == len(spec.argv)
                and argv[1:2] == ["-m"]
                and argv[2] in (spec.argv[2], *_OLD_MICROBENCH_MODULES)
            ):
                return spec
        elif list(spec.argv) == argv:
            return spec
    return None


def file_name_for_argv(argv: list[str]) -> str:
    """Bundle file name stem for an argv not in the catalog: the program's base name, then each argument,
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
