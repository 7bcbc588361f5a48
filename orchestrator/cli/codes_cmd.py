"""``fleetdx codes``: the code catalog, every finding code fleetdx can emit, with its job, scope, severities,
placement policy, meaning, action and the public source of its threshold
(:mod:`fleetdx.orchestrator.judgement.catalog`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, err_console, fits, handle_errors, print_json
from fleetdx.orchestrator.judgement.catalog import CodeSpec, JobKind


def register(app: typer.Typer) -> None:
    """Add ``codes`` to ``app``."""

    @app.command("codes")
    @handle_errors
    def codes(
        kind: Annotated[
            JobKind | None,
            typer.Option("--kind", help="Only the codes of one kind of job (analyze's are preflight's)."),
        ] = None,
        old_job: Annotated[JobKind | None, typer.Option("--job", hidden=True, help="Deprecated: --kind.")] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help='Print {"schema_version", "codes": [...]} as JSON.')
        ] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="Print the README's tables of codes.")] = False,
    ) -> None:
        """List every finding code: what it means, what to do, and what it does to placement.

        Examples: fleetdx codes ; fleetdx codes --kind postmortem ; fleetdx codes --json | jq '.codes[].code'

        Exit: 0; 3 on a usage error (an unknown --kind).
        """
        from fleetdx.orchestrator.judgement.catalog import CodeCatalog, catalog
        from fleetdx.orchestrator.judgement.catalog import markdown as as_markdown

        if markdown:
            console.out(as_markdown(), end="", highlight=False)
            return
        rows = catalog().codes
        if old_job is not None:
            err_console.print(
                "fleetdx: codes --job is deprecated: use --kind (--job is a scheduler job id in fleetdx)",
                style="yellow",
                highlight=False,
                soft_wrap=True,
            )
            kind = kind or old_job
        if kind is not None:
            rows = [r for r in rows if r.job is kind]
        if as_json:
            print_json(CodeCatalog(codes=rows).model_dump(mode="json"))
            return
        _render(rows)


#: the narrowest the meaning column of the table may be; below it each code is a block of its own
MEANING_MIN = 40


def _table(rows: list[CodeSpec], meaning: bool = True) -> Table:
    t = Table(show_lines=False)
    for col in ("code", "job", "scope", "severity", "placement", *(("meaning",) if meaning else ())):
        t.add_column(col, overflow="fold")
    for r in rows:
        cells = [r.code.value, r.job.value, r.scope.value, "/".join(s.value for s in r.severities), r.placement.value]
        t.add_row(*cells, *((escape(r.description),) if meaning else ()))
    return t


def _render(rows: list[CodeSpec]) -> None:
    """A table of the codes when its meaning column gets :data:`MEANING_MIN` columns; else (the meaning went to
    two words a line at 80 columns) one block per code: its name and attributes on a line, its meaning below."""
    attributes = _table(rows, meaning=False)
    attributes.add_column("meaning", width=MEANING_MIN)
    if fits(attributes):
        console.print(_table(rows))
        return
    for r in rows:
        severities = "/".join(s.value for s in r.severities)
        console.print(
            f"[bold]{r.code.value}[/]  {r.job.value}, {r.scope.value}, {severities}, placement {r.placement.value}",
            highlight=False,
        )
        console.print(Padding(escape(r.description), (0, 0, 0, 2), expand=False), highlight=False)
