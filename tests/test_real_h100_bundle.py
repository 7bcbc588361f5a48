"""A bundle written by ``fleetdx collect --level standard`` on a real lent H100 machine (Firecracker VM, driver
580.159.04, torch 2.11+cu130; tests/fixtures/bundles/README.md): fleetdx reads back what it wrote on a GPU, judges
the idle GPU OK, keeps the three probes that could not run as ``skipped`` with their reasons, and the GPU
micro-benchmark's figures are the machine's (bf16 GEMM 763 TFLOP/s, pageable H2D 9.2 GB/s)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fleetdx.orchestrator.cli.main import _register, app
from fleetdx.probes.bundle import read_bundle

BUNDLE = Path(__file__).parent / "fixtures" / "bundles" / "h100-lent-collect"
_register()


def test_analyze_judges_the_real_idle_h100_ok_with_skipped_probes_named() -> None:
    r = CliRunner().invoke(app, ["analyze", str(BUNDLE), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["verdict"] == "OK" and report["findings"] == []
    (node,) = report["nodes"]
    assert node["host"] == "h100-lent"
    skipped = {p["name"]: p["error"] for p in node["probes"] if p["status"] == "skipped"}
    assert skipped == {
        "ibstat.txt": "ibstat: not found on PATH",
        "sysfs_infiniband.txt": "/sys/class/infiniband: no RDMA device",
        "all_reduce_perf_-b8_-e1G_-f2_-g1.txt": "all_reduce_perf not found (PATH, $NCCL_TESTS_HOME)",
    }
    assert all(p["status"] == "ok" for p in node["probes"] if p["name"] not in skipped)


def test_the_bundle_parses_to_the_machine_facts() -> None:
    data = read_bundle(BUNDLE)
    assert data.host == "h100-lent" and data.level == "standard" and not data.replayed
    r = CliRunner().invoke(app, ["parse", "bundle", str(BUNDLE), "--json"])
    assert r.exit_code == 0, r.output
    facts = json.loads(r.stdout)
    assert facts["parse_failures"] == [] and facts["unreadable"] == {}
    (gpu,) = facts["gpus"]
    assert (gpu["name"], gpu["bus_id"], gpu["gen_current"], gpu["width_current"]) == (
        "NVIDIA H100 80GB HBM3",
        "00000000:00:06.0",
        5,
        16,
    )
    (mb,) = facts["microbench"]
    assert round(mb["gemm_bf16_tflops"]) == 763 and round(mb["h2d_pageable_gbps"], 1) == 9.2
    assert facts["topo"]["gpus"][0]["cpu_affinity_raw"] == "0-15" and facts["topo"]["nics"] == []


def test_real_busy_h100_is_excluded_for_the_foreign_process_not_for_slow_memory() -> None:
    """The same H100 while another process held 21 GiB and ran bf16 GEMMs (h100-lent-busy): CRITICAL for the
    foreign process, the power cap it causes is INFO, and the halved device copy (1608 against 3006 GB/s) is
    INFO measured-while-shared, never a WARNING against the GPU's memory."""
    r = CliRunner().invoke(app, ["analyze", str(BUNDLE.parent / "h100-lent-busy"), "--json"])
    assert r.exit_code == 2, r.output
    report = json.loads(r.stdout)
    assert report["verdict"] == "CRITICAL" and report["exclude"] == "h100-busy"
    got = {(f["code"], f["severity"]) for f in report["findings"]}
    assert got == {("GPU_FOREIGN_PROCESS", "critical"), ("GPU_CLOCKS_THROTTLED", "info"), ("HBM_SLOW", "info")}
    (hbm,) = [f for f in report["findings"] if f["code"] == "HBM_SLOW"]
    assert hbm["details"]["shared_with_pid"] == 444 and round(hbm["details"]["measured"]) == 1608
