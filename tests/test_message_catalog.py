"""The message catalog (probes/parsers/messages.yaml, read by fleetdx.probes.parsers.msgcatalog): it validates,
every row's fixture is read as its row's kind, no fixture is claimed by a row of another failure class, every
pattern runs in linear time on 1 MB hostile lines, and a job log with the new kinds gives them rank and host."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers import msgcatalog
from fleetdx.probes.parsers.joblog import EventKind, parse_joblog
from fleetdx.probes.parsers.joblog_kernel import parse_kernel_log
from fleetdx.probes.parsers.literals import Literals
from fleetdx.probes.parsers.logline import normalise_line
from fleetdx.probes.parsers.msgcatalog import (
    GROUPS,
    Catalog,
    MessageRow,
    catalog,
    load_rows,
    to_bytes,
)

ROWS = load_rows()
FIX = Path(__file__).parent / "fixtures" / "joblogs_catalog"
#: the kinds joblog's hand-written patterns give (every other kind comes from the catalog only)
_JOBLOG_KINDS = {EventKind(r.kind) for r in ROWS if r.extractor != "catalog"} | {EventKind.NODE_FAIL, EventKind.SIGNAL}


def _bodies(line: str) -> list[str]:
    return [ll.body for ll in normalise_line(line)]


def test_catalog_validates_and_is_broad() -> None:
    assert len(ROWS) >= 60
    assert len({r.id for r in ROWS}) == len(ROWS)
    projects = {r.source.project for r in ROWS}
    assert {"nccl", "pytorch", "slurm", "cuda", "ucx", "nvidia-driver"} <= projects
    for r in ROWS:
        assert EventKind(r.kind)  # every kind is an EventKind value
        assert set(re.compile(r.pattern).groupindex) <= set(GROUPS)


def test_packaged_path_is_beside_the_module_through_the_fleetdx_symlink() -> None:
    assert msgcatalog.CATALOG_PATH.is_file()
    assert msgcatalog.CATALOG_PATH.parent == Path(msgcatalog.__file__).parent


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("(?P<seq>", "(?P<sequence>", 1), "not in the vocabulary"),
        (lambda t: t.replace("failure_class: nccl_timeout", "failure_class: timeout", 1), "failure_class"),
        (lambda t: t.replace("supersedes: [python-exception]", "supersedes: [watchdog-timeout]", 1), "supersedes"),
        (lambda t: t.replace("versions: 1.13-2.9", "versions: recent", 1), "version range"),
        (lambda t: t.replace('literal: "Watchdog caught', 'literal: "Watchdog kaught', 1), "literal"),
        (
            lambda t: (
                t
                + "- id: pytorch.pgnccl.watchdog_timeout\n"
                + t.split("- id: pytorch.pgnccl.watchdog_timeout\n")[1].split("- id:")[0]
            ),
            "duplicate",
        ),
    ],
)
def test_invalid_rows_are_refused(tmp_path: Path, edit: object, message: str) -> None:
    text = msgcatalog.CATALOG_PATH.read_text(encoding="utf-8")
    assert callable(edit)
    changed = edit(text)
    assert changed != text
    bad = tmp_path / "messages.yaml"
    bad.write_text(changed, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_rows(bad)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_fixture_matches_its_own_pattern_and_gives_its_kind(row: MessageRow) -> None:
    rx = re.compile(row.pattern)
    assert any(row.literal in b and rx.search(b) for b in _bodies(row.fixture)), row.fixture
    if row.extractor == "kernel":
        events = parse_kernel_log([row.fixture], "k.log", year=2026).events
    else:
        events = parse_joblog([row.fixture], "j.log").events
    assert EventKind(row.kind) in {e.kind for e in events}, events
    if row.extractor == "catalog":
        (ev,) = [e for e in events if e.kind is EventKind(row.kind)]
        if "catalog" in ev.details:  # else joblog's own patterns read the line first (a kind they know)
            assert ev.details["failure_class"] == row.failure_class and ev.details["role"] == row.role
            assert any(ev.details["catalog"] == r.id and r.failure_class == row.failure_class for r in ROWS)
        else:
            assert ev.kind in _JOBLOG_KINDS, f"{row.id}: a new kind must come from the catalog"
        assert not {e.kind.value for e in events} & set(row.supersedes)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_no_fixture_is_claimed_by_a_row_of_another_failure_class(row: MessageRow) -> None:
    bodies = _bodies(row.fixture)
    claims = [
        other.id
        for other in ROWS
        if other.failure_class != row.failure_class
        and any(other.literal in b and re.search(other.pattern, b) for b in bodies)
    ]
    assert claims == []


def _hostile(row: MessageRow) -> list[str]:
    """1 MB lines built to make a backtracking pattern go quadratic: the literal over and over, the literal with
    the fixture's tail cut short, runs of the characters the fixture is made of, no closing bracket."""
    size = 1 << 20
    near = row.fixture[row.fixture.index(row.literal) :][:-3].replace(")", "").replace("]", "").replace("*", "")
    chars = "".join(sorted(set(row.fixture)))
    return [
        (row.literal + " ") * (size // (len(row.literal) + 1)),
        (near + " ") * (size // (len(near) + 1)),
        (row.literal + "1" * 5000 + " ") * (size // (len(row.literal) + 5001)),
        row.literal + ("a1:.-_<>" * (size // 8)),
        row.literal + chars * (size // len(chars)),
    ]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_pattern_runs_in_linear_time_on_1mb_hostile_lines(row: MessageRow) -> None:
    rx = re.compile(row.pattern)
    for line in _hostile(row):
        start = time.process_time()
        for _ in rx.finditer(line):
            pass
        spent = time.process_time() - start
        assert spent < 2.0, f"{row.id}: {spent:.2f} s CPU on a {len(line)} character line"


def test_the_scan_prefilter_is_linear_on_a_1mb_line_and_finds_nothing_without_a_literal() -> None:
    cat = catalog()
    line = "x" * (1 << 20)
    start = time.process_time()
    assert cat.scan(line) == [] and not cat.may_match(line)
    assert time.process_time() - start < 2.0


def test_scan_types_the_details() -> None:
    cat = catalog()
    (m,) = cat.scan("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 978.00 MiB. GPU 3 has a total")
    assert m.row.id == "pytorch.hip_alloc.oom"
    assert m.details == {"bytes": 978 * 1024 * 1024, "dev": 3}
    (m,) = cat.scan("[rank1]: ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in")
    assert m.details == {"seconds": 480.0}
    assert to_bytes("2.00 GiB") == 2 << 30 and to_bytes("0 bytes") == 0 and to_bytes("lots") is None


def test_scan_finds_rows_whose_literals_overlap() -> None:
    # "Caught signal 7 (Bus error" holds "Bus error": both rows are looked at, not only the longer literal's
    cat = Catalog([r for r in ROWS if r.literal in ("Bus error", "Caught signal 7 (Bus error")])
    ids = [m.row.id for m in cat.scan("Bus error (core dumped) and Caught signal 7 (Bus error: x)")]
    assert ids == ["glibc.strsignal.bus_error_shell", "ucx.debug.caught_sigbus"]


def test_stats_prints_rows_per_source_and_version_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert msgcatalog.main(["--stats"]) == 0
    out = capsys.readouterr().out
    assert f"{len(ROWS)} rows" in out
    assert re.search(r"^  nccl 2\.10-2\.29 +\d+$", out, re.M)
    assert re.search(r"^  slurm >=23\.02 +2$", out, re.M)
    assert msgcatalog.main(["--nope"]) == 2


def _events(name: str) -> list[tuple[EventKind, int | None, str | None, int]]:
    log = parse_joblog((FIX / name).read_text(encoding="utf-8"), name)
    return [(e.kind, e.rank, e.host, e.line) for e in log.events]


def test_multi_rank_log_gives_the_new_kinds_with_rank_and_host() -> None:
    log = parse_joblog((FIX / "multirank_new_kinds.log").read_text(encoding="utf-8"), "m.log")
    by = {(e.kind, e.line): e for e in log.events}

    dump = by[(EventKind.FLIGHT_RECORDER_DUMP, 1)]  # gpu-a01: [rank1]: ... from rank 3
    assert (dump.rank, dump.host, dump.details["culprit_rank"]) == (1, "gpu-a01", 3)
    assert (dump.details["last_enqueued"], dump.details["last_completed"]) == (5113, 5112)
    local = by[(EventKind.FLIGHT_RECORDER_DUMP, 2)]  # gpu-a02: [rank3]: ... from this local rank
    assert (local.rank, local.host, local.details["culprit_rank"]) == (3, "gpu-a02", 3)
    stuck = by[(EventKind.WATCHDOG_STUCK, 3)]  # Ray worker prefix: the host is its ip=
    assert (stuck.rank, stuck.host, stuck.details["seconds"]) == (2, "10.0.0.7", 480.0)
    iface = by[(EventKind.NCCL_NO_SOCKET_INTERFACE, 4)]  # NCCL's host:pid:tid names the host
    assert (iface.rank, iface.host, iface.details["failure_class"]) == (0, "gpu-a01", "config_error")
    assert EventKind.NCCL_WARN not in {e.kind for e in log.events if e.line == 4}
    mism = by[(EventKind.COLLECTIVE_MISMATCH, 5)]
    assert (mism.rank, mism.host, mism.details["op"], mism.details["peer"]) == (0, "gpu-a01", "ALLREDUCE", "1")
    assert EventKind.PYTHON_EXCEPTION not in {e.kind for e in log.events if e.line == 5}
    hip = by[(EventKind.OOM_GPU, 6)]
    assert (hip.rank, hip.host, hip.details["bytes"], hip.details["dev"]) == (5, "10.0.0.9", 2 << 30, 1)
    bus = by[(EventKind.BUS_ERROR, 7)]  # srun names the host and a task id, never a rank
    assert (bus.rank, bus.host, bus.details["tasks"]) == (None, "gpu-a03", "4")
    oom = by[(EventKind.OOM_HOST, 8)]
    assert (oom.host, oom.details["count"], oom.details["step"]) == ("gpu-a03", 1, "647226.7")
    assert oom.time == "2025-03-02T11:04:12"
    shm = by[(EventKind.NCCL_SHM_ERROR, 9)]
    assert (shm.rank, shm.host, shm.details["count"]) == (6, "gpu-a04", 9637888)


def test_the_rank_that_reported_its_own_timeout_keeps_its_watchdog_event_only() -> None:
    # a rank's own "from this local rank" dump after its watchdog timeout says nothing more
    kinds = [k for k, *_ in _events("own_timeout_then_dump.log")]
    assert kinds == [EventKind.WATCHDOG_TIMEOUT, EventKind.FLIGHT_RECORDER_DUMP]
    (_, rank, _, line) = [e for e in _events("own_timeout_then_dump.log") if e[0] is EventKind.FLIGHT_RECORDER_DUMP][0]
    assert (rank, line) == (1, 3)  # rank 1's dump (it did not time out itself) is kept


def test_node_failure_does_not_blame_the_node_that_printed_it() -> None:
    """``ON HOST`` is the node whose slurmstepd printed the cancellation (the failed node cannot print): never the
    event's host (kept as ``printed_on`` where the cancellation line is whole); srun's ``Node failure on HOST``
    names the failed node."""
    line = (
        "slurmstepd: error: *** JOB 1234567 ON gpu-b-03 CANCELLED AT 2024-11-02T07:41:55 DUE TO NODE FAILURE, "
        "SEE SLURMCTLD LOG FOR DETAILS ***"
    )
    (ev,) = parse_joblog([line]).events
    assert (ev.kind, ev.host) == (EventKind.NODE_FAIL, None)
    (ev,) = parse_joblog(["slurmstepd: error: *** JOB 1234567 ON gpu-b-03 CANCELLED AT 2024-11-02T07:41:55 DUE TO "
                          "NODE FAILURE ***"]).events
    assert (ev.kind, ev.host, ev.details["printed_on"]) == (EventKind.NODE_FAIL, None, "gpu-b-03")
    (ev,) = parse_joblog(["srun: error: Node failure on gpu-b-07"]).events
    assert (ev.kind, ev.host) == (EventKind.NODE_FAIL, "gpu-b-07")


def test_lines_without_catalog_literals_give_no_catalog_events() -> None:
    text = "\n".join(["epoch 3 step 120 loss 2.31", "[rank0]: saving checkpoint to /ckpt/step120", "Bus Error: none"])
    assert parse_joblog(text).events == []


@pytest.mark.parametrize(
    "literals", [["abc", "abd", "ab"], ["Bus error", "Caught signal 7 (Bus error", "B"], [r.literal for r in ROWS]]
)
def test_the_literal_gate_matches_exactly_the_lines_holding_a_literal(literals: list[str]) -> None:
    gate = Literals(literals)
    for lit in literals:
        assert gate.any_in(f"<{lit}>") and lit in gate.found_in(f"<{lit}>")
        for cut in (lit[:-1], lit[1:]):
            if not any(other in cut for other in literals):
                assert not gate.any_in(cut) and gate.found_in(cut) == set()
    with pytest.raises(ValueError):
        Literals(["a", ""])
    with pytest.raises(ValueError):
        Literals([])


def test_the_literals_a_line_holds_are_found_by_the_gate_alone() -> None:
    """``scan`` finds a line's literals from the gate's one pass, not from an ``in`` test per literal: the same
    set on every fixture, on lines holding several literals, overlapping ones, and
    literals glued to each other."""
    import random

    cat = catalog()
    lits = cat.literals
    rng = random.Random(20)
    lines = [r.fixture for r in ROWS]
    lines += [" ".join(rng.sample(lits, 3)) for _ in range(300)]
    lines += ["".join(rng.sample(lits, 2)) for _ in range(300)]  # glued: one may start inside the other's match
    lines += [lit[: len(lit) // 2] + lit for lit in lits]  # a prefix before the literal itself
    for line in lines:
        assert cat._literals_in(line) == {lit for lit in lits if lit in line}, line


def test_a_kernel_log_gives_the_catalogued_mlx5_lines_with_the_adapter_s_pci_address() -> None:
    """The catalog's ``linux`` rows its scan reads (mlx5's health and command timeouts) come from a node's kernel
    log too, not only from a job log that quotes them: keyed by the HCA's PCI address, its host the syslog's."""
    rows = [r for r in ROWS if r.source.project == "linux" and r.extractor == "catalog"]
    assert {r.id for r in rows} >= {"linux.mlx5.health_compromised", "linux.mlx5.cmd_timeout"}
    lines = [
        "Nov 20 01:02:03 gpu-b07 kernel: mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health "
        "compromised - reached miss count",
        "Nov 20 01:02:09 gpu-b07 kernel: mlx5_core 0000:41:00.0: wait_func:964:(pid 112): ENABLE_HCA(0x104) timeout. "
        "Will cause a leak of a command resource",
        "Nov 20 01:02:10 gpu-b07 kernel: mlx5_core 0000:41:00.0: poll_health: all good",
    ]
    events = parse_kernel_log(lines, "k.log", year=2026).events
    assert [(e.kind, e.host, e.details["pci"], e.details["catalog"]) for e in events] == [
        (EventKind.IB_LINK_DOWN, "gpu-b07", "0000:41:00.0", "linux.mlx5.health_compromised"),
        (EventKind.IB_LINK_DOWN, "gpu-b07", "0000:41:00.0", "linux.mlx5.cmd_timeout"),
    ]
    assert events[1].details["error"] == "ENABLE_HCA" and events[0].ts is not None


def test_a_python_logger_name_before_a_message_is_not_a_host() -> None:
    """torch elastic's ``[TIME] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) ...``
    (torch 2.1-2.3) starts as ``host: `` would: the logger is no host; a real host prefix before it still is."""
    t = "[2024-05-01 10:00:00,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) "
    tail = "local_rank: 3 (pid: 1234) of binary: /usr/bin/python"
    (ev,) = parse_joblog([t + tail]).events
    assert (ev.kind, ev.host, ev.details["exit_code"]) == (EventKind.CHILD_FAILED, None, -9)
    (ev,) = parse_joblog(["node3: " + t + tail]).events
    assert ev.host == "node3"
    (ev,) = parse_joblog(["deepspeed.launcher.runner: [ERROR] x exits with return code = -11"]).events
    assert ev.host is None and ev.details["exit_code"] == -11
