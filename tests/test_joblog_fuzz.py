"""Property-based tests of the job-log and kernel-log parsers on mutated real job logs
(tests/fixtures/joblogs/): whatever the input (cut, spliced, re-prefixed, ANSI-sprayed, random text, binary), they
return a model or raise ``ParseError``, nothing else; and prefixing every line of a real log with a launcher
prefix never changes which event kinds it yields. Hypothesis runs derandomized, so the suite is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.joblog import parse_joblog
from fleetdx.probes.parsers.joblog_kernel import parse_kernel_log

FIX = Path(__file__).parent / "fixtures" / "joblogs"
TEXTS = [p.read_text(encoding="utf-8") for p in sorted(FIX.glob("*.log"))] + [
    # the real H100 watchdog timeout and ProcessGroupNCCL's teardown (terminate called ... what():)
    (FIX.parent / "flight_recorder" / "nccl_1rank_gpu_stall" / "stderr.txt").read_text(encoding="utf-8")
]
FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
NOISE = st.sampled_from(
    [
        "\x1b[36m",
        "[0m",
        "> ",
        "\r",
        "  ",
        "[rank3]:",
        "3: ",
        "[1,2]<stdout>:",
        "(pid=1, ip=x)",
        "gpu01: ",
        "\t",
        "|",
        "%|",
        "***",
        "[E0101 00:00:00.1 a.cc:1]",
        "WorkNCCL(",
        "SeqNum=",
        "Timeout(ms)=",
        "NVRM: ",
        "terminate called after throwing an instance of 'c10::DistBackendError'\n",
        "  what():  ",
        "\x00",
    ]
)


def _accepts(text: str) -> None:
    for parse in (parse_joblog, parse_kernel_log):
        try:
            parse(text)
        except ParseError:
            pass


@FUZZ
@given(st.sampled_from(TEXTS), st.integers(0, 4000), st.integers(0, 4000), st.lists(NOISE, max_size=6))
def test_mutated_logs_parse_or_raise_parse_error(text: str, a: int, b: int, noise: list[str]) -> None:
    lo, hi = sorted((a % (len(text) + 1), b % (len(text) + 1)))
    _accepts(text[lo:hi])
    _accepts("".join(noise) + text[lo:] + "".join(noise))
    _accepts(text[:lo] + "".join(noise) + text[hi:])


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text: str) -> None:
    _accepts(text)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    _accepts(data.decode("utf-8", errors="replace"))


@FUZZ
@given(st.sampled_from(TEXTS), st.sampled_from(["[1,7]<stdout>:", "(RayTrainWorker pid=9, ip=10.1.1.1) ", "> "]))
def test_launcher_prefix_keeps_event_kinds(text: str, prefix: str) -> None:
    plain = [e.kind for e in parse_joblog(text).events]
    prefixed = [e.kind for e in parse_joblog("\n".join(prefix + line for line in text.splitlines())).events]
    assert prefixed == plain


@FUZZ
@given(st.sampled_from(TEXTS), st.sampled_from(["log", "message", "data"]))
def test_json_lines_wrapping_keeps_event_kinds(text: str, field: str) -> None:
    """Each line of a real log as a JSON-lines record (Docker's json-file driver, a collector, a runner): the
    same events as the plain log (logline.json_line)."""
    plain = [e.kind for e in parse_joblog(text).events]
    wrapped = "\n".join(json.dumps({field: line + "\n", "stream": "stderr"}) for line in text.splitlines())
    assert [e.kind for e in parse_joblog(wrapped).events] == plain
