"""``fleetdx topo``: show a node's topology, advise a GPU subset and binding, place jobs on a cluster.

- ``topo show FILE|BUNDLE``: the ``topo -m`` matrix with link classes coloured, then the TOPO_* findings.
- ``topo advise FILE|BUNDLE --gpus K``: the best K GPUs, per-rank CPUs/NUMA node/NIC, ready-to-paste lines.
- ``topo cluster --topology-conf FILE --node-count N [--exclude HOSTLIST]``: N nodes with the fewest switch hops
  (FILE is a Slurm ``topology.conf``, or a switch map when it ends in .yaml/.yml/.json).
- ``topo slurm-conf SWITCHMAP``: the Slurm ``topology.conf`` of a YAML/JSON switch map.

A BUNDLE is a bundle directory (read as ``fleetdx analyze`` reads it). ``--json`` prints only the model dump.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fleetdx.orchestrator.cli.common import console, err_console, fits, handle_errors, print_json
from fleetdx.probes.catalog import NUMACTL, TOPO_FILE
from fleetdx.probes.contracts import Severity, Verdict
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.numactl import NumaTopology, parse_numactl
from fleetdx.probes.parsers.topo import TopoMatrix, parse_topo
from fleetdx.probes.rawfile import read_raw

if TYPE_CHECKING:  # topology/ is imported inside the commands, so that other commands start fast
    from fleetdx.orchestrator.diagnosis.topo_findings import TopoShow
    from fleetdx.probes.facts import NodeFacts
    from fleetdx.topology.cluster import ClusterTopology
    from fleetdx.topology.contracts import RankBinding

#: colour per link class, best (green) to worst (red)
STYLE = {
    "NV": "bold green",
    "PIX": "cyan",
    "PXB": "blue",
    "PHB": "yellow",
    "NODE": "magenta",
    "SYS": "bold red",
}
SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}

TopoPath = Annotated[Path, typer.Argument(help="A topo -m text file or a bundle directory.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the JSON model only.")]

topo_app = typer.Typer(
    help="Node topology (topo -m), GPU/NIC/NUMA advice and cluster placement.", no_args_is_help=True
)


class NodeInput:
    """What ``topo show``/``topo advise`` read about one node: a bare ``topo -m`` file, or a bundle directory
    read through :func:`fleetdx.probes.facts.node_facts`, so these commands see exactly the facts
    ``fleetdx analyze`` sees (the sysfs NUMA dump when numactl was absent, the GPU view's model names)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.facts: NodeFacts | None = None
        if path.is_dir():
            from fleetdx.probes.bundle import read_bundle
            from fleetdx.probes.errors import BundleError
            from fleetdx.probes.facts import node_facts

            try:
                self.facts = node_facts(read_bundle(path))
            except BundleError as e:
                raise ConfigError(f"{path}: not a bundle holding {TOPO_FILE} ({e})") from None

    def topo(self) -> TopoMatrix:
        """The ``topo -m`` matrix. Raises :class:`ParseError` for a file that does not parse, and
        :class:`ConfigError` for a bundle without a parsed one."""
        if self.facts is None:
            return parse_topo(read_raw(self.path))
        if self.facts.topo is not None:
            return self.facts.topo
        why = next((f.message for f in self.facts.parse_failures if f.file == TOPO_FILE), f"no {TOPO_FILE}")
        raise ConfigError(f"{self.path}: bundle has no topo -m matrix: {why}")

    def numa(self, numactl: Path | None) -> NumaTopology | None:
        """``numactl -H`` facts: the ``--numactl`` file, else the bundle's (``numactl_-H.txt`` or the sysfs
        dump), else ``None``. Raises :class:`ParseError` when the ``--numactl`` file does not parse."""
        if numactl is not None:
            return parse_numactl(read_raw(numactl))
        if self.facts is None:
            return None
        if self.facts.numa is None:  # a bundle file that does not parse: a warning, the matrix still advises
            for f in self.facts.parse_failures:
                if f.kind == NUMACTL.kind:
                    err_console.print(
                        f"[yellow]warning:[/] {self.path / f.file}: {f.message}; NUMA nodes from topo -m only",
                        highlight=False,
                    )
        return self.facts.numa

    def gpu_model(self, gpu_model: str | None) -> str | None:
        """``--gpu-model``, else the single product name of the bundle's GPUs, else ``None``."""
        if gpu_model is not None or self.facts is None:
            return gpu_model
        names = {g.name for g in self.facts.gpus if g.name}
        return names.pop() if len(names) == 1 else None


def rank_table(ranks: Sequence[RankBinding]) -> Table:
    """One row per local rank: its GPU, NUMA node, CPU list and NIC (with the GPU-NIC link)."""
    from fleetdx.topology.binding import cpu_list

    table = Table("local rank", "GPU", "NUMA node", "CPUs", "NIC", box=None)
    for r in ranks:
        table.add_row(
            str(r.local_rank),
            r.gpu,
            "-" if r.numa_node is None else str(r.numa_node),
            cpu_list(r.cpus) or "-",
            f"{r.nic} ({r.nic_link})" if r.nic else "-",
        )
    return table

def _cell(text: str) -> Text:
    key = "NV" if text.startswith("NV") else text
    return Text(text, style=STYLE.get(key, "dim"))


def _matrix_table(topo: TopoMatrix, short: bool = False, columns: list[str] | None = None) -> Table:
    """``nvidia-smi topo -m``'s matrix with link classes coloured; ``short``: devices named G0.., N0.. (see
    :func:`_short_names`) and no CPU/NUMA columns, so an 8-GPU, 3-NIC node fits 80 columns; ``columns``: only
    these devices' columns (every row is kept)."""
    names = topo.gpu_names + topo.nic_names
    label = _short_names(topo) if short else {n: n for n in names}
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("", no_wrap=True)
    for n in columns or names:
        table.add_column(label[n], justify="center", no_wrap=True)
    if not short:
        table.add_column("CPU Affinity")
        table.add_column("NUMA")
    gpus = {g.name: g for g in topo.gpus}
    for a in names:
        cells = [
            Text("X", style="dim") if a == b else _cell(topo.links.get(a, {}).get(b, "?")) for b in columns or names
        ]
        g = gpus.get(a)
        cpu = (g.cpu_affinity_raw or "") if g else ""
        numa = ",".join(str(x) for x in g.numa_affinity) if g and g.numa_affinity is not None else ""
        table.add_row(Text(label[a], style="bold"), *cells, *(() if short else (cpu, numa)))
    return table


def _halves(groups: list[list[str]], nics: list[str]) -> list[list[str]]:
    """Each group of matrix columns split in two: GPUs from NICs first, else in the middle."""
    out: list[list[str]] = []
    for g in groups:
        gpus = [n for n in g if n not in nics]
        cut = len(gpus) if 0 < len(gpus) < len(g) else (len(g) + 1) // 2
        out.extend(part for part in (g[:cut], g[cut:]) if part)
    return out


def _short_names(topo: TopoMatrix) -> dict[str, str]:
    """Column labels of the short matrix: GPU3 -> G3, the i-th NIC -> Ni."""
    out = {g: g.replace("GPU", "G", 1) for g in topo.gpu_names}
    out.update({n: f"N{i}" for i, n in enumerate(topo.nic_names)})
    return out


def _print_matrix(topo: TopoMatrix) -> None:
    """The matrix as ``topo -m`` lays it out when it fits the terminal; else short labels with a legend, and the
    CPU and NUMA affinity per GPU as a table of its own (headers were cut to ``G…``, ``N…`` at 80 columns)."""
    full = _matrix_table(topo)
    if fits(full):
        console.print(full)
        return
    groups = [topo.gpu_names + topo.nic_names]
    while True:  # the columns in as few groups as fit: all, then GPUs | NICs, then halves of those
        tables = [_matrix_table(topo, short=True, columns=g) for g in groups]
        if all(fits(t) for t in tables) or all(len(g) == 1 for g in groups):
            break
        groups = _halves(groups, topo.nic_names)
    for t in tables:
        console.print(t)
    label = _short_names(topo)
    legend = ", ".join(f"{label[n]} {n}" for n in topo.nic_names)
    console.print("G<i>: GPU<i>" + (f"; {legend}" if legend else ""), style="dim", highlight=False, markup=False)
    affinity = Table("GPU", "NUMA", "CPU affinity", box=None, pad_edge=False, header_style="bold")
    for g in topo.gpus:
        numa = ",".join(str(x) for x in g.numa_affinity) if g.numa_affinity is not None else ""
        affinity.add_row(g.name, numa, g.cpu_affinity_raw or "")
    console.print(affinity)


def _show_model(topo: TopoMatrix, host: str | None, gpu_model: str | None) -> TopoShow:
    from fleetdx.orchestrator.diagnosis.topo_findings import TopoShow, node_findings
    from fleetdx.topology.analyses import assign_rails, nearest_nics, remote_gpu_pairs
    from fleetdx.topology.links import generation_of, nominal_table

    gen = generation_of(gpu_model)
    gpu_cells = [c for g in topo.gpu_names for c in topo.links.get(g, {}).values()]
    return TopoShow(
        gpu_model=gpu_model,
        generation=gen.value if gen else None,
        nominal_gbps=nominal_table(gpu_cells, gen),
        gpus=topo.gpu_names,
        nics=topo.nic_names,
        matrix={a: dict(row) for a, row in topo.links.items()},
        nearest_nic=nearest_nics(topo),
        rails=assign_rails(topo),
        remote_pairs_share=round(remote_gpu_pairs(topo).share, 4),
        findings=node_findings(topo, host=host),
    )


@topo_app.command("show")
@handle_errors
def show(
    path: TopoPath,
    host: Annotated[str | None, typer.Option("--host", help="Host name to put in the findings.")] = None,
    gpu_model: Annotated[
        str | None, typer.Option("--gpu-model", help="GPU product name, for nominal link bandwidths.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Render the matrix with link classes coloured, the nearest NIC per GPU, and the findings."""
    node = NodeInput(path)
    topo = node.topo()
    model = _show_model(topo, host, node.gpu_model(gpu_model))
    if as_json:
        print_json(model)
        return
    _print_matrix(topo)
    if model.nearest_nic:
        console.print("\n[bold]Nearest NIC per GPU, and its rail[/]")
        rails = {r.gpu: r for r in model.rails}
        for gpu, c in model.nearest_nic.items():
            rail = rails.get(gpu)
            line = Text.assemble(f"  {gpu}: ", ", ".join(c.nics) or "-", " at ", _cell(c.link or "?"))
            if rail is not None:
                line.append(f"  -> {rail.nic} ({rail.reason})", style="dim")
            console.print(line)
    console.print(f"\nGPU pairs crossing NODE or SYS without NVLink: {model.remote_pairs_share:.0%}")
    if model.nominal_gbps:
        figures = ", ".join(f"{k} {v:g}" for k, v in model.nominal_gbps.items())
        console.print(f"Nominal GB/s per direction ({model.gpu_model}): {figures}", highlight=False)
    if not model.findings:
        console.print("[green]No topology findings.[/]")
    for f in model.findings:
        style = SEVERITY_STYLE.get(f.severity, "")
        line = Text.assemble(
            (f"{f.severity.value.upper():8} ", style), (f"{f.code.value} {f.subject}: ", "bold"), f.message
        )
        console.print(line)


@topo_app.command("advise")
@handle_errors
def advise_cmd(
    path: TopoPath,
    gpus: Annotated[int, typer.Option("--gpus", "-k", min=1, help="GPUs the job needs on this node.")],
    ib_port: Annotated[
        int, typer.Option("--ib-port", min=1, help="HCA port for UCX_NET_DEVICES (topo -m lists no ports).")
    ] = 1,
    numactl: Annotated[
        Path | None,
        typer.Option("--numactl", help="numactl -H output (a bundle's numactl_-H.txt is read anyway)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """The best GPU subset, the NUMA binding and NIC per local rank, and lines to paste.

    From a BUNDLE, GPUs with a foreign process, uncorrectable ECC, a row-remap failure, a critical XID, a
    hardware slowdown or a degraded NVLink/PCIe link are never advised (each is listed with its reason); the
    best subset is chosen among the others. Exit 0 with advice; 2 when fewer than --gpus healthy GPUs remain
    (no GPU is advised, the JSON has satisfied=false); 3 for bad input. A bare topo -m file carries no
    health evidence: the advice says so.
    """
    from fleetdx.topology.binding import advise

    node = NodeInput(path)
    topo = node.topo()
    if node.facts is not None:
        from fleetdx.orchestrator.placement.health import bundle_gpu_health

        health = bundle_gpu_health(node.facts)
        adv = advise(topo, gpus, ib_port=ib_port, numa=node.numa(numactl), excluded=health.excluded)
        extra = [f"not mapped to a GPU row: {u}" for u in health.unmapped]
    else:
        adv = advise(topo, gpus, ib_port=ib_port, numa=node.numa(numactl))
        extra = ["a bare topo -m file holds no health evidence: GPUs were not checked (give a bundle directory)"]
    adv = adv.model_copy(update={"warnings": [*adv.warnings, *extra]})
    if as_json:
        print_json(adv)
        if not adv.satisfied:
            raise typer.Exit(int(Verdict.CRITICAL))
        return
    if not adv.satisfied:
        console.print(f"[bold red]no advice:[/] {escape(adv.reasons[0])}", highlight=False)
        for line in adv.reasons[1:]:
            console.print(f"  {escape(line)}", highlight=False)
        for w in adv.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
        raise typer.Exit(int(Verdict.CRITICAL))
    console.print(
        Text.assemble(
            ("GPUs: ", "bold"), ", ".join(adv.gpus), "   weakest link: ", _cell(adv.min_link or "-")
        )
    )
    console.print(rank_table(adv.ranks))
    for x in adv.excluded:
        console.print(f"[red]excluded:[/] {escape(x.gpu)}: {escape('; '.join(x.reasons))}", highlight=False)
    for line in adv.reasons:
        if not line.startswith(tuple(f"{x.gpu} excluded:" for x in adv.excluded)):
            console.print(f"  [dim]{escape(line)}[/]", highlight=False)
    for w in adv.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    console.print()
    for c in adv.commands:
        console.print(c, highlight=False, markup=False, soft_wrap=True)
    for r, env in zip(adv.ranks, adv.rank_env, strict=True):
        for k, v in env.items():
            line = f"# local rank {r.local_rank}: export {k}={v}"
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def _load_cluster(path: Path) -> ClusterTopology:
    from fleetdx.topology.cluster import from_switch_map, parse_topology_conf

    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        return from_switch_map(_load_map(path, text))
    return parse_topology_conf(text)


def _load_map(path: Path, text: str) -> object:
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not JSON: {e}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not YAML: {e}") from None


@topo_app.command("cluster")
@handle_errors
def cluster_cmd(
    topology_conf: Annotated[
        Path, typer.Option("--topology-conf", help="Slurm topology.conf, or a .yaml/.json switch map.")
    ],
    node_count: Annotated[
        int | None, typer.Option("--node-count", "-N", min=1, help="Nodes the job needs (required).")
    ] = None,
    exclude: Annotated[
        str, typer.Option("--exclude", "-x", help="Hostlist of unhealthy or busy nodes.")
    ] = "",
    as_json: JsonFlag = False,
    old_nodes: Annotated[str | None, typer.Option("--nodes", hidden=True, help="Deprecated: --node-count.")] = None,
) -> None:
    """Choose N nodes with the fewest switch hops (one leaf first, then the fewest leaves)."""
    from fleetdx.orchestrator.cli.conventions import node_count as node_count_of

    nodes = node_count_of(node_count, old_nodes, "to leave hosts out: --exclude HOSTLIST")
    import hostlist

    from fleetdx.orchestrator.scheduler.targets import expand_hostlist
    from fleetdx.topology.cluster import place

    excluded = expand_hostlist(exclude) if exclude.strip() else []
    p = place(_load_cluster(topology_conf), nodes, excluded)
    if as_json:
        print_json(p)
        return
    console.print(hostlist.collect_hostlist(p.nodes), highlight=False)
    console.print(f"[dim]{p.reason}[/]")
    if p.unknown_excluded:
        console.print(
            f"[yellow]warning:[/] not in the topology: {hostlist.collect_hostlist(p.unknown_excluded)}"
        )


@topo_app.command("slurm-conf")
@handle_errors
def slurm_conf(switchmap: Annotated[Path, typer.Argument(help="A YAML or JSON switch map.")]) -> None:
    """Print the Slurm topology.conf of a switch map."""
    from fleetdx.topology.cluster import from_switch_map, render_topology_conf

    text = switchmap.read_text(encoding="utf-8")
    typer.echo(render_topology_conf(from_switch_map(_load_map(switchmap, text))), nl=False)


def register(app: typer.Typer) -> None:
    """Add the ``topo`` command group to ``app``."""
    app.add_typer(topo_app, name="topo")
