"""Property-based tests of the nccl-tests and NCCL log parsers on mutated real fixtures.

Properties:
1. Whatever the input (cut lines, truncation, dropped columns, re-spaced lines, binary garbage, random
   text), both parsers either return a model or raise ``ParseError``; no other exception escapes.
2. Re-spacing every line of a real fixture (runs of blanks replaced by other runs of spaces and tabs) does
   not change what the nccl-tests parser reads.
3. Cutting a complete run anywhere inside its table never yields a complete run: truncation reads as an
   incomplete run (hang/crash), never as a healthy one.

Hypothesis runs derandomized (fixed seed per test), so the suite is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_log import parse_nccl_log
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests
from tests.test_parse_nccl_tests import GOLDEN, NOT_NCCL_TESTS

FIX = Path(__file__).parent / "fixtures" / "nccl"
NAMES = sorted(set(GOLDEN) | set(NOT_NCCL_TESTS))
#: the hand-written variants of tests/fixtures/nccl_variants (aborts before any output) join the corpus
VARIANTS = sorted((FIX.parent / "nccl_variants").glob("*.txt"))
TEXTS = [(FIX / n).read_text(encoding="utf-8") for n in NAMES] + [p.read_text(encoding="utf-8") for p in VARIANTS]
TEXT_ONLY = [t for n, t in zip(NAMES + [p.name for p in VARIANTS], TEXTS, strict=True) if not n.endswith(".json")]

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PARSERS: list[Callable[[str], object]] = [parse_nccl_tests, parse_nccl_log]
BLANKS = st.text(alphabet=" \t", min_size=1, max_size=6)


def _accepts_or_parse_error(text: str) -> None:
    for parse in PARSERS:
        try:
            parse(text)
        except ParseError:
            pass


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(TEXTS))
    lines = text.splitlines()
    op = draw(st.sampled_from(["cut_lines", "truncate", "drop_column", "garbage", "shuffle_ws", "dup_lines"]))
    if op == "cut_lines" and lines:
        start = draw(st.integers(0, len(lines) - 1))
        stop = draw(st.integers(start, min(len(lines), start + 15)))
        del lines[start:stop]
    elif op == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    elif op == "drop_column" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        toks = lines[i].split()
        if toks:
            del toks[draw(st.integers(0, len(toks) - 1))]
        lines[i] = " ".join(toks)
    elif op == "garbage":
        pos = draw(st.integers(0, len(text)))
        junk = draw(st.binary(max_size=64)).decode("latin-1")
        return text[:pos] + junk + text[pos:]
    elif op == "shuffle_ws" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = re.sub(r"[ \t]+", lambda _: draw(BLANKS), lines[i])
    elif op == "dup_lines" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines[i:i] = lines[i : i + draw(st.integers(1, 5))]
    return "\n".join(lines)


@FUZZ
@given(mutated())
def test_mutated_fixtures_raise_only_parse_error(text: str) -> None:
    _accepts_or_parse_error(text)


@FUZZ
@given(st.text(max_size=400))
def test_random_text_raises_only_parse_error(text: str) -> None:
    _accepts_or_parse_error(text)


@FUZZ
@given(st.binary(max_size=400))
def test_binary_garbage_raises_only_parse_error(data: bytes) -> None:
    _accepts_or_parse_error(data.decode("latin-1"))


@FUZZ
@given(
    st.sampled_from(TEXTS),
    st.sampled_from(['"results"', '"config"', '"devices"', "0.0", '"    -1"', "[", "{", "null", '"nan"']),
    st.integers(0, 10**6),
)
def test_json_mutations_raise_only_parse_error(text: str, token: str, where: int) -> None:
    pos = where % (len(text) + 1)
    _accepts_or_parse_error(text[:pos] + token + text[pos:])


def _summary(text: str) -> list[tuple[object, ...]]:
    report = parse_nccl_tests(text)
    return [
        (
            r.collective,
            r.nranks,
            r.complete,
            len(r.rows),
            r.peak_busbw_gbps,
            r.avg_busbw_gbps,
            r.out_of_bounds,
        )
        for r in report.runs
    ]


@settings(FUZZ, max_examples=40)
@given(st.sampled_from(TEXT_ONLY), st.lists(BLANKS, min_size=1, max_size=12))
def test_respacing_does_not_change_the_result(text: str, blanks: list[str]) -> None:
    try:
        before = _summary(text)
    except ParseError:
        return
    cycle = iter(blanks * (len(text) // len(blanks) + 1))
    respaced = "\n".join(
        re.sub(r"(?<=\S)[ \t]+(?=\S)", lambda _: next(cycle), line) for line in text.splitlines()
    )
    assert _summary(respaced) == before


COMPLETE_SINGLE = [
    t for t in TEXT_ONLY if t.count("Avg bus bandwidth") == 1 and "Avg bus bandwidth" in t and "Rank" in t
]


@pytest.mark.parametrize("text", COMPLETE_SINGLE[:6])
def test_truncation_inside_the_table_is_never_complete(text: str) -> None:
    lines = text.splitlines()
    footer = next(i for i, line in enumerate(lines) if "Out of bounds values" in line)
    first_row = next(
        i
        for i, line in enumerate(lines)
        if re.match(r"^(\[\d+,\d+\]<stdout>:|\s*\d+:)?\s*\d+\s+\d+\s+\w", line)
    )
    for cut in range(first_row, footer):
        runs = parse_nccl_tests("\n".join(lines[:cut])).runs
        assert runs and not any(r.complete for r in runs)


#: launcher prefixes (Ray/job launcher, Open MPI tag, srun -l, log collector timestamp, MPICH -l, coloured Ray)
PREFIXES = [
    "(train, rank=3, pid=77) ",
    "[1,3]<stdout>:",
    "3: ",
    "2024-05-01T10:00:00.123Z: ",
    "[3] ",
    "\x1b[36m(RayTrainWorker pid=77, ip=10.0.0.5)\x1b[0m ",
]


@settings(FUZZ, max_examples=40)
@given(st.sampled_from(TEXT_ONLY), st.lists(st.sampled_from(PREFIXES), min_size=1, max_size=4))
def test_stacked_launcher_prefixes_do_not_change_the_result(text: str, stack: list[str]) -> None:
    """Every line of a capture behind the same stack of launcher prefixes, in any order: same runs, same
    error lines, same NCCL facts."""
    prefix = "".join(stack)
    stacked = "\n".join(prefix + line for line in text.splitlines())
    try:
        before = parse_nccl_tests(text)
    except ParseError:
        with pytest.raises(ParseError):
            parse_nccl_tests(stacked)
    else:
        after = parse_nccl_tests(stacked)
        assert _summary(stacked) == _summary(text)
        assert after.errors == before.errors
    try:
        log = parse_nccl_log(text)
    except ParseError:
        return
    assert parse_nccl_log(stacked) == log


def test_every_pattern_is_linear_on_a_1mb_hostile_line() -> None:
    """Issue 21, item 1: no pattern of the nccl-tests parser may be super-linear in line length (one 120 KB line
    cost 24 s of CPU before ``_FRAME_RE`` and ``_PERF_RE`` were bounded). Each pattern meets 1 MB lines built to
    make a backtracking pattern retry from every position; the bound (2 s of CPU each) is far above a linear
    pattern's cost (well under 1 s here) and far below a quadratic one's (minutes)."""
    import re
    import time

    from fleetdx.probes.parsers import nccl_tests

    hostile = [
        "a" * 1_000_000,
        "a(" * 500_000,
        "_" * 1_000_000,
        "_" * 999_995 + "_perf",
        "[0x" * 333_333,
        "NCCL_A=" * 142_857,
        "mpirun " + "-n " * 333_333,
        "(a" * 500_000 + ")",
        " 1 " * 333_333,
    ]
    patterns = [v for v in vars(nccl_tests).values() if isinstance(v, re.Pattern)]
    groups = [v for v in vars(nccl_tests).values() if isinstance(v, (list, tuple))]
    patterns += [p for g in groups for p in g if isinstance(p, re.Pattern)]
    assert len(patterns) > 20
    for p in patterns:
        for line in hostile:
            t = time.process_time()
            p.search(line)
            spent = time.process_time() - t
            assert spent < 2.0, (p.pattern, line[:12], spent)
