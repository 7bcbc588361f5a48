"""A log hard-wrapped at a fixed width is read with its wrapped lines joined (probes/parsers/hardwrap.py)."""

from __future__ import annotations

from pathlib import Path

from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles
from fleetdx.probes.parsers.hardwrap import MAX_JOINED, Unwrapper, unwrapped
from fleetdx.probes.parsers.joblog import EventKind, parse_joblog

#: wild log 458's first message (t5x on two GPU nodes), whole
XLA = (
    "2022-10-23 01:07:26.771566: E external/org_tensorflow/tensorflow/compiler/xla/pjrt/pjrt_stream_executor_client"
    ".cc:2153] Execution of replica 1 failed: INTERNAL: external/org_tensorflow/tensorflow/compiler/xla/service/gpu/"
    "nccl_all_reduce_thunk.cc:70: NCCL operation ncclAllReduce(send_buffer, recv_buffer, element_count, dtype, "
    "reduce_op, comm, gpu_stream) failed: unhandled cuda error"
)
OTHER = [
    "Traceback (most recent call last):",
    '  File "/home/user/t5x/t5x/train.py", line 757, in <module>',
    "    gin_utils.run(main)",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/org_tensorflow/tensorflow/compiler/xla/service/gpu/"
    "nccl_all_reduce_thunk.cc:70: NCCL operation ncclAllReduce failed: unhandled cuda error",
]


def _wrap(lines: list[str], width: int, pad: bool = False) -> list[str]:
    out: list[str] = []
    for line in lines:
        parts = [line[i : i + width] for i in range(0, len(line), width)] or [""]
        out += [p.ljust(width) if pad else p for p in parts]
    return out


def test_a_log_wrapped_at_a_fixed_width_is_read_whole() -> None:
    for pad in (False, True):
        wrapped = _wrap([XLA, *OTHER], 122, pad)
        uw = Unwrapper.detect(wrapped)
        assert uw is not None and (uw.width, uw.padded) == (122, pad)
        joined = list(unwrapped(wrapped))
        assert [s.rstrip() for s, _ in joined] == [XLA, *OTHER]
        assert [n for _, n in joined] == [-(-len(XLA) // 122), 1, 1, 1, 2]
        log = parse_joblog("\n".join(wrapped))
        (e,) = [e for e in log.events if e.kind is EventKind.NCCL_CUDA_FAILURE][:1]
        assert e.line == 1 and log.lines_read == len(wrapped)
        after = [e for e in log.events if e.line > 3]
        assert after and all(e.line == 8 for e in after)  # the exception's line: the first of its two


def test_the_postmortem_of_a_wrapped_file_cites_its_first_physical_line(tmp_path: Path) -> None:
    log = tmp_path / "wrapped.log"
    log.write_text("\n".join(_wrap([XLA, *OTHER], 122, pad=True)) + "\n")
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert c.code is F.CUDA_ERROR and c.evidence[0].line == 1


def test_lines_that_merely_share_a_length_are_not_joined() -> None:
    """Every rank printing one message (its length the longest, ranks differing) and dmesg lines of one format:
    the next line starts as they do (or as a log line does), so nothing is joined."""
    ranks = [f"gpu5: [rank{r}]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580)" for r in range(8)]
    assert Unwrapper.detect(ranks + ["gpu7: [rank2]: step 99"]) is None
    dmesg = [
        f"[Mon Mar 10 06:00:2{i} 2025] NVRM: Xid (PCI:0000:1{i}:00): 31, pid=123{i}, name=python, Ch 0000000{i}"
        for i in range(5)
    ]
    assert list(unwrapped(dmesg)) == [(d, 1) for d in dmesg]
    short = ["a line", "another line"]
    assert Unwrapper.detect(short) is None and list(unwrapped(short)) == [("a line", 1), ("another line", 1)]


def test_a_wrapped_line_is_not_joined_with_a_line_that_starts_a_log_line() -> None:
    """A line cut at the width whose next line is a stamped, indented or bracketed line (a log cut by a tool at a
    width rather than wrapped) stays as it is; a joined line keeps at most MAX_JOINED characters."""
    wrapped = _wrap([XLA, XLA], 122)
    cut = wrapped[0]
    uw = Unwrapper.detect(wrapped)
    assert uw is not None
    for nxt in ("2022-10-23 01:07:27.000000: E next", "  File x", "[rank1]: next", ""):
        assert [n for _, n in [*uw.lines([cut, nxt]), *uw.end()]] == [1, 1]
    long = [cut] + [cut.replace("2022", "abcd")] * 400 + ["end"]
    out = list(uw.lines(long)) + list(uw.end())
    assert all(len(text) <= MAX_JOINED for text, _ in out) and len(out) > 1
    assert sum(n for _, n in out) == len(long) and "".join(t for t, _ in out) == "".join(long)  # nothing dropped


def test_lines_cut_at_a_readers_cap_are_no_wrap() -> None:
    """Lines cut to one length by a reader's cap (MAX_LINE) are far wider than a terminal: the log is read as it
    is, and the line after them keeps its event."""
    capped = [f"{i} " + "x" * 70_000 for i in range(10, 14)]
    lines = [c[:65_536] for c in capped] + ["RuntimeError: CUDA error: an illegal memory access was encountered"]
    assert Unwrapper.detect(lines) is None
    assert [e.kind for e in parse_joblog("\n".join(lines)).events] == [EventKind.CUDA_ERROR]


def test_a_summarys_rules_are_no_wrap() -> None:
    """torch elastic's summary frames its entries with 60 '-' and '=' (wild log 5271, its head cut so that those
    rules are its longest lines): a rule is a whole line, so 'Root Cause' below it stays a line of its own and the
    root cause entry is read as such."""
    entry = "[{i}]:\n  time      : 2024-01-16_18:04:01\n  host      : lexun-1\n  rank      : {i} (local_rank: {i})\n"
    entry += "  exitcode  : -7 (pid: 1660{i})\n  error_file: <N/A>\n  traceback : Signal 7 (SIGBUS) received by PID 1\n"
    log = entry.format(i=6) + "-" * 60 + "\nRoot Cause (first observed failure):\n" + entry.format(i=0) + "=" * 60
    log += "\nsrun: error: lexun-1: task 0: Exited with exit code 1\n"
    assert Unwrapper.detect(log.splitlines()) is None
    roots = [e for e in parse_joblog(log, "t.log").events if e.details.get("root_cause")]
    assert [e.rank for e in roots] == [0]
