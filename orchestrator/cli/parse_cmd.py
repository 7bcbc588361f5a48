"""``fleetdx parse KIND FILE [--json]`` and ``fleetdx parse bundle DIR [--json]``.

KIND is one of ``topo``, ``p2p``, ``smi-xml``, ``smi-csv``, ``nccl-tests``, ``nccl-log``, ``numactl``,
``lscpu``, ``ibstat``, ``xid``, ``microbench`` (probes/parsers/registry.py). ``--json`` prints exactly the
parser's model dump (its fields are the contract documented on each model; ``parse bundle --json`` prints
:class:`fleetdx.probes.facts.NodeFacts`). Without ``--json`` a readable view: a link matrix for ``topo`` and ``p2p``,
a rows table for ``nccl-tests``, a field table for the others, a probe table plus a summary for ``bundle``.
A ParseError (or a missing file) prints one line on stderr and exits 2.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.probes import catalog
from fleetdx.probes.contracts import RunStatus
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.rawfile import read_raw

#: cells longer than this are cut in human tables (the JSON keeps everything)
MAX_CELL = 60
#: list items shown in one cell before "... (N more)"
MAX_ITEMS = 12


#: ``fleetdx parse bundle DIR``: the target that reads a whole bundle rather than one file
BUNDLE = "bundle"
#: the first argument of ``fleetdx parse``: the kind of every parser of the probe catalog, or ``bundle``
ParseTarget = Enum(  # type: ignore[misc]  # derived from the catalog; mypy reads only literal member lists
    "ParseTarget",
    [(p.kind.upper().replace("-", "_"), p.kind) for p in catalog.parsers()] + [("BUNDLE", BUNDLE)],
    type=str
)


def _short(value: Any) -> str:
    """A compact one-cell text for any field value."""
    if isinstance(value, Enum):
        text = str(value.value)
    elif isinstance(value, BaseModel):
        text = value.model_dump_json()
    elif isinstance(value, list):
        items = [_short(v) for v in value[:MAX_ITEMS]]
        more = f" ... ({len(value) - MAX_ITEMS} more)" if len(value) > MAX_ITEMS else ""
        text = ", ".join(items) + more
    elif isinstance(value, dict):
        text = "; ".join(f"{k}: {_short(v)}" for k, v in list(value.items())[:MAX_ITEMS])
    elif value is None:
        text = "-"
    else:
        text = str(value)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _is_model_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, BaseModel) for v in value)


def model_table(models: list[BaseModel], title: str) -> Table:
    """One row per model, one column per field (nested values shown compactly)."""
    fields = list(type(models[0]).model_fields)
    table = Table(title=title, header_style="bold")
    for f in fields:
        table.add_column(f)
    for m in models:
        table.add_row(*(_short(getattr(m, f)) for f in fields))
    return table


def render_model(model: BaseModel, title: str) -> None:
    """A field/value table for the scalar fields, then a table per list-of-models field."""
    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    nested: list[tuple[str, list[BaseModel]]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if _is_model_list(value):
            nested.append((name, value))
        else:
            table.add_row(name, _short(value))
    console.print(table)
    for name, items in nested:
        if all(type(i) is type(items[0]) for i in items):
            console.print(model_table(items, name))
        else:
            for item in items:
                render_model(item, name)


def render_matrix(names: list[str], cell: Any, title: str) -> None:
    """A square matrix: ``cell(a, b)`` for each pair of ``names`` (``X`` on the diagonal)."""
    table = Table(title=title, header_style="bold")
    table.add_column("")
    for n in names:
        table.add_column(n, justify="center")
    for a in names:
        table.add_row(a, *("X" if a == b else str(cell(a, b)) for b in names))
    console.print(table)


def render_topo(model: Any) -> None:
    names = model.gpu_names + model.nic_names
    render_matrix(names, lambda a, b: model.links.get(a, {}).get(b, "?"), "nvidia-smi topo -m")
    console.print(model_table(model.gpus, "GPU affinity"))
    for w in model.warnings:
        console.print(f"[yellow]warning:[/] {w}")


def render_nccl_tests(model: Any) -> None:
    """One rows table per run: size, count, type, out-of-place and in-place time/algbw/busbw/#wrong."""
    for i, run in enumerate(model.runs):
        coll = run.collective.value if run.collective else "?"
        table = Table(
            title=f"run {i}: {coll}, {run.nranks or '?'} ranks, avg busbw {_short(run.avg_busbw_gbps)} GB/s",
            header_style="bold",
        )
        for col in (
            "size (B)",
            "count",
            "type",
            "oop time (us)",
            "oop algbw",
            "oop busbw",
            "oop #wrong",
            "ip time (us)",
            "ip algbw",
            "ip busbw",
            "ip #wrong",
        ):
            table.add_column(col, justify="right")
        for r in run.rows:
            sides = []
            for t in (r.out_of_place, r.in_place):
                sides += (
                    [_short(t.time_us), _short(t.algbw_gbps), _short(t.busbw_gbps), _short(t.wrong)]
                    if t
                    else ["-"] * 4
                )
            table.add_row(str(r.size), str(r.count), r.type, *sides)
        console.print(table)
    for e in model.errors:
        console.print(f"[red]error:[/] {e}")


def render_ibstat(model: Any, title: str) -> None:
    """One row per port: CA, type, firmware, port, state, physical state, rate, link layer, LID."""
    table = Table(title=f"{title} ({model.source_format.value})", header_style="bold")
    for col in ("CA", "type", "firmware", "port", "state", "phys state", "rate (Gb/s)", "link layer", "LID"):
        table.add_column(col, justify="right" if col in ("port", "rate (Gb/s)", "LID") else "left")
    for ca in model.cas:
        for p in ca.ports:
            style = "green" if p.state.value == "Active" else "red"
            table.add_row(
                ca.name,
                _short(ca.ca_type),
                _short(ca.firmware),
                str(p.port),
                f"[{style}]{p.state.value}[/]",
                _short(p.phys_state),
                _short(p.rate_gbps),
                _short(p.link_layer),
                _short(p.base_lid),
            )
    console.print(table)


def render_p2p(model: Any, title: str) -> None:
    render_matrix(model.gpus, lambda a, b: model.status.get(a, {}).get(b, "?"), title)
    for code, text in model.legend.items():
        console.print(f"  {code} = {text}", highlight=False)
    for w in model.warnings:
        console.print(f"[yellow]warning:[/] {w}")


def _render(kind: catalog.Parser, model: BaseModel, title: str) -> None:
    if kind is catalog.TOPO:
        render_topo(model)
    elif kind is catalog.P2P:
        render_p2p(model, title)
    elif kind is catalog.IBSTAT:
        render_ibstat(model, title)
    elif kind is catalog.NCCL_TESTS:
        render_nccl_tests(model)
    else:
        render_model(model, title)


def render_bundle(facts: Any, bundle_dir: Path) -> None:
    """The bundle's probes (status, reason, parse result) and a summary of the facts read."""
    failed = {p.file: p for p in facts.parse_failures}
    table = Table(
        title=f"bundle {bundle_dir} (host {facts.host}{', replayed' if facts.replayed else ''})",
        header_style="bold",
    )
    for col in ("file", "status", "reason / parse"):
        table.add_column(col)
    for p in facts.probes:
        style = "green" if p.status is RunStatus.OK else "yellow" if p.status is RunStatus.SKIPPED else "red"
        note = p.error or ""
        if p.name in failed:
            note = f"[red]parse failed:[/] {failed[p.name].message}"
        table.add_row(p.name, f"[{style}]{p.status.value}[/]", note)
    console.print(table)
    summary = Table(title="facts", show_header=False)
    summary.add_column("fact", style="bold")
    summary.add_column("value")
    rows = {
        "GPUs (topo -m)": _short(facts.topo.gpu_names) if facts.topo else "-",
        "CPU": f"{facts.cpu.model_name or '?'}, {facts.cpu.cpus} CPUs ({facts.cpu.architecture})"
        if facts.cpu
        else "-",
        "NUMA nodes": _short([f"node{n.node}: {len(n.cpus)} CPUs" for n in facts.numa.nodes])
        if facts.numa
        else "-",
        "IB/RoCE ports": _short(
            [f"{ca.name}/{p.port} {p.state.value}" for ca in facts.ib.cas for p in ca.ports]
        )
        if facts.ib
        else "-",
        "nccl-tests files": _short([t.file for t in facts.nccl_tests]),
        "micro-benchmarks": str(len(facts.microbench)),
    }
    for k, v in rows.items():
        summary.add_row(k, v)
    console.print(summary)


def register(app: typer.Typer) -> None:
    @app.command("parse")
    @handle_errors
    def parse_command(
        kind: Annotated[ParseTarget, typer.Argument(help="Parser kind, or 'bundle' for a bundle directory.")],
        path: Annotated[Path, typer.Argument(help="The raw output file (or bundle directory).")],
        json_out: Annotated[bool, typer.Option("--json", help="Print the JSON model only.")] = False,
        max_bytes: Annotated[
            int | None,
            typer.Option(
                "--max-bytes",
                min=1,
                help="Largest input read, bytes (kernel logs are streamed and this bounds the XID/NVRM lines "
                "kept)." + computed_default("per kind: 16 MiB, NCCL logs 64 MiB"),
            ),
        ] = None,
    ) -> None:
        """Parse one tool output (or a whole bundle) and show the typed facts."""
        if kind.value == BUNDLE:
            from fleetdx.probes.bundle import read_bundle
            from fleetdx.probes.facts import node_facts

            facts = node_facts(read_bundle(path, max_bytes))
            print_json(facts) if json_out else render_bundle(facts, path)
            return
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory (use 'fleetdx parse bundle {path}')")
        pkind = catalog.parser_named(kind.value)
        text = read_raw(path, max_bytes or pkind.max_bytes, keep=pkind.keep)
        model = pkind.for_file(path.name)(text)
        print_json(model) if json_out else _render(pkind, model, f"{kind.value}: {path.name}")
