"""Bandwidth evidence of a postmortem (``PostmortemReport.bandwidth``): the nccl-tests results of the bundles
given, and the blamed hosts' stored curves. The nccl-tests captures are real (tests/fixtures/nccl/, sources in
/work/shared/fixtures/SOURCES-nccl.md), copied into bundles made here; the failing job's log line is synthetic;
the stored bandwidth run is the sample report of tests/store_samples.py (curves of the real GH200 captures)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from fleetdx.orchestrator.postmortem.history import with_history
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import Bundles, LogFiles
from fleetdx.orchestrator.report import CurveBackend
from fleetdx.orchestrator.store import Store
from fleetdx.probes.contracts import Collective
from tests.store_samples import NODE_A, NODE_B, bandwidth_run
from tests.test_postmortem_store import _app

NCCL = Path(__file__).parent / "fixtures" / "nccl"
#: one A100 node, 8 GPUs (its devices print "on localhost"); largest row read off the file (line 50):
#: 8589934592 B, out-of-place busbw 235.26 GB/s
ONE_NODE = NCCL / "01_all_reduce_A100x8_superbench_oldfmt_c0.txt"
#: two GH200 nodes nid005471 + nid005487; largest row (line 42): 134217728 B, busbw 122.57 GB/s
TWO_NODES = NCCL / "08_all_reduce_GH200x8_2node_slingshot_healthy.txt"
XID = "[Fri Mar 21 07:10:00 2025] NVRM: Xid (PCI:0000:4c:00): 79, pid=200, name=python, GPU has fallen off the bus.\n"


def _bundle(tmp_path: Path, host: str, captures: dict[str, Path]) -> Path:
    d = tmp_path / host
    d.mkdir()
    (d / "dmesg.txt").write_text(XID)
    for name, src in captures.items():
        shutil.copyfile(src, d / name)
    return d


def test_bundles_nccl_tests_results_become_curves_per_host(tmp_path: Path) -> None:
    b1 = _bundle(tmp_path, "gpu7", {"all_reduce_perf_-b8_-e8G_-f2_-g8.txt": ONE_NODE})
    b2 = _bundle(tmp_path, NODE_A, {"all_reduce_perf_-b8_-e128M_-f2.txt": TWO_NODES})
    report = run_postmortem([Bundles([b1, b2])])
    assert report.causes[0].code.value == "GPU_HW_FAULT"  # the bundles' kernel logs are still read
    one, two = report.bandwidth
    assert one.source == f"bundle {b1}/all_reduce_perf_-b8_-e8G_-f2_-g8.txt" and not one.simulated
    c = one.curve
    # the one-node run prints "on localhost": the bundle's host is the node
    assert (c.collective, c.nodes, c.nranks, c.backend) == (Collective.ALL_REDUCE, ["gpu7"], 8, CurveBackend.NCCL_TESTS)
    assert (c.points[-1].size, c.points[-1].busbw_gbps) == (8589934592, 235.26)
    assert [p.size for p in c.points] == sorted(p.size for p in c.points)
    assert two.curve.nodes == [NODE_A, NODE_B]
    assert (two.curve.points[-1].size, two.curve.points[-1].busbw_gbps) == (134217728, 122.57)


def test_a_bundle_without_nccl_tests_gives_no_curve(tmp_path: Path) -> None:
    assert run_postmortem([Bundles([_bundle(tmp_path, "gpu7", {})])]).bandwidth == []


def test_an_unreadable_nccl_tests_file_is_missing_evidence_not_a_curve(tmp_path: Path) -> None:
    d = _bundle(tmp_path, "gpu7", {})
    (d / "all_reduce_perf_-g8.txt").write_text("nothing nccl-tests would print\n")
    report = run_postmortem([Bundles([d])])
    assert report.bandwidth == []
    assert any("all_reduce_perf_-g8.txt: nccl-tests output not read" in m for m in report.missing_evidence)


def test_the_blamed_host_s_stored_curves_join_the_report(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-job.log"
    log.write_text(f"{NODE_A}: [rank3]: RuntimeError: CUDA error: unspecified launch failure\n")
    report = run_postmortem([LogFiles([log])])
    assert report.causes[0].host == NODE_A and report.bandwidth == []
    with Store.open(f"sqlite:///{tmp_path / 'f.db'}") as store:
        store.save_report(bandwidth_run("bw-old", 1_700_000_000.0, degraded=False))
        store.save_report(bandwidth_run("bw-new", 1_700_086_400.0, degraded=True))
        got = with_history(report, store)
    (b,) = got.bandwidth  # the newest run's curve only
    assert b.source == "store run bw-new (bandwidth)" and b.started_at == 1_700_086_400.0
    assert b.curve.nodes == [NODE_A, NODE_B] and b.curve.points[-1].busbw_gbps == 5.43


def test_cli_json_carries_the_bundles_curves_and_the_html_draws_them(tmp_path: Path) -> None:
    b = _bundle(tmp_path, NODE_A, {"all_reduce_perf_-b8_-e128M_-f2.txt": TWO_NODES})
    out = tmp_path / "pm.html"
    res = CliRunner().invoke(
        _app(),
        ["postmortem", "--bundles", str(b), "--json", "--db", f"sqlite:///{tmp_path / 'f.db'}", "--html", str(out)],
    )
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    (bw,) = doc["bandwidth"]
    assert bw["curve"]["nodes"] == [NODE_A, NODE_B] and bw["source"].endswith("all_reduce_perf_-b8_-e128M_-f2.txt")
    page = out.read_text()
    assert 'id="bandwidth"' in page and 'data-figure="curves"' in page and 'data-figure="heatmap-0"' in page
    assert "all_reduce_perf_-b8_-e128M_-f2.txt" in page[page.index('id="bandwidth"') :]
