"""Helpers of the ``slurm`` tests: a STAND-IN ``nvidia-smi`` that replays a real bundle per host, and
slurm/prolog.sh and slurm/epilog.sh installed with their settings file.

The stand-in answers each ``nvidia-smi ...`` command with the matching raw file of the bundle chosen by the
hostname it runs under (each slurmd has its own UTS namespace, so each Slurm node has its own hostname):
nothing queries a GPU, and the other probe commands (lscpu, numactl, dmesg ...) run for real.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "tests" / "fixtures" / "bundles"
#: real bundles of one H100 80GB VM (tests/fixtures/bundles/README.md)
IDLE, BUSY = BUNDLES / "h100-idle", BUNDLES / "h100-busy"
VENV_BIN = Path(sys.executable).parent
FLEETDX = VENV_BIN / "fleetdx"

_STANDIN = '''#!{python}
"""STAND-IN nvidia-smi written by a fleetdx slurm test: REPLAYS a real bundle chosen by hostname; no GPU is
queried. Bundles: {bundles!r}"""
import shutil
import socket
import sys
from pathlib import Path

from fleetdx.probes.bundle import find_raw_file

bundles = {bundles!r}
bundle = Path(bundles.get(socket.gethostname().split(".")[0], bundles["*"]))
path = find_raw_file(bundle, ["nvidia-smi", *sys.argv[1:]])
if path is None:
    sys.stderr.write(f"nvidia-smi (replay of {{bundle.name}}): nothing recorded for {{sys.argv[1:]}}\\n")
    sys.exit(6)
sys.stdout.write(path.read_text())
'''


def write_replay_bin(folder: Path, busy_hosts: list[str]) -> Path:
    """Write ``folder/replay-bin/nvidia-smi`` (the stand-in: the busy bundle on ``busy_hosts``, the idle
    one elsewhere); return the ``replay-bin`` folder, to put first on PATH."""
    bin_dir = folder / "replay-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    bundles = {"*": str(IDLE), **{h: str(BUSY) for h in busy_hosts}}
    script = bin_dir / "nvidia-smi"
    script.write_text(_STANDIN.format(python=sys.executable, bundles=bundles))
    script.chmod(0o755)
    return bin_dir


def install_node_scripts(folder: Path, replay_bin: Path, on_error: str = "open", budget_s: int = 120) -> Path:
    """Install slurm/prolog.sh and slurm/epilog.sh as an administrator would: copied into
    ``folder/slurm.d/`` beside their settings file ``fleetdx-slurm.conf`` (slurm/fleetdx-slurm.conf documents
    each line), with logs and bundles under ``folder`` and ``replay_bin`` first on the tools' PATH. Returns
    the ``slurm.d`` folder (``Prolog=DIR/prolog.sh``, ``Epilog=DIR/epilog.sh``)."""
    d = folder / "slurm.d"
    d.mkdir(parents=True, exist_ok=True)
    for name in ("prolog.sh", "epilog.sh"):
        shutil.copy2(ROOT / "slurm" / name, d / name)
    write_settings(d, folder, replay_bin, on_error=on_error, budget_s=budget_s)
    return d


def write_settings(
    d: Path, folder: Path, replay_bin: Path, *, on_error: str = "open", budget_s: int = 120, fleetdx: str = ""
) -> Path:
    """(Re)write ``d/fleetdx-slurm.conf``; ``fleetdx`` replaces the fleetdx path (a missing one, to test the
    no-verdict path)."""
    conf = d / "fleetdx-slurm.conf"
    conf.write_text(
        "\n".join(
            [
                f"FLEETDX={fleetdx or FLEETDX}",
                f"FLEETDX_PATH={replay_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                f"FLEETDX_PROLOG_BUDGET_S={budget_s}",
                f"FLEETDX_PROLOG_ON_ERROR={on_error}",
                "FLEETDX_PREFLIGHT_ARGS=--no-save",
                f"FLEETDX_LOG_DIR={folder / 'fleetdx-log'}",
                f"FLEETDX_BUNDLE_DIR={folder / 'bundles'}",
                f"FLEETDX_EPILOG_BUDGET_S={budget_s}",
            ]
        )
        + "\n"
    )
    return conf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
