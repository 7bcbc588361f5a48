"""``fleetdx k8s mark``: put a run's verdict on the Kubernetes nodes it names (label, node condition and, opt-in,
a ``NoSchedule`` taint on CRITICAL nodes): :mod:`fleetdx.orchestrator.scheduler.k8s_nodes`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, fail, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default

k8s_app = typer.Typer(help="Write fleetdx verdicts onto Kubernetes nodes.", no_args_is_help=True)


@k8s_app.command("mark")
@handle_errors
def mark(
    report: Annotated[
        Path | None, typer.Option("--report", help="A report as `fleetdx preflight --json` prints it.")
    ] = None,
    run: Annotated[str | None, typer.Option("--run", help="A stored run id (read from --db).")] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL for --run." + computed_default("$FLEETDX_DB_URL, else SQLite")),
    ] = None,
    taint_critical: Annotated[
        bool,
        typer.Option(
            "--taint-critical",
            help="Also taint CRITICAL nodes fleetdx.io/critical=CODE:NoSchedule, and remove that taint from "
            "nodes that are no longer CRITICAL (other taints are never touched).",
        ),
    ] = False,
    kubeconfig: Annotated[
        str | None,
        typer.Option("--kubeconfig", help="Kubeconfig file." + computed_default("$KUBECONFIG, then ~/.kube/config")),
    ] = None,
    in_cluster: Annotated[
        bool, typer.Option("--in-cluster", help="Use the pod's service account (inside Kubernetes).")
    ] = False,
    server: Annotated[str | None, typer.Option("--server", help="API server URL, overriding the config's.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be written; write nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one result per node as JSON.")] = False,
) -> None:
    """Label each node of a run `fleetdx.io/verdict=OK|WARNING|CRITICAL|UNKNOWN`, set its `FleetdxCritical`
    node condition (True for CRITICAL, as node-problem-detector's conditions do), and with --taint-critical
    taint CRITICAL nodes NoSchedule.

    Findings must name Kubernetes nodes: run the pre-flight with FLEETDX_K8S_NODE_NAME from spec.nodeName
    (k8s/ manifests do). Exit 0 when every node was written, 3 when any write failed (each node's reason is
    printed) or nothing could be read.
    """
    from fleetdx.orchestrator.report import RunReport
    from fleetdx.orchestrator.scheduler.k8s_nodes import apply_marks, core_api, marks_of

    if (report is None) == (run is None):
        raise fail("give exactly one of --report FILE and --run ID")
    if report is not None:
        try:
            doc = RunReport.model_validate_json(report.read_bytes())
        except ValueError as e:
            raise fail(f"{report}: not a fleetdx report ({str(e).splitlines()[0]})") from None
    else:
        from fleetdx.orchestrator.store import Store

        assert run is not None
        with Store.open(db) as store:
            doc = store.get_run(run)
    marks = marks_of(doc, taint_critical)
    if dry_run:
        print_json([m.model_dump(mode="json") for m in marks])
        return
    try:
        api = core_api(kubeconfig, in_cluster, server)
    except Exception as e:  # noqa: BLE001 - kubernetes.config raises several types for a missing/bad config
        raise fail(f"no Kubernetes API configuration: {e}") from None
    results = apply_marks(marks, api)
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
    else:
        table = Table(title=f"run {doc.run_id}: {len(results)} Kubernetes nodes")
        for col in ("node", "verdict", "tainted", "result"):
            table.add_column(col)
        for r in results:
            tainted = "-" if r.tainted is None else ("yes" if r.tainted else "no")
            table.add_row(r.node, r.verdict, tainted, escape(r.error or "written"))
        console.print(table)
    if any(r.error for r in results):
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    """Add the ``k8s`` group to ``app``."""
    app.add_typer(k8s_app, name="k8s")
