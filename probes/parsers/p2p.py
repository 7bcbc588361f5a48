"""Parser for ``nvidia-smi topo -p2p r|w|n|a`` (GPU peer-to-peer capability: read, write, NVLink, atomics).

The output is a GPU x GPU matrix of status codes followed by a legend::

            GPU0    GPU1
     GPU0   X       CNS
     GPU1   CNS     X

    Legend:
      X    = Self
      OK   = Status Ok
      CNS  = Chipset not supported
      ...

Rows may start with a space, self is a bare ``X``, the header may carry ANSI underline codes (with or without
ESC) and the legend may be cut. The matrix itself does not say which capability (r/w/n/a) was asked for: the
bundle file name does. Codes outside :class:`P2PStatus` are accepted when the output's own legend defines
them (newer drivers add entries); an undefined code raises ParseError rather than being guessed.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated

from pydantic import Field, StringConstraints

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.topo import strip_ansi

FMT = "p2p"

_GPU = re.compile(r"^GPU[0-9]+$")
_CODE = re.compile(r"^[A-Z]{1,4}$")
_LEGEND_ENTRY = re.compile(r"^\s*([A-Z]{1,4})\s*=\s*(.*?)\s*$")

#: one status cell (self cells are not stored)
P2PCell = Annotated[str, StringConstraints(pattern=r"^[A-Z]{1,4}$")]


class P2PStatus(str, Enum):
    """Codes of the ``nvidia-smi topo -p2p`` legend, as the drivers in tests/fixtures/topo/ print it."""

    OK = "OK"  #: Status Ok
    CNS = "CNS"  #: Chipset not supported
    GNS = "GNS"  #: GPU not supported
    TNS = "TNS"  #: Topology not supported
    NS = "NS"  #: Not supported
    U = "U"  #: Unknown


class P2PMatrix(Contract):
    """A parsed ``nvidia-smi topo -p2p <cap>``.

    ``status[a][b]`` is the code printed in row ``a``, column ``b`` (self omitted): a :class:`P2PStatus` value
    or another code the output's legend defines. ``legend`` maps each code to its description as printed
    (``{}`` when the legend is missing). ``warnings`` notes asymmetric pairs.
    """

    gpus: list[str]
    status: dict[str, dict[str, P2PCell]]
    legend: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)

    def supported(self, a: str, b: str) -> bool:
        """True when ``a -> b`` peer access is reported ``OK``. Raises ``KeyError`` for an unknown pair."""
        return self.status[a][b] == P2PStatus.OK.value

    @property
    def unsupported_pairs(self) -> list[tuple[str, str, str]]:
        """``(a, b, code)`` for every ordered pair whose status is not ``OK``."""
        return [
            (a, b, c) for a, row in self.status.items() for b, c in row.items() if c != P2PStatus.OK.value
        ]


def _rows(lines: list[str]) -> tuple[int, list[tuple[int, str, list[str]]]]:
    """Index of the first row and the contiguous rows as (1-based line, label, cells)."""

    def row(ln: str) -> tuple[str, list[str]] | None:
        toks = ln.split()
        if len(toks) >= 2 and _GPU.match(toks[0]) and _CODE.match(toks[1]):
            return toks[0], toks[1:]
        return None

    first = next((i for i, ln in enumerate(lines) if row(ln) is not None), None)
    if first is None:
        raise ParseError(FMT, None, "a matrix row such as ' GPU0   X       OK'")
    out: list[tuple[int, str, list[str]]] = []
    i = first
    while i < len(lines) and (r := row(lines[i])) is not None:
        out.append((i + 1, *r))
        i += 1
    return first, out


def _legend(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for ln in lines:
        m = _LEGEND_ENTRY.match(ln)
        if m:
            out[m.group(1)] = " ".join(m.group(2).split())
    return out


def parse_p2p(text: str) -> P2PMatrix:
    """Parse the text of ``nvidia-smi topo -p2p r|w|n|a``.

    Raises:
        ParseError: no GPU row; a header that does not name the row GPUs in order; a row with the wrong
            number of cells or a misplaced ``X``; a code neither in :class:`P2PStatus` nor in the legend.
    """
    lines = strip_ansi(text).splitlines()
    first, rows = _rows(lines)
    labels = [lab for _, lab, _ in rows]
    if len(set(labels)) != len(labels):
        raise ParseError(FMT, rows[0][0], "distinct GPU labels", " ".join(labels))
    head = next((i for i in range(first - 1, -1, -1) if lines[i].strip()), None)
    if head is None or re.sub(r"\s+", "", lines[head]) != "".join(labels):
        where = head + 1 if head is not None else first + 1
        raise ParseError(
            FMT,
            where,
            f"a header naming the row GPUs in order ({' '.join(labels)})",
            lines[head] if head is not None else "",
        )
    tail = lines[first + len(rows) :]
    legend = _legend(tail)
    known = {s.value for s in P2PStatus} | set(legend)
    n = len(labels)
    status: dict[str, dict[str, str]] = {}
    for i, (lineno, label, cells) in enumerate(rows):
        if len(cells) != n:
            raise ParseError(FMT, lineno, f"{n} cells (one per GPU)", " ".join(cells))
        status[label] = {}
        for j, cell in enumerate(cells):
            if (cell == "X") != (i == j):
                raise ParseError(FMT, lineno, f"{'X' if i == j else 'a status code'} in column {j + 1}", cell)
            if i != j:
                if cell not in known:
                    raise ParseError(
                        FMT, lineno, "a status code defined by the legend (OK, CNS, GNS, ...)", cell
                    )
                status[label][labels[j]] = cell
    for k, ln in enumerate(tail, start=first + len(rows) + 1):
        if ln.split()[:1] and _GPU.match(ln.split()[0]):
            raise ParseError(FMT, k, "one contiguous block of matrix rows", ln)
    warnings = [
        f"asymmetric: {a}->{b} {status[a][b]} but {b}->{a} {status[b][a]}"
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
        if status[a][b] != status[b][a]
    ]
    return P2PMatrix(gpus=labels, status=status, legend=legend, warnings=warnings)
