"""The log scanners' fast paths read exactly as their line-by-line paths: the block reader of job logs
(``_LineReader.blocks``), the kernel scanner's block gate (``KernelLogScanner.feed_lines``), the job scanner's
per-rest plans of launcher-prefixed lines (``_plan_of``, ``JobLogScanner._saturated``) and the one-pass block
prefilter (``Literals.lines_holding``). Each is compared with the plain path on real fixture logs (and, for the
caps, a log SYNTHESISED from their lines behind made-up rank prefixes) and on edge cases."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.postmortem import sources
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers import joblog, joblog_kernel
from fleetdx.probes.parsers.joblog import EventKind, JobLogScanner
from fleetdx.probes.parsers.joblog_kernel import KernelLogScanner
from fleetdx.probes.parsers.literals import Literals
from fleetdx.probes.parsers.logline import prefix_crossings
from fleetdx.probes.parsers.xid import parse_xid, xid_line_keys

FIXTURES = Path(__file__).parent / "fixtures"
LOG_DIRS = ("joblogs", "joblogs_catalog", "joblogs_wild", "kmsg")


def _logs() -> list[Path]:
    return sorted(p for d in LOG_DIRS for p in (FIXTURES / d).iterdir() if p.suffix in (".log", ".kmsg", ".txt"))


def _lines(path: Path) -> list[str]:
    return list(sources._LineReader(path))


def _reference_reader(path: Path, max_line: int) -> Iterator[str]:
    """The reader's specification, line by line: each line without its newline, cut at ``max_line`` bytes (the
    rest of a longer line skipped), decoded as UTF-8 with bad bytes replaced."""
    with open(path, "rb") as f:
        while raw := f.readline(max_line):
            if len(raw) == max_line and not raw.endswith(b"\n"):
                while (rest := f.readline(max_line)) and not rest.endswith(b"\n"):
                    pass
            yield raw.decode("utf-8", errors="replace").removesuffix("\n")


def test_the_fixture_logs_are_there() -> None:
    assert len(_logs()) > 100


# ------------------------------------------------------------------------------------------------- reader

_EDGES = [
    b"",
    b"no newline at all",
    b"a\nb\n",
    b"a\r\nb\r\n\n\n",
    b"x" * 15 + b"\n" + b"y" * 16 + b"\n" + b"z" * 17 + b"\nshort\n",  # a MAX_LINE of 16: under, at, over
    b"w" * 100 + b"\nafter a long line\n" + b"v" * 40,  # a long last line without its newline
    "é€😀 bytes split across reads\n".encode() * 3 + b"\xff\xfe bad bytes\n",
    b"\n" * 20,
]


#: pieces of SYNTHESISED logs: literal parts, bad and cut UTF-8 around them, newlines
_BYTES = [
    b"NVRM",
    b"Xid",
    "é€".encode(),
    "😀 b".encode(),
    b"\xe2",
    b"\x82",
    b"\xff",
    b"\xc3",
    b"ut ",
    b"of",
    b"\t",
    b"\n",
    b"a",
]


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("data", _EDGES)
def test_the_block_reader_reads_as_the_line_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, block: int
) -> None:
    path = tmp_path / "log"
    path.write_bytes(data)
    monkeypatch.setattr(sources, "MAX_LINE", 16)
    monkeypatch.setattr(sources, "BLOCK_BYTES", block)
    assert _lines(path) == list(_reference_reader(path, 16))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), block=st.integers(1, 40))
def test_the_block_reader_reads_any_bytes_as_the_line_reader(tmp_path: Path, data: bytes, block: int) -> None:
    path = tmp_path / "hyp.log"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "MAX_LINE", 16)
        mp.setattr(sources, "BLOCK_BYTES", block)
        assert _lines(path) == list(_reference_reader(path, 16))


def test_the_block_reader_reads_the_fixture_logs_as_the_line_reader() -> None:
    for path in _logs():
        assert _lines(path) == list(_reference_reader(path, sources.MAX_LINE)), path.name


# ----------------------------------------------------------------------------------------- block prefilter

_LITS = Literals(["NVRM", "ut of memory", "état", "😀", "AER"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("NVRMAEut ofmemoryé😀ta\n\x00x")), max_size=30), max_size=12))
def test_lines_holding_are_the_lines_any_in_finds(lines: list[str]) -> None:
    assert _LITS.lines_holding(lines) == [i for i, line in enumerate(lines) if _LITS.any_in(line)]


def test_lines_holding_on_the_fixture_lines() -> None:
    gate = Literals(list(joblog._RAW_GATE.literals))
    for path in _logs():
        lines = _lines(path)
        assert gate.lines_holding(lines) == [i for i, line in enumerate(lines) if gate.any_in(line)], path.name


_READ_LITERALS = Literals(["NVRM", "Xid", "é€", "😀 b", "ut of", "\t", "a"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400) | st.lists(st.sampled_from(_BYTES), max_size=40).map(b"".join))
def test_lines_holding_reads_a_block_as_read_as_its_lines(tmp_path: Path, data: bytes) -> None:
    # the reader's bytes of a block (bad UTF-8 included) find the same lines as the decoded lines encoded again
    path = tmp_path / "hyp.log"
    path.write_bytes(data)
    for lines, read in sources._LineReader(path).blocks_read():
        assert _READ_LITERALS.lines_holding(lines, read) == _READ_LITERALS.lines_holding(lines)
        assert [i for i, line in enumerate(lines) if _READ_LITERALS.any_in(line)] == _READ_LITERALS.lines_holding(
            lines, read
        )


def test_the_kernel_scanner_reads_a_block_as_read_as_its_lines() -> None:
    for path in _logs():
        try:
            want = _kernel_by_line(_lines(path)).result()
        except ParseError:
            continue  # the block path's error is test_a_nul_in_a_block_names_its_line's
        by_read = KernelLogScanner("k", year=2024)
        for lines, read in sources._LineReader(path).blocks_read():
            by_read.feed_lines(lines, read)
        assert by_read.result() == want, path.name


def test_a_literal_with_a_newline_is_refused() -> None:
    with pytest.raises(ValueError, match="newline"):
        Literals(["a\nb"])


# --------------------------------------------------------------------------------------- kernel block gate


def _kernel_by_line(lines: list[str]) -> KernelLogScanner:
    k = KernelLogScanner("k", year=2024)
    for line in lines:
        k.feed(line)
    return k


def _kernel_by_block(lines: list[str], size: int) -> KernelLogScanner:
    k = KernelLogScanner("k", year=2024)
    for i in range(0, len(lines), size):
        k.feed_lines(lines[i : i + size])
    return k


@pytest.mark.parametrize("size", [1, 3, 50, 100_000])
def test_the_kernel_block_gate_reads_as_line_by_line(size: int) -> None:
    kernel_events = 0
    for path in _logs():
        lines = _lines(path)
        try:
            want = _kernel_by_line(lines).result()
        except ParseError as e:
            with pytest.raises(ParseError, match=str(e.args[0])[:20]):
                _kernel_by_block(lines, size).result()
            continue
        got = _kernel_by_block(lines, size).result()
        assert got == want, path.name
        kernel_events += len(got.events)
    assert kernel_events > 20  # the fixtures hold XIDs, AER, IB link lines: the comparison saw events


def test_a_capped_xid_line_is_dropped_as_its_parse_would_drop_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel scanner drops a one-line XID message over its cap by xid_key, without parse_xid: the same
    # events and counts as parsing every one (the fixture logs, and a SYNTHESISED dense log whose caps fill)
    logs = [_lines(path) for path in _logs()] + [_dense(ranks=2, repeat=40)]
    with monkeypatch.context() as mp:
        mp.setattr(joblog_kernel, "xid_line_keys", lambda lines: None)
        want = [_kernel_result(lines) for lines in logs]
    parsed: list[str] = []
    with monkeypatch.context() as mp:
        mp.setattr(joblog_kernel, "parse_xid", lambda text: parsed.append(text) or parse_xid(text))
        got = [_kernel_result(lines) for lines in logs[:-1]]
        before_dense = len(parsed)
        got.append(_kernel_result(logs[-1]))
    assert got == want
    dense = got[-1]
    assert isinstance(dense, joblog.JobLog) and dense.events_dropped > 100
    assert sum(e.kind is EventKind.XID for e in dense.events) > 10
    dense_xid_lines = sum("NVRM: Xid" in line for line in logs[-1])
    assert len(parsed) - before_dense < dense_xid_lines / 2  # the dense log's capped ones were not parsed


def _kernel_result(lines: list[str]) -> joblog.JobLog | str:
    try:
        return _kernel_by_block(lines, 1000).result()
    except ParseError as e:
        return str(e)


def test_xid_line_keys_are_what_parse_xid_reads_in_the_lines() -> None:
    seen = 0
    for path in _logs():
        nvrm = [line for line in _lines(path) if "NVRM:" in line]
        for i in range(0, len(nvrm), 7):
            chunk = nvrm[i : i + 7]
            keys = xid_line_keys(chunk)
            try:
                whole = parse_xid("\n".join(chunk))
            except ParseError:
                assert keys is None, chunk
                continue
            if keys is None:
                continue
            seen += sum(k is not None for k in keys)
            # the XID lines, and what the lines between them say read apart, are the parse of the whole
            assert [(x.code, x.pci) for x in whole.events] == [k for k in keys if k is not None]
            runs, start = [], 0
            for j, k in enumerate(keys + [(0, "end")]):
                if k is not None:
                    runs.append((start, chunk[start:j]))
                    start = j + 1
            apart = [
                (d.kind, d.line + at, d.raw) for at, run in runs if run for d in parse_xid("\n".join(run)).driver_events
            ]
            assert apart == [(d.kind, d.line, d.raw) for d in whole.driver_events]
    assert seen > 20
    two = "NVRM: Xid (PCI:0000:3b:00): 79, a\x0cNVRM: Xid (PCI:0000:3c:00): 48"  # two lines to splitlines
    assert xid_line_keys([two]) is None and xid_line_keys(["NVRM: Xid (PCI:0000:3b:00): 79, \ufffd"]) is None
    assert xid_line_keys(["NVRM: Xid (PCI:0000:3b:00) garbled"]) is None  # parse_xid says what is wrong
    assert xid_line_keys(["NVRM: GPU at PCI:0000:3b:00: GPU-1", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1"]) == [
        None,
        (79, "0000:3b:00"),
    ]


@pytest.mark.parametrize("size", [1, 2, 100])
@pytest.mark.parametrize("as_read", [False, True])
def test_a_garbled_xid_line_stops_the_block_gate_on_the_line_feed_stops_on(size: int, as_read: bool) -> None:
    # the held NVRM line is judged when the next line (no gate literal) is read: the error counts that line, as
    # feed does (the postmortem's note says "kernel-log lines not read after line N")
    lines = ["filler"] * 3 + ["NVRM: Xid (PCI:0000:3b:00): notanumber", "after", "more"]
    by_line = KernelLogScanner("k", year=2024)
    with pytest.raises(ParseError):
        for line in lines:
            by_line.feed(line)
    by_block = KernelLogScanner("k", year=2024)
    with pytest.raises(ParseError):
        for i in range(0, len(lines), size):
            block = lines[i : i + size]
            by_block.feed_lines(block, "\n".join(block).encode() if as_read else None)
    assert by_block.lines == by_line.lines == 5


def test_aer_error_bits_are_read_after_their_aer_line_in_a_block() -> None:
    aer = [
        "[ 10.000001] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: 0000:00:02.0\n",
        "unrelated line\n",
        "[ 10.000002] pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)\n",
        "[ 10.000003] pcieport 0000:00:03.0:    [ 6] Another device's bit\n",
    ]
    lines = ["filler\n"] * 5 + aer + ["filler\n"] * 5
    got = _kernel_by_block(lines, 100).result()
    assert got == _kernel_by_line(lines).result()
    assert [e.details.get("bit") for e in got.events] == [None, 5]
    assert got.lines_read == len(lines)


def test_a_nul_in_a_block_names_its_line() -> None:
    lines = ["ok\n", "NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.\n", "bin\x00ary\n", "ok\n"]
    with pytest.raises(ParseError) as by_block:
        _kernel_by_block(lines, 10)
    with pytest.raises(ParseError) as by_line:
        _kernel_by_line(lines)
    assert str(by_block.value) == str(by_line.value)


# ------------------------------------------------------------------------------- job scanner's rest plans


def _job(lines: list[str], plans: bool, monkeypatch: pytest.MonkeyPatch) -> joblog.JobLog:
    with monkeypatch.context() as mp:
        if not plans:
            mp.setattr(joblog, "_plan_of", lambda rest: None)
        scanner = JobLogScanner("j", 2024)
        for line in lines:
            scanner.feed(line)
        return scanner.result()


def _dense(ranks: int, repeat: int) -> list[str]:
    """SYNTHESISED: the fixture logs' lines in turn, each behind the ``[rankN]:`` or ``srun -l`` ``N: `` prefix of
    the next of ``ranks`` ranks (few ranks: the per-key caps fill, and most lines are then dropped)."""
    fixture = [
        line
        for d in ("joblogs", "joblogs_catalog")
        for p in sorted((FIXTURES / d).glob("*.log"))
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    ]
    out = []
    for n, line in enumerate(fixture * repeat):
        r = n % ranks
        out.append(f"[rank{r}]:{line}\n" if r % 2 == 0 else f"{r}: {line}\n")
    return out


def test_the_rest_plans_read_an_event_dense_log_as_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _dense(ranks=2, repeat=40)
    fast = _job(lines, True, monkeypatch)
    assert fast == _job(lines, False, monkeypatch)
    assert fast.events_dropped > len(fast.events) > 100  # caps filled: the saturated path was taken


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_rest_plans_read_a_shuffled_event_dense_log_as_line_by_line(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # SYNTHESISED: the lines of _dense in a random order, as a 1,024-rank job's interleaving gives them: a
    # ChildFailedError summary's lines ("Root Cause", "[0]:", its fields, its frames) are then scattered among
    # events, and the summary stays open across them
    lines = _dense(ranks=4, repeat=30)
    random.Random(seed).shuffle(lines)
    fast = _job(lines, True, monkeypatch)
    assert fast == _job(lines, False, monkeypatch)
    assert fast.events_dropped > 1000 and len(fast.events) > 1000
    assert any(e.kind is EventKind.CHILD_FAILED for e in fast.events)


class _BuildsEveryChildEvent(JobLogScanner):
    """The scanner as it was: each ChildFailedError entry's event built, then judged by the caps (_keep)."""

    built = 0

    def _end_block(self) -> None:
        b, self._block = self._block, None
        if b is not None and (place := joblog._child_place(b)) is not None:
            _BuildsEveryChildEvent.built += 1
            self._keep(joblog._child_event(b, place, self.file, self.year))


def test_a_capped_child_failed_entry_is_dropped_before_its_event_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _dense(ranks=2, repeat=40)
    lines += [f"[rank{n % 2}]:{line}" for n, line in enumerate(lines)]  # the summaries again: their caps are full
    old = _BuildsEveryChildEvent("j", 2024)
    for line in lines:
        old.feed(line)
    built: list[int] = []
    real = joblog._child_event
    monkeypatch.setattr(joblog, "_child_event", lambda *a: built.append(1) or real(*a))
    new = JobLogScanner("j", 2024)
    for line in lines:
        new.feed(line)
    assert new.result() == old.result()
    assert len(built) < _BuildsEveryChildEvent.built / 2  # the capped ones were not built


def test_the_rest_plans_read_the_fixture_logs_as_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for path in _logs():
        lines = _lines(path)
        try:
            want = _job(lines, False, monkeypatch)
        except ParseError:
            continue
        assert _job(lines, True, monkeypatch) == want, path.name


def test_a_literal_crossing_a_prefix_is_found() -> None:
    # " CANCELLED AT " begins in srun -l's "3: " and ends in the rest: such rests are gated whole
    assert "CANCELLED AT " in prefix_crossings([" CANCELLED AT "])
    assert "CANCELLED AT " in joblog._REST_CROSSINGS
    assert joblog._plan_of("CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***") is None


def test_a_literal_inside_a_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="inside"):
        prefix_crossings(["]:"])


def test_lines_read_without_their_newline_give_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    # the block reader gives lines without their newlines; callers that stream a file object give them with
    for path in _logs():
        text = path.read_bytes().decode("utf-8", errors="replace")
        with_nl, without = text.splitlines(keepends=True), text.splitlines()
        try:
            want = _job(with_nl, True, monkeypatch)
        except ParseError:
            continue
        assert _job(without, True, monkeypatch) == want, path.name
        assert _kernel_by_line(without).result() == _kernel_by_line(with_nl).result(), path.name
