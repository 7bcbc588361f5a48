"""Screening schedules over an allocation: which groups of nodes measure a collective together, round by
round.

A *round* is a list of disjoint *groups* (tuples of host names); every group of a round runs its collective at
the same time, so a round costs one probe time whatever N is. Three schedules:

* :func:`round_robin` -- the circle method (Kirkman/Lucas, the same schedule SuperBench uses for its
  ``ib-traffic`` pair tests): N-1 rounds of N/2 disjoint pairs in which every pair of nodes meets exactly once
  (N rounds when N is odd; each round one node sits out).
* :func:`quick_screen` -- one round of disjoint pairs (an odd node out joins the last pair as a group of
  three).
* :func:`split_round` -- one step of adaptive localisation: split each suspect set in two halves and test each
  half, padded with known-good nodes so that every group is at least a pair. The driver that repeats it is
  :func:`fleetdx.orchestrator.preflight.bandwidth.screen_and_localise`.

Everything here is pure: host names in, groups out.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

Group = tuple[str, ...]
Round = list[Group]


def _check_unique(nodes: Sequence[str]) -> list[str]:
    out = list(nodes)
    if len(set(out)) != len(out):
        dup = sorted({n for n in out if out.count(n) > 1})
        raise ValueError(f"duplicate hosts in allocation: {dup}")
    return out


def round_robin(nodes: Sequence[str]) -> list[Round]:
    """The circle-method round-robin schedule.

    Node 0 stays fixed; the others rotate one place per round. With N even: N-1 rounds of N/2 pairs; with N
    odd a phantom "bye" is added: N rounds of (N-1)/2 pairs. Each unordered pair appears exactly once.

    Raises:
        ValueError: duplicate host names.
    """
    hosts = _check_unique(nodes)
    if len(hosts) < 2:
        return []
    bye: str | None = None
    ring: list[str | None] = list(hosts)
    if len(ring) % 2:
        ring.append(bye)
    n = len(ring)
    rounds: list[Round] = []
    for _ in range(n - 1):
        pairs: Round = []
        for i in range(n // 2):
            a, b = ring[i], ring[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b))
        rounds.append(pairs)
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def quick_screen(nodes: Sequence[str]) -> Round:
    """One round of disjoint neighbour pairs ``(n0, n1), (n2, n3), ...``; with N odd the last node joins the
    last pair (a group of three). Every node is measured once.

    Raises:
        ValueError: duplicate host names.
    """
    hosts = _check_unique(nodes)
    if len(hosts) < 2:
        return []
    groups: Round = [(hosts[i], hosts[i + 1]) for i in range(0, len(hosts) - 1, 2)]
    if len(hosts) % 2:
        groups[-1] = (*groups[-1], hosts[-1])
    return groups


def split_round(
    suspect_sets: Sequence[Sequence[str]],
    good: Sequence[str],
    partners_seen: Mapping[str, Collection[str]] | None = None,
) -> list[Round]:
    """One localisation step: each suspect set (known to hold at least one slow node) is split in two halves,
    and each half becomes a group; a half of one node is padded with one known-good node so that it can run a
    collective, preferring a good node it has not been measured with (``partners_seen``: suspect -> partners
    so far), so that a re-measurement is independent of the last one. Returns the rounds needed to run all
    these groups with disjoint nodes: usually one; more only when there are too few known-good nodes to pad
    every single-node half at once (each good node is used by at most one group per round).

    Raises:
        ValueError: a set is empty, sets overlap, or a single-node half cannot be padded (no good node).
    """
    seen: set[str] = set()
    halves: list[list[str]] = []
    for s in suspect_sets:
        members = list(s)
        if not members:
            raise ValueError("empty suspect set")
        if seen & set(members):
            raise ValueError("suspect sets overlap")
        seen |= set(members)
        if len(members) == 1:
            halves.append(members)
            continue
        mid = math.ceil(len(members) / 2)
        halves.extend([members[:mid], members[mid:]])
    pool = [g for g in good if g not in seen]
    pending_single = [h[0] for h in halves if len(h) == 1]
    if pending_single and not pool:
        raise ValueError("no known-good node to pair a single suspect with")
    prior = partners_seen or {}
    rounds: list[Round] = []
    this: Round = [tuple(h) for h in halves if len(h) > 1]
    while pending_single or this:
        free = list(pool)
        left: list[str] = []
        for s in pending_single:
            if not free:
                left.append(s)
                continue
            fresh = [g for g in free if g not in prior.get(s, ())]
            g = (fresh or free)[0]
            free.remove(g)
            this.append((s, g))
        rounds.append(this)
        this, pending_single = [], left
    return rounds


def localisation_round_bound(n_nodes: int) -> int:
    """The promised bound on rounds after the screen to name one slow node: ceil(log2 N) + 2 (halving, plus
    the pair-with-good step and the confirming re-measurement)."""
    return math.ceil(math.log2(max(n_nodes, 2))) + 2
