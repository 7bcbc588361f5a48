"""The README's "Deploy on a cluster" on a Slurm site, followed on this machine: the service's systemd unit
(slurm/fleetdx-serve.service) checked by systemd-analyze, then its ExecStartPre and ExecStart run as systemd
would run them (against a local PostgreSQL), a write token made with the README's command, and slurm/prolog.sh
run as slurmd runs it (its environment and the README's settings line, without slurmd) pushing its node's
pre-flight to the service, where it is read back over HTTP. What cannot run here: systemd itself as PID 1 (the
unit is verified, not started), a GPU (the pre-flight of this machine is UNKNOWN: no nvidia-smi).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "slurm" / "fleetdx-serve.service"
INSTALLED = "/opt/fleetdx/venv/bin/fleetdx"
FLEETDX = Path(sys.executable).with_name("fleetdx")

pytest_plugins = ["tests.pgfixtures"]


def _unit(path: Path = UNIT) -> dict[str, list[str]]:
    """Each key of a systemd unit file and its values in order (continuation lines are not used there)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _deploy_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Deploy on a cluster\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_serve_unit_runs_fleetdx_hardened_as_its_own_user() -> None:
    unit = _unit()
    assert unit["ExecStartPre"] == [f"{INSTALLED} db upgrade"]
    (start,) = unit["ExecStart"]
    assert start.startswith(f"{INSTALLED} serve ")
    assert unit["User"] == ["fleetdx"] and unit["Restart"] == ["on-failure"]
    assert unit["EnvironmentFile"] == ["/etc/fleetdx/serve.env"]
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                       "PrivateTmp": "yes", "CapabilityBoundingSet": ""}.items():
        assert unit[key] == [value], key
    assert unit["StateDirectory"] == ["fleetdx"] and unit["ReadWritePaths"] == ["/var/lib/fleetdx"]
    assert "HOME=/var/lib/fleetdx" in unit["Environment"]
    # no secret on a command line or in the unit: the URL and webhooks come from the environment file
    assert "FLEETDX_DB_URL" not in " ".join(unit["Environment"]) and "--db" not in start


def _verifiable(tmp_path: Path) -> Path:
    """The unit with fleetdx's path made one that exists here (systemd-analyze checks ExecStart's program)."""
    path = tmp_path / UNIT.name
    path.write_text(UNIT.read_text().replace(INSTALLED, str(FLEETDX)))
    return path


def test_serve_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    unit = _verifiable(tmp_path)
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and UNIT.name not in r.stderr, r.stderr
    # the check can fail: a misspelt directive is named (systemd ignores it, so the hardening would be lost)
    unit.write_text(unit.read_text().replace("NoNewPrivileges=", "NoNewPrivilege="))
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120)
    assert "Unknown key 'NoNewPrivilege'" in r.stderr, r.stderr


def test_serve_unit_exposure_is_low(tmp_path: Path) -> None:
    """`systemd-analyze security --offline=yes` (systemd 250 and later) rates the unit's sandbox: 1.9 here on
    its scale of 0 (locked down) to 10 (exposed); at most 3 holds it at "OK"."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    r = subprocess.run([analyze, "security", "--offline=yes", str(_verifiable(tmp_path))], capture_output=True,
                       text=True, timeout=120)
    if "--offline" in r.stderr and r.returncode != 0:
        pytest.skip(f"this systemd-analyze has no offline security check: {r.stderr.strip()[:200]}")
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
    assert m, r.stdout[-2000:] + r.stderr
    assert float(m.group(1)) <= 3.0, r.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _expand(command: str, env: dict[str, str]) -> list[str]:
    """A unit's Exec line as systemd splits it: ``${VAR}`` one word, ``$VAR`` split at whitespace."""
    argv: list[str] = []
    for word in shlex.split(command):
        if word.startswith("${") and word.endswith("}"):
            argv.append(env[word[2:-1]])
        elif word.startswith("$"):
            argv += env[word[1:]].split()
        else:
            argv.append(word)
    return [str(FLEETDX) if a == INSTALLED else a for a in argv]


@pytest.fixture
def unit_service(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The unit's ExecStartPre then ExecStart, with the unit's Environment= defaults and an environment file's
    lines (FLEETDX_DB_URL, and a loopback address on a free port): the service's URL and that environment."""
    unit = _unit()
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    for line in unit["Environment"]:
        key, value = shlex.split(line)[0].split("=", 1)
        env[key] = value
    env.update({"FLEETDX_DB_URL": pg_url, "FLEETDX_LISTEN": "127.0.0.1", "FLEETDX_PORT": str(_free_port())})
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    (pre,) = unit["ExecStartPre"]
    subprocess.run(_expand(pre, env), check=True, timeout=120, env=env, capture_output=True)
    (start,) = unit["ExecStart"]
    proc = subprocess.Popen(_expand(start, env), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{env['FLEETDX_PORT']}"
    try:
        for _ in range(300):  # up to 60 s for the interpreter and the workers on a busy machine
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        yield url, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_readme_slurm_steps_push_a_prolog_preflight_to_the_service(
    unit_service: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = unit_service
    section = _deploy_section()
    # step: a write token for the nodes, with the README's command (its --out path moved here)
    (token_line,) = re.findall(r"^(fleetdx token create \S+ --scope write --out \S+)$", section, re.M)
    token_file = tmp_path / "token"
    argv = shlex.split(token_line)
    argv[argv.index("--out") + 1] = str(token_file)
    made = subprocess.run([str(FLEETDX), *argv[1:]], env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0 and oct(token_file.stat().st_mode)[-3:] == "600", made.stderr
    token = token_file.read_text().strip()
    # step: the prolog's settings line of the README, pointing at this service
    (args_line,) = re.findall(r'^FLEETDX_PREFLIGHT_ARGS="(--report-to \S+ --token-file \S+)"$', section, re.M)
    args = shlex.split(args_line)
    args[args.index("--report-to") + 1] = url
    args[args.index("--token-file") + 1] = str(token_file)
    conf = (ROOT / "slurm" / "fleetdx-slurm.conf").read_text()
    conf = conf.replace("FLEETDX=/opt/fleetdx/venv/bin/fleetdx", f"FLEETDX={FLEETDX}")
    conf = conf.replace("FLEETDX_PREFLIGHT_ARGS=\n", f'FLEETDX_PREFLIGHT_ARGS="{shlex.join(args)}"\n')
    conf = conf.replace("FLEETDX_LOG_DIR=/var/log/fleetdx", f"FLEETDX_LOG_DIR={tmp_path / 'log'}")
    assert str(FLEETDX) in conf and url in conf and str(tmp_path / "log") in conf
    (tmp_path / "fleetdx-slurm.conf").write_text(conf)
    # slurmd's environment for a prolog: no PATH of ours, the job's id and the node's name
    host = socket.gethostname().split(".")[0]
    prolog_env = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": host, "FLEETDX_SLURM_CONFIG": str(tmp_path /
                  "fleetdx-slurm.conf"), "HOME": str(tmp_path), "FLEETDX_SPOOL_DIR": str(tmp_path / "spool")}
    ran = subprocess.run(["/bin/bash", str(ROOT / "slurm" / "prolog.sh")], env=prolog_env, capture_output=True,
                         text=True, timeout=200)
    log = (tmp_path / "log" / "prolog.log").read_text()
    err = (tmp_path / "log" / "prolog.err").read_text()
    # no GPU here: UNKNOWN, and the prolog is fail-open as shipped (a CRITICAL would drain through scontrol)
    assert ran.returncode == 0 and "job 4242 on " in log, log + err
    assert f"report saved to {url}/reports" in err and not (tmp_path / "spool").exists(), err
    # read back: the run of job 4242 is in the service's database, with this node
    headers = {"Authorization": f"Bearer {token}"}
    runs = httpx.get(f"{url}/runs", params={"job": "4242"}, headers=headers, timeout=30).json()
    assert len(runs) == 1, runs
    run = httpx.get(f"{url}/runs/{runs[0]['run_id']}", headers=headers, timeout=30).json()
    assert [n["host"] for n in run["nodes"]] == [host] and run["kind"] == "preflight"
    metrics = httpx.get(f"{url}/metrics", headers=headers, timeout=30).text
    assert f'fleetdx_node_verdict{{node="{host}"}}' in metrics


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_upgrades_started_at_once_run_one_after_the_other(pg_url: str) -> None:
    """Two `fleetdx db upgrade` of one empty PostgreSQL database at once (two pods' initContainers, two hosts'
    ExecStartPre) both succeed: the test holds the migration lock while both start, sees both wait for it, then
    lets them go; one creates the schema, the other finds it current. Without the lock both created the same
    tables and one failed on a duplicate key (measured before the lock was added: 3 of 3 tries)."""
    from sqlalchemy import create_engine, text

    from fleetdx.orchestrator.store.migrate import MIGRATION_LOCK_KEY

    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    procs: list[subprocess.Popen[str]] = []
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            procs = [subprocess.Popen([str(FLEETDX), "db", "upgrade", "--db", pg_url], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(2)]
            waiting = 0
            for _ in range(600):  # up to 120 s for both interpreters to start and ask for the lock
                waiting = conn.execute(
                    text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                ).scalar_one()
                if waiting == 2 or any(p.poll() is not None for p in procs):
                    break
                time.sleep(0.2)
            assert waiting == 2, [p.communicate(timeout=30) for p in procs if p.poll() is not None]
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        engine.dispose()
    assert [p.returncode for p in procs] == [0, 0], outs
    said = sorted(out.split(": ", 1)[1].strip() for out, _ in outs)
    assert said[0].startswith("already at schema revision ") and said[1].startswith("schema empty -> "), said
