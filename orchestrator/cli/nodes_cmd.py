"""``fleetdx nodes``: every known node's state (ok, suspect, quarantined, retesting, returned), since when and
why, and its lemon score; ``fleetdx nodes history HOST``, ``fleetdx nodes return HOST --reason TEXT`` (a person
returns a node), and ``fleetdx nodes check`` (the periodic check of ``slurm/healthcheck.sh``). The state
machine: :mod:`fleetdx.orchestrator.diagnosis.node_states`."""

from __future__ import annotations

import socket
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, fail, finite_positive, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import DB_HELP, computed_default
from fleetdx.probes.contracts import Level

if TYPE_CHECKING:
    from fleetdx.orchestrator.store.states import NodeRecord

DbOption = Annotated[str | None, typer.Option("--db", help=DB_HELP)]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

nodes_app = typer.Typer()

_STYLE = {"ok": "green", "returned": "green", "suspect": "yellow", "retesting": "magenta", "quarantined": "bold red"}


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def exit_code(records: list[NodeRecord]) -> int:
    """The Nagios code of a fleet: 2 when a node is quarantined or retesting (out of service), else 1 when one
    is suspect, else 0."""
    found = {r.status.state.value for r in records}
    if found & {"quarantined", "retesting"}:
        return 2
    return 1 if "suspect" in found else 0


@nodes_app.callback(invoke_without_command=True)
@handle_errors
def nodes(ctx: typer.Context, db: DbOption = None, as_json: JsonFlag = False) -> None:
    """List every known node: its state, since when (UTC) and why, and its lemon score.

    States: ok, suspect (found CRITICAL or not judged; nothing done yet), quarantined (drained or tainted by
    fleetdx), retesting, returned (back after a clean retest or by a person). A node is known once a stored
    pre-flight names it. Lemon score: quarantines in the last 30 days. "held" marks a node that failed again
    within the flap window after a return: only `fleetdx nodes return` brings it back.

    Exit 2 when a node is quarantined or retesting, 1 when one is suspect, 0 otherwise, 3 when the database
    cannot be read.
    """
    if ctx.invoked_subcommand is not None:
        return
    from fleetdx.orchestrator.diagnosis.node_states import LEMON_THRESHOLD
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store import states as st

    with Store.open(db) as store:
        records = st.list_nodes(store)
    if as_json:
        print_json([r.model_dump(mode="json") for r in records])
    else:
        table = Table(title=f"{len(records)} nodes")
        for col in ("node", "state", "since", "lemon", "why"):
            table.add_column(col, overflow="fold")
        for r in records:
            s = r.status
            state = f"[{_STYLE[s.state.value]}]{s.state.value}[/]" + (" held" if s.held else "")
            lemon = f"{r.lemon_score}" + (" lemon" if r.lemon_score >= LEMON_THRESHOLD else "")
            table.add_row(escape(s.host), state, _when(s.since), lemon, escape(f"{s.reason} ({s.by.value})"))
        console.print(table)
    raise typer.Exit(exit_code(records))


@nodes_app.command("history")
@handle_errors
def history(
    host: Annotated[str, typer.Argument(help="Node host name as it appears in reports.")],
    db: DbOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many of the newest transitions to show.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Show a node's state transitions, newest first: from, to, when (UTC), by whom, why, and a retest's result."""
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store import states as st

    with Store.open(db) as store:
        found = st.transitions(store, host, limit=limit)
    if as_json:
        print_json([t.model_dump(mode="json") for t in found])
        return
    if not found:
        raise fail(f"{host}: no state transitions stored")
    table = Table(title=f"{host}: {len(found)} transitions")
    for col in ("at", "from", "to", "by", "why"):
        table.add_column(col, overflow="fold")
    for t in found:
        why = t.reason + (f" [retest {t.retest.value}]" if t.retest else "")
        was = t.from_state.value if t.from_state else "-"
        table.add_row(_when(t.at), was, t.to_state.value, t.by.value, escape(why))
    console.print(table)


@nodes_app.command("return")
@handle_errors
def return_node(
    host: Annotated[str, typer.Argument(help="Node host name as it appears in reports.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it goes back (kept in its history), e.g. a ticket.")],
    db: DbOption = None,
) -> None:
    """Return a node to service by hand (state returned, by admin), clearing a flap hold. On Slurm, the next
    periodic check resumes it when fleetdx drained it; or resume it yourself: `scontrol update NodeName=X
    State=RESUME`. Exit 0, or 3 for a node that is unknown or already ok.
    """
    from fleetdx.orchestrator.diagnosis.node_states import ReturnEvent
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store import states as st

    if not reason.strip():
        raise fail("--reason must say why the node goes back")
    with Store.open(db) as store:
        result = st.record(store, host, ReturnEvent(at=time.time(), reason=reason.strip()))
    if result.transition is None:
        what = "unknown to the store" if result.status is None else "already ok"
        raise fail(f"{host}: {what}; nothing to return")
    typer.echo(f"{host}: {result.transition.from_state.value if result.transition.from_state else '-'} -> returned")


@nodes_app.command("check")
@handle_errors
def check(
    slurm_node: Annotated[
        str | None,
        typer.Option(
            "--slurm-node",
            help="This machine's Slurm node name." + computed_default("$SLURMD_NODENAME, else the host name"),
            envvar="SLURMD_NODENAME",
            show_envvar=False,
        ),
    ] = None,
    level: Annotated[
        Level, typer.Option("--level", help="Level of the check; a retest runs at least at the failed run's.")
    ] = Level.QUICK,
    timeout: Annotated[
        float, typer.Option("--timeout", callback=finite_positive, help="Deadline of the pre-flight, s.")
    ] = 60.0,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """The periodic check of this Slurm node (slurm/healthcheck.sh runs it as HealthCheckProgram): a pre-flight
    in this process; CRITICAL drains the node with `fleetdx: CODE subject`. A node fleetdx drained, that the
    store holds as failing, is retested at the failed run's level and resumed when clean; a node an
    administrator drained is never touched.

    Exit 0 checked or resumed (or not ours), 2 drained now or still drained, 3 when Slurm or the database
    cannot be used.
    """
    from fleetdx.orchestrator.preflight.periodic import Action, SlurmCheck
    from fleetdx.probes.runner import SubprocessRunner

    host = socket.gethostname().split(".")[0]
    outcome = SlurmCheck(
        node=slurm_node or host, host=host, runner=SubprocessRunner(), db=db, level=level, run_timeout_s=timeout
    ).run()
    if as_json:
        print_json(outcome)
    else:
        state = f" [state {outcome.state.value}]" if outcome.state is not None else ""
        typer.echo(f"{outcome.node}: {outcome.action.value}: {outcome.message}{state}")
    if outcome.action in (Action.DRAINED, Action.KEPT_OUT):
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Add the ``nodes`` group to ``app``."""
    app.add_typer(nodes_app, name="nodes")
