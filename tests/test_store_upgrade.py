"""A database written by the previous release (schema revision 0001, contracts version 1) upgraded by
`fleetdx db upgrade` (migration 0002) loses nothing: every run, node, probe result, finding, recommendation,
raw output and curve survives; each finding gets its hosts, the bandwidth screen's pair and group findings
split from their comma-joined subject; a bandwidth run's schedule moves out of ``level``; and the history of
every host of an old pair finding shows it.

``tests/fixtures/store/legacy_v1.sqlite`` was made by the previous release's own code
(``make_legacy_v1_db.py`` and README.md beside it). The PostgreSQL variant copies its rows, as they are, into
a PostgreSQL database at revision 0001 and upgrades that.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, create_engine, select, text

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.report import RunKind, Schedule
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import NodeHistory, Store
from fleetdx.orchestrator.store.migrate import downgrade, head_revision
from fleetdx.orchestrator.store.migrate import upgrade as migrate_to
from fleetdx.probes.contracts import Level, Verdict
from tests.store_samples import (
    DEGRADED,
    DEGRADED_ROWS,
    HEALTHY,
    HEALTHY_ROWS,
    NCCL_FILE,
    NODE_A,
    NODE_B,
    SMI_XML,
    STORE_FIXTURES,
    TOPO,
    bandwidth_run,
    preflight_run,
)

pytest_plugins = ["tests.pgfixtures"]

LEGACY_DB = STORE_FIXTURES / "legacy_v1.sqlite"
T0 = 1_763_800_000.0  # the generator's T0
GPU = [f"gpu{i:02d}" for i in range(1, 13)]  # gpu01 .. gpu12

#: tables of revision 0001, in an order that respects their foreign keys
TABLES_0001 = [
    "runs",
    "nodes",
    "probe_results",
    "raw_outputs",
    "findings",
    "recommendations",
    "busbw_curves",
    "busbw_curve_nodes",
]
#: what the generator stored (its JSON summary, README.md): run -> (kind, level, nodes, [(code, node, subject)])
LEGACY_RUNS: dict[str, tuple[str, str | None, list[str], list[tuple[str, str | None, str]]]] = {
    "pf-quick": ("preflight", "quick", ["h100-vm-idle"], [("TOPO_AFFINITY_MISSING", "h100-vm-idle", "GPU0")]),
    "bw-samples-healthy": ("bandwidth", None, [NODE_A, NODE_B], []),
    "bw-samples-degraded": (
        "bandwidth",
        None,
        [NODE_A, NODE_B],
        [
            ("NCCL_BUSBW_LOW", NODE_A, f"{NODE_A}+{NODE_B}"),
            ("NCCL_BUSBW_LOW", NODE_B, f"{NODE_A}+{NODE_B}"),
        ],
    ),
    "bw-localise": (
        "bandwidth",
        "localise",
        GPU[:9],
        [
            ("NCCL_TEST_HANG", None, "gpu01,gpu02"),
            ("NCCL_WRONG_RESULTS", None, "gpu07,gpu08,gpu09"),
            ("NCCL_BUSBW_LOW", None, "gpu03,gpu04"),
        ],
    ),
    "bw-roundrobin": (
        "bandwidth",
        "roundrobin",
        ["gpu05", "gpu06", "gpu07"],
        [("NCCL_TEST_FAILED", None, "gpu06,gpu07")],
    ),
    "pf-full": ("preflight", "full", ["gpu11", "gpu12"], [("NCCL_TEST_HANG", None, "gpu11,gpu12")]),
}
#: each run's findings after the upgrade: (code, nodes)
UPGRADED_FINDINGS: dict[str, list[tuple[FindingCode, list[str]]]] = {
    "pf-quick": [(FindingCode.TOPO_AFFINITY_MISSING, ["h100-vm-idle"])],
    "bw-samples-healthy": [],
    "bw-samples-degraded": [(FindingCode.NCCL_BUSBW_LOW, [NODE_A]), (FindingCode.NCCL_BUSBW_LOW, [NODE_B])],
    "bw-localise": [
        (FindingCode.NCCL_TEST_HANG, ["gpu01", "gpu02"]),
        (FindingCode.NCCL_WRONG_RESULTS, ["gpu07", "gpu08", "gpu09"]),
        (FindingCode.NCCL_BUSBW_LOW, ["gpu03", "gpu04"]),
    ],
    "bw-roundrobin": [(FindingCode.NCCL_TEST_FAILED, ["gpu06", "gpu07"])],
    "pf-full": [(FindingCode.NCCL_TEST_HANG, ["gpu11", "gpu12"])],
}


def fleetdx(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command line (``python -m fleetdx``), as a user runs it (tables 200 columns wide)."""
    env = {**os.environ, "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "fleetdx", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def row_counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES_0001}
    finally:
        engine.dispose()


@pytest.fixture
def legacy_sqlite(tmp_path: Path) -> str:
    """A copy of the previous release's database, still at revision 0001."""
    path = tmp_path / "legacy.sqlite"
    shutil.copy(LEGACY_DB, path)
    return f"sqlite:///{path}"


@pytest.fixture
def legacy_pg(pg_url: str) -> str:
    """A PostgreSQL database at revision 0001 holding the previous release's rows, copied unchanged from
    the SQLite fixture (ids included; the id sequences then moved past them)."""
    engine = create_engine(pg_url)
    source = create_engine(f"sqlite:///{LEGACY_DB}")
    try:
        migrate_to(engine, "0001")
        src_meta, dst_meta = MetaData(), MetaData()
        src_meta.reflect(source)
        dst_meta.reflect(engine)
        with source.connect() as src, engine.begin() as dst:
            for name in TABLES_0001:
                rows = [dict(r._mapping) for r in src.execute(select(src_meta.tables[name]))]
                if rows:
                    dst.execute(dst_meta.tables[name].insert(), rows)
                if "id" in dst_meta.tables[name].c:
                    dst.execute(text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), max(id)) FROM {name}"))
    finally:
        source.dispose()
        engine.dispose()
    return pg_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def legacy_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("legacy_sqlite" if request.param == "sqlite" else "legacy_pg"))


def test_the_fixture_is_the_previous_releases_schema() -> None:
    """What the test upgrades: revision 0001, findings.node, a pair finding with node NULL, a bandwidth run's
    schedule in level, and contracts version 1."""
    conn = sqlite3.connect(f"file:{LEGACY_DB}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0001",)]
        assert {r[1] for r in conn.execute("PRAGMA table_info(findings)")} >= {"node", "subject"}
        assert "finding_nodes" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        runs = conn.execute("SELECT run_id, kind, level, schema_version FROM runs ORDER BY id").fetchall()
        assert [(r, k, lv) for r, k, lv, _ in runs] == [(r, k, lv) for r, (k, lv, _, _) in LEGACY_RUNS.items()]
        assert {v for *_, v in runs} == {1}
        findings = conn.execute(
            "SELECT r.run_id, f.code, f.node, f.subject FROM findings f JOIN runs r ON r.id = f.run_pk ORDER BY f.id"
        ).fetchall()
        expected = [(run, *f) for run, (_, _, _, fs) in LEGACY_RUNS.items() for f in fs]
        assert findings == expected
    finally:
        conn.close()


def test_db_upgrade_keeps_every_row(legacy_url: str) -> None:
    before = row_counts(legacy_url)
    assert before == {
        "runs": 6,
        "nodes": 19,
        "probe_results": 7,
        "raw_outputs": 5,
        "findings": 8,
        "recommendations": 1,
        "busbw_curves": 4,
        "busbw_curve_nodes": 8,
    }
    result = fleetdx("db", "upgrade", "--db", legacy_url)
    assert result.returncode == 0, result.stderr
    assert f"schema 0001 -> {head_revision()}" in result.stdout
    assert row_counts(legacy_url) == before
    with Store.open(legacy_url) as store:
        assert store.revision() == head_revision()
        summaries = {s.run_id: s for s in store.list_runs(limit=100)}
        assert set(summaries) == set(LEGACY_RUNS)
        for run_id, (kind, _, nodes, findings) in LEGACY_RUNS.items():
            report = store.get_run(run_id)
            assert report.kind is RunKind(kind)
            assert [n.host for n in report.nodes] == nodes
            assert [(f.code, f.nodes) for f in report.findings] == UPGRADED_FINDINGS[run_id]
            assert [f.subject for f in report.findings] == [s for _, _, s in findings]  # subjects unchanged
            assert (summaries[run_id].node_count, summaries[run_id].finding_count) == (len(nodes), len(findings))


def test_upgraded_runs_equal_the_reports_the_previous_release_saved(legacy_url: str) -> None:
    assert fleetdx("db", "upgrade", "--db", legacy_url).returncode == 0
    with Store.open(legacy_url) as store:
        # the previous release built these three with tests/store_samples.py; its samples are this one's
        assert store.get_run("pf-quick") == preflight_run("pf-quick", T0)
        assert store.get_run("bw-samples-healthy") == bandwidth_run("bw-samples-healthy", T0 + 60, degraded=False)
        assert store.get_run("bw-samples-degraded") == bandwidth_run("bw-samples-degraded", T0 + 120, degraded=True)


def test_level_and_schedule_are_split(legacy_url: str) -> None:
    assert fleetdx("db", "upgrade", "--db", legacy_url).returncode == 0
    with Store.open(legacy_url) as store:
        got = {r.run_id: (r.level, r.schedule) for r in store.list_runs(limit=100)}
    assert got == {
        "pf-quick": (Level.QUICK, None),
        "bw-samples-healthy": (None, None),
        "bw-samples-degraded": (None, None),
        "bw-localise": (None, Schedule.LOCALISE),
        "bw-roundrobin": (None, Schedule.ROUNDROBIN),
        "pf-full": (Level.FULL, None),
    }


def test_raw_outputs_curves_probes_and_recommendations_survive(legacy_url: str) -> None:
    assert fleetdx("db", "upgrade", "--db", legacy_url).returncode == 0
    with Store.open(legacy_url) as store:
        pf = store.get_raw("pf-quick", "h100-vm-idle")
        assert pf["nvidia-smi_topo_-m.txt"].encode() == TOPO.read_bytes()
        assert pf["nvidia-smi_-q_-x.xml"].encode() == SMI_XML.read_bytes()
        assert store.get_raw("bw-samples-healthy", NODE_A)[NCCL_FILE].encode() == HEALTHY.read_bytes()
        assert store.get_raw("bw-samples-degraded", NODE_A)[NCCL_FILE].encode() == DEGRADED.read_bytes()
        log = store.get_raw("bw-localise", "gpu01")["bandwidth.log"]
        assert log == "round 0: gpu01,gpu02 all_reduce: no result after 120 s\n"

        def rows(run_id: str) -> list[tuple[int, float, float, float]]:
            (c,) = store.get_run(run_id).curves
            return [(p.size, p.time_us, p.algbw_gbps, p.busbw_gbps) for p in c.points]

        assert rows("bw-samples-healthy") == HEALTHY_ROWS and rows("bw-samples-degraded") == DEGRADED_ROWS
        assert [p.peak_busbw_gbps for p in store.recent_busbw(NODE_B, "all_reduce")] == [5.83, 122.57]
        assert [(c.nodes, len(c.points)) for c in store.get_run("bw-localise").curves] == [(["gpu03", "gpu04"], 3)]
        assert [c.nodes for c in store.get_run("bw-roundrobin").curves] == [["gpu05", "gpu07"]]

        full = store.get_run("pf-full")
        assert [[p.name for p in n.probes] for n in full.nodes] == [["nvidia-smi -q -x", "cross-node-bandwidth"]] * 2
        assert full.verdict is Verdict.CRITICAL and [n.verdict for n in full.nodes] == [Verdict.CRITICAL] * 2
        (rec,) = store.get_run("pf-quick").recommendations
        assert rec.subject == "local rank 0" and rec.data == {"gpu": 0, "cpus": "0-15", "numa_node": 0}


def test_history_of_both_hosts_of_an_old_pair_finding_shows_it(legacy_url: str) -> None:
    assert fleetdx("db", "upgrade", "--db", legacy_url).returncode == 0
    for host, run_id, code, nodes in [
        ("gpu01", "bw-localise", "NCCL_TEST_HANG", ["gpu01", "gpu02"]),
        ("gpu02", "bw-localise", "NCCL_TEST_HANG", ["gpu01", "gpu02"]),
        ("gpu08", "bw-localise", "NCCL_WRONG_RESULTS", ["gpu07", "gpu08", "gpu09"]),
        ("gpu04", "bw-localise", "NCCL_BUSBW_LOW", ["gpu03", "gpu04"]),
        ("gpu12", "pf-full", "NCCL_TEST_HANG", ["gpu11", "gpu12"]),
    ]:
        result = fleetdx("history", host, "--db", legacy_url, "--json")
        assert result.returncode == 0, result.stderr
        history = NodeHistory.model_validate_json(result.stdout)
        entry = next(e for e in history.entries if e.run_id == run_id)
        assert [(f.code.value, f.nodes) for f in entry.findings] == [(code, nodes)], host
    # gpu07 is in two runs: the wrong results of bw-localise and the failed pair of bw-roundrobin
    result = fleetdx("history", "gpu07", "--db", legacy_url, "--json")
    history = NodeHistory.model_validate_json(result.stdout)
    assert [(e.run_id, [f.code for f in e.findings]) for e in history.entries] == [
        ("bw-roundrobin", [FindingCode.NCCL_TEST_FAILED]),
        ("bw-localise", [FindingCode.NCCL_WRONG_RESULTS]),
    ]
    table = fleetdx("history", "gpu06", "--db", legacy_url)
    assert table.returncode == 0 and "NCCL_TEST_FAILED gpu06,gpu07" in table.stdout


def test_http_api_finds_old_pair_findings_from_each_host(legacy_url: str) -> None:
    assert fleetdx("db", "upgrade", "--db", legacy_url).returncode == 0
    with Store.open(legacy_url) as store:
        client = TestClient(create_app(store))
        for host in ("gpu01", "gpu02"):
            body = client.get(f"/nodes/{host}/history").json()
            assert [f["nodes"] for f in body["entries"][0]["findings"]] == [["gpu01", "gpu02"]]
            found = client.get("/findings", params={"host": host, "code": "NCCL_TEST_HANG"}).json()
            assert [(x["run_id"], x["finding"]["nodes"]) for x in found] == [("bw-localise", ["gpu01", "gpu02"])]


def test_downgrade_restores_the_old_columns_and_upgrade_again_is_the_same(legacy_url: str) -> None:
    assert fleetdx("db", "upgrade", "--db", legacy_url).returncode == 0
    with Store.open(legacy_url) as store:
        upgraded = {r.run_id: store.get_run(r.run_id) for r in store.list_runs(limit=100)}
        downgrade(store.engine, "0001")
        assert store.revision() == "0001"
    engine = create_engine(legacy_url)
    try:
        with engine.connect() as conn:
            findings = conn.execute(
                text(
                    "SELECT r.run_id, f.code, f.node, f.subject FROM findings f JOIN runs r ON r.id = f.run_pk "
                    "ORDER BY f.id"
                )
            ).all()
            levels = conn.execute(text("SELECT run_id, kind, level FROM runs ORDER BY id")).all()
    finally:
        engine.dispose()
    # the previous release's rows again: one host back in node, pairs NULL, schedules back in level
    assert [tuple(r) for r in findings] == [(run, *f) for run, (_, _, _, fs) in LEGACY_RUNS.items() for f in fs]
    assert [tuple(r) for r in levels] == [(run, kind, level) for run, (kind, level, _, _) in LEGACY_RUNS.items()]
    assert row_counts(legacy_url)["findings"] == 8
    with Store.open(legacy_url, check_schema=False) as store:
        store.upgrade()
        assert {r.run_id: store.get_run(r.run_id) for r in store.list_runs(limit=100)} == upgraded


def test_an_old_sqlite_file_is_upgraded_on_first_use(legacy_sqlite: str) -> None:
    """A user's own SQLite file needs no `fleetdx db upgrade`: the first command migrates it."""
    result = fleetdx("history", "gpu02", "--db", legacy_sqlite, "--json")
    assert result.returncode == 0, result.stderr
    (entry,) = NodeHistory.model_validate_json(result.stdout).entries
    assert [(f.code, f.nodes) for f in entry.findings] == [(FindingCode.NCCL_TEST_HANG, ["gpu01", "gpu02"])]
    assert row_counts(legacy_sqlite)["findings"] == 8
