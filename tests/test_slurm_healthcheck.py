"""slurm/healthcheck.sh run by slurmd itself as ``HealthCheckProgram`` on a real Slurm 22.05
(tests/slurmcluster.py: three nodes sim1..sim3, one STAND-IN GPU each): drain -> retest -> resume.

The cluster runs the ``#@healthcheck`` lines of slurm/fleetdx-slurm.conf (``HealthCheckNodeState=IDLE,MIXED``),
the interval shortened to a few seconds. Each node's ``nvidia-smi`` is a STAND-IN that REPLAYS a real bundle
chosen per host by a switch file: the busy H100 (a foreign process holds GPU0: CRITICAL) while
``WORK/busy/HOST`` exists, the idle one otherwise; nothing queries a GPU. The node states are kept in one
SQLite file all three nodes share (``--db`` in FLEETDX_HEALTHCHECK_ARGS).

* sim1 turns critical: healthcheck.sh drains it with ``fleetdx: GPU_FOREIGN_PROCESS GPU0`` (quarantined in the
  store); while it stays busy the retests fail and it stays drained; once its stand-in is idle again a clean
  retest returns it and healthcheck.sh resumes it.
* sim2 is drained by an administrator ("DIMM replacement"); its stand-in then turns critical and idle again:
  healthcheck.sh runs there and never touches it (the reason and the drain stay, the store records nothing).
* sim3 stays healthy and in service.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurmcluster import ROOT, SlurmCluster, slurm_cluster, wait_for
from tests.slurmreplay import BUSY, FLEETDX, IDLE

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1800)]

INTERVAL_S = 5
#: how long any step waits for the checks (s): generous, a check's pace follows the machine's load (CI at load
#: 15 runs each `fleetdx nodes check` many times slower); a passing run waits only as long as the checks take
WAIT_S = 360
_STANDIN = '''#!{python}
"""STAND-IN nvidia-smi written by tests/test_slurm_healthcheck.py: REPLAYS the busy H100 bundle while
{busy_dir}/HOST exists, else the idle one; no GPU is queried."""
import socket
import sys
from pathlib import Path

from fleetdx.probes.bundle import find_raw_file

host = socket.gethostname().split(".")[0]
bundle = Path({busy!r} if (Path({busy_dir!r}) / host).exists() else {idle!r})
path = find_raw_file(bundle, ["nvidia-smi", *sys.argv[1:]])
if path is None:
    sys.stderr.write(f"nvidia-smi (replay of {{bundle.name}}): nothing recorded for {{sys.argv[1:]}}\\n")
    sys.exit(6)
sys.stdout.write(path.read_text())
'''


def healthcheck_lines(scripts: Path) -> str:
    """The ``#@healthcheck`` slurm.conf lines of slurm/fleetdx-slurm.conf, in ``scripts``, every few seconds."""
    conf = (ROOT / "slurm" / "fleetdx-slurm.conf").read_text().splitlines()
    lines = [ln.removeprefix("#@healthcheck ") for ln in conf if ln.startswith("#@healthcheck ")]
    text = "\n".join(lines).replace("/etc/slurm/fleetdx/", f"{scripts}/")
    assert "HealthCheckInterval=300" in text and "HealthCheckNodeState=IDLE,MIXED" in text
    return text.replace("HealthCheckInterval=300", f"HealthCheckInterval={INTERVAL_S}")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("slurm-healthcheck")
    w.chmod(0o755)
    return w


@pytest.fixture(scope="module")
def cluster(work: Path) -> Iterator[SlurmCluster]:
    (work / "busy").mkdir()
    bin_dir = work / "standin-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(_STANDIN.format(python=sys.executable, busy=str(BUSY), idle=str(IDLE), busy_dir=str(work / "busy")))
    smi.chmod(0o755)
    scripts = work / "slurm.d"
    scripts.mkdir()
    (scripts / "healthcheck.sh").write_bytes((ROOT / "slurm" / "healthcheck.sh").read_bytes())
    (scripts / "healthcheck.sh").chmod(0o755)
    (scripts / "fleetdx-slurm.conf").write_text(
        "\n".join(
            [
                f"FLEETDX={FLEETDX}",
                f"FLEETDX_PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "FLEETDX_HEALTHCHECK_BUDGET_S=120",
                f'FLEETDX_HEALTHCHECK_ARGS="--db sqlite:///{work / "fleet.db"}"',  # shell syntax: quoted
                f"FLEETDX_LOG_DIR={work / 'fleetdx-log'}",
                "FLEETDX_FLAP_WINDOW_S=86400",
            ]
        )
        + "\n"
    )
    extra = healthcheck_lines(scripts)
    print(f"slurm.conf lines:\n{extra}")
    with slurm_cluster(nodes=3, gpus=1, extra_conf=extra) as c:
        # slurmd runs HealthCheckProgram without SLURM_CONF: the settings file names this cluster's (it is read
        # at each run; until now the checks could not reach Slurm and changed nothing)
        with (scripts / "fleetdx-slurm.conf").open("a") as f:
            f.write(f"SLURM_CONF={c.env['SLURM_CONF']}\n")
        yield c


@pytest.fixture(autouse=True)
def _logs_after_each_test(work: Path, cluster: SlurmCluster) -> Iterator[None]:
    """After each test, the checks' own log and errors and slurmd's lines about the health check (pytest shows
    them when the test failed: which runs happened, and which slurmd killed or never started)."""
    yield
    err = work / "fleetdx-log" / "healthcheck.err"
    print(f"--- healthcheck.log:\n{log(work)}")
    print(f"--- healthcheck.err (tail):\n{err.read_text()[-4000:] if err.exists() else '(none)'}")
    for f in sorted((cluster.dir / "log").glob("slurmd-*.log")):
        said = [ln for ln in f.read_text(errors="replace").splitlines() if "health" in ln.lower()]
        print(f"--- {f.name}, its health check lines (last 20 of {len(said)}):\n" + "\n".join(said[-20:]))


def log(work: Path) -> str:
    path = work / "fleetdx-log" / "healthcheck.log"
    return path.read_text() if path.exists() else ""


def nodes_json(work: Path) -> dict[str, dict[str, object]]:
    out = subprocess.run(
        [str(FLEETDX), "nodes", "--json", "--db", f"sqlite:///{work / 'fleet.db'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return {r["status"]["host"]: r for r in json.loads(out.stdout or "[]")}


def history(work: Path, host: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [str(FLEETDX), "nodes", "history", host, "--json", "--db", f"sqlite:///{work / 'fleet.db'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return list(reversed(json.loads(out.stdout or "[]")))


def lines_for(work: Path, node: str) -> list[str]:
    return [ln for ln in log(work).splitlines() if f" {node}: " in ln]


def test_drain_retest_resume_and_an_admin_drain_untouched(cluster: SlurmCluster, work: Path) -> None:
    c = cluster
    # every node is checked and known to the store as ok first
    wait_for(lambda: {"sim1", "sim2", "sim3"} <= set(nodes_json(work)), WAIT_S, "every node checked once")
    assert {h: r["status"]["state"] for h, r in nodes_json(work).items()} == {"sim1": "ok", "sim2": "ok", "sim3": "ok"}  # type: ignore[index]

    # an administrator drains sim2, then its stand-in turns critical (and later healthy again)
    c.run("scontrol", "update", "NodeName=sim2", "State=DRAIN", "Reason=DIMM replacement, ticket 77")
    (work / "busy" / "sim2").touch()

    # sim1 turns critical: drained by healthcheck.sh with fleetdx's reason, quarantined in the store
    (work / "busy" / "sim1").touch()
    wait_for(lambda: "DRAIN" in c.node_field("sim1", "State"), WAIT_S, "sim1 drained by healthcheck.sh")
    reason = c.node_field("sim1", "Reason")
    assert reason == "fleetdx: GPU_FOREIGN_PROCESS GPU0", reason
    wait_for(lambda: nodes_json(work)["sim1"]["status"]["state"] in ("quarantined", "retesting"), WAIT_S, "quarantined")  # type: ignore[index]

    # still busy: the retests fail and sim1 stays drained
    wait_for(lambda: any("kept_out: retest failed" in ln for ln in lines_for(work, "sim1")), WAIT_S,
             "a failed retest of sim1")  # fmt: skip
    assert "DRAIN" in c.node_field("sim1", "State")

    # the stand-in is healthy again: a clean retest returns sim1 and healthcheck.sh resumes it
    (work / "busy" / "sim1").unlink()
    wait_for(lambda: "DRAIN" not in c.node_field("sim1", "State"), WAIT_S, "sim1 resumed by healthcheck.sh")
    assert nodes_json(work)["sim1"]["status"]["state"] == "returned"  # type: ignore[index]
    steps = [(t["from_state"], t["to_state"]) for t in history(work, "sim1")]
    print(f"sim1 transitions: {steps}")
    assert steps[0] == (None, "ok") and steps[-1] == ("retesting", "returned")
    assert ("ok", "suspect") in steps and ("suspect", "quarantined") in steps and ("retesting", "quarantined") in steps
    # its log line is written once fleetdx has resumed the node and exited
    wait_for(lambda: any(re.search(r"sim1: resumed: clean retest", ln) for ln in lines_for(work, "sim1")), WAIT_S,
             "the log line of the resume")  # fmt: skip

    # sim2: healthcheck.sh ran there while it was drained and busy, and left it alone
    wait_for(lambda: any("not_ours" in ln for ln in lines_for(work, "sim2")), WAIT_S, "a check of the drained sim2")
    (work / "busy" / "sim2").unlink()
    n = len(lines_for(work, "sim2"))

    def not_ours_since() -> int:
        return sum("not_ours" in ln for ln in lines_for(work, "sim2")[n:])

    wait_for(lambda: not_ours_since() >= 2, WAIT_S, "two more checks of sim2, its stand-in idle")
    assert "DRAIN" in c.node_field("sim2", "State")
    assert c.node_field("sim2", "Reason") == "DIMM replacement, ticket 77"
    # from its first check after the administrator's drain on, no check of sim2 did anything (a check already
    # running when the administrator drained it may have finished as "checked" before)
    seen = lines_for(work, "sim2")
    first = next(i for i, ln in enumerate(seen) if "not_ours" in ln)
    acted = [ln for ln in seen[first:] if re.search(r"sim2: (checked|drained|resumed|kept_out|unconfirmed):", ln)]
    assert acted == [], acted
    # the store recorded nothing after; a check that found the stand-in busy while the administrator drained the
    # node (its line says "set during the check") left its CRITICAL verdict there (suspect), and no drain of its own
    raced = any("set during the check" in ln for ln in seen)
    assert [t["to_state"] for t in history(work, "sim2")] in ([["ok"], ["ok", "suspect"]] if raced else [["ok"]])

    # sim3 stayed healthy and in service
    assert "DRAIN" not in c.node_field("sim3", "State")
    assert nodes_json(work)["sim3"]["status"]["state"] == "ok"  # type: ignore[index]
    print(f"--- healthcheck.log:\n{log(work)}")
