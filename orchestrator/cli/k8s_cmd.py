"""``fleetdx k8s mark``: put a run's verdict on the Kubernetes nodes it names (label, node condition and, opt-in,
a ``NoSchedule`` taint on CRITICAL nodes): :mod:`fleetdx.orchestrator.scheduler.k8s_nodes`. ``fleetdx k8s
watch``: check this node at an interval and mark it the same way (the DaemonSet's loop)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from fleetdx.orchestrator.scheduler.k8s_nodes import MarkResult, WatchRound

from fleetdx.orchestrator.cli.common import console, fail, finite_positive, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.probes.contracts import Level

k8s_app = typer.Typer(help="Write fleetdx verdicts onto Kubernetes nodes.", no_args_is_help=True)


#: the options every command that talks to the API server takes
Kubeconfig = Annotated[
    str | None,
    typer.Option("--kubeconfig", help="Kubeconfig file." + computed_default("$KUBECONFIG, then ~/.kube/config")),
]
InCluster = Annotated[bool, typer.Option("--in-cluster", help="Use the pod's service account (inside Kubernetes).")]
Server = Annotated[str | None, typer.Option("--server", help="API server URL, overriding the config's.")]


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
    kubeconfig: Kubeconfig = None,
    in_cluster: InCluster = False,
    server: Server = None,
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
    marks = marks_of(doc, taint_critical, _flap_window_s())
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


@k8s_app.command("watch")
@handle_errors
def watch(
    interval: Annotated[
        float,
        typer.Option("--interval", callback=finite_positive, help="Seconds from one check's start to the next."),
    ] = 300.0,
    rounds: Annotated[
        int | None,
        typer.Option("--rounds", min=1, help="Stop after N checks." + computed_default("run until stopped")),
    ] = None,
    level: Annotated[
        Level,
        typer.Option(
            "--level",
            help="quick: state only, seconds; standard: adds GPU micro-benchmarks and the intra-node nccl-tests "
            "sweep (tens of seconds of GPU work: only on a node no job holds); full needs several nodes.",
        ),
    ] = Level.QUICK,
    timeout: Annotated[
        float, typer.Option("--timeout", callback=finite_positive, help="Deadline of one check's probes, s.")
    ] = 60.0,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", min=1, help="Expected GPUs.")] = None,
    taint_critical: Annotated[
        bool,
        typer.Option(
            "--taint-critical",
            help="Taint the node fleetdx.io/critical=CODE:NoSchedule when CRITICAL; remove that taint after a "
            "clean check at the level that put it or higher, and only if fleetdx put it. A node CRITICAL again "
            "within $FLEETDX_FLAP_WINDOW_S (24 h) of such a return stays tainted until a person removes it.",
        ),
    ] = False,
    kubeconfig: Kubeconfig = None,
    in_cluster: InCluster = False,
    server: Server = None,
    report_to: Annotated[
        str | None,
        typer.Option("--report-to", help="Also push each report to this fleetdx service (its base URL)."),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="File holding a write token for --report-to (fleetdx token create)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON line per check.")] = False,
) -> None:
    """Check this Kubernetes node every --interval seconds and mark it as `k8s mark` does (label, condition,
    with --taint-critical the taint): the loop of the DaemonSet in k8s/healthcheck-daemonset.yaml.

    The node is $FLEETDX_K8S_NODE_NAME (spec.nodeName through the downward API). Each check runs in this
    process, like a one-node `fleetdx preflight`. An UNKNOWN verdict leaves taints as they are. With --rounds:
    exit 0 when every check ran and every write succeeded, else 3.
    """
    import os

    from fleetdx.orchestrator.cli.preflight_cmd import _pusher
    from fleetdx.orchestrator.preflight.run import NodeJob, run_local_preflight
    from fleetdx.orchestrator.report import RunReport
    from fleetdx.orchestrator.scheduler.job import K8S_NODE_VAR, node_name_from_env
    from fleetdx.orchestrator.scheduler.k8s_nodes import apply_marks, core_api, marks_of
    from fleetdx.orchestrator.scheduler.k8s_nodes import watch as watch_loop

    if level is Level.FULL:
        raise fail("--level full needs several nodes (its cross-node step); one node checks quick or standard")
    node = node_name_from_env(os.environ)
    if node is None:
        raise fail(f"${K8S_NODE_VAR} is not set: give the pod its node's name (fieldRef spec.nodeName)")
    push = _pusher(report_to, token_file, None, False)
    flap_window_s = _flap_window_s()
    try:
        api = core_api(kubeconfig, in_cluster, server)
    except Exception as e:  # noqa: BLE001 - kubernetes.config raises several types for a missing/bad config
        raise fail(f"no Kubernetes API configuration: {e}") from None
    job = NodeJob(host=node, level=level, probe_timeout_s=timeout / 3)
    source = None if gpus_per_node is None else "--gpus-per-node"

    def check() -> RunReport:
        result = run_local_preflight(
            job, run_timeout_s=timeout, expected_gpus=gpus_per_node, expected_gpus_source=source
        )
        if push is not None:
            push(result)
        return result.report

    failed = False

    def show(r: WatchRound) -> None:
        nonlocal failed
        failed = failed or r.error is not None or any(m.error for m in r.results)
        _print_round(node, r, as_json)

    def mark(report: RunReport) -> list[MarkResult]:
        return apply_marks(marks_of(report, taint_critical, flap_window_s), api)

    watch_loop(check, mark, interval_s=interval, rounds=rounds, on_round=show)
    if failed:
        raise typer.Exit(3)


def _flap_window_s() -> float:
    """``$FLEETDX_FLAP_WINDOW_S`` (else 24 h): how soon after fleetdx removed its taint a new failure holds the
    node for a person (:mod:`fleetdx.orchestrator.scheduler.k8s_nodes`)."""
    from fleetdx.orchestrator.store.settings import resolve_flap_window_s

    try:
        return resolve_flap_window_s(None)
    except ValueError as e:
        raise fail(str(e)) from None


def _print_round(node: str, r: WatchRound, as_json: bool) -> None:
    """One JSON line, or one text line per node written: node, verdict, taint, run id and what happened."""
    if as_json:
        typer.echo(r.model_dump_json())
        return
    results: list[MarkResult | None] = [*r.results] or [None]
    for m in results:
        what = r.error or (m.error if m else None) or (m.note if m else None) or "written"
        tainted = "-" if m is None or m.tainted is None else ("tainted" if m.tainted else "untainted")
        line = f"{m.node if m else node} {r.verdict or '-'} {tainted} {r.run_id or '-'}: {escape(what)}"
        console.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the ``k8s`` group to ``app``."""
    app.add_typer(k8s_app, name="k8s")
