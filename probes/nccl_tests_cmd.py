"""How fleetdx finds and invokes the nccl-tests binaries; it runs nothing and judges nothing (the catalog's
sweep row runs through the one runner; :mod:`fleetdx.orchestrator.diagnosis.rules_nccl` judges the parsed output).

* Discovery (:func:`find_binary`): ``--nccl-tests-dir`` first, then ``$NCCL_TESTS_HOME``, then ``PATH``; in a
  directory both ``<dir>/<name>`` and ``<dir>/build/<name>`` (where ``make`` puts them) are tried.
* Features (:func:`features_from_help`): ``-J`` (JSON output, nccl-tests >= 2.17.3), ``-I`` (per-iteration
  timings, 2.19.x) and ``-T`` (its own timeout) are used only when the binary's own ``-h`` lists them.
* The argv (:func:`build_argv`): sizes, GPUs per process, iterations, data check, and those options.

Option letters are those of NVIDIA/nccl-tests ``src/common.cu`` and its README.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import Field

from fleetdx.probes.contracts import Collective, Contract

#: seconds between nccl-tests' own -T timeout and the runner's hard deadline
SELF_TIMEOUT_MARGIN_S = 10


class Discovery(Contract):
    """Where a binary was found (``path`` ``None``: not found) and every place that was searched."""

    name: str
    path: str | None
    source: str | None  #: "--nccl-tests-dir", "NCCL_TESTS_HOME" or "PATH"
    searched: list[str]


def _is_exe(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_binary(
    collective: Collective,
    nccl_tests_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    which: Callable[[str, str | None], str | None] | None = None,
) -> Discovery:
    """Find the binary of ``collective`` (:attr:`Collective.binary`): ``nccl_tests_dir``, then
    ``env["NCCL_TESTS_HOME"]``, then ``env["PATH"]``.

    ``env`` defaults to the process environment; ``which(name, path)`` to :func:`shutil.which`.
    """
    import shutil

    env = os.environ if env is None else env
    which = which or (lambda name, path: shutil.which(name, path=path))
    searched: list[str] = []
    for source, base in (
        ("--nccl-tests-dir", nccl_tests_dir),
        ("NCCL_TESTS_HOME", env.get("NCCL_TESTS_HOME")),
    ):
        if not base:
            continue
        for cand in (Path(base) / collective.binary, Path(base) / "build" / collective.binary):
            searched.append(str(cand))
            if _is_exe(cand):
                return Discovery(name=collective.binary, path=str(cand), source=source, searched=searched)
    searched.append(f"PATH={env.get('PATH', '')}")
    found = which(collective.binary, env.get("PATH"))
    return Discovery(name=collective.binary, path=found, source="PATH" if found else None, searched=searched)


class Features(Contract):
    """What a binary's ``-h`` says it supports."""

    json_output: bool = False  #: ``-J,--output_file``
    per_iter_timing: bool = False  #: ``-I,--per_iter_timing``
    self_timeout: bool = False  #: ``-T,--timeout``


def features_from_help(help_text: str) -> Features:
    """Read the option list nccl-tests prints for ``-h``."""
    return Features(
        json_output="-J,--output_file" in help_text,
        per_iter_timing="-I,--per_iter_timing" in help_text,
        self_timeout="-T,--timeout" in help_text,
    )


class NcclTestsOptions(Contract):
    """Arguments of one run. Sizes as nccl-tests reads them (``8``, ``64K``, ``8G``)."""

    min_bytes: str = "8"
    max_bytes: str = "8G"
    step_factor: int = 2
    gpus: int = Field(default=1, ge=1)  #: ``-g``: GPUs per process (intra-node: all GPUs of the node)
    iters: int | None = None  #: ``-n`` (nccl-tests default 20)
    warmup_iters: int | None = None  #: ``-w``
    check: int | None = 1  #: ``-c``: validation passes (0 -> ``#wrong`` is N/A; None: no ``-c``, default 1)
    timeout_s: float = 600.0  #: the runner's hard deadline for the whole command


def build_argv(
    binary: str, opts: NcclTestsOptions, features: Features, json_path: str | None = None
) -> list[str]:
    """The argv of one run; ``-J``/``-I``/``-T`` only where ``features`` says the build supports them. The one
    nccl-tests argv builder: :func:`fleetdx.probes.catalog.nccl_sweep_probe` calls it too."""
    argv = [
        binary,
        "-b",
        opts.min_bytes,
        "-e",
        opts.max_bytes,
        "-f",
        str(opts.step_factor),
        "-g",
        str(opts.gpus),
    ]
    if opts.check is not None:
        argv += ["-c", str(opts.check)]
    if opts.iters is not None:
        argv += ["-n", str(opts.iters)]
    if opts.warmup_iters is not None:
        argv += ["-w", str(opts.warmup_iters)]
    if features.self_timeout and opts.timeout_s > 2 * SELF_TIMEOUT_MARGIN_S:
        argv += ["-T", str(int(opts.timeout_s - SELF_TIMEOUT_MARGIN_S))]
    if features.json_output and json_path:
        argv += ["-J", json_path]
        if features.per_iter_timing:
            argv += ["-I", "1"]
    return argv


