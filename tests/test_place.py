"""Node choice for a job (issue 14, item 2): ``fleetdx.orchestrator.placement.job.place`` and ``fleetdx place``.

Scheduler state: tests/fixtures/placement/ holds real outputs of a 6-node Slurm 22.05 cluster run on this
machine (README.md there): gpu01 idle, gpu02 drained, gpu03 draining (mixed+drain), gpu04 mixed, gpu05
allocated, gpu06 down; leaf1 = gpu[01-03], leaf2 = gpu[04-06] under a spine.

Health: pre-flight reports are stored in a fresh store (SQLite, and PostgreSQL when FLEETDX_TEST_PG_URL is
set). Their GPU findings are the ones fleetdx's own rules find in the real h100-busy bundle (GPU0 held by pid
1929), re-addressed to the Slurm node names; the stored ``topo -m`` is the real one of the same H100 VM (one
GPU, one NUMA node, CPUs 0-15). Findings marked "test finding" in their message are written here.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import place_cmd
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import run_rules
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.placement.contracts import ExclusionStage, PlacementRequest
from fleetdx.orchestrator.placement.health import gpu_health
from fleetdx.orchestrator.placement.job import PlacementInputError, place
from fleetdx.orchestrator.placement.policy import DAY
from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.store import Store
from fleetdx.probes.bundle import read_bundle
from fleetdx.probes.catalog import TOPO_FILE
from fleetdx.probes.contracts import Level, RunStatus, Severity
from fleetdx.probes.facts import node_facts
from fleetdx.probes.parsers.slurm_nodes import parse_scontrol_nodes
from fleetdx.probes.runner import RunResult
from fleetdx.topology.cluster import parse_topology_conf

FIX = Path(__file__).parent / "fixtures"
PLACE = FIX / "placement"
BUSY = FIX / "bundles" / "h100-busy"
IDLE_TOPO = (FIX / "bundles" / "h100-idle" / TOPO_FILE).read_text(encoding="utf-8")
NODES = parse_scontrol_nodes((PLACE / "scontrol_show_node.txt").read_text(encoding="utf-8"))
TREE = parse_topology_conf((PLACE / "scontrol_show_topology.txt").read_text(encoding="utf-8"))
T0 = 1_800_000_000.0

#: ``store``: a fresh migrated store, once on SQLite and once on PostgreSQL (``FLEETDX_TEST_PG_URL``)
pytest_plugins = ["tests.pgfixtures"]


def busy_findings(host: str) -> list[Finding]:
    """fleetdx's rules on the real busy bundle, the findings re-addressed to ``host``."""
    facts = node_facts(read_bundle(BUSY))
    return [f.model_copy(update={"nodes": [host]}) for f in run_rules(facts, Fleet(nodes=[facts]))]


def preflight(store: Store, started: float, findings: dict[str, list[Finding]], hosts: list[str]) -> None:
    report = assemble_report(
        RunKind.PREFLIGHT,
        hosts,
        [f for fs in findings.values() for f in fs],
        started_at=started,
        level=Level.QUICK,
    )
    assert store.save_report(report, raw={h: {TOPO_FILE: IDLE_TOPO} for h in hosts})


def req(n: int, k: int = 1, **kw: object) -> PlacementRequest:
    return PlacementRequest(nodes=n, gpus_per_node=k, **kw)  # type: ignore[arg-type]


def test_drained_down_and_allocated_nodes_are_never_advised() -> None:
    a = place(req(2), store=None, candidates=NODES, cluster=TREE, now=T0)
    assert a.placed and [n.host for n in a.nodes] == ["gpu01", "gpu04"]
    why = {x.host: (x.stage, x.reasons[0]) for x in a.excluded}
    drained = "Slurm state IDLE+DRAIN (reason: GPU_ECC_UNCORRECTABLE on GPU3 (fleetdx))"
    assert why["gpu02"] == (ExclusionStage.SCHEDULER, drained)
    assert why["gpu03"][1].startswith("Slurm state MIXED+DRAIN")
    assert why["gpu06"][1].startswith("Slurm state DOWN")
    assert why["gpu05"][1] == "Slurm state ALLOCATED"
    # two usable nodes only: a third is never made up from a drained one
    a = place(req(3), store=None, candidates=NODES, cluster=TREE, now=T0)
    assert not a.placed and a.exit_code == 2 and a.nodes == [] and a.slurm is None
    assert a.reasons == ["3 node(s) needed, only 2 fit"]
    # asking for the drained node by name gets a refusal, not the node
    a = place(req(1, hostlist="gpu02"), store=None, candidates=NODES, now=T0)
    assert not a.placed and [x.host for x in a.excluded] == ["gpu02"]


def test_critical_node_is_never_placed_until_a_clean_preflight(store: Store) -> None:
    preflight(store, T0, {"gpu01": busy_findings("gpu01")}, ["gpu01", "gpu04"])
    a = place(req(1), store=store, candidates=NODES, cluster=TREE, now=T0 + 60)
    assert a.placed and [n.host for n in a.nodes] == ["gpu04"]
    x = [x for x in a.excluded if x.host == "gpu01"][0]
    assert x.stage is ExclusionStage.HEALTH and "latest verdict CRITICAL" in x.reasons[0]
    assert FindingCode.GPU_FOREIGN_PROCESS in x.codes
    a = place(req(2), store=store, candidates=NODES, cluster=TREE, now=T0 + 60)
    assert not a.placed and a.exit_code == 2
    # a later clean pre-flight makes it placeable again
    preflight(store, T0 + 3600, {}, ["gpu01", "gpu04"])
    a = place(req(2), store=store, candidates=NODES, cluster=TREE, now=T0 + 3700)
    assert a.placed and [n.host for n in a.nodes] == ["gpu01", "gpu04"]
    assert all("latest verdict OK" in n.health for n in a.nodes)
    # and its failed pre-flight of an hour ago is history: one point (policy), said in words
    n1 = a.nodes[0]
    assert n1.penalty == 1.0 and n1.history.startswith("1 CRITICAL pre-flight(s) in 30 days: +1")
    # per node: the GPU subset, NUMA node and CPUs from the stored topo -m
    assert n1.gpus is not None and n1.gpus.gpus == ["GPU0"] and n1.gpus.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert n1.gpus.ranks[0].numa_node == 0 and n1.gpus.ranks[0].cpus == list(range(16))
    assert a.slurm is not None and a.slurm.argv[:2] == ["--nodes=2", "--nodelist=gpu[01,04]"]
    assert a.slurm.switches == 2  # gpu01 is under leaf1, gpu04 under leaf2
    hosts = a.kubernetes_affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]  # type: ignore[index]
    assert hosts["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["gpu01", "gpu04"]  # type: ignore[index]


def test_busy_gpu_excluded_on_an_otherwise_fit_node(store: Store) -> None:
    # a clean pre-flight that still saw a degraded PCIe link on GPU0 (a warning): the node is fit, its only
    # GPU is not, so it is excluded at the GPU stage and never advised
    pcie = Finding(
        code=FindingCode.PCIE_LINK_DEGRADED,
        severity=Severity.WARNING,
        nodes=["gpu01"],
        subject="GPU0",
        message="PCIe link degraded: x8 of x16 (test finding)",
    )
    preflight(store, T0, {"gpu01": [pcie]}, ["gpu01", "gpu04"])
    a = place(req(1, hostlist="gpu01"), store=store, now=T0 + 60)
    assert not a.placed and a.excluded[0].stage is ExclusionStage.GPUS
    assert "only 0 of 1 healthy" in a.excluded[0].reasons[0]
    a = place(req(1, hostlist="gpu[01,04]"), store=store, now=T0 + 60)
    assert a.placed and [n.host for n in a.nodes] == ["gpu04"]


def test_open_findings_expire_and_history_ranks_lower(store: Store) -> None:
    straggler = Finding(
        code=FindingCode.STRAGGLER_NODE,
        severity=Severity.CRITICAL,
        nodes=["gpu01"],
        subject="gpu01",
        message="busbw 0.01 GB/s, 20x below the median (test finding)",
    )
    bw = assemble_report(RunKind.BANDWIDTH, ["gpu01", "gpu02", "gpu03"], [straggler], started_at=T0)
    assert store.save_report(bw)
    later = assemble_report(RunKind.ANALYZE, ["gpu01"], [], started_at=T0 + DAY)  # OK, but not a pre-flight
    assert store.save_report(later)
    hosts = "gpu[01-03]"
    a = place(req(1, hostlist=hosts), store=store, cluster=TREE, now=T0 + 2 * DAY)
    assert a.placed and a.nodes[0].host == "gpu02"
    assert [x.host for x in a.excluded] == ["gpu01"] and "open STRAGGLER_NODE" in a.excluded[0].reasons[0]
    # 8 days on, the straggler finding is older than the 7-day window: fit again, but one point behind
    a = place(req(3, hostlist=hosts), store=store, cluster=TREE, now=T0 + 8 * DAY)
    assert a.placed and a.excluded == []
    assert {n.host: n.penalty for n in a.nodes} == {"gpu01": 1.0, "gpu02": 0.0, "gpu03": 0.0}
    a = place(req(2, hostlist=hosts), store=store, cluster=TREE, now=T0 + 8 * DAY)
    assert [n.host for n in a.nodes] == ["gpu02", "gpu03"]
    # a node no run lists ranks after known-good nodes (0.5 points) but before a failed one
    a = place(req(1, hostlist="gpu[01,04]"), store=store, now=T0 + 8 * DAY)
    assert [n.host for n in a.nodes] == ["gpu04"] and a.nodes[0].penalty == 0.5


def test_locality_beats_history() -> None:
    # leaf1 has gpu01..03, leaf2 gpu04..06: two nodes under one leaf beat two healthier nodes across the spine
    tree = parse_topology_conf((PLACE / "topology.conf").read_text(encoding="utf-8"))
    from fleetdx.topology.cluster import ClusterIndex

    idx = ClusterIndex(tree)
    p = idx.place(2, exclude=["gpu05", "gpu06"], penalty={"gpu01": 3.0, "gpu02": 3.0, "gpu03": 3.0})
    assert p.switch_hops == 1 and p.nodes == ["gpu01", "gpu02"]
    p = idx.place(2, exclude=[], penalty={"gpu01": 3.0, "gpu02": 3.0})
    assert p.nodes == ["gpu04", "gpu05"] and p.switch_hops == 1  # both leaves fit: the one with no penalty


def test_no_candidate_source_is_an_input_error() -> None:
    with pytest.raises(PlacementInputError):
        place(req(1), store=None)
    with pytest.raises(PlacementInputError):
        place(req(1, hostlist="gpu[01-"), store=None)


def test_unmapped_gpu_finding_is_warned(store: Store) -> None:
    f = Finding(
        code=FindingCode.PCIE_LINK_DEGRADED, severity=Severity.WARNING, nodes=["gpu04"], subject="PCI:0000:3b:00.0",
        message="PCIe link degraded (test finding)",
    )
    assert gpu_health([f]).unmapped
    preflight(store, T0, {"gpu04": [f]}, ["gpu04"])
    a = place(req(1, hostlist="gpu04"), store=store, now=T0 + 1)
    assert a.placed and any("PCI:0000:3b:00.0" in w for w in a.warnings)


def _cli(*args: str) -> object:
    cli = typer.Typer()
    place_cmd.register(cli)

    @cli.callback()
    def _root() -> None:
        """test root"""

    return CliRunner().invoke(cli, list(args))


def test_cli_slurm_args_json_and_exit_codes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    common = ["--scontrol-nodes", str(PLACE / "scontrol_show_node.txt"), "--db", db]
    common += ["--topology-conf", str(PLACE / "scontrol_show_topology.txt")]
    r = _cli("place", "--node-count", "2", "--gpus-per-node", "1", "--slurm-args", *common)
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    argv = shlex.split(r.stdout)  # type: ignore[attr-defined]
    assert argv == ["--nodes=2", "--nodelist=gpu[01,04]", "--exclude=gpu[02-03,05-06]", "--switches=2"]
    r = _cli("place", "--node-count", "3", "--gpus-per-node", "1", "--json", *common)
    assert r.exit_code == 2  # type: ignore[attr-defined]
    data = json.loads(r.stdout)  # type: ignore[attr-defined]
    assert data["placed"] is False and {x["host"] for x in data["excluded"]} == {"gpu02", "gpu03", "gpu05", "gpu06"}
    r = _cli("place", "--node-count", "3", "--gpus-per-node", "1", "--slurm-args", *common)
    assert r.exit_code == 2 and r.stdout == ""  # type: ignore[attr-defined]
    r = _cli("place", "--node-count", "1", "--gpus-per-node", "1", "--hostlist", "gpu[01-", "--db", db)
    assert r.exit_code == 3 and "Traceback" not in r.output  # type: ignore[attr-defined]
    r = _cli("place", "--node-count", "1", "--gpus-per-node", "9", *common)
    assert r.exit_code == 2 and "declares gpu:8" in r.output  # type: ignore[attr-defined]


def test_a_slow_pair_condemns_neither_member(store: Store) -> None:
    pair = Finding(
        code=FindingCode.NCCL_BUSBW_LOW,
        severity=Severity.CRITICAL,
        nodes=["gpu01", "gpu04"],
        subject="gpu01+gpu04",
        message="busbw 5.4 GB/s where the fleet's median is 122 (test finding)",
    )
    report = assemble_report(RunKind.BANDWIDTH, ["gpu01", "gpu04"], [pair], started_at=T0)
    assert [n.verdict.name for n in report.nodes] == ["OK", "OK"]  # group-only code: the report blames neither
    assert store.save_report(report)
    a = place(req(2), store=store, candidates=NODES, now=T0 + 60)
    assert a.placed and [n.host for n in a.nodes] == ["gpu01", "gpu04"]


def test_gpus_held_by_jobs_and_partitions() -> None:
    detailed = parse_scontrol_nodes((PLACE / "scontrol_show_node_-d.txt").read_text(encoding="utf-8"))
    a = place(req(2, 8), store=None, candidates=detailed, cluster=TREE, now=T0)
    assert not a.placed
    assert [x.reasons for x in a.excluded if x.host == "gpu04"] == [["2 of its 8 GPUs are held by jobs, 8 needed"]]
    a = place(req(2, 6), store=None, candidates=detailed, cluster=TREE, now=T0)
    assert a.placed and [n.host for n in a.nodes] == ["gpu01", "gpu04"]
    # partition debug is gpu[05-06]: one allocated, one down, so nothing there
    a = place(req(1, partition="debug"), store=None, candidates=NODES, now=T0)
    assert not a.placed and {x.host for x in a.excluded} == {"gpu05", "gpu06"}
    a = place(req(1, partition="nope"), store=None, candidates=NODES, now=T0)
    assert not a.placed and any("partition 'nope'" in w for w in a.warnings)


def test_cli_policy_options(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    r = _cli("place", "-N", "1", "--gpus-per-node", "1", "-w", "gpu01", "--db", db, "--json", "--finding-days", "0.5")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    assert json.loads(r.stdout)["policy"]["open_finding_ttl_s"] == 43200.0  # type: ignore[attr-defined]
    r = _cli("place", "-N", "1", "--gpus-per-node", "1", "-w", "gpu01", "--db", db, "--history-days", "nan")
    # a usage error (fleetdx's own entry point turns click's 2 into 3; this bare test app keeps click's code)
    assert r.exit_code != 0 and "must be a finite number" in r.output  # type: ignore[attr-defined]


def test_penalty_never_costs_locality_random() -> None:
    import random

    from fleetdx.topology.cluster import ClusterIndex, from_switch_map

    leaves = [{"name": f"leaf{j}", "nodes": [f"n{j}{i}" for i in range(4)]} for j in range(6)]
    spines = [{"name": "spine0", "switches": "leaf[0-2]"}, {"name": "spine1", "switches": "leaf[3-5]"}]
    tree = ClusterIndex(from_switch_map({"switches": [*leaves, *spines, {"name": "core", "switches": "spine[0-1]"}]}))
    blocks = ClusterIndex(from_switch_map({"blocks": leaves}))
    everyone = [n for leaf in leaves for n in leaf["nodes"]]
    rng = random.Random(14)
    for _ in range(200):
        down = rng.sample(everyone, rng.randint(0, 10))
        n = rng.randint(1, len(everyone) - len(down))
        pen = {h: float(rng.randint(0, 3)) for h in everyone}
        for idx in (tree, blocks):
            plain, ranked = idx.place(n, down), idx.place(n, down, penalty=pen)
            assert len(ranked.nodes) == n and not set(ranked.nodes) & set(down)
            assert ranked.switch_hops == plain.switch_hops and len(ranked.groups) <= len(plain.groups)
            # within the chosen groups, no free node left out has fewer points than one taken
            free = [h for g in ranked.groups for h in idx.group_nodes[g] if h not in down]
            worst_taken = max(pen[h] for h in ranked.nodes)
            assert all(pen[h] >= worst_taken for h in free if h not in ranked.nodes)


def test_an_old_critical_verdict_still_counts(store: Store) -> None:
    # the latest run is 60 days old, outside every window: a broken node stays out until a run says otherwise
    preflight(store, T0, {"gpu01": busy_findings("gpu01")}, ["gpu01"])
    a = place(req(1, hostlist="gpu01"), store=store, now=T0 + 60 * DAY)
    assert not a.placed and "latest verdict CRITICAL" in a.excluded[0].reasons[0]
    assert a.excluded[0].codes == []  # its findings are older than the 7-day window: not repeated as open


class CannedRunner:
    """A stand-in runner: answers each argv with a canned result (the captured file's text, or a failure)."""

    def __init__(self, answers: dict[tuple[str, ...], RunResult]) -> None:
        self.answers = answers

    def run(self, argv, timeout_s, env=None):  # type: ignore[no-untyped-def]
        return self.answers[tuple(argv)]


def test_live_slurm_sources_through_a_runner() -> None:
    from fleetdx.orchestrator.scheduler.slurm_nodes import (
        NODES_ARGV,
        TOPOLOGY_ARGV,
        SchedulerUnavailable,
        slurm_candidates,
        slurm_topology,
    )

    ok = CannedRunner(
        {
            NODES_ARGV: RunResult(
                argv=list(NODES_ARGV),
                status=RunStatus.OK,
                returncode=0,
                stdout=(PLACE / "scontrol_show_node_-d_-o.txt").read_text(encoding="utf-8"),
            ),
            TOPOLOGY_ARGV: RunResult(argv=list(TOPOLOGY_ARGV), status=RunStatus.OK, returncode=0, stdout=""),
        }
    )
    nodes = slurm_candidates(ok)
    assert [n.name for n in nodes if n.usable] == ["gpu01", "gpu04"] and nodes[3].gpus_used == 2
    assert slurm_topology(ok) is None  # no TopologyPlugin: empty output
    down = CannedRunner(
        {
            NODES_ARGV: RunResult(
                argv=list(NODES_ARGV),
                status=RunStatus.FAILED,
                returncode=1,
                reason="exit code 1",
                stderr="scontrol: fatal: Could not establish a configuration source\n",
            )
        }
    )
    with pytest.raises(SchedulerUnavailable, match="Could not establish a configuration source"):
        slurm_candidates(down)


def test_kubernetes_affinity_is_a_valid_pod_affinity() -> None:
    """The snippet dropped into the worker pod template of the repository's RayJob manifest validates against
    KubeRay's RayJob CRD schema (its pod template carries Kubernetes' own PodSpec schema, affinity included)."""
    import copy

    import jsonschema
    import yaml

    root = Path(__file__).resolve().parents[1]
    schemas = root.parent / "shared" / "schemas" / "kuberay"
    if not schemas.is_dir():
        schemas = Path("/work/shared/schemas/kuberay")
    if not schemas.is_dir():
        pytest.skip(f"KubeRay CRD schemas not found at {schemas}")
    crd = yaml.load(
        (schemas / "ray.io_rayjobs.yaml").read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    )
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    validator = jsonschema.Draft7Validator(schema)
    a = place(req(2), store=None, candidates=NODES, cluster=TREE, now=T0)
    doc = yaml.safe_load((root / "k8s" / "rayjob-preflight.yaml").read_text())
    doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"] = a.kubernetes_affinity
    validator.validate(doc)
    bad = copy.deepcopy(doc)
    terms = bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0][
        "values"
    ] = "gpu01,gpu04"  # a string where Kubernetes wants a list: the schema must catch it
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def _random_history(
    store: Store, rng: object, hosts: list[str], runs: int = 40, start: float = T0 - 40 * DAY, samples: bool = True
) -> None:
    """A seeded random history over ``hosts``: pre-flights (clean, with the real busy bundle's GPU findings,
    test findings that make a node unfit, an unmapped GPU finding, pair findings), bandwidth runs naming a
    straggler, and the store samples' runs (a hung pair, a straggler, a full pre-flight); matrices of one (H100
    VM) or eight (HGX A100) GPUs. Findings marked "test finding" are written here."""
    import random

    from tests.store_samples import full_preflight_run, pair_run, preflight_raw, preflight_run

    assert isinstance(rng, random.Random)
    a100 = (FIX / "topo" / "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt").read_text(encoding="utf-8")
    matrix = {h: rng.choice([IDLE_TOPO, a100, a100, None]) for h in hosts}
    for r in range(runs):
        started = start + r * DAY + rng.random() * 3600
        members = rng.sample(hosts, rng.randint(1, 4))
        findings: list[Finding] = []
        for h in members:
            roll = rng.random()
            if roll < 0.15:
                findings += busy_findings(h)
            elif roll < 0.25:
                gpus = rng.sample(range(8), rng.randint(1, 3))
                findings += [
                    Finding(
                        code=FindingCode.GPU_ECC_UNCORRECTABLE,
                        severity=Severity.CRITICAL,
                        nodes=[h],
                        subject=f"GPU{g}",
                        message="volatile uncorrectable ECC (test finding)",
                    )
                    for g in gpus
                ]
            elif roll < 0.3:
                findings.append(
                    Finding(
                        code=FindingCode.PCIE_LINK_DEGRADED,
                        severity=Severity.WARNING,
                        nodes=[h],
                        subject="PCI:0000:3b:00.0",
                        message="x8 of x16 (test finding)",
                    )
                )
            elif roll < 0.38:
                findings.append(
                    Finding(
                        code=FindingCode.IB_PORT_DOWN,
                        severity=Severity.CRITICAL,
                        nodes=[h],
                        subject="mlx5_0:1",
                        message="port down (test finding)",
                    )
                )
        if len(members) > 1 and rng.random() < 0.3:
            findings.append(
                Finding(
                    code=FindingCode.NCCL_BUSBW_LOW,
                    severity=Severity.CRITICAL,
                    nodes=members[:2],
                    subject=",".join(members[:2]),
                    message="slow pair (test finding)",
                )
            )
        report = assemble_report(RunKind.PREFLIGHT, members, findings, started_at=started, level=Level.QUICK)
        raw = {h: {TOPO_FILE: t} for h in members if (t := matrix[h]) is not None}
        assert store.save_report(report, raw=raw)
        if rng.random() < 0.25:
            s = rng.choice(hosts)
            strag = Finding(
                code=FindingCode.STRAGGLER_NODE,
                severity=rng.choice([Severity.WARNING, Severity.CRITICAL]),
                nodes=[s],
                subject=s,
                message="straggler (test finding)",
            )
            bw = assemble_report(RunKind.BANDWIDTH, [s, rng.choice(hosts)], [strag], started_at=started + 60)
            assert store.save_report(bw)
    if not samples:
        return
    assert store.save_report(pair_run("sample-pair", T0 - 3 * DAY))
    assert store.save_report(full_preflight_run("sample-full", T0 - 2 * DAY))
    assert store.save_report(preflight_run("sample-pre", T0 - DAY, host="gpu04"), raw=preflight_raw("gpu04"))


def test_snapshot_answers_equal_per_query_answers_random(store: Store) -> None:
    """A HealthSnapshot kept across queries gives the very answer place() computes from the store per query:
    random histories, several instants, query shapes (nodes, GPUs per node, hostlists, exclude lists,
    partitions, Slurm or hostlist candidates, with and without a switch tree)."""
    import random

    from fleetdx.orchestrator.placement.snapshot import HealthSnapshot
    from fleetdx.topology.cluster import ClusterIndex, from_switch_map

    rng = random.Random(1414)
    hosts = [f"gpu{i:02d}" for i in range(1, 25)]
    _random_history(store, rng, hosts)
    leaves = [{"name": f"leaf{j}", "nodes": hosts[j * 4 : (j + 1) * 4]} for j in range(6)]
    tree = ClusterIndex(
        from_switch_map(
            {"switches": [*leaves, {"name": "s0", "switches": "leaf[0-2]"}, {"name": "s1", "switches": "leaf[3-5]"}]}
        )
    )
    slurm_tree = ClusterIndex(TREE)
    compared = placed = 0
    for now in (T0 - 20 * DAY, T0 - 2.5 * DAY, T0, T0 + 6 * DAY, T0 + 40 * DAY):
        snap = HealthSnapshot(store, now=now)
        for _ in range(25):
            n, k = rng.choice([1, 1, 2, 3, 5, 8]), rng.choice([1, 1, 2, 4, 8])
            exclude = rng.sample(hosts, rng.randint(0, 3))
            if rng.random() < 0.3:  # the Slurm fixture's six nodes as candidates
                kw: dict[str, object] = {"candidates": NODES, "cluster": rng.choice([slurm_tree, None])}
                r = req(rng.choice([1, 2]), rng.choice([1, 2]), exclude=exclude, partition=rng.choice([None, "gpu"]))
            else:
                first = rng.randint(1, 20)
                hostlist = rng.choice(["gpu[01-24]", f"gpu[{first:02d}-24],h100-vm-idle", "gpu[01-12],nowhere1"])
                kw = {"cluster": rng.choice([tree, None])}
                r = req(n, k, hostlist=hostlist, exclude=exclude)
            per_query = place(r, store=store, now=now, **kw)  # type: ignore[arg-type]
            kept = place(r, store=store, snapshot=snap, **kw)  # type: ignore[arg-type]
            assert kept.model_dump(mode="json") == per_query.model_dump(mode="json"), (now, r)
            compared += 1
            placed += per_query.placed
    assert compared == 125 and 20 < placed < 110  # both outcomes were compared, many times each
    # a snapshot is of one policy: another one is a caller's mistake, not a silently mixed answer
    from fleetdx.orchestrator.placement.policy import HealthPolicy

    with pytest.raises(ValueError, match="another store or policy"):
        place(req(1, hostlist="gpu05"), store=store, snapshot=snap, policy=HealthPolicy(penalty_unknown=3.0))


def test_advanced_snapshot_answers_equal_per_query_answers_random(store: Store) -> None:
    """After more runs are stored, a snapshot advanced to the new store state (the hosts those runs name
    dropped, every other host kept) answers as place() does from the store, while the unadvanced one does not."""
    import random

    from fleetdx.orchestrator.placement.snapshot import HealthSnapshot
    from fleetdx.orchestrator.store.node_health import hosts_named_after
    from fleetdx.topology.cluster import ClusterIndex, from_switch_map

    rng = random.Random(77)
    hosts = [f"gpu{i:02d}" for i in range(1, 25)]
    _random_history(store, rng, hosts)
    blocks = [{"name": f"b{j}", "nodes": hosts[j * 6 : (j + 1) * 6]} for j in range(4)]
    tree = ClusterIndex(from_switch_map({"blocks": blocks}))
    now = T0 + DAY
    before = store.newest_run_pk()
    assert before is not None
    old = HealthSnapshot(store, now=now, generation=before)
    old.judgements(hosts)
    old.raw(hosts, [TOPO_FILE])
    _random_history(store, rng, hosts, runs=6, start=T0 - 5 * DAY, samples=False)
    changed = hosts_named_after(store, before)
    assert changed and changed < set(hosts)  # some hosts named by the new runs, some not
    moved = old.advanced(store.newest_run_pk(), changed)
    assert moved._judged.keys() == set(hosts) - changed
    stale = 0
    for _ in range(40):
        r = req(rng.choice([1, 2, 3, 6]), rng.choice([1, 2, 8]), hostlist="gpu[01-24]", exclude=rng.sample(hosts, 2))
        cluster = rng.choice([tree, None])
        per_query = place(r, store=store, now=now, cluster=cluster)
        assert place(r, store=store, snapshot=moved, cluster=cluster) == per_query, r
        stale += place(r, store=store, snapshot=old, cluster=cluster) != per_query
    assert stale > 0  # the new runs change answers: the comparison can fail
