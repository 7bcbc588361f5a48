"""The parsed facts of one node, read from one bundle: what every diagnosis rule consumes.

:func:`node_facts` (written with the bundle work) reads each raw file of a bundle with its parser; a file that
fails to parse becomes a :class:`ParseFailure` (the raw text stays in the bundle), never an exception.
"""

from __future__ import annotations

from pydantic import Field

from probes.contracts import Contract
from probes.parsers.ibstat import IbReport
from probes.parsers.lscpu import CpuInfo
from probes.parsers.nccl_log import NcclLog
from probes.parsers.nccl_tests import NcclTestsReport
from probes.parsers.numactl import NumaTopology
from probes.parsers.p2p import P2PMatrix
from probes.parsers.smi_csv import SmiCsv
from probes.parsers.smi_xml import SmiReport
from probes.parsers.topo import TopoMatrix
from probes.parsers.xid import XidLog
from probes.runner import RunStatus


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


class Microbench(Contract):
    """GPU micro-benchmark figures for one GPU (``torch_microbench.json``); ``None`` where not measured.

    Units: TFLOP/s (1e12 FLOP/s) for GEMM, GB/s (1e9 B/s) for copies; the device-to-device copy counts
    bytes read plus bytes written.
    """

    gpu_index: int | None = None
    gpu_name: str | None = None
    gemm_bf16_tflops: float | None = None
    gemm_fp16_tflops: float | None = None
    gemm_fp32_tflops: float | None = None
    d2d_gbps: float | None = None
    h2d_pinned_gbps: float | None = None
    d2h_pinned_gbps: float | None = None
    h2d_pageable_gbps: float | None = None
    d2h_pageable_gbps: float | None = None


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
