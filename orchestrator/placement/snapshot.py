"""Placement's view of the store at one instant, shared by many queries: each host's judgement and raw outputs.

A placement answer (:func:`fleetdx.orchestrator.placement.job.place`) needs the policy's judgement of every
candidate (:func:`~fleetdx.orchestrator.store.node_health.node_health` then
:func:`~fleetdx.orchestrator.placement.policy.judge`) and the chosen nodes' newest ``topo -m`` / ``numactl -H``.
Over a 1,000-node fleet that is about 30-50 ms of CPU per query, almost all of it the same for every query
(bench/MEASUREMENTS.md, Placement). A :class:`HealthSnapshot` computes each host's judgement the first time a
query names it and keeps it, with the host's raw outputs, so later queries about the same store state (other
nodes counts, GPUs per node, exclude lists, hostlists) only filter and rank.

Each host's judgement depends only on its own rows, the policy and the instant ``now``, so a judgement kept
here is exactly what ``place(request, store=store, now=snapshot.now, policy=snapshot.policy)`` computes for
that host (tests/test_place.py compares whole answers). A snapshot never notices a run stored after it began:
its owner drops it when the store changes (:class:`fleetdx.orchestrator.service.placement_cache.SnapshotKeeper`
keys it on :meth:`~fleetdx.orchestrator.store.Store.newest_run_pk` and a short lifetime).

Thread-safe (FastAPI runs sync endpoints in a thread pool); at most :data:`MAX_HOSTS` hosts are kept, hosts
beyond that are judged per query as without a snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence

from fleetdx.orchestrator.placement.policy import DEFAULT_POLICY, HealthPolicy, NodeJudgement, judge
from fleetdx.orchestrator.store.node_health import latest_raw, node_health
from fleetdx.orchestrator.store.store import Store

#: hosts whose judgement (and raw outputs) one snapshot keeps; beyond that they are computed per query
MAX_HOSTS = 200_000


class HealthSnapshot:
    """The judgements of ``store``'s hosts under ``policy`` at ``now`` (Unix seconds; default: the clock),
    computed on first use and kept. ``generation``: the store state it stands for (the caller's key, e.g.
    :meth:`Store.newest_run_pk`).

    Raises (from :meth:`judgements` / :meth:`raw`): :class:`~fleetdx.orchestrator.store.StoreError` as every
    store read does.
    """

    def __init__(
        self,
        store: Store,
        *,
        now: float | None = None,
        policy: HealthPolicy = DEFAULT_POLICY,
        generation: int | None = None,
    ) -> None:
        self.store, self.policy, self.generation = store, policy, generation
        self.now = time.time() if now is None else now
        self._judged: dict[str, NodeJudgement] = {}
        self._raw: dict[str, dict[str, str]] = {}
        self._raw_files: dict[str, frozenset[str]] = {}  # which files were asked for each host in _raw
        self._texts: dict[str, str] = {}  # one copy of each distinct text (a fleet shares a few matrices)
        self._lock = threading.Lock()  # guards the dicts
        self._filling = threading.Lock()  # one store read at a time: concurrent first queries wait, then share it

    def judgements(self, hosts: Sequence[str]) -> dict[str, NodeJudgement]:
        """``host -> judgement`` for each of ``hosts``; those not kept yet are read in one
        :func:`node_health` call (three queries) and kept."""
        with self._lock:
            missing = [h for h in dict.fromkeys(hosts) if h not in self._judged]
            if not missing:
                return {h: self._judged[h] for h in hosts}
        fresh: dict[str, NodeJudgement] = {}
        with self._filling:
            with self._lock:
                missing = [h for h in missing if h not in self._judged]
            if missing:
                p = self.policy
                records = node_health(
                    self.store,
                    missing,
                    open_since=self.now - p.open_finding_ttl_s,
                    history_since=self.now - p.history_window_s,
                )
                fresh = {h: judge(records.get(h), h, p) for h in missing}
        with self._lock:
            if fresh and len(self._judged) + len(fresh) <= MAX_HOSTS:
                self._judged.update(fresh)
            return {h: fresh.get(h) or self._judged[h] for h in hosts}

    def raw(self, hosts: Collection[str], files: Collection[str]) -> dict[str, dict[str, str]]:
        """As :func:`~fleetdx.orchestrator.store.node_health.latest_raw` (host -> file name -> text; a host with
        none of ``files`` stored is absent), each host's texts read once and kept."""
        want = frozenset(files)
        with self._lock:
            missing = [h for h in dict.fromkeys(hosts) if not want <= self._raw_files.get(h, frozenset())]
        fresh: dict[str, dict[str, str]] = {}
        if missing:
            with self._filling:
                with self._lock:
                    missing = [h for h in missing if not want <= self._raw_files.get(h, frozenset())]
                fresh = latest_raw(self.store, missing, want) if missing else {}
        found: dict[str, dict[str, str]] = {}
        with self._lock:
            for h in missing:
                got = {f: self._texts.setdefault(t, t) for f, t in fresh.get(h, {}).items()}
                if len(self._raw) < MAX_HOSTS or h in self._raw:
                    self._raw[h] = {**self._raw.get(h, {}), **got}
                    self._raw_files[h] = self._raw_files.get(h, frozenset()) | want
                found[h] = got
            for h in hosts:
                if h not in found:
                    found[h] = self._raw.get(h, {})
        out = {h: {f: t for f, t in v.items() if f in want} for h, v in found.items()}
        return {h: v for h, v in out.items() if v}

    def advanced(self, generation: int | None, changed: Collection[str]) -> HealthSnapshot:
        """This snapshot at a newer store state ``generation`` (the same instant and policy): what it kept of
        every host but ``changed`` (``node_health.hosts_named_after`` this snapshot's generation), which the new one
        reads again on first use. A host no newer run names has the same rows, so the same judgement."""
        new = HealthSnapshot(self.store, now=self.now, policy=self.policy, generation=generation)
        gone = set(changed)
        with self._lock:
            new._judged = {h: j for h, j in self._judged.items() if h not in gone}
            new._raw = {h: v for h, v in self._raw.items() if h not in gone}
            new._raw_files = {h: v for h, v in self._raw_files.items() if h not in gone}
            new._texts = dict(self._texts)
        return new

    def renewed(self, generation: int | None, now: float | None = None) -> HealthSnapshot:
        """A snapshot of the same store and policy at the later instant ``now`` (default: the clock) and store
        state ``generation`` (read by the caller before this call) that has already judged, and read the raw
        outputs of, every host this one has: the store reads a query would otherwise make, done ahead (by
        :class:`~fleetdx.orchestrator.service.placement_cache.SnapshotKeeper` off the request path). Raises
        what :meth:`judgements` / :meth:`raw` raise."""
        new = HealthSnapshot(self.store, now=now, policy=self.policy, generation=generation)
        with self._lock:
            judged = list(self._judged)
            by_files: dict[frozenset[str], list[str]] = {}
            for h, files in self._raw_files.items():
                by_files.setdefault(files, []).append(h)
        if judged:
            new.judgements(judged)
        for files, hosts in by_files.items():
            new.raw(hosts, files)
        return new
