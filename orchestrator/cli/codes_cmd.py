"""``fleetdx codes``: the code catalog, every finding code fleetdx can emit, with its job, scope, severities,
placement policy, meaning, action and the public source of its threshold
(:mod:`fleetdx.orchestrator.judgement.catalog`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, handle_errors, print_json


def register(app: typer.Typer) -> None:
    """Add ``codes`` to ``app``."""

    @app.command("codes")
    @handle_errors
    def codes(
        job: Annotated[
            str | None,
            typer.Option("--job", help="Only the codes of one job: preflight, bandwidth, postmortem or steps."),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help='Print {"schema_version", "codes": [...]} as JSON.')
        ] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="Print the README's tables of codes.")] = False,
    ) -> None:
        """List every finding code: what it means, what to do, and what it does to placement.

        Examples: fleetdx codes ; fleetdx codes --job postmortem ; fleetdx codes --json | jq '.codes[].code'

        Exit: 0; 3 on a usage error (an unknown --job).
        """
        from fleetdx.orchestrator.judgement.catalog import CodeCatalog, JobKind, catalog
        from fleetdx.orchestrator.judgement.catalog import markdown as as_markdown

        if markdown:
            console.out(as_markdown(), end="", highlight=False)
            return
        rows = catalog().codes
        if job is not None:
            try:
                kind = JobKind(job)
            except ValueError:
                raise typer.BadParameter(
                    f"{job!r}: one of {', '.join(k.value for k in JobKind)}", param_hint="--job"
                ) from None
            rows = [r for r in rows if r.job is kind]
        if as_json:
            print_json(CodeCatalog(codes=rows).model_dump(mode="json"))
            return
        t = Table(show_lines=False)
        for col in ("code", "job", "scope", "severity", "placement", "meaning"):
            t.add_column(col, overflow="fold")
        for r in rows:
            t.add_row(
                r.code.value,
                r.job.value,
                r.scope.value,
                "/".join(s.value for s in r.severities),
                r.placement.value,
                escape(r.description),
            )
        console.print(t)
