"""Which of many fixed substrings a line holds, in one pass over the line: the prefilter of every log parser.

A log parser reads a line only when it holds one of the literals its messages need (the message catalog's
``literal`` of each row, a parser's own trigger keys). :class:`Literals` answers "any of them?" and "which of
them?" with an Aho-Corasick automaton (the ``ahocorasick-rs`` package: Rust, linear in the line's length
whatever the number of literals; A. V. Aho and M. J. Corasick, "Efficient string matching: an aid to
bibliographic search", CACM 18(6), 1975). On the event-dense benchmark's lines it takes 0.9 us a line against
3.3 us for the trie-shaped ``re`` alternation it replaced (bench/postmortem.py, bench/MEASUREMENTS.md).

Pure; never raises on any ``str``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ahocorasick_rs import AhoCorasick, MatchKind


class Literals:
    """A fixed set of non-empty literals (case-sensitive, matched anywhere in a line).

    Raises:
        ValueError: no literal, or an empty one (it would match every line).
    """

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = list(dict.fromkeys(literals))
        if not self.literals or any(not lit for lit in self.literals):
            raise ValueError("literals must be non-empty strings, at least one")
        # Standard match kind: the only one that reports overlapping matches (a literal inside another's)
        self._ac = AhoCorasick(self.literals, matchkind=MatchKind.Standard)
        self._first = self._ac.find_matches_as_indexes
        self._all = self._ac.find_matches_as_strings

    def any_in(self, line: str) -> bool:
        """Whether ``line`` holds at least one literal."""
        return bool(self._first(line))

    def found_in(self, line: str) -> set[str]:
        """Every literal ``line`` holds (each once), overlapping ones included."""
        return set(self._all(line, overlapping=True))
