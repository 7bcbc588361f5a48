"""The database is down: the run's report goes to a spool file, and `fleetdx db import` loads it later
without losing or duplicating anything (SQLite and PostgreSQL)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import db_cmd
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.report import RunKind, Schedule
from fleetdx.orchestrator.store import SpoolError, Store, import_spool_file, read_spool, save_or_spool, write_spool
from fleetdx.orchestrator.store.spool import SPOOL_SUFFIX, spool_name, upgrade_v1
from fleetdx.probes.contracts import SCHEMA_VERSION
from tests.store_samples import (
    DOWN_PG_URL,
    NCCL_FILE,
    NODE_A,
    SMI_XML,
    STORE_FIXTURES,
    TOPO,
    bandwidth_raw,
    bandwidth_run,
    preflight_raw,
    preflight_run,
)

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0


def cli() -> typer.Typer:
    app = typer.Typer()
    db_cmd.register(app)
    return app


def spool_while_down(spool_dir: Path) -> list[Path]:
    """Two runs finished while the database was down; returns their spool files."""
    paths = []
    for report, raw in [
        (preflight_run("pf-down", T0), preflight_raw()),
        (bandwidth_run("bw-down", T0 + 60, degraded=True), bandwidth_raw(True)),
    ]:
        outcome = save_or_spool(DOWN_PG_URL, report, raw, spool_dir=spool_dir)
        assert not outcome.saved and outcome.spool_path is not None
        paths.append(outcome.spool_path)
    return paths


def test_unreachable_database_spools_the_report(tmp_path: Path) -> None:
    outcome = save_or_spool(DOWN_PG_URL, preflight_run("pf-down", T0), preflight_raw(), spool_dir=tmp_path)
    assert outcome.saved is False
    assert outcome.spool_path == tmp_path / f"pf-down{SPOOL_SUFFIX}"
    assert outcome.error is not None and "Connection refused" in outcome.error and "port 1" in outcome.error
    assert f"fleetdx db import {outcome.spool_path}" in outcome.message
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"pf-down{SPOOL_SUFFIX}"]  # no temporary file left
    doc = json.loads(gzip.decompress(outcome.spool_path.read_bytes()))
    assert doc["format"] == "fleetdx-spool" and doc["report"]["run_id"] == "pf-down"
    assert doc["raw"]["h100-vm-idle"]["nvidia-smi_-q_-x.xml"].encode() == SMI_XML.read_bytes()


def test_unusable_sqlite_path_spools_too(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    url = f"sqlite:///{tmp_path / 'a-file' / 'fleetdx.db'}"
    outcome = save_or_spool(url, preflight_run("pf-1", T0), spool_dir=tmp_path / "spool")
    assert not outcome.saved and outcome.spool_path is not None and outcome.spool_path.is_file()
    assert outcome.error is not None and "cannot create" in outcome.error


def test_reachable_database_saves_and_writes_no_spool(migrated_url: str, tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    outcome = save_or_spool(migrated_url, preflight_run("pf-1", T0), preflight_raw(), spool_dir=spool_dir)
    assert outcome.saved and outcome.spool_path is None and outcome.error is None
    assert not spool_dir.exists()


def test_spool_and_import_lose_nothing(migrated_url: str, tmp_path: Path) -> None:
    paths = spool_while_down(tmp_path / "spool")
    with Store.open(migrated_url) as store:
        results = [import_spool_file(store, p) for p in paths]
        assert [(r.run_id, r.inserted, r.removed) for r in results] == [
            ("pf-down", True, True),
            ("bw-down", True, True),
        ]
        assert not any(p.exists() for p in paths)  # removed after the commit
        assert store.get_run("pf-down") == preflight_run("pf-down", T0)
        assert store.get_run("bw-down") == bandwidth_run("bw-down", T0 + 60, degraded=True)
        raw = store.get_raw("pf-down", "h100-vm-idle")
        assert raw["nvidia-smi_topo_-m.txt"].encode() == TOPO.read_bytes()
        assert raw["nvidia-smi_-q_-x.xml"].encode() == SMI_XML.read_bytes()
        assert store.get_raw("bw-down", NODE_A) == bandwidth_raw(True)[NODE_A]
        assert NCCL_FILE in store.get_raw("bw-down", NODE_A)


def test_importing_twice_does_not_duplicate(migrated_url: str, tmp_path: Path) -> None:
    (path,) = spool_while_down(tmp_path / "spool")[:1]
    copy = tmp_path / "copy" / path.name
    copy.parent.mkdir()
    shutil.copy(path, copy)
    with Store.open(migrated_url) as store:
        assert import_spool_file(store, path).inserted is True
        again = import_spool_file(store, copy)
        assert again.inserted is False and again.removed is True
        assert [r.run_id for r in store.list_runs()] == ["pf-down"]


def test_cli_import_loads_a_spool_directory(migrated_url: str, tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    spool_while_down(spool_dir)
    result = CliRunner().invoke(cli(), ["db", "import", str(spool_dir), "--db", migrated_url])
    assert result.exit_code == 0, result.output
    assert "run pf-down imported" in result.output and "run bw-down imported" in result.output
    assert "2 of 2 spool files loaded" in result.output
    assert list(spool_dir.iterdir()) == []
    again = CliRunner().invoke(cli(), ["db", "import", str(spool_dir), "--db", migrated_url])
    # nothing left to import is not an error (a cron'd import of an empty spool directory exits 0)
    assert again.exit_code == 0 and "0 of 0 spool files loaded" in again.output


def test_cli_import_reports_a_bad_file_and_keeps_it(migrated_url: str, tmp_path: Path) -> None:
    (good,) = spool_while_down(tmp_path / "spool")[:1]
    bad = tmp_path / "spool" / f"broken{SPOOL_SUFFIX}"
    bad.write_bytes(b"not gzip")
    result = CliRunner().invoke(cli(), ["db", "import", str(bad), str(good), "--db", migrated_url, "--json"])
    assert result.exit_code == 3
    assert "broken" in result.output and "not a gzip-compressed spool file" in result.output
    assert bad.exists() and not good.exists()
    with Store.open(migrated_url) as store:
        assert [r.run_id for r in store.list_runs()] == ["pf-down"]


def test_cli_import_with_the_database_down_keeps_the_files(tmp_path: Path) -> None:
    paths = spool_while_down(tmp_path / "spool")
    result = CliRunner().invoke(cli(), ["db", "import", *map(str, paths), "--db", DOWN_PG_URL])
    assert result.exit_code == 3
    assert "cannot reach database" in result.output and "Traceback" not in result.output
    assert all(p.exists() for p in paths)


def test_read_spool_rejects_what_is_not_a_spool_file(tmp_path: Path) -> None:
    not_gzip = tmp_path / "a.json.gz"
    not_gzip.write_text("{}")
    with pytest.raises(SpoolError, match="not a gzip-compressed"):
        read_spool(not_gzip)
    wrong_json = tmp_path / "b.json.gz"
    wrong_json.write_bytes(gzip.compress(b'{"format": "something-else"}'))
    with pytest.raises(SpoolError, match="not a fleetdx spool file"):
        read_spool(wrong_json)


def test_failed_spool_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        write_spool(preflight_run("pf-1", T0), None, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_when_the_spool_fails_too_the_outcome_says_both(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    outcome = save_or_spool(DOWN_PG_URL, preflight_run("pf-1", T0), spool_dir=blocker)
    assert not outcome.saved and outcome.spool_path is None
    assert outcome.error is not None and "Connection refused" in outcome.error and "spool" in outcome.error
    assert outcome.message.startswith("report neither saved nor spooled")


def test_spool_names_are_safe_file_names() -> None:
    assert spool_name("pf-2026-11-23T08:00:00Z/job 42") == f"pf-2026-11-23T08_00_00Z_job_42{SPOOL_SUFFIX}"


# -- spool files of the previous release (report schema_version 1) ---------------------------------------
LEGACY_SPOOL = STORE_FIXTURES / "legacy_v1_spool"


def test_previous_release_spool_files_import(migrated_url: str, tmp_path: Path) -> None:
    """Spool files written by the previous release's write_spool (tests/fixtures/store/README.md): a
    bandwidth run (schedule in ``level``, a hung group with ``node`` null and the hosts in its subject) and
    a pre-flight (a finding with ``node``)."""
    spool_dir = tmp_path / "spool"
    shutil.copytree(LEGACY_SPOOL, spool_dir)
    for path in spool_dir.iterdir():
        doc = json.loads(gzip.decompress(path.read_bytes()))
        assert doc["report"]["schema_version"] == 1 and all("node" in f for f in doc["report"]["findings"])
    result = CliRunner().invoke(cli(), ["db", "import", str(spool_dir), "--db", migrated_url])
    assert result.exit_code == 0, result.output
    assert "2 of 2 spool files loaded" in result.output and list(spool_dir.iterdir()) == []
    with Store.open(migrated_url) as store:
        bw = store.get_run("bw-spooled")
        want = (RunKind.BANDWIDTH, None, Schedule.QUICK, SCHEMA_VERSION)  # upgraded to the current version
        assert (bw.kind, bw.level, bw.schedule, bw.schema_version) == want
        assert [(f.code, f.nodes, f.subject) for f in bw.findings] == [
            (FindingCode.NCCL_TEST_HANG, ["gpu01", "gpu02", "gpu03"], "gpu01,gpu02,gpu03")
        ]
        assert store.get_raw("bw-spooled", "gpu01") == {
            "bandwidth.log": "round 0: gpu01,gpu02,gpu03 all_reduce: no result after 120 s\n"
        }
        for host in ("gpu01", "gpu02", "gpu03"):
            (entry,) = store.node_history(host)
            assert [f.code for f in entry.findings] == [FindingCode.NCCL_TEST_HANG]
        # the previous release built it with tests/store_samples.py's preflight_run, as this one does
        assert store.get_run("pf-spooled") == preflight_run("pf-spooled", T0 + 14460)
        assert store.get_raw("pf-spooled", "h100-vm-idle")["nvidia-smi_-q_-x.xml"].encode() == SMI_XML.read_bytes()


def test_upgrade_v1_touches_only_version_1_group_findings() -> None:
    def doc(version: int, **finding: object) -> dict[str, object]:
        return {"report": {"schema_version": version, "kind": "bandwidth", "findings": [finding]}}

    group = {"code": "NCCL_BUSBW_LOW", "node": None, "subject": "h1, h2,h1"}
    assert upgrade_v1(doc(1, **group))["report"]["findings"] == [
        {"code": "NCCL_BUSBW_LOW", "subject": "h1, h2,h1", "nodes": ["h1", "h2"]}
    ]
    for unchanged in (
        doc(2, **group),  # version 2 says what it means
        doc(1, code="NCCL_BUSBW_LOW", node="h1", subject="h1,h2"),  # a node finding
        doc(1, code="GPU_XID", node=None, subject="a,b"),  # not a code of the bandwidth screen
        {"format": "something-else"},
    ):
        assert upgrade_v1(unchanged) == unchanged


@pytest.mark.slow
def test_parallel_importers_store_every_run_once_and_all_succeed(migrated_url: str, tmp_path: Path) -> None:
    # four `fleetdx db import DIR` at once: each file is claimed by a rename, so none fails for a file another
    # importer took (before: every run stored once, but each process exited 2)
    import subprocess
    import sys

    spool_dir = tmp_path / "spool"
    ids = [f"pf-{i:02d}" for i in range(16)]
    for i, run_id in enumerate(ids):
        write_spool(preflight_run(run_id, T0 + i), preflight_raw(), spool_dir)
    argv = [sys.executable, "-m", "fleetdx", "db", "import", str(spool_dir), "--db", migrated_url]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, (out, err)
    assert list(spool_dir.iterdir()) == []
    with Store.open(migrated_url) as store:
        assert sorted(r.run_id for r in store.list_runs(limit=100)) == ids


# -- issue 21, item 3: limits on what `db import` reads; item 12: `db current` on a missing SQLite file -------


def test_a_gzip_bomb_named_as_a_spool_file_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    import tracemalloc

    bomb = tmp_path / f"bomb{SPOOL_SUFFIX}"
    bomb.write_bytes(gzip.compress(b"\0" * (64 << 20), 9))  # 64 MiB of zeros in about 64 KB
    limit = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(SpoolError, match="decompresses to over 1048576 bytes"):
            read_spool(bomb, max_bytes=limit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit, f"{peak} bytes held to refuse a bomb (before: the whole 64 MiB)"


def test_a_spool_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / f"big{SPOOL_SUFFIX}"
    big.write_bytes(os.urandom(4096))
    with pytest.raises(SpoolError, match="4096 bytes, over the 1000 byte limit"):
        read_spool(big, max_bytes=1000)


def test_cli_import_refuses_devices_and_fifos_without_reading_or_renaming_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/i.db"
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    os.mkfifo(spool_dir / f"pipe{SPOOL_SUFFIX}")
    result = CliRunner().invoke(cli(), ["db", "import", "/dev/zero", str(spool_dir), "--db", url])
    assert result.exit_code == 3, result.output
    assert "/dev/zero: a character device, not a regular file" in result.output
    assert "a FIFO (named pipe), not a regular file" in result.output
    assert "2 spool files could not be imported" in result.output and "Traceback" not in result.output
    assert os.path.exists("/dev/zero") and (spool_dir / f"pipe{SPOOL_SUFFIX}").exists()


def test_cli_import_max_bytes_is_the_limit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/i.db"
    (path,) = spool_while_down(tmp_path / "spool")[:1]
    small = CliRunner().invoke(cli(), ["db", "import", str(path), "--db", url, "--max-bytes", "100"])
    assert small.exit_code == 3 and "raise the limit with --max-bytes" in small.output and path.exists()
    default = CliRunner().invoke(cli(), ["db", "import", str(path), "--db", url])
    assert default.exit_code == 0, default.output


def test_cli_import_default_limit_is_the_spool_limit() -> None:
    import inspect

    from fleetdx.orchestrator.store.spool import MAX_SPOOL_BYTES

    assert inspect.signature(db_cmd.import_).parameters["max_bytes"].default == MAX_SPOOL_BYTES


def test_cli_import_of_a_missing_path_exits_3(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli(), ["db", "import", str(tmp_path / "nope"), "--db", f"sqlite:///{tmp_path}/i.db"])
    assert result.exit_code == 3 and "no such file or directory" in result.output


def test_db_current_on_a_missing_sqlite_file_exits_3_and_creates_nothing(tmp_path: Path) -> None:
    where = tmp_path / "nonexistent" / "dir"
    result = CliRunner().invoke(cli(), ["db", "current", "--db", f"sqlite:///{where}/x.db"])
    assert result.exit_code == 3, result.output
    assert "no such file" in result.output and "fleetdx db upgrade" in result.output
    assert not (tmp_path / "nonexistent").exists()
    up = CliRunner().invoke(cli(), ["db", "upgrade", "--db", f"sqlite:///{where}/x.db"])
    assert up.exit_code == 0
    now = CliRunner().invoke(cli(), ["db", "current", "--db", f"sqlite:///{where}/x.db"])
    assert now.exit_code == 0 and "up to date" in now.output
