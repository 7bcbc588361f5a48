"""Placement answers and the store state they rest on, memoised per worker while nothing has changed.

A placement answer (:func:`fleetdx.orchestrator.placement.job.place`) is a function of the request, the
scheduler's candidate nodes, the store's runs and the clock (an open finding counts for a week). Computing one
over a 1,000-node fleet costs about 40 ms of CPU (bench/MEASUREMENTS.md, Placement), so a scheduler or
submission wrapper asking the same question many times a second would saturate the service. An answer is
reused only when the request and the candidates are equal, the store's newest run is the same
(:meth:`~fleetdx.orchestrator.store.Store.newest_run_pk`, one indexed query: a report pushed to the service
is seen by the next query), and it is at most ``ttl_s`` seconds old (so the clock drifts by at most that much
against a week-long validity). An answer is kept with its JSON body and ETag (:class:`EncodedAnswer`), encoded
once: a cached answer is sent as those bytes, not validated and serialised again per request. Thread-safe: the
answers are computed in the thread pool.

The store generation itself is one query per request; :class:`Coalesced` shares one read among the requests
that wait at the same time (each still gets a read that started after it arrived, so a report stored before a
query is always seen by it), so 16 concurrent queries cost one or two database round trips, not 16.

Distinct questions (other node counts, exclude lists, hostlists) cannot reuse an answer, but they rest on the
same store state: :class:`SnapshotKeeper` keeps one
:class:`~fleetdx.orchestrator.placement.snapshot.HealthSnapshot` per worker (each host's judgement and raw
outputs, read on first use), advanced past each new run (only the hosts it names are read again) and renewed
off the request path when ``ttl_s`` old, so such a query only filters and ranks (about 1 ms of CPU instead of
30-50 ms over 1,000 candidates).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from starlette.concurrency import run_in_threadpool

from fleetdx.orchestrator.placement.contracts import PlacementAnswer, PlacementRequest
from fleetdx.orchestrator.placement.policy import DEFAULT_POLICY, HealthPolicy
from fleetdx.orchestrator.placement.snapshot import HealthSnapshot
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.node_health import hosts_named_after
from fleetdx.probes.parsers.slurm_nodes import SlurmNode

log = logging.getLogger("fleetdx.api")

#: default lifetime of a cached answer, seconds
DEFAULT_TTL_S = 5.0
#: answers kept per worker (least recently used dropped first)
MAX_ENTRIES = 128

T = TypeVar("T")
_Key = tuple[str, str, int | None]


@dataclass(frozen=True)
class EncodedAnswer:
    """A placement answer with its JSON ``body`` (UTF-8 bytes, pydantic's encoding of ``answer``) and its
    ``etag`` (a quoted strong validator of the body: equal bodies, equal tags)."""

    answer: PlacementAnswer
    body: bytes
    etag: str

    @classmethod
    def of(cls, answer: PlacementAnswer) -> EncodedAnswer:
        body = answer.model_dump_json().encode("utf-8")
        return cls(answer, body, '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"')


class PlacementCache:
    """See the module doc. ``ttl_s`` 0 disables it (every query computes)."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, max_entries: int = MAX_ENTRIES) -> None:
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._entries: OrderedDict[_Key, tuple[float, EncodedAnswer]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(request: PlacementRequest, candidates: Sequence[SlurmNode] | None, generation: int | None) -> _Key:
        """What an answer depends on besides the clock (see the module doc)."""
        cands = "" if candidates is None else "\n".join(c.model_dump_json() for c in candidates)
        return (request.model_dump_json(), cands, generation)

    def cached(self, key: _Key) -> EncodedAnswer | None:
        """The answer kept for ``key`` while at most ``ttl_s`` old, else ``None`` (counted as a miss)."""
        if self.ttl_s <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and now - hit[0] <= self.ttl_s:
                self._entries.move_to_end(key)
                self.hits += 1
                return hit[1]
            self.misses += 1
        return None

    def keep(self, key: _Key, answer: EncodedAnswer, computed_at: float) -> None:
        """Keep ``answer`` for ``key`` (``computed_at``: :func:`time.monotonic` when its computation began)."""
        if self.ttl_s <= 0:
            return
        with self._lock:
            self._entries[key] = (computed_at, answer)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def answer(
        self,
        request: PlacementRequest,
        candidates: Sequence[SlurmNode] | None,
        generation: int | None,
        compute: Callable[[], PlacementAnswer],
    ) -> EncodedAnswer:
        """The cached answer for this request, candidates and store generation, else ``compute()``'s (kept)."""
        key = self.key(request, candidates, generation)
        hit = self.cached(key)
        if hit is not None:
            return hit
        now = time.monotonic()
        answer = EncodedAnswer.of(compute())  # outside the lock: two threads may compute the same answer once each
        self.keep(key, answer, now)
        return answer


class Coalesced(Generic[T]):
    """``read()`` (a blocking call, run in the thread pool) shared by the coroutines that ask at the same time.

    :meth:`get` returns the value of a read that *started after* the call: while one read runs, every caller
    arriving meanwhile waits for it to end, then the first of them starts the next read for all of them. So no
    caller gets a value older than its own arrival (a run stored before a query is seen by that query), and a
    burst of N concurrent callers costs two reads, not N. A failed read raises in the callers it was for that
    find no newer value; the next caller reads again. One event loop at a time (a uvicorn worker's); a new loop
    (a test client's) starts afresh."""

    def __init__(self, read: Callable[[], T]) -> None:
        self.read = read
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._asked = 0  # arrivals so far
        self._covers = 0  # the arrivals the last good read started after
        self._value: T | None = None
        self.reads = 0

    async def get(self) -> T:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._lock, self._covers = loop, asyncio.Lock(), 0
        self._asked += 1
        ticket = self._asked
        async with self._lock:
            if self._covers >= ticket:
                return self._value  # type: ignore[return-value]  # set with _covers
            covers = self._asked  # every caller so far arrived before this read starts
            value = await run_in_threadpool(self.read)
            self.reads += 1
            self._value, self._covers = value, covers
            return value


def _pk(generation: int | None) -> int:
    """A generation as a run primary key to compare (``None``, an empty store: 0, before every run)."""
    return 0 if generation is None else generation


class SnapshotKeeper:
    """The worker's :class:`HealthSnapshot` of ``store`` (see the module doc).

    :meth:`get` returns the kept one while it is of the given store generation (or newer) and at most
    ``ttl_s`` seconds old. A newer generation (runs stored since) *advances* it: the hosts those runs name
    (:func:`hosts_named_after`, one query) are dropped and read again on first use, every other host is kept,
    so a report pushed by a prolog costs the next query one host's re-read, not 1,000. Past ``ttl_s`` it is
    *renewed* off the request path (:meth:`HealthSnapshot.renewed` on ``spawn``, a daemon thread by default:
    every kept host judged again at a later instant and the current generation) while it keeps answering;
    past ``2 * ttl_s`` (a renewal that could not finish) a new one is read on the request path. So an answer
    rests on judgements at most ``2 * ttl_s`` old, and runs committed out of primary-key order (PostgreSQL
    sequences) are seen at the latest then. A failed renewal drops the snapshot: the next query reads the store
    itself and a store error is its 503. ``ttl_s`` 0 disables it (``None``: every query reads the store).
    ``clock``: monotonic seconds (tests pass their own)."""

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        policy: HealthPolicy = DEFAULT_POLICY,
        *,
        clock: Callable[[], float] = time.monotonic,
        spawn: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.ttl_s, self.policy, self.clock = ttl_s, policy, clock
        self.spawn = spawn or (lambda work: threading.Thread(target=work, name="placement-renew", daemon=True).start())
        self._kept: tuple[HealthSnapshot, float] | None = None  # the snapshot and when (clock) it was judged
        self._renewing = False
        self._lock = threading.Lock()
        self.made = self.advanced = self.renewed = 0

    def get(self, store: Store, generation: int | None) -> HealthSnapshot | None:
        """The snapshot for ``store`` at ``generation`` (:meth:`Store.newest_run_pk`); ``None`` when disabled.
        Raises :class:`~fleetdx.orchestrator.store.StoreError` when advancing it cannot read the store."""
        if self.ttl_s <= 0:
            return None
        now = self.clock()
        with self._lock:
            kept = self._kept[0] if self._kept is not None else None
            made = self._kept[1] if self._kept is not None else now
            if kept is None or kept.store is not store or now - made > 2 * self.ttl_s:
                fresh = HealthSnapshot(store, policy=self.policy, generation=generation)
                self._kept = (fresh, now)
                self.made += 1
                return fresh
            if _pk(kept.generation) < _pk(generation):
                kept = kept.advanced(generation, hosts_named_after(store, _pk(kept.generation)))
                self._kept = (kept, made)
                self.advanced += 1
            if now - made <= self.ttl_s or self._renewing:
                return kept  # young enough, or a renewal is under way
            self._renewing = True
        self.spawn(lambda: self._renew(kept))
        return kept

    def _renew(self, old: HealthSnapshot) -> None:
        made = self.clock()
        try:
            new = old.renewed(old.store.newest_run_pk())
            for _ in range(3):  # runs stored during the renewal: advance it to the kept one's generation
                with self._lock:
                    cur = self._kept[0] if self._kept is not None else None
                    if cur is None or cur.store is not new.store:
                        return  # dropped meanwhile
                    if _pk(cur.generation) <= _pk(new.generation):
                        self._kept = (new, made)
                        self.renewed += 1
                        return
                    target = cur.generation
                new = new.advanced(target, hosts_named_after(new.store, _pk(new.generation)))
        except Exception as e:  # noqa: BLE001  nothing is lost: the next query reads the store itself
            log.warning("placement snapshot renewal failed: %s", e)
            with self._lock:
                self._kept = None  # not an old snapshot answering on: the next query's store error is its 503
        finally:
            with self._lock:
                self._renewing = False
