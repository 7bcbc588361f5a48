"""End to end, with a real network fault: ``fleetdx bandwidth`` over a Ray cluster of 4 hosts, each in its own
network namespace, one of whose links is throttled with ``tc tbf``. The run must name that host and no other,
from real gloo measurements. The test builds and removes its namespaces and stops every process it started.

Skipped (with the reason) where namespaces cannot be made (not root, no iproute2, not permitted).
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.netns import NetnsLab, netns_unavailable

pytestmark = [pytest.mark.netns, pytest.mark.ray, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent
N_HOSTS = 4
THROTTLED = 2
#: Ray 2.60 token auth (PLATFORM.md); a token of our own, so nothing is read from or written to ~/.ray
ENV = {
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": secrets.token_hex(32),
    "RAY_USAGE_STATS_ENABLED": "0",
    "PYTHONUNBUFFERED": "1",
}


def _ray_start(lab: NetnsLab, i: int, temp_dir: Path, logs: Path) -> None:
    common = [
        str(VENV_BIN / "ray"),
        "start",
        "--block",
        f"--node-ip-address={lab.addr(i)}",
        "--num-cpus=1",
        f'--resources={{"fleetdx-host:h{i}": 1}}',
        "--disable-usage-stats",
    ]
    if i == 0:
        argv = [*common, "--head", "--port=6379", "--include-dashboard=false", f"--temp-dir={temp_dir}"]
    else:
        argv = [*common, f"--address={lab.addr(0)}:6379"]
    lab.popen(i, argv, env=ENV, log=str(logs / f"ray-h{i}.log"))


def _wait_for_log(path: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    tail = path.read_text(errors="replace")[-1500:] if path.exists() else "(no log)"
    raise AssertionError(f"{path.name}: no {text!r} within {timeout_s} s: {tail}")


def _wait_for_nodes(lab: NetnsLab, n: int, timeout_s: float) -> None:
    probe = (
        "import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
        "print(sum(1 for x in ray.nodes() if x['Alive'])); ray.shutdown()"
    )
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        r = lab.run(0, [sys.executable, "-c", probe, f"{lab.addr(0)}:6379"], env=ENV, timeout=60)
        last = (r.stdout + r.stderr)[-500:]
        if r.returncode == 0 and r.stdout.strip().splitlines()[-1:] == [str(n)]:
            return
        time.sleep(2)
    raise AssertionError(f"Ray cluster of {n} namespaced hosts not up in {timeout_s} s: {last}")


@pytest.fixture(scope="module")
def netns_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsLab]:
    why = netns_unavailable()
    if why:
        pytest.skip(why)
    temp_dir = Path("/tmp") / f"fdxray{time.time_ns() % 10**8}"  # short: Ray's socket paths are limited
    logs = tmp_path_factory.mktemp("netns-logs")
    try:
        with NetnsLab(N_HOSTS) as lab:
            lab.throttle(THROTTLED, "100mbit")
            for i in range(N_HOSTS):  # one at a time: raylets joining at once race on the session dir
                _ray_start(lab, i, temp_dir, logs)
                _wait_for_log(logs / f"ray-h{i}.log", "Ray runtime started", timeout_s=90)
            _wait_for_nodes(lab, N_HOSTS, timeout_s=120)
            yield lab
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.timeout(600)
def test_fleetdx_bandwidth_names_the_throttled_host(netns_cluster: NetnsLab) -> None:
    lab = netns_cluster
    r = lab.run(
        0,
        [
            str(VENV_BIN / "fleetdx"),
            "bandwidth",
            "--address",
            f"{lab.addr(0)}:6379",
            "--nodes",
            f"h[0-{N_HOSTS - 1}]",
            "--schedule",
            "roundrobin",
            "--backend",
            "gloo",
            "--sizes",
            "1M,4M",
            "--iters",
            "3",
            "--timeout",
            "180",
            "--no-save",
            "--json",
        ],
        env=ENV,
        timeout=500,
    )
    assert r.stdout.strip(), r.stderr[-3000:]
    report = json.loads(r.stdout)
    stragglers = [n for f in report["findings"] for n in f["nodes"] if f["code"] == "STRAGGLER_NODE"]
    assert stragglers == [f"h{THROTTLED}"], (report["findings"], r.stderr[-2000:])
    assert report["exclude"] == f"h{THROTTLED}"
    assert r.returncode == 2  # CRITICAL
    # every pair with the throttled host is slower than every pair without it: a real, measured effect
    top = {tuple(c["nodes"]): c["points"][-1]["busbw_gbps"] for c in report["curves"]}
    print("pair busbw GB/s:", {",".join(k): round(v, 4) for k, v in top.items()})  # evidence, shown with -s
    with_h = [v for k, v in top.items() if f"h{THROTTLED}" in k]
    without = [v for k, v in top.items() if f"h{THROTTLED}" not in k]
    assert len(with_h) == 3 and len(without) == 3
    assert max(with_h) < min(without)
    # 100 Mbit/s = 0.0125 GB/s: a 2-rank all_reduce (busbw factor 1) through the throttled link cannot beat it
    assert max(with_h) < 0.0125 * 1.2
