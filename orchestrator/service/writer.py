"""Group commit of ``POST /reports``: the uploads of one worker that wait at the same time are stored together.

A one-node pre-flight report is a few rows; storing it alone costs a transaction (a session, the duplicate check,
a flush of the unit of work, a commit) for each, and that bounded ingestion at about 70 reports/s
(bench/api.py). :class:`ReportWriter` writes the uploads that arrive while a write is under way as one
:meth:`~fleetdx.orchestrator.store.Store.save_reports` (one transaction, the rows of all runs inserted
together), at most :data:`MAX_BATCH` at a time. Nothing waits to fill a batch: an upload arriving to an idle
writer is written at once, alone; batches form only under load, where they pay. Each request is answered after
its own run was committed, with its own outcome: when a batch cannot be stored as one (a constraint: another
worker stored one of its runs meanwhile), each of its uploads is stored on its own, so one upload's error is
never another's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from starlette.concurrency import run_in_threadpool

from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.store import Store, StoreError

#: the most runs written in one transaction
MAX_BATCH = 32

_Item = tuple[RunReport, Mapping[str, Mapping[str, str]] | None]


class ReportWriter:
    """One worker's writer of uploaded runs into ``store`` (see the module doc). One event loop at a time (a
    uvicorn worker's); a new loop (a test client's) starts afresh."""

    def __init__(self, store: Store, max_batch: int = MAX_BATCH) -> None:
        self.store, self.max_batch = store, max_batch
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._pending: list[tuple[_Item, asyncio.Future[bool]]] = []
        self.batches = self.written = 0

    async def save(self, report: RunReport, raw: Mapping[str, Mapping[str, str]] | None) -> bool:
        """Store the run (after the runs waiting before it, maybe with them): True when stored, False when a
        run with its ``run_id`` was stored already.

        Raises:
            StoreError: the store refused this run or is unreachable (as :meth:`Store.save_report`).
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._lock, self._pending = loop, asyncio.Lock(), []
        done: asyncio.Future[bool] = loop.create_future()
        self._pending.append(((report, raw), done))
        async with self._lock:
            while not done.done():  # the writers before this one took the uploads queued before it
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
                try:
                    outcomes = await run_in_threadpool(self._write, [item for item, _ in batch])
                except BaseException as e:  # cancelled, or a bug: every waiter of the batch learns it
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(e if isinstance(e, Exception) else StoreError("write cancelled"))
                    raise
                for (_, waiter), outcome in zip(batch, outcomes, strict=True):
                    if isinstance(outcome, BaseException):
                        waiter.set_exception(outcome)
                    else:
                        waiter.set_result(outcome)
        return await done

    def _write(self, items: list[_Item]) -> list[bool | StoreError]:
        """Each item's outcome: the batch in one transaction, else one by one (blocking: the thread pool)."""
        self.batches += 1
        self.written += len(items)
        if len(items) > 1:
            try:
                return list(self.store.save_reports(items))
            except StoreError:
                pass  # tell which: each on its own below
        outcomes: list[bool | StoreError] = []
        for report, raw in items:
            try:
                outcomes.append(self.store.save_report(report, raw))
            except StoreError as e:
                outcomes.append(e)
        return outcomes
