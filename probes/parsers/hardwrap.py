"""Paste damage: a log hard-wrapped at a fixed width, its lines joined again. Pure.

A log copied from a terminal, a forum's code box or a blog's ``<pre>`` often reaches fleetdx cut into lines of
one width: every line longer than ``W`` characters became a line of exactly ``W`` and the rest of it (``...failed:
un`` / ``handled cuda error``), sometimes with every line padded with blanks to ``W`` (a terminal's copy). No
pattern matches a message cut in two, so such a log is read with its wrapped lines joined again.

A sample of the log (its first :data:`SAMPLE_LINES` lines) is judged wrapped at ``W`` when ``W``, its longest
line, is :data:`MIN_WIDTH` to :data:`MAX_WIDTH` characters and at least :data:`MIN_WRAPPED` lines exactly ``W`` long,
different even with their numbers ignored, are followed by a line that can be their rest (below). An unwrapped log
has lines of every length, its longest seldom twice over; where its lines share one length (one message printed
by every rank) the next line starts as they do. The log is judged padded when most of its non-empty lines are
exactly ``W`` long. Then a line of exactly ``W`` characters (padded: one that does not end in two blanks, the
padding of a line that ended there; never a rule of one repeated character) is joined with the next one, unless
the next line is empty, starts the way a log line does (indented, a bracket, a date or clock, a glog or syslog
stamp, ``Traceback (``, ``File "``, a table's ``|``) or with the wrapped line's own first characters: a log whose
lines merely share a length (dmesg lines of one format) is read as it is. A logical line grows to
:data:`MAX_JOINED` characters at most: the next line then starts one of its own (nothing is dropped).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

#: the lines a wrap width is judged on
SAMPLE_LINES = 4000
#: the narrowest width judged a wrap (narrower lines are not cut by terminals or code boxes)
MIN_WIDTH = 60
#: the widest width judged a wrap (a terminal or a code box; longer equal lines are lines cut by a reader's cap)
MAX_WIDTH = 512
#: different lines of exactly the longest length that make a wrap
MIN_WRAPPED = 2
#: the share of non-empty lines of exactly the width that makes a padded paste
PADDED_SHARE = 0.6
#: the most characters one joined line keeps
MAX_JOINED = 16 * 1024
#: how a log line starts: such a line starts a line of its own, never a wrapped line's rest
_STARTS_LINE_RE = re.compile(
    r"(?:\s|\[|\(|<|\{|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[A-Z][a-z]{2} [ \d]\d |[IWEFD]\d{4} |Traceback \(|File \""
    r"|\*\*\*|={3}|-{3}|#|>>> |\||\+[-=])"
)


_DIGITS_RE = re.compile(r"\d+")


def _rest_of(cut: str, line: str) -> bool:
    """Whether ``line`` can be the rest of the wrapped line that starts with ``cut``: not empty, not started the
    way a log line starts, and not with ``cut``'s own first characters (the next line of a log whose lines share
    one prefix and length: ``gpu5: [rank0]: ...``, ``gpu5: [rank1]: ...``)."""
    return bool(line.strip()) and not _STARTS_LINE_RE.match(line) and line[:4] != cut[:4]


@dataclass
class Unwrapper:
    """Joins the lines of a log hard-wrapped at ``width`` (see the module doc), fed in blocks; build it with
    :meth:`detect`."""

    width: int
    padded: bool
    _held: list[str] = field(default_factory=list)  #: the physical lines of the logical line still open
    _size: int = 0

    @classmethod
    def detect(cls, sample: Sequence[str]) -> Unwrapper | None:
        """An unwrapper for the log whose first lines are ``sample`` (lines without their newlines), or ``None``
        when they show no hard wrap."""
        lines = [s.rstrip("\r") for s in sample[:SAMPLE_LINES]]
        width = max(map(len, lines), default=0)
        if not MIN_WIDTH <= width <= MAX_WIDTH:
            return None
        at_width = [s for s in lines if len(s) == width]
        if len(set(at_width)) < MIN_WRAPPED:
            return None
        filled = sum(1 for s in lines if s.strip())
        uw = cls(width, padded=len(at_width) >= PADDED_SHARE * filled)
        pairs = zip(lines, lines[1:], strict=False)
        cut = {_DIGITS_RE.sub("0", a) for a, b in pairs if uw._cut(a) and _rest_of(a, b)}
        return uw if len(cut) >= MIN_WRAPPED else None

    def _cut(self, line: str) -> bool:
        """Whether ``line`` (without its newline) is a wrapped line's start: its rest is the next line. A rule of
        one character (torch elastic's summary frames its entries with 60 ``-`` or ``=``) is a whole line."""
        s = line.rstrip("\r")
        return len(s) == self.width and not (self.padded and s[-2:].isspace()) and len(set(s)) > 1

    def lines(self, block: Iterable[str]) -> Iterator[tuple[str, int]]:
        """The logical lines of ``block`` (the next physical lines of the log), each with how many physical lines
        it spans; a line whose rest may be in the next block is held until it comes (or :meth:`end`)."""
        for line in block:
            if self._held and (not _rest_of(self._held[0], line) or self._size + len(line) > MAX_JOINED):
                yield from self.end()
            self._held.append(line)
            self._size += len(line)
            if not self._cut(line):
                yield from self.end()

    def end(self) -> Iterator[tuple[str, int]]:
        """The logical line still held, if any (the log's end)."""
        if self._held:
            held, self._held, self._size = self._held, [], 0
            yield "".join(s.rstrip("\r") for s in held), len(held)


def unwrapped(lines: Iterable[str]) -> Iterator[tuple[str, int]]:
    """The logical lines of a log given as physical lines (without newlines), each with how many physical lines
    it spans: its hard-wrapped lines joined (module doc), else every line as it is with a span of 1."""
    it = iter(lines)
    sample: list[str] = []
    for line in it:
        sample.append(line)
        if len(sample) >= SAMPLE_LINES:
            break
    uw = Unwrapper.detect(sample)
    if uw is None:
        yield from ((s, 1) for s in sample)
        yield from ((s, 1) for s in it)
        return
    yield from uw.lines(sample)
    yield from uw.lines(it)
    yield from uw.end()
