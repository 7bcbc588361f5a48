"""The parsed facts of one node, read from one bundle: what every diagnosis rule consumes.

:func:`node_facts` reads each raw file of a bundle with its parser (:func:`classify` maps file names to parser
kinds and NodeFacts fields, :data:`FILE_SLOTS` is the explicit list); a file that fails to parse becomes a
:class:`ParseFailure` (the raw text stays in the bundle), never an exception. ``numactl -H`` facts come from
``numactl_-H.txt`` or, on nodes without numactl, from the sysfs dump ``sysfs_numa.txt``; InfiniBand facts from
``ibstat.txt``, ``ibstatus.txt`` or ``sysfs_infiniband.txt``: the first that parses wins, and
:attr:`NodeFacts.sources` names it. File names are those of :mod:`fleetdx.probes.commands`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from fleetdx.probes import commands as cmd
from fleetdx.probes.commands import ParserKind
from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.ibstat import IbReport
from fleetdx.probes.parsers.lscpu import CpuInfo
from fleetdx.probes.parsers.microbench import Microbench
from fleetdx.probes.parsers.nccl_log import NcclLog
from fleetdx.probes.parsers.nccl_tests import Collective, NcclTestsReport
from fleetdx.probes.parsers.numactl import NumaTopology
from fleetdx.probes.parsers.p2p import P2PMatrix
from fleetdx.probes.parsers.smi_csv import SmiCsv
from fleetdx.probes.parsers.smi_xml import SmiReport
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.probes.parsers.xid import XidLog
from fleetdx.probes.runner import RunStatus

if TYPE_CHECKING:
    from fleetdx.probes.bundle import BundleData


class ProbeRecord(Contract):
    """One command of the bundle: how it ran (from ``meta.json``, or ``ok`` for a bare raw file)."""

    name: str  #: file name in the bundle, e.g. "nvidia-smi_topo_-m.txt"
    status: RunStatus
    duration_s: float | None = None
    error: str | None = None  #: skip reason, exit code text or timeout message
    argv: list[str] | None = None


class ParseFailure(Contract):
    """A raw file that did not parse; the text stays in the bundle."""

    file: str
    kind: str
    line: int | None
    message: str


class NamedNcclTests(Contract):
    file: str
    report: NcclTestsReport


class NamedNcclLog(Contract):
    file: str
    log: NcclLog


class NodeFacts(Contract):
    """Everything parsed from one node's bundle. A field is ``None`` when its raw file is absent, was skipped,
    or failed to parse (then ``parse_failures`` says why)."""

    host: str
    replayed: bool = False  #: the facts come from a replayed/simulated bundle, not a live run
    probes: list[ProbeRecord] = Field(default_factory=list)
    parse_failures: list[ParseFailure] = Field(default_factory=list)
    topo: TopoMatrix | None = None
    p2p: P2PMatrix | None = None
    smi: SmiReport | None = None
    query_gpu: SmiCsv | None = None
    compute_apps: SmiCsv | None = None
    remapped_rows: SmiCsv | None = None
    numa: NumaTopology | None = None
    cpu: CpuInfo | None = None
    ib: IbReport | None = None
    xids: XidLog | None = None
    nccl_tests: list[NamedNcclTests] = Field(default_factory=list)
    nccl_logs: list[NamedNcclLog] = Field(default_factory=list)
    microbench: list[Microbench] = Field(default_factory=list)
    #: slot (a :class:`FactSlot` value) -> the bundle file that filled it, for the single-file slots
    #: (e.g. ``{"ib": "sysfs_infiniband.txt"}`` when ``ibstat`` was skipped); nccl-tests/log files carry their
    #: own names
    sources: dict[str, str] = Field(default_factory=dict)


class FactSlot(str, Enum):
    """The :class:`NodeFacts` field a raw file fills."""

    TOPO = "topo"
    P2P = "p2p"
    SMI = "smi"
    QUERY_GPU = "query_gpu"
    COMPUTE_APPS = "compute_apps"
    REMAPPED_ROWS = "remapped_rows"
    NUMA = "numa"
    CPU = "cpu"
    IB = "ib"
    XIDS = "xids"
    NCCL_TESTS = "nccl_tests"
    NCCL_LOGS = "nccl_logs"
    MICROBENCH = "microbench"


#: nccl-tests binaries' file names: ``<collective>_perf...`` (NVIDIA/nccl-tests src/*.cu; the collectives of
#: :class:`fleetdx.probes.parsers.nccl_tests.Collective`); ``-h`` help is not a run
_NCCL_TESTS_FILE = re.compile(rf"^({'|'.join(c.value for c in Collective)})_perf(?!.*_-h\.txt$).*\.(txt|json)$")
_NCCL_LOG_FILE = re.compile(r"(nccl_debug|NCCL_DEBUG).*\.(txt|log)$")

#: exact file names -> (parser kind, slot), in priority order per slot (the first present file fills it)
FILE_SLOTS: tuple[tuple[str, ParserKind, FactSlot], ...] = (
    (cmd.TOPO_FILE, ParserKind.TOPO, FactSlot.TOPO),
    (cmd.P2P_FILE, ParserKind.P2P, FactSlot.P2P),
    (cmd.SMI_XML_FILE, ParserKind.SMI_XML, FactSlot.SMI),
    (cmd.QUERY_GPU_FILE, ParserKind.SMI_CSV, FactSlot.QUERY_GPU),
    (cmd.COMPUTE_APPS_FILE, ParserKind.SMI_CSV, FactSlot.COMPUTE_APPS),
    (cmd.REMAPPED_ROWS_FILE, ParserKind.SMI_CSV, FactSlot.REMAPPED_ROWS),
    (cmd.NUMACTL_FILE, ParserKind.NUMACTL, FactSlot.NUMA),
    (cmd.SYSFS_NUMA_FILE, ParserKind.NUMACTL, FactSlot.NUMA),
    (cmd.LSCPU_FILE, ParserKind.LSCPU, FactSlot.CPU),
    (cmd.LSCPU_TEXT_FILE, ParserKind.LSCPU, FactSlot.CPU),
    (cmd.IBSTAT_FILE, ParserKind.IBSTAT, FactSlot.IB),
    (cmd.IBSTATUS_FILE, ParserKind.IBSTAT, FactSlot.IB),
    (cmd.SYSFS_INFINIBAND_FILE, ParserKind.IBSTAT, FactSlot.IB),
    (cmd.DMESG_FILE, ParserKind.XID, FactSlot.XIDS),
    (cmd.MICROBENCH_FILE, ParserKind.MICROBENCH, FactSlot.MICROBENCH),
)


def classify(name: str) -> list[tuple[ParserKind, FactSlot]]:
    """The (parser kind, slot) pairs a bundle file name feeds; ``[]`` for a file fleetdx does not parse
    (``uname_-a.txt``, ``nvidia-smi.txt``, NCCL XML dumps). A nccl-tests run with ``NCCL_DEBUG`` in its name
    feeds both the nccl-tests and the nccl-log slots."""
    exact = [(kind, slot) for fname, kind, slot in FILE_SLOTS if fname == name]
    if exact:
        return exact
    out: list[tuple[ParserKind, FactSlot]] = []
    if _NCCL_TESTS_FILE.match(name):
        out.append((ParserKind.NCCL_TESTS, FactSlot.NCCL_TESTS))
    if _NCCL_LOG_FILE.search(name):
        out.append((ParserKind.NCCL_LOG, FactSlot.NCCL_LOGS))
    return out


def _probe_records(data: BundleData) -> list[ProbeRecord]:
    return [
        ProbeRecord(
            name=c.file, status=c.status, duration_s=c.duration_s, error=c.reason, argv=c.argv or None
        )
        for c in data.commands
    ]


def _parse_one(
    parser: Callable[[str], BaseModel], kind: ParserKind, name: str, text: str
) -> BaseModel | ParseFailure:
    """The parsed model, or a ParseFailure for a ParseError (the only exception a parser may raise)."""
    try:
        return parser(text)
    except ParseError as e:
        return ParseFailure(file=name, kind=kind.value, line=e.line, message=str(e))


def node_facts(data: BundleData) -> NodeFacts:
    """Parse every recognised file of ``data`` (see :func:`classify`) into :class:`NodeFacts`.

    Files whose command did not end ``ok`` are not parsed (their status is in ``probes``), except nccl-tests
    outputs, whose parser reads failure output too. A file that fails to parse becomes a
    :class:`ParseFailure`; this function never raises for bad content. When two files feed one slot (e.g.
    ``lscpu_-J.json`` and ``lscpu.txt``) the first in :data:`FILE_SLOTS` order that parses wins.
    """
    from fleetdx.probes.parsers.microbench import MicrobenchReport
    from fleetdx.probes.parsers.registry import parser_for

    single: dict[FactSlot, Any] = {}
    failures: list[ParseFailure] = []
    tests: list[NamedNcclTests] = []
    logs: list[NamedNcclLog] = []
    bench: list[Microbench] = []
    sources: dict[str, str] = {}
    order = {fname: i for i, (fname, _, _) in enumerate(FILE_SLOTS)}
    for name in sorted(data.files, key=lambda n: (order.get(n, len(order)), n)):
        meta = data.meta_for(name)
        for kind, slot in classify(name):
            if meta is not None and meta.status is not RunStatus.OK and slot is not FactSlot.NCCL_TESTS:
                continue
            if slot in single:
                continue
            got = _parse_one(parser_for(kind, name), kind, name, data.files[name])
            if isinstance(got, ParseFailure):
                failures.append(got)
            elif slot is FactSlot.NCCL_TESTS:
                tests.append(NamedNcclTests(file=name, report=got))
            elif slot is FactSlot.NCCL_LOGS:
                logs.append(NamedNcclLog(file=name, log=got))
            elif slot is FactSlot.MICROBENCH:
                assert isinstance(got, MicrobenchReport)
                bench.extend(got.gpus)
                single[slot] = got
                sources[slot.value] = name
            else:
                single[slot] = got
                sources[slot.value] = name
    single.pop(FactSlot.MICROBENCH, None)
    return NodeFacts(
        host=data.host,
        replayed=data.replayed,
        probes=_probe_records(data),
        parse_failures=failures,
        nccl_tests=tests,
        nccl_logs=logs,
        microbench=bench,
        sources=sources,
        **{slot.value: v for slot, v in single.items()},
    )
