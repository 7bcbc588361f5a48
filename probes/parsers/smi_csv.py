"""Parser for ``nvidia-smi --query-gpu=... / --query-compute-apps=... / --query-remapped-rows=...
--format=csv[,noheader][,nounits]``.

:class:`SmiCsv` keeps the generic table (column name -> raw cell) and offers typed accessors for the three
query kinds: :meth:`SmiCsv.gpus`, :meth:`SmiCsv.compute_apps`, :meth:`SmiCsv.remapped_rows`.

Format, as nvidia-smi prints it: cells separated by ``", "``; the header names each field with its unit in
brackets (``memory.total [MiB]``) and may print a field under its canonical name rather than the alias that
was asked for (``clocks.sm`` -> ``clocks.current.sm [MHz]``, ``clocks_throttle_reasons.active`` ->
``clocks_event_reasons.active``, ``used_memory`` -> ``used_gpu_memory [MiB]``). Missing values are
``[N/A]`` or ``[Not Supported]``; cells carry units (``1980 MHz``, ``80 %``) unless ``nounits`` was given.
A query with no result (no compute process) prints the header alone: that is zero rows, not an error.
With ``noheader`` the caller passes the field list it asked for.

A first line is a header only if it looks like one: at most :data:`MAX_HEADER_CHARS` characters and
:data:`MAX_COLUMNS` cells, each a field name as nvidia-smi spells them (lower-case first letter, dotted
words: ``clocks.current.sm``, ``encoder.stats.sessionCount``) with an optional short unit in brackets, and
at least one cell naming a known field family (``index``, ``memory.*``, ``remapped_rows.*`` ...). Lines are
read one at a time and a line's cells are counted before it is split, so a 50 MB line costs no more than
its own text.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from enum import Enum

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers import smi_values as V
from fleetdx.probes.parsers.smi_values import ClockEventReason

FMT = "smi-csv"
#: one header cell: a field name (lower-case first letter, dotted words of letters, digits and ``_``) and an
#: optional unit in brackets (``[MiB]``, ``[MHz]``, ``[W]``, ``[%]``, ``[us]``)
_HEADER_CELL_RE = re.compile(r"^([a-z][A-Za-z0-9_]{0,63}(?:\.[A-Za-z0-9_]{1,64}){0,6})(?: \[([^\]\[]{1,16})\])?$")
#: nvidia-smi has some 200 query fields (``--help-query-gpu``): a header is never longer than this
MAX_HEADER_CHARS = 16384
MAX_COLUMNS = 256
#: the first dotted word of the ``--query-gpu``, ``--query-compute-apps``, ``--query-remapped-rows`` and
#: ``--query-retired-pages`` fields (``nvidia-smi --help-query-*``): a header names at least one of them
KNOWN_FIELD_ROOTS = frozenset(
    {
        "accounting", "addressing_mode", "c2c", "clocks", "clocks_event_reasons", "clocks_event_reasons_counters",
        "clocks_throttle_reasons", "compute_cap", "compute_mode", "count", "display_active", "display_attached",
        "display_mode", "driver_model", "driver_version", "ecc", "encoder", "enforced", "fabric", "fan", "fbc",
        "gom", "gpu_bus_id", "gpu_name", "gpu_serial", "gpu_uuid", "gsp", "index", "inforom", "memory", "mig",
        "module", "name", "pci", "pcie", "persistence_mode", "pid", "platform", "power", "process_name",
        "protected_memory", "pstate", "remapped_rows", "reset_status", "retired_pages", "serial", "temperature",
        "timestamp", "used_gpu_memory", "used_memory", "utilization", "uuid", "vbios_version",
    }
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f]")  # control characters but the tab
_EXCERPT = 120

#: canonical field -> the other names nvidia-smi accepts or prints for it (``nvidia-smi --help-query-gpu``)
_ALIASES: dict[str, tuple[str, ...]] = {
    "clocks.sm": ("clocks.current.sm",),
    "clocks.max.sm": ("clocks.max.sm_clock",),
    "clocks_event_reasons.active": ("clocks_throttle_reasons.active",),
    "pci.bus_id": ("gpu_bus_id",),
    "used_memory": ("used_gpu_memory",),
    "power.draw": ("power.draw.average", "power.draw.instant"),
    "power.limit": ("enforced.power.limit",),
}


class SmiQuery(str, Enum):
    """Which ``--query-*`` produced the table, told from its columns."""

    GPU = "query-gpu"
    COMPUTE_APPS = "query-compute-apps"
    REMAPPED_ROWS = "query-remapped-rows"


class CsvColumn(Contract):
    """One header cell: field name and the unit in brackets, if any (``memory.total [MiB]``)."""

    name: str
    unit: str | None = None


class QueryGpuRow(Contract):
    """Typed view of one ``--query-gpu`` row. ``None`` where the field was not queried or is ``[N/A]``.
    Memory in bytes, clocks in MHz, power in W, temperature in °C, utilisation in percent."""

    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    clock_event_mask: int | None = None  #: the ``clocks_event_reasons.active`` bitmask
    clock_event_reasons: list[ClockEventReason] = Field(default_factory=list)
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    ecc_uncorrected_volatile_total: int | None = None
    retired_pages_pending: bool | None = None
    driver_version: str | None = None


class ComputeAppRow(Contract):
    """One ``--query-compute-apps`` row: a process holding a compute context on a GPU."""

    pid: int
    process_name: str | None = None
    used_memory_bytes: int | None = None
    bus_id: str | None = None
    gpu_uuid: str | None = None


class RemappedRowsRow(Contract):
    """One ``--query-remapped-rows`` row (NVIDIA "A100/H100 GPU Memory Error Management")."""

    bus_id: str | None = None
    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failure: bool | None = None


class SmiCsv(Contract):
    """A ``--query-*`` CSV table: the columns and, per row, column name (unit stripped) -> raw cell."""

    query: SmiQuery
    columns: list[CsvColumn]
    rows: list[dict[str, str]] = Field(default_factory=list)
    header: bool = True  #: False when parsed with ``noheader`` and caller-given fields

    def _cell(self, row: dict[str, str], field: str) -> str | None:
        for name in (field, *_ALIASES.get(field, ())):
            if name in row:
                return row[name]
        return None

    def has(self, field: str) -> bool:
        """True if ``field`` (or one of its aliases) is a column."""
        names = {c.name for c in self.columns}
        return any(n in names for n in (field, *_ALIASES.get(field, ())))

    def gpus(self) -> list[QueryGpuRow]:
        """Rows of a ``--query-gpu`` table. Raises :class:`ParseError` for a cell that is not a valid value.
        """
        return [self._gpu_row(i, r) for i, r in enumerate(self.rows)]

    def _gpu_row(self, i: int, r: dict[str, str]) -> QueryGpuRow:
        line = i + 1 + int(self.header)

        def num(field: str, units: tuple[str, ...] = ()) -> float | None:
            return V.number(FMT, self._cell(r, field), units, line)

        def integer(field: str, units: tuple[str, ...] = ()) -> int | None:
            return V.integer(FMT, self._cell(r, field), units, line)

        mask = _hex_mask(self._cell(r, "clocks_event_reasons.active"), line)
        return QueryGpuRow(
            index=integer("index"),
            name=V.text(self._cell(r, "name")),
            uuid=V.text(self._cell(r, "uuid")),
            bus_id=V.text(self._cell(r, "pci.bus_id")),
            pcie_gen_current=integer("pcie.link.gen.current"),
            pcie_gen_max=integer("pcie.link.gen.max"),
            pcie_width_current=integer("pcie.link.width.current"),
            pcie_width_max=integer("pcie.link.width.max"),
            sm_clock_mhz=integer("clocks.sm", ("MHz",)),
            max_sm_clock_mhz=integer("clocks.max.sm", ("MHz",)),
            clock_event_mask=mask,
            clock_event_reasons=V.reasons_from_mask(mask) if mask is not None else [],
            temperature_c=num("temperature.gpu", ("C",)),
            power_draw_w=num("power.draw", ("W",)),
            power_limit_w=num("power.limit", ("W",)),
            memory_total_bytes=V.mib_to_bytes(FMT, self._cell(r, "memory.total"), line),
            memory_used_bytes=V.mib_to_bytes(FMT, self._cell(r, "memory.used"), line),
            utilization_gpu_pct=num("utilization.gpu", ("%",)),
            utilization_memory_pct=num("utilization.memory", ("%",)),
            ecc_uncorrected_volatile_total=integer("ecc.errors.uncorrected.volatile.total"),
            retired_pages_pending=V.yes_no(FMT, self._cell(r, "retired_pages.pending"), line),
            driver_version=V.text(self._cell(r, "driver_version")),
        )

    def compute_apps(self) -> list[ComputeAppRow]:
        """Rows of a ``--query-compute-apps`` table (empty when no process holds a GPU)."""
        out = []
        for i, r in enumerate(self.rows):
            line = i + 1 + int(self.header)
            pid = V.integer(FMT, self._cell(r, "pid"), (), line)
            if pid is None:
                raise ParseError(FMT, line, "a pid", self._cell(r, "pid") or "")
            out.append(
                ComputeAppRow(
                    pid=pid,
                    process_name=V.text(self._cell(r, "process_name")),
                    used_memory_bytes=V.mib_to_bytes(FMT, self._cell(r, "used_memory"), line),
                    bus_id=V.text(self._cell(r, "pci.bus_id")),
                    gpu_uuid=V.text(self._cell(r, "gpu_uuid")),
                )
            )
        return out

    def remapped_rows(self) -> list[RemappedRowsRow]:
        """Rows of a ``--query-remapped-rows`` table."""
        out = []
        for i, r in enumerate(self.rows):
            line = i + 1 + int(self.header)
            out.append(
                RemappedRowsRow(
                    bus_id=V.text(self._cell(r, "pci.bus_id")),
                    correctable=V.integer(FMT, self._cell(r, "remapped_rows.correctable"), (), line),
                    uncorrectable=V.integer(FMT, self._cell(r, "remapped_rows.uncorrectable"), (), line),
                    pending=V.yes_no(FMT, self._cell(r, "remapped_rows.pending"), line),
                    failure=V.yes_no(FMT, self._cell(r, "remapped_rows.failure"), line),
                )
            )
        return out


def _hex_mask(cell: str | None, line: int) -> int | None:
    if cell is None or V.is_not_available(cell):
        return None
    s = cell.strip()
    try:
        return int(s, 16) if s.lower().startswith("0x") else int(s)
    except ValueError:
        raise ParseError(FMT, line, "a hexadecimal bitmask like 0x0000000000000004", s) from None


def _split(line: str) -> list[str]:
    return [c.strip() for c in line.split(",")]


def _excerpt(line: str) -> str:
    """``line`` clipped for an error message (the error keeps it: never a whole 50 MB line)."""
    return line if len(line) <= _EXCERPT else f"{line[:_EXCERPT]}... ({len(line)} characters)"


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line without ``\r``) of each non-blank line, one at a time."""
    start, n = 0, 1
    while start <= len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        line = text[start:end]
        if line and not line.isspace():
            yield n, line.rstrip("\r")
        start, n = end + 1, n + 1


def _header(line: str) -> list[CsvColumn] | None:
    """The columns of ``line`` if it looks like a header of nvidia-smi field names (see the module doc)."""
    if len(line) > MAX_HEADER_CHARS or line.count(",") >= MAX_COLUMNS:
        return None
    cols = []
    for c in _split(line):
        m = _HEADER_CELL_RE.match(c)
        if m is None:
            return None
        cols.append(CsvColumn(name=m.group(1), unit=m.group(2)))
    if not any(c.name.split(".", 1)[0] in KNOWN_FIELD_ROOTS for c in cols):
        return None
    return cols


def parse_smi_csv(text: str, fields: Sequence[str] | None = None) -> SmiCsv:
    """Parse one ``nvidia-smi --query-*=... --format=csv`` output.

    ``fields``: the field names asked for, required with ``noheader`` output (the first line is then data);
    when given and a header is present, the header must have as many columns. Raises :class:`ParseError` for
    empty input, a first line that is not a header (and no ``fields``), a row with the wrong number of cells,
    NUL/control bytes, or a cell that is not a valid value for its field (every row is read through the typed
    accessor of the table's :class:`SmiQuery`).
    """
    if "\x00" in text:
        raise ParseError(FMT, None, "CSV text", "NUL byte in input")
    lines = _lines(text)
    first_line = next(lines, None)
    if first_line is None:
        raise ParseError(FMT, None, "a header line or rows", "empty input")
    first_no, first = first_line
    columns = _header(first)
    header = columns is not None and not (fields is not None and _looks_like_data(first, fields))
    if header and columns is not None:
        if fields is not None and len(fields) != len(columns):
            raise ParseError(FMT, first_no, f"{len(fields)} header columns", first)
        body: Iterable[tuple[int, str]] = lines
    elif fields is not None:
        columns = [CsvColumn(name=f.strip()) for f in fields]
        body = itertools.chain([first_line], lines)
    else:
        expected = (
            "a header of nvidia-smi field names with their units in brackets, like "
            "'index, name, memory.total [MiB]'"
        )
        raise ParseError(FMT, first_no, expected, _excerpt(first))
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ParseError(FMT, first_no, "distinct column names", first)
    rows = []
    for n, ln in body:
        if _CONTROL_RE.search(ln):
            raise ParseError(FMT, n, "printable text", _excerpt(ln))
        if ln.count(",") + 1 != len(names):
            raise ParseError(FMT, n, f"{len(names)} cells", _excerpt(ln))
        rows.append(dict(zip(names, _split(ln), strict=True)))
    table = SmiCsv(query=_query_of(names), columns=columns, rows=rows, header=header)
    _validate(table)
    return table


def _query_of(names: list[str]) -> SmiQuery:
    if any(n.startswith("remapped_rows.") for n in names):
        return SmiQuery.REMAPPED_ROWS
    if "pid" in names:
        return SmiQuery.COMPUTE_APPS
    return SmiQuery.GPU


def _validate(table: SmiCsv) -> None:
    """Read every row through the typed accessor of its query kind, so a bad cell fails here, at parse time,
    and never later inside a diagnosis rule."""
    if table.query is SmiQuery.REMAPPED_ROWS:
        table.remapped_rows()
    elif table.query is SmiQuery.COMPUTE_APPS:
        table.compute_apps()
    else:
        table.gpus()


def _looks_like_data(line: str, fields: Sequence[str]) -> bool:
    """With ``fields`` given, a first line is a header only if its names match those fields (or aliases)."""
    cols = _header(line)
    if cols is None or len(cols) != len(fields):
        return True
    for col, f in zip(cols, fields, strict=True):
        f = f.strip()
        group = {f, *_ALIASES.get(f, ())}
        for canon, alts in _ALIASES.items():
            if f in alts:
                group |= {canon, *alts}
        if col.name not in group:
            return True
    return False
