"""``fleetdx serve``: the read-only HTTP API (:mod:`fleetdx.orchestrator.service.api`) over the store, with uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetdx.orchestrator.cli.common import err_console, handle_errors

DB_HELP = "Database URL (default: $FLEETDX_DB_URL, else an SQLite file in the user's data directory)."


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve)


@handle_errors
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port to listen on.")] = 8000,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
) -> None:
    """Serve the run history over HTTP: GET /runs, /runs/{id}, /nodes/{host}/history, /findings, /healthz."""
    import uvicorn

    from fleetdx.orchestrator.service.api import create_app
    from fleetdx.orchestrator.store import Store

    store = Store.open(db)
    err_console.print(f"fleetdx API on http://{host}:{port} reading {store.url}", highlight=False)
    try:
        uvicorn.run(create_app(store), host=host, port=port, log_level="info")
    finally:
        store.close()
