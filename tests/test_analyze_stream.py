"""``fleetdx analyze`` streams bundles -> facts -> findings (issue 22 item 3): the streamed diagnosis
(:func:`diagnose_stream`, keeping of each node only its findings and the peer rules' few fields) equals the
in-memory one (:func:`diagnose` over every node's facts) on the fixture bundles and on a synthesised fleet
where the peer rules fire; the raw outputs saved are those of the directories; and the Python heap no
longer grows with each bundle's text and facts."""

from __future__ import annotations

import json
import re
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from fleetdx.orchestrator.diagnosis.base import Fleet, PeerViews, peer_view
from fleetdx.orchestrator.diagnosis.engine import PEER_RULES, RULES, diagnose
from fleetdx.orchestrator.preflight.run import analyze_bundles, report_of
from fleetdx.orchestrator.report import RunKind
from fleetdx.probes.bundle import META_FILE, read_bundle
from fleetdx.probes.catalog import MICROBENCH_FILE, TOPO_FILE
from fleetdx.probes.facts import NodeFacts, node_facts

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"
FIXTURES = sorted(p for p in BUNDLES.iterdir() if p.is_dir())


def _in_memory(dirs: list[Path], expected_gpus: int | None = None) -> dict[str, Any]:
    """The report as analyze made it before streaming: every bundle and its facts held, then diagnosed."""
    facts = [node_facts(read_bundle(d)) for d in dirs]
    source = "--gpus-per-node" if expected_gpus is not None else None
    fleet = Fleet(nodes=facts, expected_gpus_per_node=expected_gpus, expected_gpus_source=source)
    return _comparable(report_of(RunKind.ANALYZE, diagnose(fleet), started_at=0.0, level=None, simulated=False))


def _comparable(report: Any) -> dict[str, Any]:
    doc: dict[str, Any] = report.model_dump(mode="json")
    for key in ("run_id", "started_at", "finished_at"):
        doc.pop(key)
    return doc


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    meta = dst / META_FILE
    if meta.is_file():
        doc = json.loads(meta.read_text(encoding="utf-8"))
        doc["host"] = dst.name
        meta.write_text(json.dumps(doc), encoding="utf-8")
    return dst


def _fleet(root: Path, n: int) -> list[Path]:
    """``n`` bundles, each its own host: every other one a copy of the fixtures in turn, the others of the
    8-GPU topology fixtures (a GPU-count majority of 8), with varied micro-benchmark figures (peer medians:
    one node at 60 %) and one topo-03 copy with two lost NVLink bonds, so that the peer rules have something
    to say."""
    topos = [p for p in FIXTURES if p.name in ("topo-01", "topo-03", "topo-06", "topo-11")]
    dirs = []
    for i in range(n):
        src = FIXTURES[i // 2 % len(FIXTURES)] if i % 2 == 0 else topos[i // 2 % len(topos)]
        d = _copy(src, root / f"n{i:04d}")
        bench = d / MICROBENCH_FILE
        if bench.is_file():
            doc = json.loads(bench.read_text(encoding="utf-8"))
            scale = 0.6 if i == 2 else 1.0 + (i % 7 - 3) / 100
            doc = {k: v * scale if isinstance(v, float) else v for k, v in doc.items()}
            bench.write_text(json.dumps(doc), encoding="utf-8")
        if src.name == "topo-03" and i == 3:
            topo = d / TOPO_FILE
            lines = topo.read_text(encoding="utf-8").splitlines(keepends=True)
            lines[1] = re.sub(r"NV12", "NV6 ", lines[1], count=2)  # GPU0's first NVLink cells
            topo.write_text("".join(lines), encoding="utf-8")
        dirs.append(d)
    return dirs


@pytest.mark.parametrize("expected_gpus", [None, 8])
def test_fixture_bundles_give_the_same_report(expected_gpus: int | None) -> None:
    got = _comparable(analyze_bundles(FIXTURES, expected_gpus).report)
    assert got == _in_memory(FIXTURES, expected_gpus)


def test_a_synthesised_fleet_gives_the_same_report_with_peer_findings(tmp_path: Path) -> None:
    dirs = _fleet(tmp_path, 6 * len(FIXTURES) + 5)
    got = _comparable(analyze_bundles(dirs).report)
    assert got == _in_memory(dirs)
    codes = {f["code"] for f in got["findings"]}
    # the peer rules spoke: a peer median, a GPU-count majority, a peer topology
    assert {"GEMM_SLOW", "GPU_COUNT_MISMATCH", "TOPO_MISMATCH_PEERS"} <= codes
    assert any("peer_median" in f["details"] for f in got["findings"] if f["code"] == "GEMM_SLOW")


def _facts(tmp_path: Path) -> list[NodeFacts]:
    return [node_facts(read_bundle(d)) for d in _fleet(tmp_path, 4 * len(FIXTURES) + 3)]


def test_peer_rules_read_only_the_peer_fields(tmp_path: Path) -> None:
    facts = _facts(tmp_path)
    full = Fleet(nodes=facts)
    views = Fleet(nodes=[peer_view(n) for n in facts])
    shared = PeerViews()
    interned = Fleet(nodes=[shared(n) for n in facts])
    said = 0
    for rule in PEER_RULES:
        for node, view, one in zip(facts, views.nodes, interned.nodes, strict=True):
            expected = rule(node, full)
            assert rule(view, views) == expected, (rule.__name__, node.host)
            assert rule(one, interned) == expected, (rule.__name__, node.host)
            said += len(expected)
    assert said > 0
    topos = {id(n.topo) for n in interned.nodes if n.topo is not None}
    assert len(topos) < sum(n.topo is not None for n in facts)  # equal matrices are held once


def test_the_other_rules_do_not_read_the_fleet(tmp_path: Path) -> None:
    facts = _facts(tmp_path)
    full, empty = Fleet(nodes=facts), Fleet(nodes=[])
    for rule in RULES:
        if rule in PEER_RULES:
            continue
        for node in facts:
            assert rule(node, empty) == rule(node, full), (rule.__name__, node.host)


def test_raw_outputs_are_read_from_the_directories(tmp_path: Path) -> None:
    from fleetdx.orchestrator.store import Store

    dirs = FIXTURES[:4]
    result = analyze_bundles(dirs)
    assert result.bundles == {}
    expected = {b.host: b.files for b in map(read_bundle, dirs)}
    raw = result.raw()
    assert sorted(raw) == sorted(expected) and len(raw) == len(expected)
    assert {h: dict(raw[h]) for h in raw} == expected
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with Store.open(url, check_schema=False) as store:
        store.upgrade()
    with Store.open(url) as store:
        assert store.save_report(result.report, raw)
        for host, files in expected.items():
            assert store.get_raw(result.report.run_id, host) == files


def _heap_peak(dirs: list[Path]) -> int:
    tracemalloc.start()
    try:
        analyze_bundles(dirs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_heap_does_not_grow_with_each_bundle(tmp_path: Path) -> None:
    """Bundles of h100-idle (about 50 KiB of text, 150 KiB of facts each when held): the peak of the Python
    heap grows by well under that per bundle (findings, probe summaries and peer views only)."""
    src = BUNDLES / "h100-idle"
    dirs = [_copy(src, tmp_path / f"h{i:03d}") for i in range(120)]
    analyze_bundles(dirs[:4])  # warm: imports, caches
    small, large = _heap_peak(dirs[:20]), _heap_peak(dirs)
    per_bundle = (large - small) / 100
    assert per_bundle < 40 * 1024, f"{per_bundle / 1024:.1f} KiB more heap per bundle"


def test_the_report_json_is_written_in_pieces_with_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetdx.orchestrator.cli.common import model_json, print_json

    reports = [analyze_bundles(d).report for d in (FIXTURES, FIXTURES[:1], _fleet(tmp_path, 40))]
    assert len(reports[0].nodes) > 1 and len(reports[0].findings) > 1 and len(reports[1].nodes) == 1
    for report in reports:
        whole = report.model_dump_json(indent=2).encode()
        pieces = list(model_json(report, ("nodes", "findings")))
        assert b"".join(pieces) == whole
        if len(report.nodes) > 1:
            assert len(pieces) > len(report.nodes) and max(map(len, pieces)) < len(whole) / 4
        print_json(report, stream=("nodes", "findings"))
        assert capsys.readouterr().out == whole.decode() + "\n"
    # a field that is not a list of models, or not a field, is written whole
    assert b"".join(model_json(reports[0], ("verdict", "nope"))) == reports[0].model_dump_json(indent=2).encode()
