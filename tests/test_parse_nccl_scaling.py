"""The nccl-tests text parser is linear in rows (issue 21, item 1).

Pasted or filtered output whose sweep restarts (``-N``, ``-d all``) reads, without a column header, as one more
process's table per restart; the parser used to scan every open table for each row (and note each line into
each of them), so 4 MiB took over a minute. The work is measured as the number of Python line events the parse
runs (deterministic, unlike CPU time on a loaded machine): 4 times the rows must cost about 4 times the lines,
not 8 to 16 times. The indexed choice of a row's table is checked against the plain rule it replaces.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.probes.parsers import nccl_tests as nt
from fleetdx.probes.parsers.nccl_tests import Row, Timing, parse_nccl_tests

SWEEP = Path(__file__).parent / "fixtures" / "nccl" / "all_reduce_perf_-b8_-e512M_-f2_-g1.txt"


def _restarted(n_bytes: int, header: bool) -> str:
    lines = SWEEP.read_text().splitlines()
    rows = [line for line in lines if line.strip()[:1].isdigit()]
    out = list(lines[:10]) if header else []
    while sum(len(line) + 1 for line in out) < n_bytes:
        out.extend(rows)
    return "\n".join(out) + "\n"


def _line_events(text: str) -> int:
    count = 0

    def trace(frame: object, event: str, arg: object) -> object:
        nonlocal count
        count += event == "line"
        return trace

    old = sys.gettrace()
    sys.settrace(trace)  # type: ignore[arg-type]
    try:
        parse_nccl_tests(text)
    finally:
        sys.settrace(old)
    return count


def test_headerless_restarted_sweep_is_linear_in_rows() -> None:
    small, large = _restarted(128 << 10, header=False), _restarted(512 << 10, header=False)
    report = parse_nccl_tests(large)
    assert len(report.runs) > 100  # the shape that used to be quadratic: one open table per restart
    ratio = _line_events(large) / _line_events(small)
    assert ratio < 5.0, f"4x the rows cost {ratio:.1f}x the work (before the fix: 8.3x)"


def test_headed_restarted_sweep_is_linear_in_rows() -> None:
    ratio = _line_events(_restarted(512 << 10, header=True)) / _line_events(_restarted(128 << 10, header=True))
    assert ratio < 5.0


def test_restarted_sweep_keeps_its_rows_and_last_lines() -> None:
    text = _restarted(64 << 10, header=False)
    report = parse_nccl_tests(text)
    rows = [line for line in text.splitlines() if line.strip()]
    assert sum(len(r.rows) for r in report.runs) == len(rows)
    assert all(r.headerless and not r.complete for r in report.runs)
    # the hang evidence of the last table: its own last 8 lines, as the parser cleans them
    assert [line.split() for line in report.runs[-1].last_lines] == [line.split() for line in rows[-8:]]
    assert [line.split() for line in report.runs[0].last_lines] == [line.split() for line in rows[19:27]]


def _row(size: int, dtype: str) -> Row:
    side = Timing(time_us=1.0, algbw_gbps=1.0, busbw_gbps=1.0)
    return Row(size=size, count=1, type=dtype, redop="sum", root=-1, out_of_place=side, in_place=side)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.booleans()),
        st.tuples(st.just("row"), st.integers(0, 40), st.sampled_from(["float", "half"]), st.integers(0, 30)),
        st.tuples(st.just("close"), st.integers(0, 30)),
        st.tuples(st.just("ask"), st.sampled_from([0, 1, 2, 3, 8, 16, 17, 40, 41]), st.sampled_from(["float", "half"])),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(OPS)
def test_indexed_owner_is_the_rule(ops: list[tuple[object, ...]]) -> None:
    """_Tables.owner picks the table the plain scan (_row_owner over the open tables) picks, whatever the
    history of opens, rows (sizes 0 and 1 included: size / 0 reads as size / 1) and closes."""
    tables = nt._Tables()
    made: list[nt._Builder] = []
    layout = nt._Layout(True, True, [["time"], ["time"]], False)
    for op in ops:
        live = [b for b in made if not b.closed]
        if op[0] == "open":
            b = nt._Builder(group=0, collective=None, launcher_np=None, nccl_tests_version=None, nccl_version=None)
            b.seq, b.layout, b.headerless = len(made), layout, bool(op[1])
            made.append(b)
            tables.add(b)
        elif op[0] == "row" and live:
            b = live[int(op[3]) % len(live)]  # type: ignore[call-overload]
            b.rows.append(_row(int(op[1]), str(op[2])))  # type: ignore[call-overload]
            tables.took_row(b)
        elif op[0] == "close" and live:
            b = live[int(op[1]) % len(live)]  # type: ignore[call-overload]
            b.closed = True
            tables.closed(b)
        elif op[0] == "ask":
            size, dtype = int(op[1]), str(op[2])  # type: ignore[call-overload]
            want = nt._row_owner(live, size, dtype) if live else None
            assert tables.owner(size, dtype) is want
