"""Interval arithmetic on numpy arrays: unions, their lengths, and the part of one set not covered by another.
Pure; times in any one unit (microseconds in traces).

The union is HTA's ``merge_kernel_intervals`` (``hta/utils/utils.py``): sort by start, start a new group where
a start lies after the running maximum of the previous ends, take each group's min start and max end.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float64]


def merge(start: F, end: F) -> tuple[F, F]:
    """The union of the intervals ``[start[i], end[i])`` as sorted, disjoint ``(starts, ends)``."""
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def length(start: F, end: F) -> float:
    """Total length of the union of the intervals."""
    s, e = merge(start, end)
    return float(np.sum(e - s)) if s.size else 0.0


def clip(start: F, end: F, lo: float, hi: float) -> tuple[F, F]:
    """The intervals cut to ``[lo, hi)``, empty ones dropped."""
    s, e = np.maximum(start, lo), np.minimum(end, hi)
    keep = e > s
    return s[keep], e[keep]


def uncovered(start: F, end: F, cover_start: F, cover_end: F) -> float:
    """Length of the union of the first set not covered by the union of the second:
    ``|A u B| - |B|``."""
    if start.size == 0:
        return 0.0
    both = length(np.concatenate([start, cover_start]), np.concatenate([end, cover_end]))
    return both - length(cover_start, cover_end)


def subtract(start: F, end: F, cover_start: F, cover_end: F) -> tuple[F, F]:
    """The union of the first set minus the union of the second, as sorted, disjoint ``(starts, ends)``."""
    a_s, a_e = merge(start, end)
    b_s, b_e = merge(cover_start, cover_end)
    if a_s.size == 0 or b_s.size == 0:
        return a_s, a_e
    cuts = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    lo, hi = cuts[:-1], cuts[1:]
    mid = (lo + hi) / 2
    in_a = np.searchsorted(a_s, mid, side="right") - 1
    in_a = (in_a >= 0) & (mid < a_e[np.clip(in_a, 0, None)])
    in_b = np.searchsorted(b_s, mid, side="right") - 1
    in_b = (in_b >= 0) & (mid < b_e[np.clip(in_b, 0, None)])
    keep = in_a & ~in_b
    return merge(lo[keep], hi[keep])
