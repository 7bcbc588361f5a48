"""The streaming Kineto trace parser on real traces (HTA's published A100 test data, and CPU gloo traces
captured on the dev machine), on broken input, and under hypothesis fuzzing.

Expected counts were read from the files (``zcat FILE | python -m json.tool``, counting ``cat`` values)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.steps.load import load_trace as read_kineto
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.kineto import GpuKind, Marker, gpu_kind, parse_kineto_bytes
from fleetdx.probes.rawfile import RawFileError

FIX = Path(__file__).parent / "fixtures" / "traces"
NCCL2 = FIX / "hta-a100-2rank-nccl" / "rank-0.json.gz"
A16 = FIX / "hta-a100-16rank" / "rank-0.json.gz"
S128 = FIX / "hta-sampled-128rank" / "rank-1.json.gz"


def test_distributed_info_steps_and_gpu_activities_of_a_real_a100_trace() -> None:
    t = read_kineto(NCCL2)
    assert (t.rank, t.world_size, t.backend) == (0, 2, "nccl")
    assert [s.number for s in t.steps] == [4, 5, 6]
    assert len(t.gpu) == 2700 + 960 + 114  # kernel + gpu_memcpy + gpu_memset events
    kinds = Counter(GpuKind(k) for k in t.gpu.kind)
    assert kinds[GpuKind.MEMSET] == 114
    assert sum(kinds[k] for k in GpuKind if k.is_memory) == 960 + 114
    assert kinds[GpuKind.COMM] > 0  # ncclKernel_AllReduce_..., ncclKernel_Broadcast_...
    assert len(t.launches) == 8740  # every cuda_runtime event carries a correlation id
    assert len(t.cpu_ops) == 14346
    assert len(t.markers[Marker.OPTIMIZER]) == 9  # Optimizer.step#SGD.step, zero_grad x3, "## optimizer ##" x3
    assert len(t.markers[Marker.COMM]) == 21  # nccl:all_reduce x15, nccl:broadcast x6
    assert t.skipped == 0


def test_a_rank_of_the_128_rank_job_and_the_16_rank_one() -> None:
    t = read_kineto(S128)
    assert (t.rank, t.world_size) == (1, 128)
    assert len(t.steps) == 2
    t16 = read_kineto(A16)
    assert (t16.rank, t16.world_size) == (0, 16)
    assert [s.number for s in t16.steps] == [550, 551, 552, 553, 554]
    assert Counter(GpuKind(k) for k in t16.gpu.kind)[GpuKind.MEMCPY_HTOD] > 0


def test_a_cpu_gloo_trace_has_steps_markers_and_no_gpu() -> None:
    t = read_kineto(FIX / "cpu-gloo-clean" / "rank-2.json.gz")
    assert (t.rank, t.world_size, t.backend) == (2, 4, "gloo")
    assert not t.has_gpu and len(t.launches) == 0
    assert len(t.steps) == 12
    assert len(t.markers[Marker.DATA]) == 12  # one DataLoader __next__ per step
    assert len(t.markers[Marker.COMM]) > 0  # gloo:all_reduce on gloo's worker threads


def test_plain_json_and_gzip_read_alike(tmp_path: Path) -> None:
    plain = tmp_path / "rank-1.json"
    plain.write_bytes(gzip.decompress(S128.read_bytes()))
    a, b = read_kineto(plain), read_kineto(S128)
    assert (a.rank, len(a.gpu), len(a.cpu_ops), list(a.gpu.ts)) == (b.rank, len(b.gpu), len(b.cpu_ops), list(b.gpu.ts))


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_any_chunk_size_reads_the_same(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Items, numbers and separators cut at every possible place by the buffer end read the same."""
    import fleetdx.probes.parsers.kineto as kineto

    whole = read_kineto(S128)
    monkeypatch.setattr(kineto, "_CHUNK_CHARS", chunk)
    cut = read_kineto(S128)
    assert (cut.rank, cut.world_size, cut.events, cut.skipped) == (whole.rank, whole.world_size, whole.events, 0)
    assert list(cut.gpu.ts) == list(whole.gpu.ts) and list(cut.cpu_ops.dur) == list(whole.cpu_ops.dur)
    assert [s.number for s in cut.steps] == [s.number for s in whole.steps]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", GpuKind.COMM),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", GpuKind.COMM),
        ("Memcpy HtoD (Pinned -> Device)", GpuKind.MEMCPY_HTOD),
        ("Memcpy DtoH (Device -> Pageable)", GpuKind.MEMCPY_DTOH),
        ("Memcpy DtoD (Device -> Device)", GpuKind.MEMCPY_DTOD),
        ("Memset (Device)", GpuKind.MEMSET),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", GpuKind.COMPUTE),
        ("cudaDeviceSync", GpuKind.OTHER),
    ],
)
def test_gpu_kinds_follow_hta(name: str, kind: GpuKind) -> None:
    assert gpu_kind(name) is kind


def test_events_without_numbers_are_counted_as_skipped() -> None:
    doc = {
        "distributedInfo": {"rank": "x", "world_size": 4},
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1},
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": -2},
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2, "args": {"stream": 7}},
            {"ph": "f", "id": 1},
            [1, 2],
        ],
    }
    t = parse_kineto_bytes(json.dumps(doc).encode())
    assert (t.rank, t.world_size, t.skipped, len(t.gpu), t.events) == (None, 4, 2, 1, 5)
    assert list(t.gpu.stream) == [7] and list(t.gpu.correlation) == [-1]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"traceEvents": []}',
        b'{"traceEvents": [{"ph": "X"',
        b"\x1f\x8b\x08\x00garbage",
        gzip.compress(b'{"traceEvents": [', mtime=0)[:-3],  # mtime=0: the same id in every xdist worker
        b"\xff\xfe\x00",
        b'{"schemaVersion": 1}',
    ],
)
def test_broken_input_is_one_parse_error(data: bytes) -> None:
    with pytest.raises(ParseError):
        parse_kineto_bytes(data)


def test_max_events_bounds_what_is_kept() -> None:
    with pytest.raises(ParseError, match="at most 100 kept events"):
        read_kineto(S128, max_events=100)


def test_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(RawFileError):
        read_kineto(tmp_path)
    with pytest.raises(RawFileError):
        read_kineto(tmp_path / "missing.json.gz")


FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
#: the head of a real trace (first 40 kB of the decompressed JSON) as the corpus to mutate
HEAD = gzip.decompress(S128.read_bytes())[:40_000]


def _parse_or_error(data: bytes) -> None:
    try:
        parse_kineto_bytes(data)
    except ParseError:
        pass


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(HEAD)))
def test_fuzz_truncated_real_trace(cut: int) -> None:
    _parse_or_error(HEAD[:cut])
    _parse_or_error(gzip.compress(HEAD)[: cut // 4])


@FUZZ
@given(pos=st.integers(min_value=0, max_value=len(HEAD) - 1), junk=st.binary(min_size=1, max_size=8))
def test_fuzz_bytes_flipped_in_a_real_trace(pos: int, junk: bytes) -> None:
    _parse_or_error(HEAD[:pos] + junk + HEAD[pos + len(junk) :])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=12,
)
_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "M", "f", "i", 3]),
        "cat": st.sampled_from(["kernel", "gpu_memcpy", "cpu_op", "cuda_runtime", "user_annotation", None]),
        "name": st.sampled_from(["ProfilerStep#3", "ProfilerStep#x", "nccl:all_reduce", "Memcpy HtoD", "k", 5]),
        "ts": _json,
        "dur": _json,
        "tid": _json,
        "args": _json,
    }
)


@FUZZ
@given(events=st.lists(_event, max_size=20), info=_json)
def test_fuzz_structured_events(events: list[object], info: object) -> None:
    doc = {"distributedInfo": info, "traceEvents": events}
    _parse_or_error(json.dumps(doc, allow_nan=True).encode())
