"""Group commit of ``POST /reports`` (issue 22 item 6): ``Store.save_reports`` stores several runs in one
transaction, and the service's ``ReportWriter`` writes the uploads waiting at the same time as one batch, each
answered with its own outcome. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, RunReport, assemble_report
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.service.writer import ReportWriter
from fleetdx.orchestrator.store import Store, StoreError
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from fleetdx.probes.contracts import Level, Severity

pytest_plugins = ["tests.pgfixtures"]

TOPO = "\tGPU0\nGPU0\t X \n"


def report(run_id: str, host: str, critical: bool = False) -> RunReport:
    findings = []
    if critical:
        findings.append(
            Finding(
                code=FindingCode.GPU_FOREIGN_PROCESS,
                severity=Severity.CRITICAL,
                nodes=[host],
                subject="GPU0",
                message="pid 7 holds GPU0 (test finding)",
            )
        )
    return assemble_report(
        RunKind.PREFLIGHT, [host], findings, started_at=time.time() - 60, level=Level.QUICK, run_id=run_id
    )


def test_save_reports_stores_a_batch_in_one_go_and_says_which_were_new(store: Store) -> None:
    old = report("batch-old", "n0")
    assert store.save_report(old)
    items = [(report(f"batch-{i}", f"n{i}", critical=i == 2), {f"n{i}": {"topo": TOPO}}) for i in range(1, 4)]
    outcomes = store.save_reports([*items, (old, None), (items[0][0], None)])
    assert outcomes == [True, True, True, False, False]  # stored before; twice in the batch
    for r, raw in items:
        assert store.get_run(r.run_id) == r
        assert store.get_raw(r.run_id, r.nodes[0].host) == raw[r.nodes[0].host]
    assert len(store.list_runs(limit=10)) == 4


def test_save_reports_stores_nothing_when_one_report_is_refused(store: Store) -> None:
    twice = report("batch-twice", "n1")
    twice = twice.model_copy(update={"nodes": [*twice.nodes, *twice.nodes]})
    with pytest.raises(StoreError, match="a host appears twice"):
        store.save_reports([(report("batch-fine", "n2"), None), (twice, None)])
    assert store.list_runs(limit=10) == []


def test_uploads_waiting_together_are_one_transaction_each_with_its_own_outcome(store: Store) -> None:
    """Seven concurrent saves: the first is written at once, alone; the six that arrived meanwhile are one
    batch; a run already stored and a run twice in the batch answer False."""
    writer = ReportWriter(store)
    stored_before = report("w-5", "n5")
    store.save_report(stored_before)
    reports = [report(f"w-{i}", f"n{i}") for i in range(5)] + [stored_before, report("w-0", "n0")]

    async def main() -> list[bool]:
        return list(await asyncio.gather(*(writer.save(r, None) for r in reports)))

    assert asyncio.run(main()) == [True] * 5 + [False, False]
    assert writer.batches == 2 and writer.written == 7
    assert {r.run_id for r in store.list_runs(limit=20)} == {f"w-{i}" for i in range(6)}


def test_a_batch_the_store_refuses_is_written_one_by_one(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the batch cannot be stored as one (a constraint: another worker stored one of its runs meanwhile),
    each upload is saved alone, so one upload's error is its own."""
    writer = ReportWriter(store)

    def refused(_items: object) -> list[bool]:
        raise StoreError("a batch of 3 runs was refused by a constraint (test)")

    monkeypatch.setattr(store, "save_reports", refused)
    twice = report("w-twice", "n9")
    twice = twice.model_copy(update={"nodes": [*twice.nodes, *twice.nodes]})
    reports = [report("w-a", "na"), report("w-b", "nb"), twice, report("w-c", "nc")]

    async def main() -> list[bool | BaseException]:
        return list(await asyncio.gather(*(writer.save(r, None) for r in reports), return_exceptions=True))

    outcomes = asyncio.run(main())
    assert outcomes[:2] == [True, True] and outcomes[3] is True
    assert isinstance(outcomes[2], StoreError) and "appears twice" in str(outcomes[2])
    assert {r.run_id for r in store.list_runs(limit=20)} == {"w-a", "w-b", "w-c"}


def test_post_reports_through_the_writer(store: Store) -> None:
    """The route answers 201 once stored, 200 when the run was stored already; the run reads back."""
    token = create_token(store, "prolog", TokenScope.WRITE).token
    client = TestClient(create_app(store), headers={"Authorization": f"Bearer {token}"})
    r = report("http-1", "n1", critical=True)
    body = {"report": r.model_dump(mode="json"), "raw": {"n1": {"topo": TOPO}}}
    first = client.post("/reports", json=body)
    assert first.status_code == 201 and first.json() == {"run_id": "http-1", "inserted": True}
    again = client.post("/reports", json=body)
    assert again.status_code == 200 and again.json()["inserted"] is False
    assert client.get("/runs/http-1").json()["verdict"] == r.model_dump(mode="json")["verdict"]
