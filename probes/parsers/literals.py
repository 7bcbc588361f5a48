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

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate
from operator import add, methodcaller

from ahocorasick_rs import AhoCorasick, BytesAhoCorasick, MatchKind

_UTF8 = methodcaller("encode", "utf-8", "surrogatepass")


class Literals:
    """A fixed set of non-empty literals (case-sensitive, matched anywhere in a line).

    Raises:
        ValueError: no literal, an empty one (it would match every line), or one holding a newline (a line's
            end).
    """

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = list(dict.fromkeys(literals))
        if not self.literals or any(not lit or "\n" in lit for lit in self.literals):
            raise ValueError("literals must be non-empty strings without a newline, at least one")
        # Standard match kind: the only one that reports overlapping matches (a literal inside another's)
        self._ac = AhoCorasick(self.literals, matchkind=MatchKind.Standard)
        self._first = self._ac.find_matches_as_indexes
        self._all = self._ac.find_matches_as_strings
        # a block's lines in one pass: over UTF-8 bytes (str offsets cost a conversion), leftmost-first (which
        # keeps the automaton's fast literal prefilter; any one match a line is enough to flag it)
        self._block = BytesAhoCorasick(
            [lit.encode("utf-8", "surrogatepass") for lit in self.literals], matchkind=MatchKind.LeftmostFirst
        ).find_matches_as_indexes
        self._blob_safe = not any("\ufffd" in lit for lit in self.literals)

    def any_in(self, line: str) -> bool:
        """Whether ``line`` holds at least one literal."""
        return bool(self._first(line))

    def found_in(self, line: str) -> set[str]:
        """Every literal ``line`` holds (each once), overlapping ones included."""
        return set(self._all(line, overlapping=True))

    def lines_holding(self, lines: Sequence[str], blob: bytes | None = None) -> list[int]:
        """The indexes, ascending, of the ``lines`` that hold at least one literal (exactly those for which
        :meth:`any_in` is true), in one pass over the block: about 30x cheaper a line than :meth:`any_in` on a job
        log's lines when the literals are rare.

        ``blob``, when given, is the lines as they were read: lines without newlines whose bytes, joined by
        ``b"\\n"``, decode (UTF-8, bad bytes replaced) to ``lines`` joined by newlines (a reader's block: it saves
        encoding them again). A literal is valid UTF-8 and starts on a character, so a byte the decoder replaced
        neither makes nor breaks its match: the answer is the same (unless a literal holds U+FFFD, the
        replacement character itself: the lines are then encoded)."""
        if blob is not None and self._blob_safe:
            return self._holding(blob)
        if "\n" not in "".join(lines):  # lines without newlines (a reader's): joined by one, counted by them
            return self._holding("\n".join(lines).encode("utf-8", "surrogatepass"))
        encoded = list(map(_UTF8, lines))
        # each line followed by a newline, which no literal holds: no match spans two lines; line i starts at the
        # bytes of the lines before it plus their i newlines
        starts = list(map(add, accumulate(map(len, encoded), initial=0), range(len(encoded) + 1)))
        return sorted({bisect_right(starts, s) - 1 for _, s, _ in self._block(b"\n".join(encoded))})

    def _holding(self, blob: bytes) -> list[int]:
        """:meth:`lines_holding` of lines without newlines given as their UTF-8 bytes joined by newlines."""
        out: list[int] = []
        line = pos = 0
        for _, start, _ in self._block(blob):  # ascending, none spanning a newline (no literal holds one)
            line += blob.count(b"\n", pos, start)
            pos = start
            if not out or out[-1] != line:
                out.append(line)
        return out
