"""Shared test configuration: fixture paths, the GPU skip, and the code catalog's bookkeeping: every finding a
test makes in this process is checked against its catalog row (a severity the row does not list fails the test
that made it), and a run of the whole suite fails when a catalog row was never emitted by any test (issue 19)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _has_cuda() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


#: (code, severity) of every finding fleetdx's rules emitted in this test process
EMITTED: set[tuple[str, str]] = set()
#: modules whose findings are not emissions: tests, and the store and placement, which rebuild stored findings
REBUILDERS = ("tests", "fleetdx.orchestrator.store", "fleetdx.orchestrator.placement")


def pytest_configure(config: pytest.Config) -> None:
    for key, value in getattr(config, "workerinput", {}).get("fleetdx_terminal_env", {}).items():
        if value is None:
            os.environ.pop(key, None)  # as in a plain run: see pytest_configure_node
        else:
            os.environ[key] = value
    if _loadfile(config):
        # modules are queued in the order pytest_collection_modifyitems gives (long ones first), not by size
        config.option.loadscopereorder = False
    from fleetdx.orchestrator.judgement.catalog import spec
    from fleetdx.orchestrator.judgement.findings import Finding

    made = Finding.__init__

    def recording_init(self: Finding, /, **data: object) -> None:
        made(self, **data)
        if sys._getframe(1).f_globals.get("__name__", "").startswith(REBUILDERS):
            return  # made up by a test (random, synthetic) or rebuilt from stored rows: not emitted here
        row = spec(self.code)
        assert self.severity in row.severities, (
            f"{self.code.value} emitted at {self.severity.value}; codes.yaml lists {[s.value for s in row.severities]}"
        )
        EMITTED.add((self.code.value, self.severity.value))

    Finding.__init__ = recording_init  # type: ignore[method-assign]


def _whole_suite(config: pytest.Config) -> bool:
    """True when this run is the README's test command: every test file, no selection by keyword or marker."""
    args = [a for a in config.args if a not in ("tests", "tests/", str(Path(__file__).parent))]
    return not args and not config.getoption("keyword") and not config.getoption("markexpr")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # a pytest-xdist worker: its emissions go to the controller, which judges
        worker_output["fleetdx_emitted"] = sorted(EMITTED)
        return
    if not _whole_suite(session.config):
        return
    from fleetdx.orchestrator.judgement.catalog import catalog

    never = [r.code.value for r in catalog().codes if not any(c == r.code.value for c, _ in EMITTED)]
    if never:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = f"code catalog: rows never emitted by any test: {', '.join(never)} (add a test, or drop the row)"
        if tr is not None:
            tr.write_line(msg, red=True)
        if exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: tests marked ``slow`` here, by module (every test) or by "module::test-name prefix": those over about 5 s on the
#: 2-core CI machine (``pytest --durations``, 2026-11-27). They stay in the full suite; the README's fast subset
#: (``-m "not slow and not ray and not slurm and not netns and not chromium"``) leaves them out.
SLOW = (
    "test_rawfile.py::test_over_the_limit_is_refused",
    "test_rawfile.py::test_a_huge_kernel_log_is_streamed",
    "test_steps_hta.py",
    "test_watch_live.py::test_synthetic_live_job_straggler_then_hang",
    "test_watch_gloo.py",
    "test_kineto.py::test_any_chunk_size_reads_the_same",
    "test_kineto.py::test_fuzz_structured_events",
    "test_collective.py::test_worker_body_runs_every_collective",
    "test_store_upgrade.py",
    "test_ray_connect.py::test_cli_bandwidth_with_a_dead_address",
    "test_pair_findings.py::test_fleetdx_history_of_each_host",
    "test_message_catalog.py::test_pattern_runs_in_linear_time",
    "test_htmlreport.py::test_huge_",
    "test_fleet_pages.py::test_a_fleet_of_5000_nodes",
    "test_slim_install.py",
    "test_local_preflight.py::test_spool_delivers",
    "test_nodes_cli.py::test_nodes_lists_a_node_a_local_preflight_just_stored",
    "test_nodes_cli.py::test_return_and_history",
    "test_parse_nccl_fuzz.py::test_every_pattern_is_linear",
    "test_code_catalog.py::test_every_job_json_has_the_envelope",
    "test_code_catalog.py::test_codes_json_lists_every_code",
    "test_cli_width.py::test_steps_figures_are_whole",
    "test_steps.py::test_fuzz_decompose",
    "test_new_probe.py",
    "test_steps_cli.py",
    "test_readme_examples.py",
    "test_flight_recorder_parse.py::test_fuzz_structured_entries",
    "test_standard_level.py",
    "test_fleet_scaling.py",
    "test_cli_lazy.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist, in the controller: a worker ended; add the findings its tests emitted."""
    EMITTED.update((code, severity) for code, severity in getattr(node, "workeroutput", {}).get("fleetdx_emitted", []))


def _loadfile(config: pytest.Config) -> bool:
    """Whether this run is ``pytest -n N --dist loadfile`` (pytest-xdist: each test module runs whole on one
    worker, so its module fixtures, a Slurm or Ray cluster, start once)."""
    return config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") == "loadfile"


#: the modules that take longest (CI's ``--durations``), longest first; the Ray ones (test_collective,
#: test_preflight_full, test_bandwidth_netns) between Slurm's, so that few Ray clusters start at once
LONGEST = (
    "test_slurm_preflight.py",
    "test_collective.py",
    "test_slurm_prolog.py",
    "test_slurm_healthcheck.py",
    "test_watch_live.py",
    "test_preflight_full.py",
    "test_watch_gloo.py",
    "test_steps_live.py",
    "test_postmortem_slurm_forgotten.py",
    "test_postmortem_slurm.py",
    "test_bandwidth_netns.py",
    "test_place_slurm_live.py",
    "test_goodput_slurm.py",
    "test_slurm_cluster.py",
    "test_preflight_e2e.py",
    "test_report_not_lost.py",
)


#: the modules that start Ray (their tests marked ``ray``, and test_slurm_preflight's Ray on a Slurm allocation):
#: under ``--dist loadfile`` they run one after the other on one worker, as in a plain run. Several Ray clusters
#: at once on 2 cores failed to start in time ("The current node timed out during startup"), and gloo sweeps
#: hung past their 60 s. A worker checks the list against the marks (:func:`pytest_collection_modifyitems`).
RAY_MODULES = frozenset(
    {
        "test_api_push.py",
        "test_bandwidth_netns.py",
        "test_collective.py",
        "test_fanout.py",
        "test_new_probe.py",
        "test_preflight_e2e.py",
        "test_preflight_full.py",
        "test_ray_connect.py",
        "test_report_not_lost.py",
        "test_simulate_start.py",
        "test_slurm_preflight.py",
    }
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's ``--dist loadfile``, with every module of :data:`RAY_MODULES` in one scope (one worker).
    (``--dist loadgroup`` with ``xdist_group`` marks would say this, but pytest-xdist 3.8 cannot group under
    pytest 9.2: it renames the test ids, which pytest 9.2 no longer reads; pytest-xdist issue 1386.)"""
    if config.getoption("dist", "no") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RayTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return "ray" if file.rsplit("/", 1)[-1] in RAY_MODULES else file

    return RayTogether(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, in the controller: hand each worker this process's terminal size variables. A worker is
    started with ``COLUMNS=80 LINES=24`` where a plain run has none, and fleetdx's human output (and that of the
    commands the tests run) then wraps at 80 columns instead of its 140 for logs."""
    node.workerinput["fleetdx_terminal_env"] = {k: os.environ.get(k) for k in ("COLUMNS", "LINES")}


def _queue_rank(item: pytest.Item) -> int:
    """Where a test's module goes in pytest-xdist's queue: the long modules first, then the other slow ones, so
    that none of them starts last and runs on alone."""
    if item.path.name in LONGEST:
        return LONGEST.index(item.path.name)
    return len(LONGEST) + (0 if item.get_closest_marker("slow") else 1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        where = f"{item.path.name}::{item.name}"
        if any(where.startswith(s) if "::" in s else item.path.name == s for s in SLOW):
            item.add_marker(slow)
        if item.path.name == "test_htmlreport_browser.py":
            item.add_marker(pytest.mark.chromium)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller queues tests in this order
        items.sort(key=_queue_rank)  # stable: a module's tests keep their order and stay together
        unlisted = sorted({i.path.name for i in items if i.get_closest_marker("ray")} - RAY_MODULES)
        if unlisted:
            raise pytest.UsageError(f"tests/conftest.py RAY_MODULES lacks {', '.join(unlisted)} (tests marked ray)")
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if gpu_items and not _has_cuda():
        skip = pytest.mark.skip(reason="no NVIDIA GPU with CUDA on this machine")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _private_default_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run by tests without ``--db`` (preflight, postmortem) save into a throwaway SQLite file, never
    into the user's default database; a test that wants another store sets ``FLEETDX_DB_URL`` itself."""
    if "FLEETDX_DB_URL" not in os.environ:
        monkeypatch.setenv("FLEETDX_DB_URL", f"sqlite:///{tmp_path_factory.mktemp('store')}/fleetdx.db")
