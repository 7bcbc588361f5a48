"""Run reports for the store tests, built from facts read off the fixture files in tests/fixtures/store/.

- ``08_all_reduce_GH200x8_2node_slingshot_healthy.txt``: all_reduce_perf on nid005471 + nid005487 (ranks 0-3
  and 4-7), 8 ranks; its last out-of-place rows are 16777216 B 461.7 us 36.34/63.59 GB/s ...
  134217728 B 1916.4 us 70.04/122.57 GB/s.
- ``09_..._noCXIhook_degraded.txt``: the same two nodes without the CXI hook; last out-of-place rows
  16777216 B 5036.9 us 3.33/5.83 GB/s ... 134217728 B 43293 us 3.10/5.43 GB/s.
- ``h100-vm-idle_nvidia-smi_topo_-m.txt``: ``nvidia-smi topo -m`` of one H100 VM, with its ESC[4m/ESC[0m
  bytes; ``h100-vm-idle_nvidia-smi_-q_-x.xml``: its ``nvidia-smi -q -x``.
"""

from __future__ import annotations

from pathlib import Path

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import (
    BusbwCurve,
    BusbwPoint,
    NodeReport,
    ProbeSummary,
    Recommendation,
    RunKind,
    RunReport,
    Schedule,
    assemble_report,
)
from fleetdx.probes.contracts import Level, RunStatus, Severity, Verdict

STORE_FIXTURES = Path(__file__).parent / "fixtures" / "store"
HEALTHY = STORE_FIXTURES / "08_all_reduce_GH200x8_2node_slingshot_healthy.txt"
DEGRADED = STORE_FIXTURES / "09_all_reduce_GH200x8_2node_slingshot_noCXIhook_degraded.txt"
TOPO = STORE_FIXTURES / "h100-vm-idle_nvidia-smi_topo_-m.txt"
SMI_XML = STORE_FIXTURES / "h100-vm-idle_nvidia-smi_-q_-x.xml"

NODE_A, NODE_B = "nid005471", "nid005487"

#: a TCP port where nothing listens (port 1, tcpmux, is never served here): "the database is down"
DOWN_PG_URL = "postgresql+psycopg://fleetdx@127.0.0.1:1/fleetdx?connect_timeout=3"
NCCL_FILE = "all_reduce_perf_-b8_-e128M_-f2_-g4.txt"

#: (size B, time us, algbw GB/s, busbw GB/s): out-of-place columns of the last 4 rows, read off the files
HEALTHY_ROWS = [
    (16777216, 461.7, 36.34, 63.59),
    (33554432, 686.5, 48.88, 85.54),
    (67108864, 1090.5, 61.54, 107.69),
    (134217728, 1916.4, 70.04, 122.57),
]
DEGRADED_ROWS = [
    (16777216, 5036.9, 3.33, 5.83),
    (33554432, 17388.0, 1.93, 3.38),
    (67108864, 21253.0, 3.16, 5.53),
    (134217728, 43293.0, 3.10, 5.43),
]


def read_text(path: Path) -> str:
    """The file's exact text (no newline translation: ESC bytes and CRs kept)."""
    return path.read_bytes().decode("utf-8")


def curve(rows: list[tuple[int, float, float, float]]) -> BusbwCurve:
    return BusbwCurve(
        collective="all_reduce",
        nodes=[NODE_A, NODE_B],
        nranks=8,
        backend="nccl-tests",
        points=[BusbwPoint(size=s, time_us=t, algbw_gbps=a, busbw_gbps=b) for s, t, a, b in rows],
    )


def bandwidth_run(run_id: str, started_at: float, degraded: bool) -> RunReport:
    """A bandwidth run over the two GH200 nodes; the degraded one finds NCCL_BUSBW_LOW on both nodes."""
    findings = []
    if degraded:
        findings = [
            Finding(
                code=FindingCode.NCCL_BUSBW_LOW,
                severity=Severity.CRITICAL,
                node=host,
                subject=f"{NODE_A}+{NODE_B}",
                message="all_reduce peak busbw 5.83 GB/s, 4.7% of this pair's history (122.57 GB/s)",
                details={"peak_busbw_gbps": 5.83, "history_busbw_gbps": [122.57], "file": NCCL_FILE},
            )
            for host in (NODE_A, NODE_B)
        ]
    verdict = Verdict.CRITICAL if degraded else Verdict.OK
    return RunReport(
        run_id=run_id,
        kind=RunKind.BANDWIDTH,
        started_at=started_at,
        finished_at=started_at + 42.5,
        verdict=verdict,
        exit_code=int(verdict),
        nodes=[NodeReport(host=h, verdict=verdict) for h in (NODE_A, NODE_B)],
        findings=findings,
        exclude="nid[005471,005487]" if degraded else "",
        curves=[curve(DEGRADED_ROWS if degraded else HEALTHY_ROWS)],
    )


def bandwidth_raw(degraded: bool) -> dict[str, dict[str, str]]:
    text = read_text(DEGRADED if degraded else HEALTHY)
    return {NODE_A: {NCCL_FILE: text}}


def preflight_run(run_id: str, started_at: float, host: str = "h100-vm-idle") -> RunReport:
    """A pre-flight of one H100 VM with a warning, an info-less probe list and a recommendation."""
    return RunReport(
        run_id=run_id,
        kind=RunKind.PREFLIGHT,
        started_at=started_at,
        finished_at=started_at + 3.25,
        level="quick",
        verdict=Verdict.WARNING,
        exit_code=1,
        nodes=[
            NodeReport(
                host=host,
                verdict=Verdict.WARNING,
                probes=[
                    ProbeSummary(name="nvidia-smi topo -m", status=RunStatus.OK, duration_s=0.049),
                    ProbeSummary(name="nvidia-smi -q -x", status=RunStatus.OK, duration_s=0.118),
                    ProbeSummary(
                        name="ibstat", status=RunStatus.SKIPPED, error="ibstat: not installed (no InfiniBand)"
                    ),
                ],
            )
        ],
        findings=[
            Finding(
                code=FindingCode.TOPO_AFFINITY_MISSING,
                severity=Severity.WARNING,
                node=host,
                subject="GPU0",
                message="GPU0 has no GPU NUMA ID (N/A) in nvidia-smi topo -m",
                details={"cells": ["0-15", "0", "N/A"], "file": "nvidia-smi_topo_-m.txt"},
            )
        ],
        recommendations=[
            Recommendation(
                node=host,
                kind="rank-binding",
                subject="local rank 0",
                message="bind local rank 0 to CPUs 0-15 (NUMA node 0)",
                data={"gpu": 0, "cpus": "0-15", "numa_node": 0},
            )
        ],
    )


def preflight_raw(host: str = "h100-vm-idle") -> dict[str, dict[str, str]]:
    return {host: {"nvidia-smi_topo_-m.txt": read_text(TOPO), "nvidia-smi_-q_-x.xml": read_text(SMI_XML)}}


#: the hosts of :func:`pair_run`: GPU01 and GPU02 hang together, GPU03 is slow on its own
GPU01, GPU02, GPU03 = "gpu01", "gpu02", "gpu03"


def pair_run(run_id: str, started_at: float) -> RunReport:
    """A ``fleetdx bandwidth`` run (schedule localise) over three hosts, made as the command makes it
    (:func:`assemble_report`): a hung pair (one finding about GPU01 and GPU02, in that order), a straggler
    (GPU03 alone) and a run-wide finding (no host)."""
    findings = [
        Finding(
            code=FindingCode.NCCL_TEST_HANG,
            severity=Severity.CRITICAL,
            nodes=[GPU01, GPU02],
            subject=f"{GPU01},{GPU02}",
            message=f"{GPU01},{GPU02}: all_reduce did not finish (no result after 120 s)",
            details={"round": 0, "collective": "all_reduce", "nodes": [GPU01, GPU02], "error": "timeout"},
        ),
        Finding(
            code=FindingCode.STRAGGLER_NODE,
            severity=Severity.CRITICAL,
            nodes=[GPU03],
            subject=GPU03,
            message=f"{GPU03}: busbw 41.2 GB/s vs allocation median 96.5 GB/s (-57%)",
            details={"measured_gbps": 41.2, "expected_gbps": 96.5},
        ),
        Finding(
            code=FindingCode.NCCL_TESTS_NOT_MPI,
            severity=Severity.INFO,
            subject="all_reduce_perf",
            message="all_reduce_perf was built without MPI: one process per node",
        ),
    ]
    return assemble_report(
        RunKind.BANDWIDTH,
        [GPU01, GPU02, GPU03],
        findings,
        started_at=started_at,
        schedule=Schedule.LOCALISE,
        run_id=run_id,
    )


def full_preflight_run(run_id: str, started_at: float) -> RunReport:
    """A pre-flight at level full: it carries both a probe level and the bandwidth step's schedule, a
    finding about a pair whose subject does not list the hosts (the hosts are listed backwards, to show the
    order is kept), and a node that could not be judged."""
    findings = [
        Finding(
            code=FindingCode.NCCL_BUSBW_LOW,
            severity=Severity.WARNING,
            nodes=[GPU02, GPU01],
            subject="all_reduce 64 MiB",
            message="busbw 80.1 GB/s vs allocation median 96.5 GB/s (-17%)",
            details={"measured_gbps": 80.1, "expected_gbps": 96.5},
        )
    ]
    return assemble_report(
        RunKind.PREFLIGHT,
        [GPU01, GPU02, GPU03],
        findings,
        started_at=started_at,
        level=Level.FULL,
        schedule=Schedule.QUICK,
        unjudged={GPU03: "no GPU inventory: nvidia-smi_-q_-x.xml: skipped (nvidia-smi: not found on PATH)"},
        probes={GPU01: [ProbeSummary(name="nvidia-smi -q -x", status=RunStatus.OK, duration_s=0.12)]},
        run_id=run_id,
    )


def write_runs(url: str, prefix: str, count: int, same_run_id: bool = False) -> list[bool]:
    """Save ``count`` degraded bandwidth runs (with raw output) to ``url``; a process or thread entry point.
    Run ids are ``<prefix>-<i>``, or all ``shared-run`` when ``same_run_id``. Returns save_report's results.
    """
    from fleetdx.orchestrator.store import Store

    out = []
    with Store.open(url) as store:
        for i in range(count):
            run_id = "shared-run" if same_run_id else f"{prefix}-{i}"
            out.append(store.save_report(bandwidth_run(run_id, 1.7e9 + i, True), bandwidth_raw(True)))
    return out


def migrated(url: str) -> str:
    """Migrate ``url`` to the newest schema, as ``fleetdx db upgrade`` does; returns ``url``."""
    from fleetdx.orchestrator.store import Store

    with Store.open(url, check_schema=False) as store:
        store.upgrade()
    return url
