"""Inputs of the HTML report tests (tests/test_htmlreport*.py): real report contracts read from
tests/fixtures/htmlreport/ (see its README), real busbw curves parsed from nccl-tests captures, the real step
traces of tests/fixtures/traces/cpu-gloo-slow-data-rank2/, and the hostile and synthetic variants the tests
make from them (named as such)."""

from __future__ import annotations

from pathlib import Path

from fleetdx.orchestrator.judgement import EvidenceLine, Finding, FindingCode
from fleetdx.orchestrator.postmortem.contracts import PostmortemReport, TimelineEntry
from fleetdx.orchestrator.report import BusbwCurve, BusbwPoint, CurveBackend, NodeHistory, NodeHistoryEntry, RunKind
from fleetdx.probes.contracts import Job, SchedulerKind, Severity, Verdict
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests

ROOT = Path(__file__).parent
HTML_FIXTURES = ROOT / "fixtures" / "htmlreport"
NCCL = Path("/work/shared/fixtures/nccl")
STEP_TRACES = ROOT / "fixtures" / "traces" / "cpu-gloo-slow-data-rank2"

PM_TIMEOUT = (
    HTML_FIXTURES / "postmortem-01_watchdog-allreduce-seq1580_rank-prefix_last-enqueued-completed_llamafactory.json"
)
PM_IB = HTML_FIXTURES / "postmortem-22_nccl-ib-local-catastrophic-error_mpirun-timestamp-rank-stdout-prefix.json"
PM_XID = HTML_FIXTURES / "postmortem-32_kernel-xid45-caused-by-previous-xid149-xid145_nvlink_python3-pids.json"
POSTMORTEMS = [PM_TIMEOUT, PM_IB, PM_XID]

#: nccl-tests captures with one two-node all_reduce table each, and the out-of-place busbw of their largest
#: row, read off the files: (file, hosts, largest size B, busbw GB/s)
NCCL_CURVES = [
    ("08_all_reduce_GH200x8_2node_slingshot_healthy.txt", ("nid005471", "nid005487"), 134217728, 122.57),
    ("21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt", ("test1", "test2"), 1073741824, 6.44),
    (
        "15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt",
        ("nvidiatools-29-workload", "nvidiatools-30-workload"),
        8589934592,
        8.11,
    ),
]

#: a log line as an attacker would write it: it closes a tag, opens a script, and tries an event handler
HOSTILE = '</code></td><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def load_postmortem(path: Path) -> PostmortemReport:
    return PostmortemReport.model_validate_json(path.read_text())


def nccl_curves() -> list[BusbwCurve]:
    """One curve per capture of :data:`NCCL_CURVES` (out-of-place rows), on the hosts its devices name."""
    out = []
    for name, _hosts, _size, _busbw in NCCL_CURVES:
        run = parse_nccl_tests((NCCL / name).read_text()).runs[0]
        assert run.collective is not None and run.nranks is not None
        hosts = sorted({d.host for d in run.devices})
        points = [
            BusbwPoint(
                size=r.size,
                time_us=r.out_of_place.time_us,
                algbw_gbps=r.out_of_place.algbw_gbps,
                busbw_gbps=r.out_of_place.busbw_gbps,
            )
            for r in run.rows
            if r.out_of_place.time_us is not None
            and r.out_of_place.algbw_gbps is not None
            and r.out_of_place.busbw_gbps is not None
        ]
        out.append(
            BusbwCurve(
                collective=run.collective,
                nodes=hosts,
                nranks=run.nranks,
                backend=CurveBackend.NCCL_TESTS,
                points=points,
            )
        )
    return out


def history_for(host: str, text: str = "GPU 3 throttled: HW slowdown (clock event reasons)") -> NodeHistory:
    """A made-up store history of ``host``: a pre-flight that warned, a week before (named synthetic in the
    run id)."""
    return NodeHistory(
        host=host,
        entries=[
            NodeHistoryEntry(
                run_id="synthetic-preflight-1",
                kind=RunKind.PREFLIGHT,
                started_at=1_559_000_000.0,
                verdict=Verdict.WARNING,
                job_id=None,
                findings=[
                    Finding(
                        code=FindingCode.GPU_CLOCKS_THROTTLED,
                        severity=Severity.WARNING,
                        nodes=[host],
                        subject="GPU 3",
                        message=text,
                    )
                ],
            )
        ],
    )


def hostile_postmortem() -> PostmortemReport:
    """The real IB report with :data:`HOSTILE` in every text the page shows (hostile, made up here)."""
    rep = load_postmortem(PM_IB)
    c = rep.causes[0]
    cause = c.model_copy(
        update={
            "host": "node" + HOSTILE,
            "gpu": HOSTILE,
            "time": HOSTILE,
            "nodes": [*c.nodes, "evil" + HOSTILE],
            "message": "message " + HOSTILE,
            "action": "action " + HOSTILE,
            "evidence": [EvidenceLine(file="logs/" + HOSTILE, line=7, text="line " + HOSTILE), *c.evidence],
        }
    )
    timeline = [
        TimelineEntry(time=HOSTILE, host="host" + HOSTILE, rank=3, kind="kind" + HOSTILE, text="event " + HOSTILE),
        *rep.timeline,
    ]
    job = Job(scheduler=SchedulerKind.SLURM, job_id="4711" + HOSTILE, name=HOSTILE, nodes=["n1", HOSTILE])
    return rep.model_copy(
        update={
            "findings": [cause, *rep.findings[1:]],
            "timeline": timeline,
            "missing_evidence": ["missing " + HOSTILE],
            "job": job,
        }
    )


def synthetic_huge_postmortem(ranks: int = 1024, hosts: int = 128, events: int = 200_000) -> PostmortemReport:
    """A synthetic report the size of a 1,024-rank job: ``events`` timeline entries over ``ranks`` ranks on
    ``hosts`` hosts (ISO stamps), 300 causes, the first with 50,000 evidence lines of 12 kB each. The line
    shapes are the real watchdog line of joblog 01; the data is made up (synthetic)."""
    base = load_postmortem(PM_TIMEOUT)
    line = base.causes[0].evidence[0].text
    long_line = line + " " + "x" * 12_000
    timeline = [
        TimelineEntry(
            time=f"2026-11-22T10:{(i // 60_000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}Z",
            host=f"synthetic-gpu{(i % ranks) // (ranks // hosts):03d}",
            rank=i % ranks,
            kind="watchdog-timeout" if i % 7 else "work-progress",
            text=line,
        )
        for i in range(events)
    ]
    first = base.causes[0].model_copy(
        update={"evidence": [EvidenceLine(file="synthetic.log", line=i + 1, text=long_line) for i in range(50_000)]}
    )
    causes = [first] + [base.causes[0].model_copy(update={"message": f"synthetic cause {i}"}) for i in range(299)]
    return base.model_copy(update={"timeline": timeline, "findings": causes})
