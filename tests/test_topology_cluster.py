"""Cluster topology: Slurm topology.conf and switch maps, placement, topology.conf rendering."""

from __future__ import annotations

import json
import random
from itertools import combinations
from pathlib import Path

import pytest
import yaml

from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.topology.cluster import (
    ClusterIndex,
    PlacementError,
    TopologyError,
    TopologyPlugin,
    cluster_graph,
    from_switch_map,
    parse_topology_conf,
    place,
    render_topology_conf,
)

DIR = Path(__file__).parent / "fixtures" / "topology"


def tree() -> object:
    return parse_topology_conf((DIR / "tree_3level.conf").read_text())


def test_parse_tree_conf() -> None:
    t = parse_topology_conf((DIR / "tree_3level.conf").read_text())
    assert t.plugin is TopologyPlugin.TREE
    by = {s.name: s for s in t.switches}
    assert by["leaf1"].nodes == ["gpu01", "gpu02", "gpu03", "gpu04"] and by["leaf1"].link_speed == 400
    assert by["leaf4"].nodes[-1] == "gpu16"  # lower-case keys are accepted
    assert by["spine2"].switches == ["leaf3", "leaf4"]  # trailing comment dropped
    assert by["core"].switches == ["spine1", "spine2"]
    assert len(t.nodes) == 16
    idx = ClusterIndex(t)
    assert (idx.level["leaf1"], idx.level["spine1"], idx.level["core"]) == (1, 2, 3)


def test_parse_block_conf() -> None:
    t = parse_topology_conf((DIR / "block.conf").read_text())
    assert t.plugin is TopologyPlugin.BLOCK
    assert [b.name for b in t.blocks] == ["nvl1", "nvl2"] and t.block_sizes == [4, 8]
    assert t.blocks[1].nodes[0] == "gb05"


def test_bad_confs() -> None:
    with pytest.raises(TopologyError, match="unknown switch leaf2"):
        parse_topology_conf((DIR / "bad_unknown_switch.conf").read_text())
    with pytest.raises(ParseError) as e:
        parse_topology_conf("SwitchName=a Nodes=n1\nNodes\n")
    assert e.value.line == 2
    with pytest.raises(ParseError):
        parse_topology_conf("# nothing\n")
    with pytest.raises(ParseError):
        parse_topology_conf("SwitchName=a Nodes=n[1-2]\nBlockName=b Nodes=n[3-4]\n")
    with pytest.raises(TopologyError, match="cycle"):
        parse_topology_conf("SwitchName=a Switches=b\nSwitchName=b Switches=a\n")
    with pytest.raises(TopologyError, match="n2"):
        parse_topology_conf("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[2-3]\n")


def test_place_prefers_one_leaf_then_fewest_leaves_under_the_lowest_switch() -> None:
    t = tree()
    p = place(t, 4)
    assert p.nodes == ["gpu01", "gpu02", "gpu03", "gpu04"] and p.switch == "leaf1" and p.switch_hops == 1
    # leaf1 loses a node: leaf2 still has 4
    p = place(t, 4, exclude=["gpu02"])
    assert p.switch == "leaf2" and p.nodes == ["gpu05", "gpu06", "gpu07", "gpu08"]
    # 6 nodes: two leaves under one spine, 3 hops
    p = place(t, 6, exclude=["gpu02", "gpu10"])
    assert p.switch == "spine1" and p.switch_hops == 3 and p.groups == ["leaf2", "leaf1"]
    assert p.nodes == ["gpu05", "gpu06", "gpu07", "gpu08", "gpu01", "gpu03"]
    # 9 nodes: no spine has 9 free -> the core, 5 hops, fewest leaves (3)
    p = place(t, 9)
    assert p.switch == "core" and p.switch_hops == 5 and len(p.groups) == 3 and len(set(p.nodes)) == 9


def test_place_best_fit_keeps_the_emptier_leaf_whole() -> None:
    t = tree()
    # 3 nodes: leaf1 has 3 free, leaf2 4 free -> take leaf1 (tightest fit)
    p = place(t, 3, exclude=["gpu01"])
    assert p.switch == "leaf1" and p.nodes == ["gpu02", "gpu03", "gpu04"]


def test_place_reports_unknown_exclusions_and_fails_when_too_few() -> None:
    t = tree()
    p = place(t, 2, exclude=["nosuch"])
    assert p.unknown_excluded == ["nosuch"]
    with pytest.raises(PlacementError):
        place(t, 17)
    with pytest.raises(PlacementError):
        place(t, 16, exclude=["gpu01"])
    with pytest.raises(PlacementError):
        place(t, 0)


def test_place_blocks() -> None:
    t = parse_topology_conf((DIR / "block.conf").read_text())
    p = place(t, 3, exclude=["gb01"])
    assert p.groups == ["nvl1"] and p.nodes == ["gb02", "gb03", "gb04"] and p.switch_hops is None
    p = place(t, 6, exclude=["gb01"])
    assert p.groups == ["nvl2", "nvl1"] and p.switch is None and len(p.nodes) == 6
    with pytest.raises(PlacementError):
        place(t, 8, exclude=["gb01"])


def test_switch_map_yaml_renders_the_golden_topology_conf() -> None:
    t = from_switch_map(yaml.safe_load((DIR / "switchmap.yaml").read_text()))
    assert render_topology_conf(t) == (DIR / "switchmap.expected.conf").read_text()
    # and the rendering reads back to the same topology
    assert parse_topology_conf(render_topology_conf(t)) == t


def test_switch_map_json_blocks() -> None:
    t = from_switch_map(json.loads((DIR / "switchmap_blocks.json").read_text()))
    text = render_topology_conf(t)
    assert "BlockName=nvl1 Nodes=gb[01-18]" in text and "BlockSizes=18,36" in text
    assert parse_topology_conf(text) == t


def test_switch_map_errors() -> None:
    with pytest.raises(ConfigError):
        from_switch_map({"switches": [{"nom": "x"}]})
    with pytest.raises(ConfigError):
        from_switch_map({})
    with pytest.raises(ConfigError):
        from_switch_map({"switches": [{"name": "a", "nodes": "n[1-"}]})


def test_cluster_graph() -> None:
    g = cluster_graph(tree())
    assert g.nodes["core"]["kind"] == "switch" and g.nodes["core"]["level"] == 3
    assert (
        g.nodes["gpu07"]["kind"] == "node" and g.has_edge("leaf2", "gpu07") and g.has_edge("core", "spine1")
    )
    assert g.number_of_nodes() == 16 + 4 + 2 + 1


def _random_tree(rng: random.Random) -> object:
    """A random 2- or 3-level tree of up to 8 leaves with 1-5 nodes each."""
    leaves = [f"leaf{i}" for i in range(rng.randint(1, 8))]
    lines, k = [], 0
    for leaf in leaves:
        size = rng.randint(1, 5)
        lines.append(f"SwitchName={leaf} Nodes=n[{k:03d}-{k + size - 1:03d}]")
        k += size
    spines = [leaves[i : i + 3] for i in range(0, len(leaves), 3)]
    for s, kids in enumerate(spines):
        lines.append(f"SwitchName=spine{s} Switches={','.join(kids)}")
    if len(spines) > 1:
        lines.append(f"SwitchName=core Switches={','.join(f'spine{s}' for s in range(len(spines)))}")
    return parse_topology_conf("\n".join(lines))


@pytest.mark.parametrize("seed", range(60))
def test_placement_is_optimal_against_brute_force_over_leaf_sets(seed: int) -> None:
    rng = random.Random(seed)
    t = _random_tree(rng)
    idx = ClusterIndex(t)
    nodes = t.nodes
    exclude = set(rng.sample(nodes, rng.randint(0, len(nodes) // 2)))
    n = rng.randint(1, len(nodes))
    free = {g: [x for x in ns if x not in exclude] for g, ns in idx.group_nodes.items()}
    # brute force: every switch, every subset of its leaves holding n free nodes; best = (level, #leaves)
    best = None
    for s in idx.level:
        leaves = idx.leaves_under[s]
        for r in range(1, len(leaves) + 1):
            for combo in combinations(leaves, r):
                if sum(len(free[x]) for x in combo) >= n:
                    level = 1 if r == 1 else idx.level[s]
                    best = min(best or (level, r), (level, r))
    if best is None:
        with pytest.raises(PlacementError):
            idx.place(n, exclude)
        return
    p = idx.place(n, exclude)
    assert len(p.nodes) == n == len(set(p.nodes)) and not set(p.nodes) & exclude
    assert {idx.node_group[x] for x in p.nodes} <= set(p.groups)
    level = 1 if len(p.groups) == 1 else idx.level[p.switch or ""]
    assert (level, len(p.groups)) == best
