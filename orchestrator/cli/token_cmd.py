"""``fleetdx token create|revoke|list``: the bearer tokens of the HTTP API (``fleetdx serve``), kept hashed in
the run database (:mod:`fleetdx.orchestrator.store.tokens`). Run them against the service's database
(``--db``, else ``$FLEETDX_DB_URL``)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, err_console, fail, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default

DB_HELP = "Database URL of the service." + computed_default(
    "$FLEETDX_DB_URL, else an SQLite file in the user's data directory"
)
DbOption = Annotated[str | None, typer.Option("--db", help=DB_HELP)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]

token_app = typer.Typer(
    help="Manage the API's bearer tokens: a write token for nodes and prologs that push reports "
    "(fleetdx preflight --report-to URL --token-file F), read tokens for dashboards and Prometheus."
)


def register(app: typer.Typer) -> None:
    """Add the ``token`` group to ``app``."""
    app.add_typer(token_app, name="token")


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


@token_app.command("create")
@handle_errors
def create(
    name: Annotated[str, typer.Argument(help="Who or what holds the token, e.g. 'slurm-prolog' or 'prometheus'.")],
    scope: Annotated[
        Literal["read", "write"],  # TokenScope's values (the store module, which loads SQLAlchemy, is imported late)
        typer.Option("--scope", help="read: GET endpoints; write: POST /reports, and reads."),
    ] = "read",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the token to this new file (mode 0600) instead of stdout."),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token and print it once (stdout, or --out FILE); only its SHA-256 is stored."""
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store.tokens import TokenScope, create_token

    if out is not None and out.exists():
        raise fail(f"{out}: already exists (not overwritten)")
    with Store.open(db) as store:
        new = create_token(store, name, TokenScope(scope))
    if out is not None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new.token + "\n")
    if as_json:
        print_json(new.info if out is not None else new)
    elif out is None:
        typer.echo(new.token)
    where = f"written to {out}" if out is not None else "shown once: keep it"
    err_console.print(
        escape(f"token {new.info.token_id} ({new.info.scope.value}) for {new.info.name!r} {where}"), highlight=False
    )


@token_app.command("revoke")
@handle_errors
def revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (12 hex characters, from `fleetdx token list`).")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: every request with it is refused (401) from now on, in every worker."""
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store.tokens import revoke_token

    with Store.open(db) as store:
        info = revoke_token(store, token_id)
    if as_json:
        print_json(info)
    else:
        typer.echo(f"token {info.token_id} ({info.name}) revoked at {_when(info.revoked_at)}")


@token_app.command("list")
@handle_errors
def list_(db: DbOption = None, as_json: JsonOption = False) -> None:
    """List every token (valid and revoked) without secrets: id, name, scope, created, revoked."""
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store.tokens import list_tokens

    with Store.open(db) as store:
        tokens = list_tokens(store)
    if as_json:
        print_json([t.model_dump(mode="json") for t in tokens])
        return
    table = Table("id", "name", "scope", "created (UTC)", "revoked (UTC)", title=f"{len(tokens)} API tokens")
    for t in tokens:
        table.add_row(t.token_id, escape(t.name), t.scope.value, _when(t.created_at), _when(t.revoked_at))
    console.print(table)
