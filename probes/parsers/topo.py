"""Parser for ``nvidia-smi topo -m`` (the GPU/NIC link matrix with CPU/NUMA affinity).

Link classes are as the ``nvidia-smi topo -m`` legend defines them: ``X`` (self), ``NV#`` (a bonded set of #
NVLinks), ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS`` (older drivers print ``SOC``; it is normalised to
``SYS``).

How the text is read (every variant below was seen in real captured outputs, see tests/fixtures/topo/):

1. ANSI SGR codes are removed, with or without their ESC byte (``\\x1b[4m``, ``[4m``, ``[0m``): recent drivers
   underline the header and copy/paste often keeps only the printable part.
2. **Row labels define the matrix.** A row is a line whose first token is a device name (``GPU3``, ``NIC0``,
   ``mlx5_bond_0``, ``mlx4_0``, ...) and whose second token is a link class or ``X``; the block of rows runs
   from there to the first blank or non-label line (so a bad cell inside it is reported, not skipped).
   The rows, in order, name the columns (the matrix is square), so a header whose separators were lost
   (``GPU0GPU1GPU2``), mixed with single spaces, or indented by a tab, 5 or 8 spaces or nothing is still
   read right. The header is only checked: with all whitespace removed it must be the row labels followed
   by the names of the trailing columns (``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``, each
   optional, in that order).
3. A row's first ``N`` tokens (``N`` = number of rows) are its link cells; self is ``X`` whether printed
   ``" X "``, ``"X "`` or ``"X"``. Whatever follows is the affinity part, mapped onto the header's trailing
   columns by :func:`_affinity_cells` (tab positions when they are consistent, else a documented shape rule).
4. The legend (``Legend:``) gives the driver generation (:class:`TopoLegend`); the ``NIC Legend:`` maps the
   ``NICn`` labels to real device names (any order, any number of NICs).

A matrix that is not symmetric is returned with a warning (asymmetry is a finding for topology/, not a
parse failure). Anything else that does not fit raises :class:`~fleetdx.probes.errors.ParseError` naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated

from pydantic import Field, StringConstraints

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "topo"

#: one cell of the matrix after normalisation (SOC -> SYS); self cells are not stored
LINK_RE = r"^(NV[0-9]+|PIX|PXB|PHB|NODE|SYS)$"
LinkCell = Annotated[str, StringConstraints(pattern=LINK_RE)]
#: a cell as printed: the classes above, the self marker and the pre-NODE-era ``SOC``
_RAW_CELL = re.compile(r"^(X|SOC|NV[0-9]+|PIX|PXB|PHB|NODE|SYS)$")
#: SGR escape sequences, with or without the ESC byte (pasted outputs often lose it but keep ``[4m``)
_ANSI = re.compile(r"\x1b?\[[0-9;]*m")
#: a device name as a row label: GPUn, NICn, or an RDMA device name (mlx5_0, mlx5_bond_0, mlx5_ib3, ...)
_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
_GPU = re.compile(r"^GPU[0-9]+$")
_NIC_LABEL = re.compile(r"^NIC[0-9]+$")
_NIC_LEGEND = re.compile(r"^\s*(NIC[0-9]+)\s*:\s*(\S+)\s*$")
_LEGEND_ENTRY = re.compile(r"^\s*(X|SOC|SYS|NODE|PHB|PXB|PIX|NV#)\s*=\s*(.*?)\s*$")
#: ids are capped at 9 digits before int() (Python refuses int() of strings over 4300 digits)
_CPU_RANGE = re.compile(r"^([0-9]{1,9})(?:-([0-9]{1,9}))?$")
_INT = re.compile(r"^[0-9]{1,9}$")

#: upper bounds that reject garbage before a range is expanded: Linux CONFIG_NR_CPUS is at most 8192 and
#: CONFIG_NODES_SHIFT at most 10 (1024 NUMA nodes) in the kernel's Kconfig; we allow generous margins.
MAX_CPU_ID = 65535
MAX_NUMA_ID = 4095


class TopoLegend(str, Enum):
    """Which generation of the ``nvidia-smi topo -m`` legend the output carries.

    * ``legacy``: ``SOC`` (SMP link between CPU sockets), no ``NODE`` line; PIX/PXB say "PCIe switch".
    * ``middle``: ``SYS`` and ``NODE`` lines; PIX/PXB still say "PCIe switch(es)".
    * ``modern``: PIX says "at most a single PCIe bridge", PXB "multiple PCIe bridges".
    """

    LEGACY = "legacy"
    MIDDLE = "middle"
    MODERN = "modern"


class AffinityColumn(str, Enum):
    """The trailing (non-link) columns of ``topo -m``, in the order the driver prints them."""

    CPU = "CPU Affinity"
    NUMA = "NUMA Affinity"
    GPU_NUMA_ID = "GPU NUMA ID"


class TopoGpu(Contract):
    """One GPU row. ``cpu_affinity`` is the expanded CPU list (``[]`` when the cell is empty or ``N/A``, as
    under a cgroup-restricted job); ``numa_affinity`` is ``None`` when the column is absent or ``N/A``;
    ``gpu_numa_id`` is ``None`` when absent or ``N/A``."""

    name: str  # "GPU0"
    cpu_affinity: list[int] = Field(default_factory=list)
    cpu_affinity_raw: str | None = None  # the cell as printed, e.g. "0-31,64-95", "N/A", "" -> None
    numa_affinity: list[int] | None = None
    gpu_numa_id: int | None = None


class TopoNic(Contract):
    """One NIC column/row. ``name`` is the real device name (``mlx5_0``, ``mlx5_bond_0``); ``label`` is the
    ``NICn`` column label when the output used a NIC Legend, else ``None``. When the output uses ``NICn``
    labels but its NIC Legend is missing, ``name`` and ``label`` are both the label (a warning says so)."""

    name: str
    label: str | None = None


class TopoMatrix(Contract):
    """A parsed ``nvidia-smi topo -m``.

    ``links[a][b]`` is the link class between devices ``a`` and ``b`` keyed by real device names (GPUs and
    NICs, rows as printed; self cells omitted). ``legend`` is ``"legacy"`` (SOC era), ``"middle"``
    (SYS and NODE, PIX/PXB say "PCIe switch"), ``"modern"`` (PIX/PXB say "PCIe bridge(s)") or ``None``
    when the output has no legend (or too little of it to tell). ``columns`` lists the trailing columns
    the header names (empty when the header names none). ``warnings`` holds what was odd but readable
    (an asymmetric cell pair, an unresolved ``NICn`` label).
    """

    gpus: list[TopoGpu]
    nics: list[TopoNic] = Field(default_factory=list)
    links: dict[str, dict[str, LinkCell]]
    legend: TopoLegend | None = None
    columns: list[AffinityColumn] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def link(self, a: str, b: str) -> str:
        """Link class between ``a`` and ``b`` (``"X"`` when ``a == b``). Raises ``KeyError`` if unknown."""
        if a == b:
            return "X"
        return self.links[a][b]

    @property
    def gpu_names(self) -> list[str]:
        return [g.name for g in self.gpus]

    @property
    def nic_names(self) -> list[str]:
        return [n.name for n in self.nics]


def strip_ansi(text: str) -> str:
    """Remove SGR codes (``ESC[4m``, ``ESC[0m``) and their ESC-less remnants (``[4m``) from ``text``."""
    return _ANSI.sub("", text)


def expand_id_list(cell: str, *, fmt: str, line: int, limit: int) -> list[int]:
    """Expand a Linux cpulist such as ``"0-31,64-95"`` into ``[0, ..., 31, 64, ..., 95]`` (sorted, unique).

    Format: comma-separated ids or inclusive ``a-b`` ranges (kernel ``Documentation/admin-guide/cputopology``
    "cpulist" format). Raises ``ParseError`` on any other text, a reversed range or an id above ``limit``.
    """
    out: set[int] = set()
    for part in cell.split(","):
        m = _CPU_RANGE.match(part)
        if m is None:
            raise ParseError(fmt, line, "a CPU/NUMA list such as 0-31,64-95", cell)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or hi > limit:
            raise ParseError(fmt, line, f"ids in ascending ranges no greater than {limit}", cell)
        out.update(range(lo, hi + 1))
    return sorted(out)


@dataclass(frozen=True)
class _Row:
    lineno: int  # 1-based
    label: str
    tokens: list[str]  # the whitespace-separated tokens after the label
    rest: str  # the raw text after the label


def _split_row(lineno: int, line: str, *, strict: bool = True) -> _Row | None:
    """The line as a matrix row, or ``None`` when it is not one. A strict row is a device label followed by
    a link/self cell; a lenient one (a line inside the matrix block) only needs the label, so that a bad
    cell is reported as such by :func:`_link_grid` instead of ending the block."""
    tokens = line.split()
    if not tokens or not _LABEL.match(tokens[0]):
        return None
    if strict and (len(tokens) < 2 or not _RAW_CELL.match(tokens[1])):
        return None
    start = line.index(tokens[0]) + len(tokens[0])
    return _Row(lineno, tokens[0], tokens[1:], line[start:])


def _matrix_rows(lines: Sequence[str]) -> tuple[int, list[_Row]]:
    """Index of the first row line and the block of rows: from the first strict row to the first blank or
    non-row line. Raises ParseError if there is no row, or if a row appears again after the block ended."""
    first = next((i for i, ln in enumerate(lines) if _split_row(i + 1, ln) is not None), None)
    if first is None:
        raise ParseError(FMT, None, "a matrix row such as 'GPU0  X  NV12 ...'")
    rows: list[_Row] = []
    i = first
    while i < len(lines) and (row := _split_row(i + 1, lines[i], strict=False)) is not None:
        rows.append(row)
        i += 1
    for j in range(i, len(lines)):
        if lines[j].strip().startswith("Legend"):
            break
        if _split_row(j + 1, lines[j]) is not None:
            raise ParseError(FMT, j + 1, "one contiguous block of matrix rows", lines[j])
    return first, rows


def _header_columns(lines: Sequence[str], first: int, labels: list[str]) -> list[AffinityColumn]:
    """Check the header against the row labels and return its trailing columns (see the module doc)."""
    idx = next((i for i in range(first - 1, -1, -1) if lines[i].strip()), None)
    if idx is None:
        raise ParseError(FMT, first + 1, "a header line naming the devices before the first row")
    compact = re.sub(r"\s+", "", lines[idx])
    names = "".join(labels)
    if not compact.startswith(names):
        raise ParseError(
            FMT, idx + 1, f"a header naming the row devices in order ({' '.join(labels)})", lines[idx]
        )
    tail = compact[len(names) :]
    columns: list[AffinityColumn] = []
    for col in AffinityColumn:
        key = col.value.replace(" ", "")
        if tail.startswith(key):
            columns.append(col)
            tail = tail[len(key) :]
    if tail:
        raise ParseError(
            FMT, idx + 1, "trailing columns among CPU Affinity, NUMA Affinity, GPU NUMA ID", tail
        )
    return columns


def _affinity_cells(
    row: _Row, n: int, columns: list[AffinityColumn]
) -> tuple[dict[AffinityColumn, str], bool]:
    """Map the text after the ``n`` link cells of ``row`` onto ``columns``; absent/empty cells are left out.
    Returns the cells and whether they were placed by tab position (``False``: by the right-alignment rule).

    With tabs, cells are taken by position (empty cells count), after dropping the one empty cell recent
    drivers print between ``NUMA Affinity`` and ``GPU NUMA ID`` (``"0\\t\\tN/A"``, seen in every captured
    output with that column). When the positions do not fit (tabs expanded to spaces, hand spacing), the
    non-empty tokens are **right-aligned** to the columns: a cell the driver leaves empty is the CPU
    affinity (a cgroup-restricted job), while NUMA Affinity and GPU NUMA ID are always printed (a number,
    a list or ``N/A``). Limit: with spaces only, an empty NUMA Affinity next to a present CPU Affinity
    cannot be told from an empty CPU Affinity; the shapes are then checked (GPU NUMA ID must be an integer
    or ``N/A``), and a list that reads as neither raises ParseError rather than being guessed. A GPU row
    read by this rule with cells missing gets a warning in :attr:`TopoMatrix.warnings` naming the columns
    assumed empty, so the assumption is visible.
    """
    end = 0
    for tok in row.tokens[:n]:
        end = row.rest.index(tok, end) + len(tok)
    rest = row.rest[end:]
    extra = row.tokens[n:]
    if len(extra) > len(columns):
        raise ParseError(FMT, row.lineno, f"{n} link cells then at most {len(columns)} affinity cells", rest)
    if "\t" in rest:
        cells = rest.lstrip(" ").removeprefix("\t").split("\t")
        cells = [c.strip() for c in cells]
        if (
            len(cells) == len(columns) + 1
            and columns[-1:] == [AffinityColumn.GPU_NUMA_ID]
            and len(columns) >= 2
            and cells[-2] == ""
        ):
            del cells[-2]
        if len(cells) == len(columns) and all(c.split() == [c] or c == "" for c in cells):
            return {col: c for col, c in zip(columns, cells, strict=True) if c}, True
    return dict(zip(columns[len(columns) - len(extra) :], extra, strict=True)), False


def _gpu(row: _Row, cells: dict[AffinityColumn, str]) -> TopoGpu:
    cpu_raw = cells.get(AffinityColumn.CPU)
    cpu: list[int] = []
    if cpu_raw is not None and cpu_raw != "N/A":
        cpu = expand_id_list(cpu_raw, fmt=FMT, line=row.lineno, limit=MAX_CPU_ID)
    numa_raw = cells.get(AffinityColumn.NUMA)
    numa = None
    if numa_raw is not None and numa_raw != "N/A":
        numa = expand_id_list(numa_raw, fmt=FMT, line=row.lineno, limit=MAX_NUMA_ID)
    nid_raw = cells.get(AffinityColumn.GPU_NUMA_ID)
    nid = None
    if nid_raw is not None and nid_raw != "N/A":
        if not _INT.match(nid_raw) or int(nid_raw) > MAX_NUMA_ID:
            raise ParseError(FMT, row.lineno, "GPU NUMA ID as an integer or N/A", nid_raw)
        nid = int(nid_raw)
    return TopoGpu(
        name=row.label, cpu_affinity=cpu, cpu_affinity_raw=cpu_raw, numa_affinity=numa, gpu_numa_id=nid
    )


def _link_grid(rows: list[_Row]) -> list[list[str]]:
    """The ``N x N`` cells of the matrix as printed (``SOC`` -> ``SYS``), checked: ``X`` exactly on the
    diagonal, a link class everywhere else, no extra link cells."""
    n = len(rows)
    grid: list[list[str]] = []
    for i, row in enumerate(rows):
        cells = row.tokens[:n]
        if len(cells) < n or (len(row.tokens) > n and _RAW_CELL.match(row.tokens[n])):
            raise ParseError(FMT, row.lineno, f"{n} link cells (one per row label)", row.rest)
        for j, cell in enumerate(cells):
            if not _RAW_CELL.match(cell) or (cell == "X") != (i == j):
                want = "X (self)" if i == j else "a link class (NV#, PIX, PXB, PHB, NODE, SYS, SOC)"
                raise ParseError(FMT, row.lineno, f"{want} in column {j + 1}", cell)
        grid.append(["SYS" if c == "SOC" else c for c in cells])
    return grid


def _legend(lines: Sequence[str]) -> TopoLegend | None:
    """Legend generation from the ``Legend:`` entries (whitespace-insensitive).

    ``SOC`` only exists in the legacy legend; the middle and modern legends differ only in the PXB/PIX wording
    ("PCIe switch(es)" vs "PCIe bridge(s)"), so a legend cut before those lines (both print X, SYS, NODE, PHB
    first) gives ``None``, as does a missing legend.
    """
    entries: dict[str, str] = {}
    for ln in lines:
        m = _LEGEND_ENTRY.match(ln)
        if m:
            entries[m.group(1)] = " ".join(m.group(2).split())
    pcie = entries.get("PXB", "") + " " + entries.get("PIX", "")
    if "SOC" in entries:
        return TopoLegend.LEGACY
    if "bridge" in pcie:
        return TopoLegend.MODERN
    if "switch" in pcie and ("SYS" in entries or "NODE" in entries):
        return TopoLegend.MIDDLE
    return None


def _nic_legend(lines: Sequence[str], start: int) -> dict[str, str]:
    """``NICn -> device name`` from the ``NIC Legend:`` lines (``lines[0]`` is line ``start + 1`` of the
    output). Raises ParseError on a conflicting entry."""
    out: dict[str, str] = {}
    for i, ln in enumerate(lines, start=start):
        m = _NIC_LEGEND.match(ln)
        if m:
            label, dev = m.groups()
            if out.get(label, dev) != dev:
                raise ParseError(FMT, i + 1, f"one device name for {label}", ln)
            out[label] = dev
    return out


def _nics(rows: list[_Row], legend: dict[str, str], warnings: list[str]) -> list[TopoNic]:
    nics: list[TopoNic] = []
    for row in rows:
        if not _NIC_LABEL.match(row.label):
            nics.append(TopoNic(name=row.label))
        elif row.label in legend:
            nics.append(TopoNic(name=legend[row.label], label=row.label))
        else:
            warnings.append(f"{row.label} has no NIC Legend entry; its device name is unknown")
            nics.append(TopoNic(name=row.label, label=row.label))
    return nics


def parse_topo(text: str) -> TopoMatrix:
    """Parse the text of ``nvidia-smi topo -m`` (any variant listed in the module doc).

    Returns a :class:`TopoMatrix` with GPUs first, then NICs, in printed order.

    Raises:
        ParseError: no matrix row; a header that does not name the row devices; a row with the wrong
            number of link cells, a misplaced ``X`` or an unknown link class; GPU rows after NIC rows;
            a duplicate device; a malformed CPU/NUMA list or GPU NUMA ID; NIC rows with affinity cells.
    """
    lines = strip_ansi(text).splitlines()
    first, rows = _matrix_rows(lines)
    labels = [r.label for r in rows]
    grid = _link_grid(rows)
    columns = _header_columns(lines, first, labels)
    n_gpus = sum(1 for lab in labels if _GPU.match(lab))
    if n_gpus == 0 or any(not _GPU.match(lab) for lab in labels[:n_gpus]):
        bad = next((r for r in rows[:n_gpus] if not _GPU.match(r.label)), rows[0])
        raise ParseError(FMT, bad.lineno, "GPU rows (GPU0, GPU1, ...) before NIC rows", bad.label)
    warnings: list[str] = []
    nics = _nics(rows[n_gpus:], _nic_legend(lines[first + len(rows) :], first + len(rows)), warnings)
    names = labels[:n_gpus] + [nic.name for nic in nics]
    if len(set(names)) != len(names):
        raise ParseError(FMT, rows[0].lineno, "distinct device names", " ".join(names))
    gpus: list[TopoGpu] = []
    for r in rows[:n_gpus]:
        cells, by_position = _affinity_cells(r, len(rows), columns)
        if not by_position and 0 < len(cells) < len(columns):
            missing = ", ".join(c.value for c in columns if c not in cells)
            warnings.append(
                f"{r.label}: {len(cells)} affinity cells for {len(columns)} columns; assumed empty: {missing}"
            )
        gpus.append(_gpu(r, cells))
    for r in rows[n_gpus:]:
        if _affinity_cells(r, len(rows), columns)[0]:
            raise ParseError(FMT, r.lineno, "no affinity cells on a NIC row", r.rest)
    links = {a: {b: grid[i][j] for j, b in enumerate(names) if i != j} for i, a in enumerate(names)}
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            b = names[j]
            if links[a][b] != links[b][a]:
                warnings.append(f"asymmetric: {a}->{b} {links[a][b]} but {b}->{a} {links[b][a]}")
    return TopoMatrix(
        gpus=gpus,
        nics=nics,
        links=links,
        legend=_legend(lines[first + len(rows) :]),
        columns=columns,
        warnings=warnings,
    )
