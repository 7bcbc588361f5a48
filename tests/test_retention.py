"""``fleetdx db prune``: runs (with every row under them), postmortems and node state changes older than the age
leave the store on SQLite and PostgreSQL, each node's newest run stays; prolog reports and epilog bundles
older than the age leave the disk, each host's newest stays."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import db_cmd
from fleetdx.orchestrator.diagnosis.node_states import Actor, NodeState
from fleetdx.orchestrator.store import PostmortemRecord, Store
from fleetdx.orchestrator.store.models import (
    Base,
    CurveNodeRow,
    CurveRow,
    FindingNodeRow,
    FindingRow,
    NodeRow,
    NodeStateRow,
    NodeTransitionRow,
    PostmortemHostRow,
    PostmortemRow,
    ProbeResultRow,
    RawOutputRow,
    RecommendationRow,
    RunRow,
)
from fleetdx.orchestrator.store.retention import (
    KEPT_TABLES,
    SlurmDirs,
    _would_remove_names,
    parse_age,
    prune_files,
    prune_store,
    slurm_dirs,
)
from tests.cliapp import cli_app
from tests.store_samples import (
    GPU01,
    bandwidth_raw,
    bandwidth_run,
    pair_run,
    preflight_raw,
    preflight_run,
)
from tests.store_samples import (
    migrated as migrated_sqlite,
)

pytest_plugins = ["tests.pgfixtures"]

DAY = 86400.0
NOW = 1_800_000_000.0
CUTOFF = NOW - 90 * DAY
#: run id -> started, days before NOW; which survive a prune at 90 days
RUNS = {"a-old": 200, "a-mid": 100, "a-new": 1, "b-only": 200, "pair-old": 150, "pair-new": 10}
SURVIVE = {"a-new", "b-only", "pair-new", "bw-new"}


def fill(store: Store) -> None:
    for run_id, days in RUNS.items():
        started = NOW - days * DAY
        if run_id.startswith("pair"):
            store.save_report(pair_run(run_id, started))
        else:
            host = run_id.split("-")[0]
            store.save_report(preflight_run(run_id, started, host=host), preflight_raw(host))
    store.save_report(bandwidth_run("bw-old", NOW - 120 * DAY, degraded=True), bandwidth_raw(True))
    store.save_report(bandwidth_run("bw-new", NOW - 5 * DAY, degraded=False), bandwidth_raw(False))
    for pm_id, days in (("pm-old", 100), ("pm-new", 3)):
        record = PostmortemRecord(
            postmortem_id=pm_id, job_id="4711", created_at=NOW - days * DAY, verdict="CRITICAL", hosts=["a", GPU01]
        )
        store.save_postmortem(record, {"postmortem_id": pm_id})
    with Session(store.engine) as s, s.begin():  # a's state went back and forth long ago (a flapping node)
        for days, (old, new) in zip(
            (160, 150, 140), [("ok", "suspect"), ("suspect", "ok"), ("ok", "suspect")], strict=True
        ):
            s.add(
                NodeTransitionRow(
                    host="a",
                    from_state=NodeState(old),
                    to_state=NodeState(new),
                    at=NOW - days * DAY,
                    reason="test: a flapping node",
                    by=Actor.FLEETDX,
                )
            )


def counts(store: Store) -> dict[str, int]:
    with Session(store.engine) as s:
        return {t.name: int(s.scalar(select(func.count()).select_from(t)) or 0) for t in Base.metadata.sorted_tables}


def orphans(store: Store) -> int:
    """Rows whose parent row is gone (what a forgotten child table would leave)."""
    pairs = [
        (NodeRow.run_pk, RunRow.id),
        (FindingRow.run_pk, RunRow.id),
        (RecommendationRow.run_pk, RunRow.id),
        (CurveRow.run_pk, RunRow.id),
        (RawOutputRow.run_pk, RunRow.id),
        (ProbeResultRow.node_pk, NodeRow.id),
        (FindingNodeRow.finding_pk, FindingRow.id),
        (CurveNodeRow.curve_pk, CurveRow.id),
        (PostmortemHostRow.postmortem_pk, PostmortemRow.id),
    ]
    with Session(store.engine) as s:
        return sum(
            int(s.scalar(select(func.count()).where(child.not_in(select(parent)))) or 0) for child, parent in pairs
        )


def test_prune_keeps_each_nodes_newest_run(store: Store) -> None:
    fill(store)
    before = counts(store)
    states_before = before[NodeStateRow.__tablename__]
    assert before["node_transitions"] >= 5

    dry = prune_store(store, CUTOFF, dry_run=True, batch=1)
    assert counts(store) == before  # a dry run removes nothing
    assert dry.rows["runs"] == 4 and dry.kept_newest == 1  # b-only: b's newest

    done = prune_store(store, CUTOFF, batch=1)  # one run per transaction: the batching is exercised
    assert done.rows == dry.rows and done.kept_newest == 1 and not done.dry_run
    assert {r.run_id for r in store.list_runs(limit=100)} == SURVIVE
    assert orphans(store) == 0
    after = counts(store)
    for table, n in done.rows.items():
        assert before[table] - after[table] == n, table
    assert done.rows["probe_results"] > 0 and done.rows["finding_nodes"] > 0 and done.rows["busbw_curve_nodes"] > 0
    assert done.rows["raw_outputs"] > 0 and done.rows["postmortems"] == 1 and done.rows["postmortem_hosts"] == 2
    assert [p.postmortem_id for p in store.list_postmortems(limit=10)] == ["pm-new"]
    assert done.rows["node_transitions"] >= 3
    assert [e.run_id for e in store.node_history("a")] == ["a-new"]
    assert [e.run_id for e in store.node_history("b")] == ["b-only"]  # older than the age, but b's current state
    assert after[NodeStateRow.__tablename__] == states_before  # current states untouched
    with Session(store.engine) as s:
        hosts = set(s.scalars(select(NodeTransitionRow.host)))
    assert {"a", "b"} <= hosts  # each host keeps at least its newest state change

    again = prune_store(store, CUTOFF)
    assert sum(again.rows.values()) == 0 and counts(store) == after


def test_every_store_table_is_pruned_or_kept_on_purpose() -> None:
    """A new table must be listed in retention.py: pruned with its parent, or kept (KEPT_TABLES)."""
    assert set(Base.metadata.tables) == set(_would_remove_names()) | KEPT_TABLES


def test_parse_age() -> None:
    assert parse_age("90d") == 90 * DAY and parse_age("2w") == 14 * DAY and parse_age(" 12h ") == 12 * 3600
    assert parse_age("1.5m") == 90
    for bad in ("90", "d", "-1d", "0d", "90 days", "1y"):
        with pytest.raises(ValueError, match="age"):
            parse_age(bad)


def _touch(path: Path, days_ago: float, text: str = "{}") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text)
    when = NOW - days_ago * DAY
    os.utime(path, (when, when))


@pytest.fixture
def node_files(tmp_path: Path) -> tuple[Path, SlurmDirs]:
    logs, bundles = tmp_path / "log", tmp_path / "bundles"
    _touch(logs / "prolog-100-a.json", 200)
    _touch(logs / "prolog-200-a.json", 1)
    _touch(logs / "prolog-101-b.json", 300)  # b's only report: kept
    _touch(logs / "prolog.log", 400)  # the scripts' logs are logrotate's, not ours
    outside = tmp_path / "elsewhere.json"
    _touch(outside, 500)
    (logs / "prolog-102-c.json").symlink_to(outside)  # a link is never followed nor removed
    _touch(bundles / "100" / "a" / "nvidia-smi_-q_-x.xml", 200, "x" * 1000)
    _touch(bundles / "100" / "a", 200)
    _touch(bundles / "200" / "a" / "meta.json", 2)
    _touch(bundles / "101" / "b" / "meta.json", 300)
    _touch(bundles / "101" / "b", 300)
    _touch(bundles / "100" / "c" / "old.txt", 300)
    _touch(bundles / "100" / "c" / "new.txt", 1)  # a bundle's age is its newest file's
    _touch(bundles / "300" / "c" / "meta.json", 0.5)
    conf = tmp_path / "fleetdx-slurm.conf"
    conf.write_text(
        f'# test\nFLEETDX=/opt/fleetdx/venv/bin/fleetdx\nFLEETDX_LOG_DIR={logs}\nFLEETDX_BUNDLE_DIR="{bundles}"\n'
    )
    return conf, SlurmDirs(log_dir=logs, bundle_dir=bundles)


def test_prune_files(node_files: tuple[Path, SlurmDirs]) -> None:
    conf, dirs = node_files
    assert slurm_dirs(conf) == dirs
    dry = prune_files(dirs, CUTOFF, dry_run=True)
    assert all(Path(f.path).exists() for f in dry.files)
    done = prune_files(dirs, CUTOFF)
    gone = {(f.kind, Path(f.path).relative_to(conf.parent).as_posix()) for f in done.files}
    assert gone == {("prolog-report", "log/prolog-100-a.json"), ("epilog-bundle", "bundles/100/a")}
    assert {f.path for f in dry.files} == {f.path for f in done.files}
    assert done.kept_newest_files == 2  # b's report and b's bundle
    left = sorted(
        p.relative_to(conf.parent).as_posix() for p in conf.parent.rglob("*") if p.is_file() or p.is_symlink()
    )
    assert left == [
        "bundles/100/c/new.txt",
        "bundles/100/c/old.txt",
        "bundles/101/b/meta.json",
        "bundles/200/a/meta.json",
        "bundles/300/c/meta.json",
        "elsewhere.json",
        "fleetdx-slurm.conf",
        "log/prolog-101-b.json",
        "log/prolog-102-c.json",
        "log/prolog-200-a.json",
        "log/prolog.log",
    ]
    assert [f.bytes for f in done.files if f.kind == "epilog-bundle"] == [1000]


def test_prune_files_of_missing_folders(tmp_path: Path) -> None:
    result = prune_files(SlurmDirs(tmp_path / "none", tmp_path / "neither"), NOW)
    assert result.files == [] and result.kept_newest_files == 0


def test_cli_prune_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fleetdx.orchestrator.store.retention.time.time", lambda: NOW)
    fill(store)
    app = cli_app(db_cmd)
    runner = CliRunner()
    dry = runner.invoke(app, ["db", "prune", "--older-than", "90d", "--db", store.url, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would remove what is older than 90d" in dry.output and "kept 1 older runs" in dry.output
    assert all(len(line) <= 80 for line in dry.output.splitlines() if store.url not in line)
    assert len(store.list_runs(limit=100)) == 8
    env = {"FLEETDX_RETENTION": "90d"}
    done = runner.invoke(app, ["db", "prune", "--db", store.url, "--json"], env=env)
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert result["rows"]["runs"] == 4 and result["older_than_s"] == 90 * DAY and result["dry_run"] is False
    assert {r.run_id for r in store.list_runs(limit=100)} == SURVIVE


def test_cli_prune_files(node_files: tuple[Path, SlurmDirs], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fleetdx.orchestrator.store.retention.time.time", lambda: NOW)
    conf, dirs = node_files
    runner = CliRunner()
    r = runner.invoke(cli_app(db_cmd), ["db", "prune", "--older-than", "90d", "--slurm-conf", str(conf)])
    assert r.exit_code == 0, r.output
    assert "prolog-reports: 1" in r.output and "epilog-bundles: 1" in r.output and "kept 2 older" in r.output
    assert not (dirs.bundle_dir / "100" / "a").exists() and (dirs.bundle_dir / "100" / "c").exists()


@pytest.mark.parametrize("args", [["--older-than", "90"], ["--older-than", "1y"], ["--slurm-conf", "/nonexistent"]])
def test_cli_prune_bad_input_is_unknown(args: list[str], tmp_path: Path) -> None:
    argv = ["db", "prune", *args] + (["--older-than", "90d"] if "--older-than" not in args else [])
    r = CliRunner().invoke(cli_app(db_cmd), argv + ["--db", f"sqlite:///{tmp_path}/x.db"])
    assert r.exit_code == 3, r.output


ROOT = Path(__file__).resolve().parents[1]


def _unit(name: str) -> dict[str, list[str]]:
    """A systemd unit file's settings: NAME -> its values in order (comments and sections left out)."""
    settings: dict[str, list[str]] = {}
    for line in (ROOT / "slurm" / name).read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def test_systemd_service_runs_db_prune(node_files: tuple[Path, SlurmDirs], monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's ExecStart, its Environment= defaults expanded as systemd does ($VAR splits on spaces,
    ${VAR} stays one word), is a `fleetdx db prune` that prunes a node's files; the timer runs it daily."""
    monkeypatch.setattr("fleetdx.orchestrator.store.retention.time.time", lambda: NOW)
    conf, dirs = node_files
    service = _unit("fleetdx-prune.service")
    env = dict(v.strip('"').split("=", 1) for v in service["Environment"])
    assert env["FLEETDX_RETENTION"] == "90d" and service["Type"] == ["oneshot"]
    (exec_start,) = service["ExecStart"]
    argv = []
    for word in exec_start.split():
        if word.startswith("${"):
            argv.append(env[word[2:-1]])
        elif word.startswith("$"):
            argv += env[word[1:]].split()
        else:
            argv.append(word)
    assert argv[:3] == ["/opt/fleetdx/venv/bin/fleetdx", "db", "prune"]
    assert argv[argv.index("--slurm-conf") + 1] == "/etc/slurm/fleetdx/fleetdx-slurm.conf"
    argv[argv.index("--slurm-conf") + 1] = str(conf)
    r = CliRunner().invoke(cli_app(db_cmd), argv[1:])
    assert r.exit_code == 0, r.output
    assert not (dirs.log_dir / "prolog-100-a.json").exists()
    timer = _unit("fleetdx-prune.timer")
    assert timer["OnCalendar"] == ["daily"] and timer["Persistent"] == ["true"]
    assert timer["WantedBy"] == ["timers.target"]


def test_systemd_units_verify(tmp_path: Path) -> None:
    """systemd-analyze verify takes both units (the fleetdx path made one that exists here)."""
    import shutil
    import subprocess
    import sys

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    fleetdx = Path(sys.executable).with_name("fleetdx")
    for name in ("fleetdx-prune.service", "fleetdx-prune.timer"):
        text = (ROOT / "slurm" / name).read_text().replace("/opt/fleetdx/venv/bin/fleetdx", str(fleetdx))
        (tmp_path / name).write_text(text)
    r = subprocess.run(
        [analyze, "verify", str(tmp_path / "fleetdx-prune.timer"), str(tmp_path / "fleetdx-prune.service")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "fleetdx-prune" not in r.stderr, r.stderr


def test_cronjob_runs_db_prune_with_the_secrets_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CronJob's container command line, with its environment (the database URL from the Secret), is a
    `fleetdx db prune` that prunes the store."""
    import yaml

    (cron,) = [d for d in yaml.safe_load_all((ROOT / "k8s" / "prune-cronjob.yaml").read_text()) if d]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["fleetdx", "db", "prune"] and cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert pod["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
    env = {e["name"]: e for e in c["env"]}
    assert env["FLEETDX_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "fleetdx-db", "key": "url"}
    url = f"sqlite:///{tmp_path}/cron.db"
    with Store.open(migrated_sqlite(url)) as store:
        fill(store)
    monkeypatch.setattr("fleetdx.orchestrator.store.retention.time.time", lambda: NOW)
    environ = {"FLEETDX_RETENTION": env["FLEETDX_RETENTION"]["value"], "FLEETDX_DB_URL": url}
    r = CliRunner().invoke(cli_app(db_cmd), [*c["command"][1:], *c["args"]], env=environ)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["rows"]["runs"] == 4
