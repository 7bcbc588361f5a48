"""The store on SQLite and on a real PostgreSQL (``postgres`` marker, FLEETDX_TEST_PG_URL): round trips,
idempotence, history queries, raw output compression, concurrent writers, and clear errors."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy import delete, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import db_cmd
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, Schedule
from fleetdx.orchestrator.store import (
    DatabaseUnreachable,
    NodeHistory,
    RunNotFound,
    SchemaOutdated,
    Store,
    StoreError,
)
from fleetdx.orchestrator.store import engine as engine_mod
from fleetdx.orchestrator.store import store as store_mod
from fleetdx.orchestrator.store.migrate import head_revision
from fleetdx.orchestrator.store.models import FindingNodeRow, FindingRow, NodeRow, RawOutputRow, RunRow
from fleetdx.orchestrator.store.settings import resolve_db_url, resolve_spool_dir, user_data_dir
from fleetdx.probes.contracts import Level, Severity, Verdict
from tests.store_samples import (
    DOWN_PG_URL,
    GPU01,
    GPU02,
    GPU03,
    NCCL_FILE,
    NODE_A,
    NODE_B,
    SMI_XML,
    TOPO,
    bandwidth_raw,
    bandwidth_run,
    full_preflight_run,
    migrated,
    pair_run,
    preflight_raw,
    preflight_run,
    write_runs,
)

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0  # 2025-11-22T08:26:40Z


def count(store: Store, column: InstrumentedAttribute[int]) -> int:
    with Session(store.engine) as s:
        return int(s.scalar(select(func.count(column))) or 0)


# -- round trips -----------------------------------------------------------------------------------------
def test_preflight_report_round_trips(store: Store) -> None:
    report = preflight_run("pf-1", T0)
    assert store.save_report(report, preflight_raw()) is True
    assert store.get_run("pf-1") == report


def test_bandwidth_report_round_trips_with_its_curve(store: Store) -> None:
    report = bandwidth_run("bw-1", T0, degraded=False)
    store.save_report(report)
    got = store.get_run("bw-1")
    assert got == report
    # the last out-of-place row of 08_..._healthy.txt: 134217728 B, 1916.4 us, 70.04 / 122.57 GB/s
    last = got.curves[0].points[-1]
    assert (last.size, last.time_us, last.algbw_gbps, last.busbw_gbps) == (134217728, 1916.4, 70.04, 122.57)


def test_raw_outputs_are_kept_compressed_and_exact(store: Store) -> None:
    store.save_report(preflight_run("pf-1", T0), preflight_raw())
    raw = store.get_raw("pf-1", "h100-vm-idle")
    assert raw["nvidia-smi_topo_-m.txt"].encode() == TOPO.read_bytes()
    assert raw["nvidia-smi_topo_-m.txt"].startswith("\t\x1b[4mGPU0\tCPU Affinity")  # ESC[4m kept
    assert raw["nvidia-smi_-q_-x.xml"].encode() == SMI_XML.read_bytes()
    with Session(store.engine) as s:
        row = s.scalars(select(RawOutputRow).where(RawOutputRow.file_name == "nvidia-smi_-q_-x.xml")).one()
        xml = SMI_XML.read_bytes()
        assert row.size == len(xml) == 26945
        assert row.sha256 == hashlib.sha256(xml).hexdigest()
        assert row.encoding == "zlib"
        assert len(row.data) < len(xml) // 4  # nvidia-smi XML is mostly tags and whitespace


def test_corrupted_raw_output_is_detected(store: Store) -> None:
    store.save_report(preflight_run("pf-1", T0), preflight_raw())
    with Session(store.engine) as s, s.begin():
        row = s.scalars(select(RawOutputRow).where(RawOutputRow.file_name == "nvidia-smi_topo_-m.txt")).one()
        row.sha256 = "0" * 64
    with pytest.raises(StoreError, match="sha256"):
        store.get_raw("pf-1", "h100-vm-idle")


def test_saving_a_run_twice_stores_it_once(store: Store) -> None:
    report = bandwidth_run("bw-1", T0, degraded=True)
    assert store.save_report(report, bandwidth_raw(True)) is True
    assert store.save_report(report, bandwidth_raw(True)) is False
    assert count(store, RunRow.id) == 1
    assert count(store, FindingRow.id) == 2


def test_raw_output_of_a_host_outside_the_nodes_is_kept(store: Store) -> None:
    # a bundle collected from a host the report does not list (e.g. the head node) is evidence too
    raw = {**preflight_raw(), "head-node": {"nvidia-smi_topo_-m.txt": TOPO.read_text()}}
    assert store.save_report(preflight_run("pf-1", T0), raw) is True
    assert store.get_raw("pf-1", "head-node") == raw["head-node"]
    assert store.get_run("pf-1").nodes[0].host == "h100-vm-idle" and len(store.get_run("pf-1").nodes) == 1


def test_a_host_twice_in_the_nodes_is_rejected(store: Store) -> None:
    report = preflight_run("pf-1", T0)
    twice = report.model_copy(update={"nodes": report.nodes * 2})
    with pytest.raises(StoreError, match="appears twice"):
        store.save_report(twice)
    assert count(store, RunRow.id) == 0


def test_unknown_run_is_an_error(store: Store) -> None:
    with pytest.raises(RunNotFound, match="nope"):
        store.get_run("nope")


# -- queries ---------------------------------------------------------------------------------------------
@pytest.fixture
def history(store: Store) -> Store:
    """Three runs: a healthy bandwidth run, a pre-flight of another host, then a degraded bandwidth run."""
    store.save_report(bandwidth_run("bw-healthy", T0, degraded=False), bandwidth_raw(False))
    store.save_report(preflight_run("pf-1", T0 + 60), preflight_raw())
    store.save_report(bandwidth_run("bw-degraded", T0 + 3600, degraded=True), bandwidth_raw(True))
    return store


def test_list_runs_newest_first_with_counts(history: Store) -> None:
    runs = history.list_runs()
    assert [r.run_id for r in runs] == ["bw-degraded", "pf-1", "bw-healthy"]
    assert [(r.node_count, r.finding_count) for r in runs] == [(2, 2), (1, 1), (2, 0)]
    assert runs[0].verdict is Verdict.CRITICAL and runs[0].exit_code == 2
    assert [r.run_id for r in history.list_runs(limit=1)] == ["bw-degraded"]


def test_node_history_shows_the_nodes_findings_over_time(history: Store) -> None:
    entries = history.node_history(NODE_A)
    assert [(e.run_id, e.verdict) for e in entries] == [
        ("bw-degraded", Verdict.CRITICAL),
        ("bw-healthy", Verdict.OK),
    ]
    assert [(f.code, f.node) for f in entries[0].findings] == [(FindingCode.NCCL_BUSBW_LOW, NODE_A)]
    assert entries[1].findings == []
    assert len(history.node_history(NODE_A, limit=1)) == 1
    assert history.node_history("never-seen") == []


def test_recent_busbw_gives_each_runs_peak_newest_first(history: Store) -> None:
    points = history.recent_busbw(NODE_B, "all_reduce")
    # peaks of the stored rows: 5.83 GB/s at 16 MiB (09_..._degraded), 122.57 GB/s at 128 MiB (08_..._healthy)
    assert [(p.run_id, p.peak_busbw_gbps, p.peak_size) for p in points] == [
        ("bw-degraded", 5.83, 16777216),
        ("bw-healthy", 122.57, 134217728),
    ]
    assert points[0].nodes == [NODE_A, NODE_B] and points[0].nranks == 8
    assert history.recent_busbw(NODE_B, "all_gather") == []
    assert history.recent_busbw("h100-vm-idle", "all_reduce") == []
    assert len(history.recent_busbw(NODE_A, "all_reduce", limit=1)) == 1


def test_find_findings_filters(history: Store) -> None:
    low = history.find_findings(code=FindingCode.NCCL_BUSBW_LOW)
    assert sorted(r.finding.node or "" for r in low) == [NODE_A, NODE_B]
    assert {r.run_id for r in low} == {"bw-degraded"}
    warn = history.find_findings(severity=Severity.WARNING)
    assert [(r.run_id, r.finding.subject) for r in warn] == [("pf-1", "GPU0")]
    assert history.find_findings(code=FindingCode.GPU_XID) == []
    assert len(history.find_findings(host=NODE_B, severity=Severity.CRITICAL)) == 1


# -- many writers at once lose nothing ------------------------------------------------------------------
def test_concurrent_threads_lose_nothing(migrated_url: str) -> None:
    url = migrated_url
    threads, per_thread = 4, 8
    results: dict[int, list[bool]] = {}

    def work(i: int) -> None:
        results[i] = write_runs(url, f"t{i}", per_thread)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert all(r == [True] * per_thread for r in results.values()) and len(results) == threads
    with Store.open(url) as s:
        assert count(s, RunRow.id) == threads * per_thread
        assert count(s, NodeRow.id) == 2 * threads * per_thread
        assert count(s, RawOutputRow.id) == threads * per_thread
        assert s.get_raw("t3-7", NODE_A)[NCCL_FILE] == bandwidth_raw(True)[NODE_A][NCCL_FILE]


@pytest.mark.slow
def test_concurrent_processes_lose_nothing(migrated_url: str, process_pool_context: Any) -> None:
    url = migrated_url
    procs, per_proc = 4, 8
    with process_pool_context.Pool(procs) as pool:
        results = pool.starmap(write_runs, [(url, f"p{i}", per_proc) for i in range(procs)], chunksize=1)
    assert results == [[True] * per_proc] * procs
    with Store.open(url) as s:
        assert count(s, RunRow.id) == procs * per_proc
        assert count(s, FindingRow.id) == 2 * procs * per_proc
        assert {r.run_id for r in s.list_runs(limit=100)} == {
            f"p{i}-{j}" for i in range(procs) for j in range(per_proc)
        }


@pytest.mark.slow
def test_concurrent_saves_of_one_run_store_it_once(migrated_url: str, process_pool_context: Any) -> None:
    url = migrated_url
    procs = 4
    with process_pool_context.Pool(procs) as pool:
        results = pool.starmap(write_runs, [(url, "same", 1, True)] * procs, chunksize=1)
    assert sorted(r[0] for r in results) == [False] * (procs - 1) + [True]
    with Store.open(url) as s:
        assert count(s, RunRow.id) == 1


# -- opening: URLs, schema, unreachable databases ---------------------------------------------------------
def test_sqlite_file_is_created_and_migrated_on_first_use(sqlite_url: str) -> None:
    with Store.open(sqlite_url) as s:
        assert s.revision() == head_revision()
    assert Path(sqlite_url.removeprefix("sqlite:///")).is_file()


@pytest.mark.postgres
def test_postgres_without_schema_asks_for_db_upgrade(pg_url: str) -> None:
    with pytest.raises(SchemaOutdated, match="fleetdx db upgrade"):
        Store.open(pg_url)
    with Store.open(migrated(pg_url)) as s:
        assert s.revision() == head_revision()


def test_unreachable_postgres_names_host_port_and_reason() -> None:
    url = DOWN_PG_URL.replace("fleetdx@", "fleetdx:s3cret@")
    with pytest.raises(DatabaseUnreachable) as e:
        Store.open(url)
    msg = str(e.value)
    assert "127.0.0.1" in msg and "port 1" in msg and "Connection refused" in msg
    assert "s3cret" not in msg and "\n" not in msg


def test_sqlite_path_that_cannot_exist_is_unreachable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(DatabaseUnreachable, match="cannot create"):
        Store.open(f"sqlite:///{tmp_path / 'a-file' / 'fleetdx.db'}")


def test_bad_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot use database URL"):
        Store.open("nosuchdb://somewhere/x")


def test_default_locations_follow_flag_then_env_then_user_data_dir(tmp_path: Path) -> None:
    assert resolve_db_url("sqlite:///x.db", env={"FLEETDX_DB_URL": "postgresql://h/db"}) == "sqlite:///x.db"
    assert resolve_db_url(None, env={"FLEETDX_DB_URL": "postgresql://h/db"}) == "postgresql://h/db"
    assert resolve_db_url(None, env={}) == f"sqlite:///{user_data_dir() / 'fleetdx.db'}"
    assert resolve_spool_dir(None, env={"FLEETDX_SPOOL_DIR": str(tmp_path)}) == tmp_path
    assert resolve_spool_dir(None, env={}) == user_data_dir() / "spool"


# -- fleetdx history ---------------------------------------------------------------------------------------
def history_cli() -> typer.Typer:
    app = typer.Typer()
    db_cmd.register(app)
    return app


def test_cli_history_json_is_the_node_history(history: Store, migrated_url: str) -> None:
    result = CliRunner().invoke(history_cli(), ["history", NODE_B, "--db", migrated_url, "--json"])
    assert result.exit_code == 0, result.output
    parsed = NodeHistory.model_validate_json(result.stdout)
    assert parsed.host == NODE_B
    assert [(e.run_id, e.verdict) for e in parsed.entries] == [
        ("bw-degraded", Verdict.CRITICAL),
        ("bw-healthy", Verdict.OK),
    ]


def test_cli_history_table_lists_findings(history: Store, migrated_url: str) -> None:
    args = ["history", "h100-vm-idle", "--db", migrated_url]
    result = CliRunner().invoke(history_cli(), args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "pf-1" in result.output and "WARNING" in result.output and "TOPO_AFFINITY_MISSING" in result.output
    assert "2025-11-22 08:27:40" in result.output  # started_at T0 + 60 s, in UTC


def test_cli_history_with_the_database_down_is_one_line() -> None:
    result = CliRunner().invoke(history_cli(), ["history", NODE_A, "--db", DOWN_PG_URL])
    assert result.exit_code == 3
    assert "cannot reach database" in result.output and "Traceback" not in result.output


# -- SQLite lock contention: wait, retry, then say so ----------------------------------------------------
@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_mod, "SQLITE_BUSY_TIMEOUT_MS", 100)
    monkeypatch.setattr(store_mod, "RETRY_BACKOFF_S", 0.01)


def hold_write_lock(url: str) -> sqlite3.Connection:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_sqlite_write_retries_while_another_writer_holds_the_lock(sqlite_url: str, short_busy_timeout: None) -> None:
    with Store.open(sqlite_url) as store:
        holder = hold_write_lock(sqlite_url)
        # released after 0.3 s; the retries (5 x 0.1 s busy_timeout plus >= 0.3 s backoff) outlast it
        timer = threading.Timer(0.3, holder.rollback)
        timer.start()
        try:
            assert store.save_report(preflight_run("pf-1", T0), preflight_raw()) is True
        finally:
            timer.join()
            holder.close()
        assert [r.run_id for r in store.list_runs()] == ["pf-1"]


def test_sqlite_lock_never_released_is_reported(sqlite_url: str, short_busy_timeout: None) -> None:
    with Store.open(sqlite_url) as store:
        holder = hold_write_lock(sqlite_url)
        try:
            with pytest.raises(DatabaseUnreachable, match="stayed locked by other writers"):
                store.save_report(preflight_run("pf-1", T0))
        finally:
            holder.close()


# -- a finding's hosts: pair and group findings ----------------------------------------------------------
@pytest.fixture
def pairs(store: Store) -> Store:
    """A bandwidth run with a hung pair (gpu01, gpu02), then a pre-flight at level full naming the pair
    backwards (gpu02, gpu01)."""
    store.save_report(pair_run("bw-pair", T0))
    store.save_report(full_preflight_run("pf-full", T0 + 60))
    return store


def test_pair_findings_round_trip_with_their_hosts_in_order(pairs: Store) -> None:
    bw = pairs.get_run("bw-pair")
    assert bw == pair_run("bw-pair", T0).model_copy(update={"finished_at": bw.finished_at})
    assert [(f.code, f.nodes) for f in bw.findings] == [
        (FindingCode.NCCL_TEST_HANG, [GPU01, GPU02]),
        (FindingCode.STRAGGLER_NODE, [GPU03]),
        (FindingCode.NCCL_TESTS_NOT_MPI, []),
    ]
    pf = pairs.get_run("pf-full")
    assert pf.findings[0].nodes == [GPU02, GPU01]
    assert (pf.level, pf.schedule) == (Level.FULL, Schedule.QUICK)
    assert pf.nodes[2].unjudged is not None and pf.nodes[2].unjudged.startswith("no GPU inventory")


def test_every_report_round_trips_exactly(store: Store) -> None:
    for report in (pair_run("bw-pair", T0), full_preflight_run("pf-full", T0 + 60)):
        store.save_report(report)
        assert store.get_run(report.run_id) == report


def test_pair_finding_is_in_the_history_of_both_hosts(pairs: Store) -> None:
    for host in (GPU01, GPU02):
        entries = pairs.node_history(host)
        assert [e.run_id for e in entries] == ["pf-full", "bw-pair"]
        assert [(f.code, f.nodes) for f in entries[1].findings] == [(FindingCode.NCCL_TEST_HANG, [GPU01, GPU02])]
        assert [(f.code, f.nodes) for f in entries[0].findings] == [(FindingCode.NCCL_BUSBW_LOW, [GPU02, GPU01])]
        assert entries[1].verdict is Verdict.CRITICAL  # a hang counts against each member
    straggler = pairs.node_history(GPU03)
    assert [f.code for f in straggler[1].findings] == [FindingCode.STRAGGLER_NODE]  # not the pair's hang
    assert straggler[0].findings == [] and straggler[0].verdict is Verdict.UNKNOWN  # unjudged in pf-full


def test_history_keeps_level_and_schedule_apart(pairs: Store) -> None:
    entries = pairs.node_history(GPU01)
    assert [(e.kind, e.level, e.schedule) for e in entries] == [
        (RunKind.PREFLIGHT, Level.FULL, Schedule.QUICK),
        (RunKind.BANDWIDTH, None, Schedule.LOCALISE),
    ]
    runs = pairs.list_runs()
    assert [(r.run_id, r.level, r.schedule, r.finding_count) for r in runs] == [
        ("pf-full", Level.FULL, Schedule.QUICK, 1),
        ("bw-pair", None, Schedule.LOCALISE, 3),
    ]


def test_find_findings_by_host_matches_every_host_of_a_pair(pairs: Store) -> None:
    for host in (GPU01, GPU02):
        found = pairs.find_findings(host=host)
        assert [(r.run_id, r.finding.code) for r in found] == [
            ("pf-full", FindingCode.NCCL_BUSBW_LOW),
            ("bw-pair", FindingCode.NCCL_TEST_HANG),
        ]
    hang = pairs.find_findings(host=GPU02, code=FindingCode.NCCL_TEST_HANG, severity=Severity.CRITICAL)
    assert [r.finding.nodes for r in hang] == [[GPU01, GPU02]]
    assert [r.finding.code for r in pairs.find_findings(host=GPU03)] == [FindingCode.STRAGGLER_NODE]
    assert pairs.find_findings(host="gpu99") == []
    assert len(pairs.find_findings()) == 4  # the run-wide finding too


def test_a_host_named_twice_by_one_finding_finds_it_once(store: Store) -> None:
    twice = Finding(
        code=FindingCode.NCCL_TEST_FAILED,
        severity=Severity.CRITICAL,
        nodes=[GPU01, GPU01],
        subject="loopback",
        message="gpu01 paired with itself failed",
    )
    report = pair_run("bw-twice", T0).model_copy(update={"findings": [twice]})
    store.save_report(report)
    assert store.get_run("bw-twice").findings[0].nodes == [GPU01, GPU01]
    assert len(store.find_findings(host=GPU01)) == 1
    assert len(store.node_history(GPU01)[0].findings) == 1


def test_deleting_a_run_deletes_its_findings_hosts(pairs: Store) -> None:
    with Session(pairs.engine) as s, s.begin():
        s.execute(delete(RunRow).where(RunRow.run_id == "bw-pair"))  # the database's ON DELETE CASCADE
    assert count(pairs, FindingRow.id) == 1
    assert count(pairs, FindingNodeRow.finding_pk) == 2  # pf-full's pair finding
