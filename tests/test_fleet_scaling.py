"""Peer statistics are computed once per fleet (``Fleet.derived``), so a rule's work per node does not grow
with the fleet, and they give exactly what a scan of every node's peers gave: the micro-benchmark peer
median, the topology peer comparison, the GPU-count majority."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetdx.orchestrator.diagnosis import references as ref
from fleetdx.orchestrator.diagnosis import rules_gpu, rules_topo
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose
from fleetdx.orchestrator.diagnosis.topo_findings import peer_findings
from fleetdx.orchestrator.judgement import Finding
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.microbench import Microbench
from fleetdx.probes.parsers.smi_xml import SmiGpu, SmiReport
from tests.topology_util import make_topo, uniform

MODELS = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]


def _topo(cell12: str = "NV4", nic: str = "PIX") -> object:
    rows = [r.split() for r in uniform(4, "NV4")]
    rows[1][2] = rows[2][1] = cell12
    return make_topo([" ".join(r) for r in rows], nic_cols=[nic, nic, "SYS", "SYS"], nic_names=["mlx5_0"])


TOPOS = [_topo(), _topo(), _topo(), _topo("NV3"), _topo("SYS"), _topo(nic="NODE"), make_topo(uniform(8, "NV18"))]


def _smi(name: str, gpus: int = 4) -> SmiReport:
    return SmiReport(gpus=[SmiGpu(index=i, bus_id=f"00000000:{i:02X}:00.0", name=name) for i in range(gpus)])


def _random_fleet(seed: int, n: int) -> Fleet:
    """Nodes with random matrices (or none), GPU models (or none), micro-benchmark figures and GPU counts;
    a few host names repeat (a host's nodes are all left out of its peers)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(n):
        model = rng.choice([*MODELS, None])
        bench = [
            Microbench(
                gpu_index=g,
                gpu_name=model,
                gemm_bf16_tflops=rng.choice([700.0, 760.5, 772.65, 772.65, 800.0]),
                d2d_gbps=rng.choice([None, 1600.0, 2990.0, 3000.0]),
            )
            for g in range(rng.randint(0, 3))
        ]
        nodes.append(
            NodeFacts(
                host=f"n{rng.randint(0, n - 3) if rng.random() < 0.2 else i:03d}",
                topo=rng.choice([*TOPOS, None]),
                smi=_smi(model, rng.choice([4, 4, 4, 8])) if model else None,
                microbench=bench,
            )
        )
    return Fleet(nodes=nodes)


def _scan_peer_median(node: NodeFacts, fleet: Fleet, name: str | None, metric: ref.Metric) -> object:
    """The peer median as it was computed before: a scan of the node's peers."""
    if name is None:
        return None
    values = [
        v
        for p in fleet.peers_of(node.host)
        for m in p.microbench
        if m.gpu_name == name and (v := rules_gpu._value(m, metric)) is not None
    ]
    return (statistics.median(values), len(values)) if values else None


def _scan_topo_peers(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """TOPO_MISMATCH_PEERS as it was computed before: every peer's matrix through compare_to_peers."""
    if node.topo is None:
        return []
    model = rules_topo.gpu_model(node)
    peers = [
        p.topo
        for p in fleet.peers_of(node.host)
        if p.topo is not None and (model is None or rules_topo.gpu_model(p) == model)
    ]
    return peer_findings(node.topo, peers, host=node.host)[1]


@given(
    st.lists(
        st.tuples(st.sampled_from("abcde"), st.sampled_from([0.0, 1.0, 1.5, 2.0, 2.0, 7.25, 1e9])), max_size=30
    )
)
def test_peer_median_is_the_median_of_the_other_hosts_values(items: list[tuple[str, float]]) -> None:
    figures = rules_gpu.PeerFigures()
    for host, v in items:
        figures.add(host, v)
    figures.seal()
    for host in "abcdef":
        others = [v for h, v in items if h != host]
        want = (statistics.median(others), len(others)) if others else None
        assert figures.peer_median(host) == want


@pytest.mark.parametrize("seed", range(8))
def test_rules_give_what_the_peer_scans_gave(seed: int) -> None:
    fleet = _random_fleet(seed, 40)
    for node in fleet.nodes:
        assert rules_topo.topo_peers_rule(node, fleet) == _scan_topo_peers(node, fleet)
        for m in node.microbench:
            for metric in ref.Metric:
                got = rules_gpu._peer_median(node, fleet, m.gpu_name, metric)
                assert got == _scan_peer_median(node, fleet, m.gpu_name, metric)
    counts = [c for c in (rules_gpu.gpu_count(n) for n in fleet.nodes) if c is not None]
    assert fleet.derived(rules_gpu._gpu_count_majority) == (rules_gpu._majority(c for c, _ in counts), len(counts))


def test_a_fleet_with_findings_from_every_peer_rule() -> None:
    """The random fleets do produce peer findings (the comparison above is not vacuous)."""
    fleet = _random_fleet(1, 60)
    codes = {f.code.value for n in fleet.nodes for f in rules_topo.topo_peers_rule(n, fleet)}
    assert codes == {"TOPO_MISMATCH_PEERS"}


def test_rules_do_not_scan_the_fleet_for_each_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per node, the rules read the fleet's statistics: calls to the per-node helpers grow with the node
    count, not with its square, and no rule scans ``peers_of``."""

    def no_scan(self: Fleet, host: str) -> list[NodeFacts]:
        raise AssertionError("a rule scanned the peers of a node")

    monkeypatch.setattr(Fleet, "peers_of", no_scan)
    calls = {"gpu_count": 0, "gpu_model": 0, "value": 0}

    def counting(name: str, fn: object) -> object:
        def wrapped(*a: object) -> object:
            calls[name] += 1
            return fn(*a)  # type: ignore[operator]

        return wrapped

    monkeypatch.setattr(rules_gpu, "gpu_count", counting("gpu_count", rules_gpu.gpu_count))
    monkeypatch.setattr(rules_topo, "gpu_model", counting("gpu_model", rules_topo.gpu_model))
    monkeypatch.setattr(rules_gpu, "_value", counting("value", rules_gpu._value))
    n = 200
    fleet = _random_fleet(3, n)
    diagnose(fleet)
    gpus = sum(len(node.microbench) for node in fleet.nodes)
    assert calls["gpu_count"] <= 2 * n
    assert calls["gpu_model"] <= 2 * n
    assert calls["value"] <= 2 * len(rules_gpu._METRICS) * gpus


def test_derived_is_built_once_and_follows_the_nodes() -> None:
    a, b = NodeFacts(host="a"), NodeFacts(host="b")
    built: list[int] = []

    def size(f: Fleet) -> int:
        built.append(len(f.nodes))
        return len(f.nodes)

    fleet = Fleet(nodes=[a, b])
    assert fleet.derived(size) == 2 and fleet.derived(size) == 2 and built == [2]
    assert fleet == Fleet(nodes=[a, b]) and "_derived" not in fleet.model_dump()
    smaller = fleet.model_copy(update={"nodes": [a]})
    assert smaller.derived(size) == 1 and fleet.derived(size) == 2
