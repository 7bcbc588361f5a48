"""The cluster graph (switches and nodes) and placement: which ``N`` nodes give a job the fewest switch hops.

Sources of a cluster topology, all pure (text or already-loaded data in, models out):

- Slurm ``topology.conf`` for the ``topology/tree`` plugin (``SwitchName=s0 Nodes=node[01-32]``,
  ``SwitchName=s10 Switches=s[0-3]``, optional ``LinkSpeed=``) and the ``topology/block`` plugin
  (``BlockName=b1 Nodes=node[01-18]``, ``BlockSizes=18,36``) (Slurm documentation, topology.conf(5)).
- A switch map (a YAML or JSON document the CLI has loaded)::

      switches:
        - {name: leaf1, nodes: "gpu[001-032]"}
        - {name: spine1, switches: "leaf[1-2]"}
      blocks:                        # optional, instead of switches
        - {name: nvl1, nodes: "gb[01-18]"}

Placement (tree): the job goes under the lowest switch whose subtree holds ``N`` free nodes (one leaf first,
then a spine, ...); among switches of that level, the one that needs the fewest leaves, then the tightest fit
(fewest free nodes, which keeps large free subtrees whole, as Slurm's tree plugin's best fit does), then name.
Leaves are filled largest first, which needs the fewest leaves. ``switch_hops`` counts the switches on the
worst path between two chosen nodes: 1 under one leaf, 3 through a spine, ``2L - 1`` through a level-``L``
switch. Placement (block): one block if any holds ``N`` free nodes (tightest fit), else the fewest blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

import hostlist
import networkx as nx
from pydantic import Field, ValidationError

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ConfigError, FleetdxError, ParseError

CONF_FMT = "topology.conf"


class TopologyPlugin(str, Enum):
    TREE = "tree"
    BLOCK = "block"


class Switch(Contract):
    """A switch: a leaf lists ``nodes``, a higher switch lists child ``switches``."""

    name: str
    nodes: list[str] = Field(default_factory=list)
    switches: list[str] = Field(default_factory=list)
    link_speed: int | None = None


class Block(Contract):
    name: str
    nodes: list[str]


class ClusterTopology(Contract):
    """One cluster's network topology, whichever source it came from."""

    plugin: TopologyPlugin
    switches: list[Switch] = Field(default_factory=list)
    blocks: list[Block] = Field(default_factory=list)
    block_sizes: list[int] = Field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        groups = self.switches if self.plugin is TopologyPlugin.TREE else self.blocks
        return [n for g in groups for n in g.nodes]


class Placement(Contract):
    """The nodes chosen for a job and why. ``switch`` is the lowest common switch (or the block); ``None``
    when the job spans several blocks. ``switch_hops`` is ``None`` for the block plugin."""

    nodes: list[str]
    plugin: TopologyPlugin
    switch: str | None
    groups: list[str]  #: the leaves (tree) or blocks used, in fill order
    switch_hops: int | None
    reason: str
    unknown_excluded: list[str] = Field(default_factory=list)


class PlacementError(FleetdxError):
    """No set of ``N`` free nodes exists under one switch tree (or in the blocks)."""


class TopologyError(ConfigError):
    """A topology that names unknown switches, has a cycle, or puts a node under two leaves."""


def _expand(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    out: list[str] = []
    for item in items:
        try:
            out.extend(hostlist.expand_hostlist(item))
        except hostlist.BadHostlist as e:
            raise ConfigError(f"bad hostlist {item!r}: {e}") from None
    return out


def parse_topology_conf(text: str) -> ClusterTopology:
    """Read a Slurm ``topology.conf`` (tree or block plugin; ``#`` comments; keys case-insensitive), or the
    output of ``scontrol show topology``, which prints the same lines with ``Level=N`` and lists under a
    switch of level 1 or more every node below it (``SwitchName=spine Level=1 Nodes=gpu[01-06]
    Switches=leaf[1-2]``): those ``Nodes=`` are dropped, the leaves hold the nodes.

    Raises:
        ParseError: a line that is not ``Key=Value`` pairs, a line that is neither a switch nor a block, or a
            file that mixes both plugins.
        TopologyError: unknown child switch, a cycle, a node under two leaves.
    """
    switches: list[Switch] = []
    blocks: list[Block] = []
    sizes: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: dict[str, str] = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if not sep or not value:
                raise ParseError(CONF_FMT, lineno, "Key=Value", token)
            fields[key.lower()] = value
        if "level" in fields and fields.get("switches") and fields["level"] != "0":
            # `scontrol show topology` lists every node below a higher-level switch under it too
            fields.pop("nodes", None)
        try:
            if "switchname" in fields:
                speed = fields.get("linkspeed")
                switches.append(
                    Switch(
                        name=fields["switchname"],
                        nodes=_expand(fields.get("nodes")),
                        switches=_expand(fields.get("switches")),
                        link_speed=int(speed) if speed is not None else None,
                    )
                )
            elif "blockname" in fields:
                blocks.append(Block(name=fields["blockname"], nodes=_expand(fields.get("nodes"))))
            elif "blocksizes" in fields:
                sizes = [int(s) for s in fields["blocksizes"].split(",")]
            else:
                raise ParseError(CONF_FMT, lineno, "SwitchName=, BlockName= or BlockSizes=", raw)
        except (ValueError, ConfigError) as e:
            raise ParseError(CONF_FMT, lineno, "valid values", f"{raw.strip()}: {e}") from None
    if switches and blocks:
        raise ParseError(CONF_FMT, None, "either SwitchName (tree) or BlockName (block) lines, not both")
    if not switches and not blocks:
        raise ParseError(CONF_FMT, None, "at least one SwitchName or BlockName line")
    plugin = TopologyPlugin.TREE if switches else TopologyPlugin.BLOCK
    topo = ClusterTopology(plugin=plugin, switches=switches, blocks=blocks, block_sizes=sizes)
    validate(topo)
    return topo


class _MapEntry(Contract):
    name: str
    nodes: str | list[str] | None = None
    switches: str | list[str] | None = None
    link_speed: int | None = None


class _SwitchMap(Contract):
    switches: list[_MapEntry] = Field(default_factory=list)
    blocks: list[_MapEntry] = Field(default_factory=list)
    block_sizes: list[int] = Field(default_factory=list)


def from_switch_map(data: object) -> ClusterTopology:
    """Build a topology from a loaded switch map (see the module docstring for its shape).

    Raises:
        ConfigError: the document does not have that shape, or mixes switches and blocks.
        TopologyError: see :func:`validate`.
    """
    try:
        m = _SwitchMap.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"switch map: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None
    if bool(m.switches) == bool(m.blocks):
        raise ConfigError("switch map: give either 'switches' or 'blocks'")
    topo = ClusterTopology(
        plugin=TopologyPlugin.TREE if m.switches else TopologyPlugin.BLOCK,
        switches=[
            Switch(name=e.name, nodes=_expand(e.nodes), switches=_expand(e.switches), link_speed=e.link_speed)
            for e in m.switches
        ],
        blocks=[Block(name=e.name, nodes=_expand(e.nodes)) for e in m.blocks],
        block_sizes=m.block_sizes,
    )
    validate(topo)
    return topo


def validate(topo: ClusterTopology) -> None:
    """Raise :class:`TopologyError` for duplicate or unknown switches, cycles, or a node in two
    leaves/blocks."""
    seen: dict[str, str] = {}
    for group in topo.switches or topo.blocks:
        for n in group.nodes:
            if n in seen:
                raise TopologyError(f"node {n} is under both {seen[n]} and {group.name}")
            seen[n] = group.name
    names = [s.name for s in topo.switches]
    if len(set(names)) != len(names):
        raise TopologyError("a switch name is defined twice")
    g: nx.DiGraph[str] = nx.DiGraph()
    g.add_nodes_from(names)
    for s in topo.switches:
        for child in s.switches:
            if child not in g:
                raise TopologyError(f"switch {s.name} lists unknown switch {child}")
            g.add_edge(s.name, child)
    if not nx.is_directed_acyclic_graph(g):
        raise TopologyError(f"switch cycle: {nx.find_cycle(g)}")


def render_topology_conf(topo: ClusterTopology) -> str:
    """The Slurm ``topology.conf`` text of ``topo`` (hostlists compressed with python-hostlist)."""
    lines = [f"# Slurm topology.conf for the topology/{topo.plugin.value} plugin, generated by fleetdx"]
    for s in topo.switches:
        parts = [f"SwitchName={s.name}"]
        if s.switches:
            parts.append(f"Switches={hostlist.collect_hostlist(s.switches)}")
        if s.nodes:
            parts.append(f"Nodes={hostlist.collect_hostlist(s.nodes)}")
        if s.link_speed is not None:
            parts.append(f"LinkSpeed={s.link_speed}")
        lines.append(" ".join(parts))
    for b in topo.blocks:
        lines.append(f"BlockName={b.name} Nodes={hostlist.collect_hostlist(b.nodes)}")
    if topo.block_sizes:
        lines.append("BlockSizes=" + ",".join(str(s) for s in topo.block_sizes))
    return "\n".join(lines) + "\n"


def cluster_graph(topo: ClusterTopology) -> nx.Graph[str]:
    """The cluster as a graph: switches (``kind="switch"``, ``level``), blocks, nodes (``kind="node"``)."""
    g: nx.Graph[str] = nx.Graph()
    idx = ClusterIndex(topo)
    for s in topo.switches:
        g.add_node(s.name, kind="switch", level=idx.level[s.name])
        for child in s.switches:
            g.add_edge(s.name, child)
        for n in s.nodes:
            g.add_node(n, kind="node")
            g.add_edge(s.name, n)
    for b in topo.blocks:
        g.add_node(b.name, kind="block")
        for n in b.nodes:
            g.add_node(n, kind="node")
            g.add_edge(b.name, n)
    return g


class ClusterIndex:
    """Precomputed lookups for fast placement queries (build once per topology, query many times)."""

    def __init__(self, topo: ClusterTopology) -> None:
        self.topo = topo
        groups = topo.switches if topo.plugin is TopologyPlugin.TREE else topo.blocks
        self.group_nodes: dict[str, list[str]] = {g.name: list(g.nodes) for g in groups if g.nodes}
        self.node_group = {n: name for name, nodes in self.group_nodes.items() for n in nodes}
        by_name = {s.name: s for s in topo.switches}
        self.level: dict[str, int] = {}
        self.leaves_under: dict[str, list[str]] = {}

        def visit(name: str) -> int:
            if name not in self.level:
                s = by_name[name]
                kids = [visit(c) for c in s.switches]
                self.level[name] = 1 + max(kids, default=0)
                leaves = [name] if s.nodes else []
                for c in s.switches:
                    leaves += self.leaves_under[c]
                self.leaves_under[name] = list(dict.fromkeys(leaves))
            return self.level[name]

        for s in topo.switches:
            visit(s.name)
        self.by_level = sorted(self.level, key=lambda s: (self.level[s], s))

    def free_counts(self, exclude: set[str]) -> dict[str, int]:
        """Free nodes per leaf/block when ``exclude`` is unavailable."""
        counts = {g: len(nodes) for g, nodes in self.group_nodes.items()}
        for n in exclude:
            g = self.node_group.get(n)
            if g is not None:
                counts[g] -= 1
        return counts

    def place(
        self, n: int, exclude: Iterable[str] = (), penalty: Mapping[str, float] | None = None
    ) -> Placement:
        """Choose ``n`` free nodes (see the module docstring).

        ``penalty`` (node -> points, default 0; e.g. its history of failures) breaks ties *after* locality:
        among the switches of the lowest level that fit, needing the fewest leaves, the one whose ``n``
        lowest-penalty free nodes have the smallest total penalty wins (then the tightest fit, then the name);
        within the chosen leaves (blocks) the ``n`` nodes of lowest penalty are taken (then fill order). A
        penalty never makes a job span more switches or blocks than it must.

        Raises:
            PlacementError: ``n < 1`` or no switch tree / block set holds ``n`` free nodes.
        """
        if n < 1:
            raise PlacementError(f"cannot place {n} nodes")
        excl = set(exclude)
        pen = penalty or {}
        unknown = sorted(x for x in excl if x not in self.node_group)
        free = self.free_counts(excl)
        if self.topo.plugin is TopologyPlugin.BLOCK:
            return self._place_blocks(n, excl, free, unknown, pen)
        best: tuple[int, float, int, str] | None = None
        best_level = None
        for s in self.by_level:
            level = self.level[s]
            if best_level is not None and level > best_level:
                break
            leaves = self.leaves_under[s]
            total = sum(free[x] for x in leaves)
            if total < n:
                continue
            need = _leaves_needed(sorted((free[x] for x in leaves), reverse=True), n)
            cost = self._cost(self._fill_order(leaves, free)[:need], n, excl, pen) if pen else 0.0
            key = (need, cost, total, s)
            if best is None or key < best:
                best, best_level = key, level
        if best is None:
            largest = max((sum(free[x] for x in self.leaves_under[s]), s) for s in self.by_level)
            raise PlacementError(
                f"no switch has {n} free nodes under it "
                f"(the most under one switch: {largest[0]} under {largest[1]})"
            )
        need, _, _, switch = best
        leaves = self._fill_order(self.leaves_under[switch], free)[:need]
        nodes = self._take(leaves, n, excl, pen)
        used = set(self.node_group[x] for x in nodes)
        leaves = [x for x in leaves if x in used]
        hops = 1 if len(leaves) == 1 else 2 * self.level[switch] - 1
        where = f"leaf {leaves[0]}" if len(leaves) == 1 else f"{len(leaves)} leaves under {switch}"
        return Placement(
            nodes=nodes,
            plugin=self.topo.plugin,
            switch=leaves[0] if len(leaves) == 1 else switch,
            groups=leaves,
            switch_hops=hops,
            reason=f"{n} free nodes under {where}: at most {hops} switch hop(s) between any two",
            unknown_excluded=unknown,
        )

    @staticmethod
    def _fill_order(groups: list[str], free: dict[str, int]) -> list[str]:
        """Groups with free nodes, most free first, then by name."""
        return [x for x in sorted(groups, key=lambda x: (-free[x], x)) if free[x]]

    def _free_in(self, groups: list[str], excl: set[str]) -> list[str]:
        return [node for g in groups for node in self.group_nodes[g] if node not in excl]

    def _cost(self, groups: list[str], n: int, excl: set[str], pen: Mapping[str, float]) -> float:
        """Total penalty of the ``n`` lowest-penalty free nodes of ``groups``."""
        return sum(sorted(pen.get(x, 0.0) for x in self._free_in(groups, excl))[:n])

    def _take(self, groups: list[str], n: int, excl: set[str], pen: Mapping[str, float] | None = None) -> list[str]:
        """The ``n`` free nodes of ``groups`` of lowest penalty, in fill order among equals, returned in
        fill order."""
        nodes = self._free_in(groups, excl)
        if not pen:
            return nodes[:n]
        order = {x: i for i, x in enumerate(nodes)}
        chosen = set(sorted(nodes, key=lambda x: (pen.get(x, 0.0), order[x]))[:n])
        return [x for x in nodes if x in chosen]

    def _place_blocks(
        self, n: int, excl: set[str], free: dict[str, int], unknown: list[str], pen: Mapping[str, float]
    ) -> Placement:
        fits = [(self._cost([b], n, excl, pen) if pen else 0.0, c, b) for b, c in free.items() if c >= n]
        if fits:
            _, _, block = min(fits)
            groups = [block]
        else:
            ordered = sorted(free, key=lambda b: (-free[b], b))
            need = _leaves_needed([free[b] for b in ordered], n)
            if need == 0:
                raise PlacementError(f"only {sum(free.values())} free nodes in all blocks, {n} needed")
            groups = ordered[:need]
        nodes = self._take(groups, n, excl, pen)
        used = set(self.node_group[x] for x in nodes)
        groups = [g for g in groups if g in used]
        one = len(groups) == 1
        return Placement(
            nodes=nodes,
            plugin=TopologyPlugin.BLOCK,
            switch=groups[0] if one else None,
            groups=groups,
            switch_hops=None,
            reason=f"{n} free nodes in block {groups[0]}"
            if one
            else f"{n} free nodes over {len(groups)} blocks",
            unknown_excluded=unknown,
        )


def _leaves_needed(counts_desc: list[int], n: int) -> int:
    """Fewest groups whose free counts (sorted descending) add up to ``n``; 0 when they never do."""
    total = 0
    for i, c in enumerate(counts_desc, 1):
        total += c
        if total >= n:
            return i
    return 0


def place(
    topo: ClusterTopology, n: int, exclude: Iterable[str] = (), penalty: Mapping[str, float] | None = None
) -> Placement:
    """One-shot :meth:`ClusterIndex.place` (build a :class:`ClusterIndex` to answer many queries)."""
    return ClusterIndex(topo).place(n, exclude, penalty)

