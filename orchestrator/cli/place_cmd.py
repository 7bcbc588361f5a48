"""``fleetdx place``: where should a job of N nodes x K GPUs go, knowing which nodes and GPUs are bad?

Candidates: the Slurm nodes (live ``scontrol show node``, or a captured ``scontrol show node`` / ``sinfo -N -h -o
'%N|%P|%T|%G|%E'`` file), limited by ``--partition`` and ``--hostlist``; or, with ``--hostlist`` alone, those
hosts. Drained, down and otherwise unusable nodes are never advised; nodes the store holds as CRITICAL or
with open unfit findings are left out (the policy: ``fleetdx.orchestrator.placement.policy``); the rest are
ranked by switch hops (``--topology-conf``, else Slurm's own ``scontrol show topology``) and history.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, err_console, finite_positive, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import DB_HELP, computed_default
from fleetdx.orchestrator.cli.conventions import node_count as node_count_of

if TYPE_CHECKING:
    from fleetdx.orchestrator.placement.contracts import PlacementAnswer
    from fleetdx.probes.parsers.slurm_nodes import SlurmNode
    from fleetdx.topology.cluster import ClusterTopology



def _candidates(
    scontrol: Path | None, sinfo: Path | None, live: bool, warnings: list[str]
) -> tuple[list[SlurmNode] | None, ClusterTopology | None]:
    from fleetdx.probes.parsers.slurm_nodes import parse_scontrol_nodes, parse_sinfo_nodes
    from fleetdx.probes.rawfile import read_raw

    if scontrol is not None:
        return parse_scontrol_nodes(read_raw(scontrol)), None
    if sinfo is not None:
        return parse_sinfo_nodes(read_raw(sinfo)), None
    if not live:
        return None, None
    from fleetdx.orchestrator.scheduler.slurm_nodes import slurm_candidates, slurm_topology
    from fleetdx.probes.errors import FleetdxError
    from fleetdx.probes.runner import SubprocessRunner

    runner = SubprocessRunner()
    nodes = slurm_candidates(runner)
    try:
        topo = slurm_topology(runner)
    except FleetdxError as e:
        warnings.append(f"Slurm's topology could not be read: {e}")
        topo = None
    return nodes, topo


def register(app: typer.Typer) -> None:
    """Add the ``place`` command to ``app``."""
    app.command("place")(place_cmd)


@handle_errors
def place_cmd(
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", min=1, help="GPUs the job needs per node.")],
    node_count: Annotated[
        int | None, typer.Option("--node-count", "-N", min=1, help="Nodes the job needs (required).")
    ] = None,
    old_nodes: Annotated[str | None, typer.Option("--nodes", hidden=True, help="Deprecated: --node-count.")] = None,
    partition: Annotated[str | None, typer.Option("--partition", "-p", help="Only Slurm nodes of it.")] = None,
    hostlist_: Annotated[
        str | None,
        typer.Option("--hostlist", "-w", help="Only these hosts (Slurm hostlist); without Slurm, the candidates."),
    ] = None,
    exclude: Annotated[str | None, typer.Option("--exclude", "-x", help="Hosts to rule out (hostlist).")] = None,
    scontrol_file: Annotated[
        Path | None, typer.Option("--scontrol-nodes", help="A saved `scontrol show node` output instead of live.")
    ] = None,
    sinfo_file: Annotated[
        Path | None, typer.Option("--sinfo", help="A saved `sinfo -N -h -o '%N|%P|%T|%G|%E'` output.")
    ] = None,
    use_slurm: Annotated[
        bool | None,
        typer.Option(
            "--slurm/--no-slurm",
            help="Ask the live Slurm (scontrol) for candidates (with --hostlist --slurm, the hostlist limits "
            "Slurm's nodes and their states are checked)."
            + computed_default("--slurm unless --hostlist or a saved file is given"),
        ),
    ] = None,
    topology_conf: Annotated[
        Path | None,
        typer.Option(
            "--topology-conf",
            help="Slurm topology.conf, saved `scontrol show topology`, or a .yaml/.json switch map."
            + computed_default("with live Slurm, Slurm's own"),
        ),
    ] = None,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not read node health from the store.")] = False,
    ib_port: Annotated[int, typer.Option("--ib-port", min=1, help="HCA port for UCX_NET_DEVICES.")] = 1,
    finding_days: Annotated[
        float | None,
        typer.Option(
            "--finding-days",
            callback=finite_positive,
            help="Days a finding stays open unless a clean pre-flight clears it." + computed_default("7"),
        ),
    ] = None,
    history_days: Annotated[
        float | None,
        typer.Option(
            "--history-days",
            callback=finite_positive,
            help="Days of failed pre-flights and straggler runs that rank a node lower." + computed_default("30"),
        ),
    ] = None,
    slurm_args: Annotated[
        bool, typer.Option("--slurm-args", help="Print only the sbatch arguments: sbatch $(fleetdx place ...) job.sh")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON answer only.")] = False,
) -> None:
    """Choose N healthy nodes with K healthy GPUs each, and say why every other candidate was left out.

    The answer per node: GPUs, NIC, NUMA node and CPUs per local rank; per job: sbatch arguments and a
    Kubernetes node affinity.

    Candidates: the live Slurm's idle and mixed nodes (never drained or down), or a saved scontrol/sinfo
    output, limited by --partition and --hostlist; or the --hostlist alone (--no-slurm, the default when a
    hostlist is given). The store then rules out nodes whose latest verdict is CRITICAL or with an open unfit
    finding (a later clean pre-flight clears them), and GPUs with health findings; the rest are ranked by
    switch hops, then history (1 point per CRITICAL pre-flight or straggler run in --history-days).

    Exit 0 placed; 2 not enough fit nodes or GPUs (nothing is advised); 3 bad input or Slurm/store unreachable.
    """
    from fleetdx.orchestrator.cli.topo_cmd import _load_cluster
    from fleetdx.orchestrator.placement.contracts import PlacementRequest
    from fleetdx.orchestrator.placement.job import _expand, place
    from fleetdx.orchestrator.placement.policy import DAY, DEFAULT_POLICY
    from fleetdx.orchestrator.store import Store

    nodes = node_count_of(node_count, old_nodes, "to place on these hosts only: --hostlist HOSTLIST")
    warnings: list[str] = []
    saved = scontrol_file is not None or sinfo_file is not None
    live = use_slurm if use_slurm is not None else (hostlist_ is None and not saved)
    if live and saved:
        raise typer.BadParameter("--slurm asks the live Slurm: give it or a saved file, not both")
    candidates, slurm_topo = _candidates(scontrol_file, sinfo_file, live, warnings)
    cluster = _load_cluster(topology_conf) if topology_conf is not None else slurm_topo
    request = PlacementRequest(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        partition=partition,
        hostlist=hostlist_,
        exclude=_expand(exclude, "--exclude") if exclude else [],
        ib_port=ib_port,
    )
    policy = DEFAULT_POLICY.model_copy(
        update={
            k: v * DAY
            for k, v in (("open_finding_ttl_s", finding_days), ("history_window_s", history_days))
            if v is not None
        }
    )
    if no_store:
        answer = place(request, store=None, candidates=candidates, cluster=cluster, policy=policy)
    else:
        with Store.open(db) as store:
            answer = place(request, store=store, candidates=candidates, cluster=cluster, policy=policy)
    if warnings:
        answer = answer.model_copy(update={"warnings": [*warnings, *answer.warnings]})
    if as_json:
        print_json(answer)
    elif slurm_args:
        if answer.slurm is not None:
            typer.echo(" ".join(answer.slurm.argv))
        else:
            err_console.print(f"[bold red]not placed:[/] {escape('; '.join(answer.reasons))}", highlight=False)
            for x in answer.excluded:
                err_console.print(f"  {escape(x.host)}: {escape('; '.join(x.reasons))}", highlight=False)
    else:
        _render(answer)
    raise typer.Exit(answer.exit_code)


def _render(a: PlacementAnswer) -> None:
    import yaml

    from fleetdx.orchestrator.cli.topo_cmd import rank_table

    if not a.placed:
        console.print(f"[bold red]not placed:[/] {escape('; '.join(a.reasons))}", highlight=False)
    else:
        console.print(f"[bold]nodes:[/] {escape(a.slurm.nodelist if a.slurm else '')}", highlight=False)
        for reason in a.reasons:
            console.print(f"  [dim]{escape(reason)}[/]", highlight=False)
    for n in a.nodes:
        console.print(
            f"\n[bold]node {n.node_rank}: {escape(n.host)}[/]" + (f" (switch {escape(n.group)})" if n.group else ""),
            highlight=False,
        )
        console.print(f"  health: {escape(n.health)}\n  history: {escape(n.history)}", highlight=False)
        for g in n.excluded_gpus:
            console.print(f"  [red]GPU excluded:[/] {escape(g.gpu)}: {escape('; '.join(g.reasons))}", highlight=False)
        if n.gpus is None:
            console.print(f"  [yellow]{escape(n.gpu_note or 'no GPU advice')}[/]", highlight=False)
            continue
        console.print(rank_table(n.gpus.ranks))
        for k, v in n.gpus.env.items():
            console.print(f"  export {k}={v}", highlight=False, markup=False, soft_wrap=True)
        for r, env in zip(n.gpus.ranks, n.gpus.rank_env, strict=True):
            for k, v in env.items():
                console.print(f"  # local rank {r.local_rank}: export {k}={v}", highlight=False, markup=False)
    if a.excluded:
        console.print("\n[bold]excluded[/]")
        table = Table("host", "stage", "why", box=None)
        for x in a.excluded:
            table.add_row(escape(x.host), x.stage.value, escape("; ".join(x.reasons)))
        console.print(table)
    if a.slurm is not None:
        console.print("\n[bold]sbatch[/] " + escape(" ".join(a.slurm.argv)), highlight=False, soft_wrap=True)
    if a.kubernetes_affinity is not None:
        console.print("[bold]Kubernetes pod spec:[/]", highlight=False)
        text = yaml.safe_dump({"affinity": a.kubernetes_affinity}, sort_keys=False)
        console.print(text.rstrip(), highlight=False, markup=False)
    for w in a.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
