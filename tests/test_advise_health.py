"""Health-aware GPU advice (issue 14, item 1): unhealthy GPUs are never advised, the best subset stays exact
over the others, and too few healthy GPUs is said (exit 2, ``satisfied: false``), never papered over.

Bundles: tests/fixtures/bundles/h100-busy is the real capture of an H100 whose GPU0 another process held
(pid 1929, 19948 MiB, its nvidia-smi_query-compute-apps.csv); h100-idle the same machine idle. Matrices:
tests/fixtures/topo/ (SOURCES-topo.md).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import topo_cmd
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.placement.health import gpu_health
from fleetdx.probes.contracts import Severity
from fleetdx.probes.parsers.topo import TopoMatrix, parse_topo
from fleetdx.topology.binding import advise
from fleetdx.topology.contracts import GpuExclusion
from fleetdx.topology.subset import NotEnoughGpus, SubsetError, best_subset
from tests.topology_util import brute_force, random_topo

FIX = Path(__file__).parent / "fixtures"
BUSY = FIX / "bundles" / "h100-busy"
IDLE = FIX / "bundles" / "h100-idle"
A100 = FIX / "topo" / "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt"


@pytest.fixture
def run():  # type: ignore[no-untyped-def]
    app = typer.Typer()
    topo_cmd.register(app)

    @app.callback()
    def _root() -> None:
        """test root"""

    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_busy_gpu0_is_never_advised(run) -> None:  # type: ignore[no-untyped-def]
    r = run("topo", "advise", str(BUSY), "--gpus", "1", "--json")
    assert r.exit_code == 2, r.output
    data = json.loads(r.stdout)
    assert data["satisfied"] is False and data["gpus"] == [] and data["ranks"] == []
    assert data["env"] == {} and data["commands"] == []
    assert [x["gpu"] for x in data["excluded"]] == ["GPU0"]
    assert data["excluded"][0]["codes"] == ["GPU_FOREIGN_PROCESS"]
    assert "pid 1929" in data["excluded"][0]["reasons"][0]
    assert "only 0 of 1 healthy" in data["reasons"][0]
    r = run("topo", "advise", str(BUSY), "--gpus", "1")
    assert r.exit_code == 2 and "no advice" in r.stdout and "CUDA_VISIBLE_DEVICES" not in r.stdout
    assert "pid 1929" in r.stdout


def test_idle_gpu0_is_advised(run) -> None:  # type: ignore[no-untyped-def]
    r = run("topo", "advise", str(IDLE), "--gpus", "1", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["satisfied"] is True and data["gpus"] == ["GPU0"] and data["excluded"] == []
    assert data["env"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_bare_matrix_says_it_holds_no_health_evidence(run) -> None:  # type: ignore[no-untyped-def]
    r = run("topo", "advise", str(A100), "--gpus", "2", "--json")
    assert r.exit_code == 0
    assert any("no health evidence" in w for w in json.loads(r.stdout)["warnings"])


def _excl(*gpus: str) -> list[GpuExclusion]:
    return [GpuExclusion(gpu=g, reasons=["test: said unhealthy"], codes=[FindingCode.GPU_XID]) for g in gpus]


def _without(topo: TopoMatrix, gone: set[str]) -> TopoMatrix:
    keep = [g for g in topo.gpus if g.name not in gone]
    links = {a: {b: v for b, v in row.items() if b not in gone} for a, row in topo.links.items() if a not in gone}
    return TopoMatrix(gpus=keep, nics=topo.nics, links=links)


def test_a100_subset_avoids_excluded_and_is_exact_over_the_rest() -> None:
    topo = parse_topo(A100.read_text(encoding="utf-8"))
    # by eye: GPU0/1 and GPU4/5 reach a NIC at PXB, GPU2/3 and GPU6/7 only at NODE; every GPU pair is NV12
    assert advise(topo, 4).gpus == ["GPU0", "GPU1", "GPU4", "GPU5"]
    adv = advise(topo, 4, excluded=_excl("GPU0", "GPU4"))
    assert adv.satisfied and not {"GPU0", "GPU4"} & set(adv.gpus)
    # the two PXB GPUs left plus two NODE ones; the first such in combinations order of GPU1,2,3,5,6,7
    assert adv.gpus == ["GPU1", "GPU2", "GPU3", "GPU5"]
    assert [x.gpu for x in adv.excluded] == ["GPU0", "GPU4"]
    assert any(r.startswith("GPU0 excluded: test") for r in adv.reasons)
    want, _, _ = brute_force(_without(topo, {"GPU0", "GPU4"}), 4)
    assert adv.gpus == want


def test_subset_with_exclusions_matches_brute_force_on_random_matrices() -> None:
    rng = random.Random(14)
    for _ in range(150):
        n = rng.randint(2, 8)
        topo = random_topo(rng, n, rng.randint(0, 3))
        gone = set(rng.sample(topo.gpu_names, rng.randint(0, n - 1)))
        left = n - len(gone)
        k = rng.randint(1, left)
        got = best_subset(topo, k, exclude=gone)
        want, _, ties = brute_force(_without(topo, gone), k)
        assert (got.gpus, got.ties) == (want, ties)


def test_fewer_healthy_gpus_than_k() -> None:
    topo = parse_topo(A100.read_text(encoding="utf-8"))
    adv = advise(topo, 7, excluded=_excl("GPU3", "GPU6"))
    assert not adv.satisfied and adv.gpus == [] and adv.ranks == [] and adv.env == {}
    assert adv.reasons[0].startswith("7 GPU(s) needed, only 6 of 8 healthy")
    with pytest.raises(NotEnoughGpus):
        best_subset(topo, 7, exclude={"GPU3", "GPU6"})
    with pytest.raises(SubsetError):  # more GPUs than the node has stays a usage error
        advise(topo, 9)


def test_exclusion_of_an_unknown_gpu_is_warned_not_dropped() -> None:
    topo = parse_topo(A100.read_text(encoding="utf-8"))
    adv = advise(topo, 2, excluded=_excl("GPU11"))
    assert adv.satisfied and any("GPU11 is not a GPU row" in w for w in adv.warnings)


def _f(code: FindingCode, sev: Severity, subject: str, host: str = "n1") -> Finding:
    return Finding(code=code, severity=sev, nodes=[host], subject=subject, message="m")


def test_which_findings_exclude_which_gpus() -> None:
    findings = [
        _f(FindingCode.GPU_FOREIGN_PROCESS, Severity.CRITICAL, "GPU0"),
        _f(FindingCode.GPU_CLOCKS_THROTTLED, Severity.INFO, "GPU1"),  # power cap at full load: busy, not bad
        _f(FindingCode.GPU_CLOCKS_THROTTLED, Severity.CRITICAL, "GPU2"),  # HW slowdown
        _f(FindingCode.GPU_XID, Severity.INFO, "GPU3"),  # an application XID
        _f(FindingCode.GPU_XID, Severity.CRITICAL, "GPU4"),
        _f(FindingCode.TOPO_NVLINK_DEGRADED, Severity.CRITICAL, "GPU5-GPU6"),
        _f(FindingCode.PCIE_LINK_DEGRADED, Severity.WARNING, "GPU7"),
        _f(FindingCode.GPU_ROW_REMAP_PENDING, Severity.WARNING, "GPU1"),
        _f(FindingCode.GPU_ECC_UNCORRECTABLE, Severity.CRITICAL, "PCI:0000:3b:00.0"),
        _f(FindingCode.GPU_ROW_REMAP_FAILURE, Severity.CRITICAL, "GPU3", host="other"),
    ]
    h = gpu_health(findings, host="n1")
    assert sorted(x.gpu for x in h.excluded) == ["GPU0", "GPU2", "GPU4", "GPU5", "GPU6", "GPU7"]
    assert len(h.unmapped) == 1 and "PCI:0000:3b:00.0" in h.unmapped[0]
    pair = [x for x in h.excluded if x.gpu == "GPU5"][0]
    assert "both ends left out" in pair.reasons[0]
