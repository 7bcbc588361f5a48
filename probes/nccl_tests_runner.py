"""The nccl-tests wrapper: find the binaries, build their argv, run them through the one runner, judge the
run.

* Discovery (:func:`find_binary`): ``--nccl-tests-dir`` first, then ``$NCCL_TESTS_HOME``, then ``PATH``; in a
  directory both ``<dir>/<name>`` and ``<dir>/build/<name>`` (where ``make`` puts them) are tried.
* Features (:func:`features_from_help`): ``-J`` (JSON output, nccl-tests >= 2.17.3) and ``-I`` (per-iteration
  timings, 2.19.x) are used only when the binary's own ``-h`` lists them; otherwise the text table is parsed.
* Running (:func:`run_nccl_test`): through a :class:`fleetdx.probes.runner.Runner` with a hard deadline; nccl-tests'
  own ``-T`` timeout is set a little earlier so that it can print its ``Test timeout`` line before the group
  is killed. A run past the deadline is ``NCCL_TEST_HANG`` with the last lines of output kept; a non-zero exit
  is ``NCCL_TEST_FAILED``. Intra-node: ``all_reduce_perf -g <gpus>`` on each node (the fan-out runs nodes in
  parallel). Multi-node needs MPI: :func:`mpirun_argv` wraps the command when ``mpirun`` is present and the
  binary links libmpi (:func:`built_with_mpi`); :func:`not_mpi_evidence` recognises the classic mistake of a
  non-MPI build launched on several processes (each process runs alone as rank 0 of 1:
  ``NCCL_TESTS_NOT_MPI``).

Option letters and output markers are those of NVIDIA/nccl-tests ``src/common.cu`` (see
fixtures/SOURCES-nccl.md). No process is spawned here except through the runner.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path

from pydantic import Field

from fleetdx.probes.contracts import Contract, EvidenceValue, Finding, FindingCode, JsonScalar, Severity
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_tests import Collective, parse_nccl_tests
from fleetdx.probes.runner import Runner, RunResult, RunStatus

#: lines of output kept in a hang or failure finding
TAIL_LINES = 20
#: seconds between nccl-tests' own -T timeout and the runner's hard deadline
SELF_TIMEOUT_MARGIN_S = 10


class NcclTest(str, Enum):
    """nccl-tests binaries fleetdx runs: ``<collective>_perf`` for a :class:`Collective` of the parser."""

    ALL_REDUCE = f"{Collective.ALL_REDUCE.value}_perf"
    ALL_GATHER = f"{Collective.ALL_GATHER.value}_perf"
    REDUCE_SCATTER = f"{Collective.REDUCE_SCATTER.value}_perf"
    SENDRECV = f"{Collective.SENDRECV.value}_perf"
    ALLTOALL = f"{Collective.ALLTOALL.value}_perf"
    BROADCAST = f"{Collective.BROADCAST.value}_perf"
    REDUCE = f"{Collective.REDUCE.value}_perf"


class Discovery(Contract):
    """Where a binary was found (``path`` ``None``: not found) and every place that was searched."""

    name: str
    path: str | None
    source: str | None  #: "--nccl-tests-dir", "NCCL_TESTS_HOME" or "PATH"
    searched: list[str]


def _is_exe(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_binary(
    test: NcclTest,
    nccl_tests_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    which: Callable[[str, str | None], str | None] | None = None,
) -> Discovery:
    """Find ``test``'s binary: ``nccl_tests_dir``, then ``env["NCCL_TESTS_HOME"]``, then ``env["PATH"]``.

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
        for cand in (Path(base) / test.value, Path(base) / "build" / test.value):
            searched.append(str(cand))
            if _is_exe(cand):
                return Discovery(name=test.value, path=str(cand), source=source, searched=searched)
    searched.append(f"PATH={env.get('PATH', '')}")
    found = which(test.value, env.get("PATH"))
    return Discovery(name=test.value, path=found, source="PATH" if found else None, searched=searched)


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
    nccl-tests argv builder: :func:`fleetdx.probes.commands.nccl_sweep_command` calls it too."""
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


def built_with_mpi(runner: Runner, binary: str) -> bool | None:
    """Whether ``binary`` links an MPI library (``ldd``), ``None`` when that cannot be told."""
    res = runner.run(["ldd", binary], timeout_s=10)
    if res.status is not RunStatus.OK:
        return None
    return bool(re.search(r"\blibmpi", res.stdout))


def mpirun_argv(
    hosts: Sequence[str],
    procs_per_host: int,
    argv: Sequence[str],
    env_names: Sequence[str] = (
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
        "LD_LIBRARY_PATH",
    ),
) -> list[str]:
    """Open MPI launch of ``argv`` on ``hosts``: one rank per GPU (``procs_per_host``), run with ``-g 1``."""
    spec = ",".join(f"{h}:{procs_per_host}" for h in hosts)
    out = [
        "mpirun",
        "-np",
        str(len(hosts) * procs_per_host),
        "-H",
        spec,
        "--bind-to",
        "none",
        "--map-by",
        "slot",
    ]
    for name in env_names:
        out += ["-x", name]
    return out + list(argv)


def not_mpi_evidence(text: str, launched_procs: int) -> dict[str, EvidenceValue] | None:
    """Evidence that a non-MPI build ran on ``launched_procs`` > 1 processes: each process prints its own
    one-rank table and lists itself as ``Rank 0`` (nranks 1, busbw 0). Read with the nccl-tests parser (its
    ``non_mpi_build`` flag); ``None`` when not the case or when the output does not parse."""
    if launched_procs < 2:
        return None
    try:
        report = parse_nccl_tests(text)
    except ParseError:
        return None
    solo = [r for r in report.runs if r.non_mpi_build]
    if not solo:
        return None
    rank0: list[JsonScalar] = [f"{d.host} pid {d.pid}" for r in solo for d in r.devices if d.rank == 0]
    return {"launched_processes": launched_procs, "headers": len(solo), "rank0_lines": rank0}


def tail(text: str, n: int = TAIL_LINES) -> list[str]:
    """The last ``n`` non-empty lines of ``text``."""
    return [ln for ln in text.splitlines() if ln.strip()][-n:]


class NcclTestsRun(Contract):
    """One nccl-tests run: how it ended, its raw outputs, and the findings about the run itself (hang,
    failure, non-MPI build). Bandwidth and ``#wrong`` findings come from parsing ``stdout``/``json_text``."""

    test: NcclTest
    argv: list[str]
    status: RunStatus
    returncode: int | None = None
    duration_s: float = 0.0
    reason: str | None = None
    stdout: str = ""
    stderr: str = ""
    json_text: str | None = None
    findings: list[Finding] = Field(default_factory=list)


def judge_run(test: NcclTest, res: RunResult, host: str | None, launched_procs: int = 1) -> list[Finding]:
    """Findings about a run's mechanics (not its numbers)."""
    out = res.stdout + ("\n" + res.stderr if res.stderr else "")
    last_lines: list[JsonScalar] = list(tail(out))
    ev: dict[str, EvidenceValue] = {
        "argv": " ".join(res.argv),
        "returncode": res.returncode,
        "duration_s": res.duration_s,
        "tail": last_lines,
    }
    subject = test.value

    def critical(code: FindingCode, message: str, evidence: dict[str, EvidenceValue]) -> Finding:
        return Finding(
            code=code, severity=Severity.CRITICAL, node=host, subject=subject, message=message, evidence=evidence
        )

    findings: list[Finding] = []
    if res.status is RunStatus.TIMEOUT:
        findings.append(critical(FindingCode.NCCL_TEST_HANG, f"{subject}: {res.reason}", ev))
    elif res.status is RunStatus.FAILED:
        last = tail(out, 1)
        message = f"{subject}: {res.reason}: {last[0] if last else ''}"
        findings.append(critical(FindingCode.NCCL_TEST_FAILED, message, ev))
    nm = not_mpi_evidence(res.stdout, launched_procs)
    if nm:
        message = (
            f"{subject}: launched on {launched_procs} processes but each ran alone as rank 0 "
            f"(nccl-tests built without MPI=1)"
        )
        findings.append(critical(FindingCode.NCCL_TESTS_NOT_MPI, message, nm))
    return findings


def run_nccl_test(
    runner: Runner,
    test: NcclTest,
    opts: NcclTestsOptions,
    *,
    nccl_tests_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    json_dir: Path | None = None,
    host: str | None = None,
    mpi_hosts: Sequence[str] | None = None,
) -> NcclTestsRun:
    """Find, probe (``-h``) and run one nccl-tests binary.

    Args:
        runner: the runner (live or replay).
        test: which binary.
        opts: sizes, GPUs, iterations, hard deadline.
        nccl_tests_dir / env: where to look (see :func:`find_binary`).
        json_dir: a directory for the ``-J`` file; without it, or when the build lacks ``-J``, text is parsed.
        host: node name for the findings.
        mpi_hosts: run across these hosts with ``mpirun`` (one rank per GPU, ``-g 1``).

    Returns:
        An :class:`NcclTestsRun`; a missing binary or missing ``mpirun`` is ``skipped`` with the reason. Never
        raises for a failed run.
    """
    found = find_binary(test, nccl_tests_dir, env)
    if found.path is None:
        return NcclTestsRun(
            test=test,
            argv=[test.value],
            status=RunStatus.SKIPPED,
            reason=f"{test.value}: not found (searched {', '.join(found.searched)})",
        )
    help_res = runner.run([found.path, "-h"], timeout_s=10)
    features = features_from_help(help_res.stdout + help_res.stderr)
    json_path = str(json_dir / f"{test.value}.json") if (json_dir and features.json_output) else None
    procs = 1
    if mpi_hosts:
        mpi_ok = built_with_mpi(runner, found.path)
        if mpi_ok is False:
            return NcclTestsRun(
                test=test,
                argv=[found.path],
                status=RunStatus.SKIPPED,
                reason=f"{found.path} is not linked with MPI (build with MPI=1) ",
            )
        gpus = opts.gpus
        argv = mpirun_argv(
            mpi_hosts, gpus, build_argv(found.path, opts.model_copy(update={"gpus": 1}), features, json_path)
        )
        procs = len(mpi_hosts) * gpus
    else:
        argv = build_argv(found.path, opts, features, json_path)
    if json_path:
        Path(json_path).unlink(missing_ok=True)  # nccl-tests would write <name>.json.1 next to an old one
    res = runner.run(argv, timeout_s=opts.timeout_s)
    json_text = None
    if json_path and Path(json_path).is_file():
        json_text = Path(json_path).read_text(encoding="utf-8", errors="replace")
    return NcclTestsRun(
        test=test,
        argv=res.argv,
        status=res.status,
        returncode=res.returncode,
        duration_s=res.duration_s,
        reason=res.reason,
        stdout=res.stdout,
        stderr=res.stderr,
        json_text=json_text,
        findings=judge_run(test, res, host, procs),
    )
