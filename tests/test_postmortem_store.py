"""A postmortem and the store: the blamed host's pre-flight history is in the report, the postmortem is kept
apart from node history, and a store that cannot be opened costs neither the postmortem nor its exit code.
The log is the real fixture 03 (an IB completion error on kp-ddp-worker-0); the stored pre-flight is a sample
report (tests/store_samples.py) renamed to that host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import postmortem_cmd
from fleetdx.orchestrator.postmortem.contracts import PostmortemReport
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.settings import sqlite_file
from tests.cliapp import cli_app
from tests.store_samples import preflight_run

FIX = Path(__file__).parent / "fixtures" / "joblogs"
LOG = FIX / "03_nccl-net-ib-completion-status12-vendor129_proxy_kp-ddp-worker.log"
HOST = "kp-ddp-worker-0"
runner = CliRunner()


def _app() -> typer.Typer:
    return cli_app(postmortem_cmd)


def test_history_is_read_and_the_postmortem_kept_apart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with Store.open(url) as store:
        store.save_report(preflight_run("pf-before", 1_700_000_000.0, host=HOST))
    res = runner.invoke(_app(), ["postmortem", "--logs", str(LOG), "--json", "--db", url])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert doc["causes"][0]["code"] == "NCCL_NETWORK_ERROR"
    (hist,) = doc["history"]
    assert hist["host"] == HOST and [e["run_id"] for e in hist["entries"]] == ["pf-before"]
    with Store.open(url) as store:
        (kept,) = store.list_postmortems(host=HOST)
        assert kept.first_cause == "NCCL_NETWORK_ERROR" and kept.verdict.name == "CRITICAL"
        back = store.get_postmortem(kept.postmortem_id, PostmortemReport)  # the model, not JSON data
        assert isinstance(back, PostmortemReport) and back.findings[0].host == HOST
        assert [e.run_id for e in store.node_history(HOST)] == ["pf-before"]  # no postmortem finding in it
        assert store.list_postmortems(host="someone-else") == []


def test_no_save_keeps_nothing_and_makes_no_store(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    res = runner.invoke(_app(), ["postmortem", "--logs", str(LOG), "--json", "--db", f"sqlite:///{db}", "--no-save"])
    assert res.exit_code == 2 and json.loads(res.stdout)["history"] == []
    assert not db.exists()  # no history to read in a store never made, and none is made
    assert f"no history read: no store at {db}" in res.stderr


def test_no_save_still_reads_the_history_of_an_existing_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with Store.open(url) as store:
        store.save_report(preflight_run("pf-before", 1_700_000_000.0, host=HOST))
    res = runner.invoke(_app(), ["postmortem", "--logs", str(LOG), "--json", "--db", url, "--no-save"])
    assert res.exit_code == 2, res.output
    assert [e["run_id"] for h in json.loads(res.stdout)["history"] for e in h["entries"]] == ["pf-before"]
    with Store.open(url) as store:
        assert store.list_postmortems() == []


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///rel/f.db", "rel/f.db"),
        ("sqlite:////abs/f.db", "/abs/f.db"),
        ("sqlite+pysqlite:////abs/f.db?timeout=5", "/abs/f.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:f.db?mode=ro&uri=true", None),
        ("postgresql+psycopg://u@h/db", None),
        ("not a url", None),
    ],
)
def test_sqlite_file_of_a_url(url: str, path: str | None) -> None:
    assert sqlite_file(url) == (Path(path) if path else None)


def test_an_unreachable_store_costs_only_the_history() -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2"
    res = runner.invoke(_app(), ["postmortem", "--logs", str(LOG), "--json", "--db", url])
    assert res.exit_code == 2  # the verdict, not a store error
    assert json.loads(res.stdout)["causes"][0]["code"] == "NCCL_NETWORK_ERROR"
    assert "no store" in res.stderr
