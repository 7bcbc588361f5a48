"""Parser for ``lscpu`` (text) and ``lscpu -J`` (JSON), autodetected.

Both are ``field: value`` lists (util-linux ``sys-utils/lscpu.c``). The text comes in two layouts: the old
flat one (every line ``Field:   value``) and the sectioned one of util-linux >= 2.37 (indented lines under
headings such as ``Caches (sum of all):`` or ``NUMA:``); indentation and headings are ignored. ``-J`` gives
``{"lscpu": [{"field": "CPU(s):", "data": "16", "children": [...]}]}``; ``children`` (util-linux >= 2.37) are
walked depth-first. The first occurrence of a field wins (hybrid CPUs print one ``Model name`` per core type).

Values of ``-`` (lscpu's "unknown", e.g. ``Socket(s): -`` on some Arm servers) become ``None``.

A long value (``Flags``, a CPU list, a vulnerability's mitigations) may come wrapped onto indented
continuation lines (a terminal-width paste, ``fold``): an indented line without ``:``, one starting at or
beyond the column where values start, or one whose text before ``:`` is no field name (``IBPB: conditional;
...``) continues the previous field's value, joined with a blank (without one after a ``,``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from enum import Enum

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.numactl import MAX_NODE_ID
from fleetdx.probes.parsers.topo import MAX_CPU_ID, expand_id_list

FMT = "lscpu"

_NUMA_FIELD = re.compile(r"^NUMA node([0-9]{1,5}) CPU\(s\)$")
_INT = re.compile(r"^[0-9]{1,7}$")
#: an lscpu field name (``On-line CPU(s) list``, ``NUMA node0 CPU(s)``, ``Vulnerability Spec store bypass``,
#: ``L1d``): starts with a letter or digit and holds none of the ``;``/``,``/``=`` that values hold
_LABEL = re.compile(r"^[^\W_][^;,=]*$")


class LscpuFormat(str, Enum):
    """Which ``lscpu`` output was read."""

    TEXT = "text"
    JSON = "json"


class CpuInfo(Contract):
    """The CPU facts of one node from ``lscpu``.

    ``cpus`` is the logical CPU count (``CPU(s)``); ``online_cpus`` the expanded ``On-line CPU(s) list``;
    ``numa_cpus`` maps each NUMA node id to its expanded CPU list (``NUMA nodeN CPU(s)``; a node with no CPUs
    maps to ``[]``). Counts are ``None`` where lscpu printed ``-`` or nothing.
    """

    architecture: str
    model_name: str | None = None
    vendor_id: str | None = None
    cpus: int
    online_cpus: list[int] = Field(default_factory=list)
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    numa_node_count: int | None = None
    numa_cpus: dict[int, list[int]] = Field(default_factory=dict)
    source_format: LscpuFormat


def _json_fields(text: str) -> Iterator[tuple[str, str | None]]:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ParseError(FMT, getattr(e, "lineno", None), "lscpu -J JSON", str(e)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("lscpu"), list):
        raise ParseError(FMT, None, 'a JSON object {"lscpu": [...]}')

    def walk(items: list[object]) -> Iterator[tuple[str, str | None]]:
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("field"), str):
                raise ParseError(FMT, None, 'entries {"field": ..., "data": ...}', str(item)[:80])
            data = item.get("data")
            if data is not None and not isinstance(data, str):
                raise ParseError(FMT, None, "string data", str(item)[:80])
            yield item["field"], data
            children = item.get("children", [])
            if not isinstance(children, list):
                raise ParseError(FMT, None, "a list of children", str(item)[:80])
            yield from walk(children)

    yield from walk(doc["lscpu"])


def _join(value: str, more: str) -> str:
    if not value:
        return more
    return value + more if value.endswith(",") or more.startswith(",") else f"{value} {more}"


def _text_fields(text: str) -> Iterator[tuple[str, str | None]]:
    pending: tuple[str, str] | None = None
    value_col: int | None = None  # where values start (lscpu aligns them), from the first field with one
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        indent = len(line) - len(line.lstrip())
        is_field = bool(sep) and bool(key.strip())
        if is_field and indent > 0:
            is_field = _LABEL.match(key.strip()) is not None and (value_col is None or indent < value_col)
        if not is_field:
            if indent > 0 and pending is not None:
                pending = (pending[0], _join(pending[1], line.strip()))
                continue
            raise ParseError(FMT, i, "'Field: value'", line)
        if pending is not None:
            yield pending[0], pending[1] or None
        pending = (key.strip() + ":", value.strip())
        if value_col is None and value.strip():
            value_col = len(line) - len(value.lstrip())
    if pending is not None:
        yield pending[0], pending[1] or None


def _fields(text: str) -> tuple[dict[str, str | None], LscpuFormat]:
    """Field name (without the colon) -> value, first occurrence wins; and the detected format."""
    fmt = LscpuFormat.JSON if text.lstrip().startswith("{") else LscpuFormat.TEXT
    items = _json_fields(text) if fmt is LscpuFormat.JSON else _text_fields(text)
    out: dict[str, str | None] = {}
    for field, data in items:
        key = field.strip().removesuffix(":").strip()
        value = None if data is None or data.strip() in ("", "-") else data.strip()
        out.setdefault(key, value)
    return out, fmt


def _count(fields: dict[str, str | None], key: str, *, required: bool = False) -> int | None:
    value = fields.get(key)
    if value is None:
        if required:
            raise ParseError(FMT, None, f"the field '{key}:'")
        return None
    if not _INT.match(value):
        raise ParseError(FMT, None, f"'{key}:' as an integer", value)
    return int(value)


def _cpu_list(value: str, field: str) -> list[int]:
    """Expand a cpulist field (``0-15``, ``0,2,4``); ParseError naming the field on bad text."""
    try:
        return expand_id_list(value, fmt=FMT, line=0, limit=MAX_CPU_ID)
    except ParseError as e:
        raise ParseError(FMT, None, f"'{field}:' as a CPU list ({e.expected})", value) from None


def parse_lscpu(text: str) -> CpuInfo:
    """Parse ``lscpu`` or ``lscpu -J`` output (JSON when the text starts with ``{``).

    Raises:
        ParseError: invalid JSON or a JSON shape other than ``{"lscpu": [...]}``; a text line without ``:``;
            no ``Architecture`` or ``CPU(s)``; a count that is not an integer; a malformed CPU list; a CPU
            listed under two NUMA nodes.
    """
    fields, fmt = _fields(text)
    arch = fields.get("Architecture")
    if arch is None:
        raise ParseError(FMT, None, "the field 'Architecture:'")
    cpus = _count(fields, "CPU(s)", required=True)
    assert cpus is not None
    online_raw = fields.get("On-line CPU(s) list")
    online = _cpu_list(online_raw, "On-line CPU(s) list") if online_raw else []
    numa: dict[int, list[int]] = {}
    for key, value in fields.items():
        if m := _NUMA_FIELD.match(key):
            node = int(m.group(1))
            if node > MAX_NODE_ID:
                raise ParseError(FMT, None, f"a NUMA node id no greater than {MAX_NODE_ID}", key)
            numa[node] = _cpu_list(value, key) if value else []
    seen: set[int] = set()
    for node in sorted(numa):
        if seen & set(numa[node]):
            raise ParseError(FMT, None, "each CPU under one NUMA node", f"node{node}")
        seen.update(numa[node])
    return CpuInfo(
        architecture=arch,
        model_name=fields.get("Model name"),
        vendor_id=fields.get("Vendor ID"),
        cpus=cpus,
        online_cpus=online,
        sockets=_count(fields, "Socket(s)"),
        cores_per_socket=_count(fields, "Core(s) per socket"),
        threads_per_core=_count(fields, "Thread(s) per core"),
        numa_node_count=_count(fields, "NUMA node(s)"),
        numa_cpus=dict(sorted(numa.items())),
        source_format=fmt,
    )
