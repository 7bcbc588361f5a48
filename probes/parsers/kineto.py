"""Streaming parser for PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip: one file per rank.

The trace is streamed: the top-level object is walked by hand and each item of ``traceEvents`` is decoded on its
own by the standard library's C JSON decoder (``json.JSONDecoder.raw_decode``; about 2.5x faster here than
``ijson``'s C backend, which builds the same dicts), then classified and reduced to a few numbers in compact
``array`` columns, so a trace of hundreds of MB never becomes a tree of Python objects (the text buffer holds
one 1 MB chunk plus the event being read). Memory is bounded by ``max_events`` kept events (about 50 bytes
each); past it the parser stops with a :class:`ParseError` saying so.

What is read (names as torch.profiler / Kineto write them; the sources are the PyTorch files named):

* ``distributedInfo`` (``torch/profiler/profiler.py`` ``_get_distributed_info``): ``rank``, ``world_size``,
  ``backend``; ``host_name`` (top level, written by newer torch; older traces name no host);
* ``ProfilerStep#N`` (``torch/profiler/profiler.py``, ``record_function("ProfilerStep#" + step)``): the steps;
* CPU stage markers (:class:`Marker`): ``enumerate(DataLoader)#...__next__`` (``torch/utils/data/
  dataloader.py`` ``_BaseDataLoaderIter._profile_name``), ``Optimizer.step#<Cls>.step`` and
  ``Optimizer.zero_grad#<Cls>.zero_grad`` (``torch/optim/optimizer.py``), ``autograd::engine::
  evaluate_function: ...`` (``torch/csrc/autograd/engine.cpp``), ``DistributedDataParallel.forward``
  (``torch/nn/parallel/distributed.py``), ``FullyShardedDataParallel.forward``, HTA-style user annotations
  ``## forward ##`` / ``## backward ##`` / ``## optimizer ##``, and the process-group record functions
  ``nccl:<collective>`` / ``gloo:<collective>`` (``torch/csrc/distributed/c10d``: ``RECORD_PARAM_COMMS``);
* every ``cpu_op`` (start, duration, thread) for op counts on CPU-only traces;
* ``cuda_runtime``/``cuda_driver`` calls with a ``correlation`` id (kernel launches, memcpy calls);
* GPU activities: ``kernel``, ``gpu_memcpy``, ``gpu_memset`` with ``args.stream``, ``args.correlation`` and
  ``args.bytes``, classified by :func:`gpu_kind` exactly as HolisticTraceAnalysis classifies kernels
  (``hta/utils/utils.py``: ``^nccl.*Kernel`` is communication, ``^Memcpy|^Memset|^dma`` memory, a name not
  matching ``^nccl.*Kernel|.*Memcpy|Memset|.*Sync`` computation, anything else other); each activity's name
  (as an index into ``GpuActivities.names``) and a kernel's ``args["est. achieved occupancy %"]`` (Kineto's
  estimate from the launch configuration: ``libkineto/src/output_json.cpp``);
* ``deviceProperties`` (top level, Kineto ``libkineto/src/CuptiActivityProfiler.cpp`` ``devicePropertiesJson``):
  the CUDA device names; ``with_flops`` (top level, ``torch/profiler/profiler.py``: metadata ``"1"`` when the
  profiler ran with ``with_flops=True``);
* FLOPs of CPU ops (:class:`FlopOps`): ``args.flops`` where the trace carries it, else, for the matrix
  multiplications ``aten::mm``/``aten::addmm``/``aten::bmm``/``aten::baddbmm`` with ``args["Input Dims"]``
  (``record_shapes=True``; ``with_flops=True`` implies it), the formula torch's profiler uses
  (``torch/csrc/profiler/util.cpp`` ``computeFlops``: ``2 x M x K x N``, times the batch for ``bmm``). torch
  2.13 computes ``flops`` per op in memory but does not write it into the exported Chrome trace (checked on a
  ``with_flops=True`` capture: only the top-level ``with_flops`` says it was asked), so the shapes are what a
  real trace offers; convolutions and elementwise ops are then not counted.

Events of other phases (flows ``s``/``f``, metadata ``M``, instants, counters) are
skipped; ``X`` events without a finite numeric ``ts``/``dur`` are counted in ``skipped``.

The parser is pure: it reads a binary stream the caller opened (``fleetdx.orchestrator.steps.load`` opens
files under the raw-file rules).

Errors: :class:`fleetdx.probes.errors.ParseError` (format ``"kineto"``) for unreadable gzip, malformed JSON,
a top level that is not an object, no ``traceEvents`` array, or more than ``max_events`` kept events.
Timestamps are microseconds as in the trace (Chrome trace format); durations too.
"""

from __future__ import annotations

import gzip
import io
import json
import json.scanner
import math
import re
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import IO, Any, cast

from fleetdx.probes.errors import ParseError

FMT = "kineto"
#: default most kept events (about 50 bytes each in the columns: 2.5 GB at worst); raise it for bigger traces
DEFAULT_MAX_EVENTS = 50_000_000


class Marker(IntEnum):
    """CPU spans that mark a stage of a training step (see the module docstring for each name's source)."""

    DATA = 0
    FORWARD = 1
    BACKWARD = 2
    OPTIMIZER = 3
    COMM = 4  #: ``nccl:*`` / ``gloo:*`` process-group record functions (any thread)


class GpuKind(IntEnum):
    """The class of one GPU activity. HTA's three kinds: COMPUTE = computation, COMM = communication, the
    memory kinds = memory (``hta.utils.utils.get_kernel_type``), OTHER = other."""

    COMPUTE = 0
    COMM = 1
    MEMCPY_HTOD = 2
    MEMCPY_DTOH = 3
    MEMCPY_DTOD = 4
    MEMCPY_OTHER = 5
    MEMSET = 6
    OTHER = 7

    @property
    def is_memory(self) -> bool:
        return GpuKind.MEMCPY_HTOD <= self <= GpuKind.MEMSET


_NCCL_KERNEL_RE = re.compile(r"^nccl.*Kernel")
_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
_STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
_COMM_RE = re.compile(r"^(?:nccl|gloo|mpi|ucc):[A-Za-z_]")


def gpu_kind(name: str) -> GpuKind:
    """Classify a GPU activity by name, as ``hta.utils.utils.get_kernel_type`` does, memory split by copy
    direction (``Memcpy HtoD (Pinned -> Device)`` -> MEMCPY_HTOD)."""
    if _NCCL_KERNEL_RE.match(name):
        return GpuKind.COMM
    if _MEMORY_RE.match(name):
        if name.startswith("Memset"):
            return GpuKind.MEMSET
        head = name[:11]
        if head == "Memcpy HtoD":
            return GpuKind.MEMCPY_HTOD
        if head == "Memcpy DtoH":
            return GpuKind.MEMCPY_DTOH
        if head == "Memcpy DtoD":
            return GpuKind.MEMCPY_DTOD
        return GpuKind.MEMCPY_OTHER
    if not _NOT_COMPUTE_RE.match(name):
        return GpuKind.COMPUTE
    return GpuKind.OTHER


def marker_of(name: str, cat: str) -> Marker | None:
    """The stage marker a CPU span's name stands for, or ``None``."""
    if name.startswith("enumerate(DataLoader)#") and name.endswith("__next__"):
        return Marker.DATA
    if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")) or name == "## optimizer ##":
        return Marker.OPTIMIZER
    if name.startswith("autograd::engine::evaluate_function:") or name == "## backward ##":
        return Marker.BACKWARD
    if name in ("DistributedDataParallel.forward", "FullyShardedDataParallel.forward", "## forward ##"):
        return Marker.FORWARD
    if cat != "cpu_op" or name.startswith(("nccl:", "gloo:")):
        if _COMM_RE.match(name):
            return Marker.COMM
    return None


@dataclass
class Spans:
    """Intervals in columns: start (us), duration (us), thread id (an integer; a non-numeric tid is -1)."""

    ts: array[float] = field(default_factory=lambda: array("d"))
    dur: array[float] = field(default_factory=lambda: array("d"))
    tid: array[int] = field(default_factory=lambda: array("q"))

    def add(self, ts: float, dur: float, tid: int) -> None:
        self.ts.append(ts)
        self.dur.append(dur)
        self.tid.append(tid)

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class GpuActivities:
    """GPU kernels, memcpys and memsets in columns. ``stream``/``correlation`` are -1 when absent (HTA's
    default), ``bytes`` 0 for kernels; ``kind`` holds :class:`GpuKind` values."""

    ts: array[float] = field(default_factory=lambda: array("d"))
    dur: array[float] = field(default_factory=lambda: array("d"))
    stream: array[int] = field(default_factory=lambda: array("q"))
    correlation: array[int] = field(default_factory=lambda: array("q"))
    kind: array[int] = field(default_factory=lambda: array("b"))
    nbytes: array[int] = field(default_factory=lambda: array("q"))
    #: the activity's name, an index into ``names``
    name: array[int] = field(default_factory=lambda: array("l"))
    #: Kineto's ``est. achieved occupancy %`` of a kernel (0-100), -1 when absent
    occupancy: array[float] = field(default_factory=lambda: array("d"))
    names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class FlopOps:
    """CPU ops that carry FLOPs: start (us) and floating-point operations (``from_shapes`` 1 when computed from
    ``Input Dims``, 0 when the trace's ``args.flops``)."""

    ts: array[float] = field(default_factory=lambda: array("d"))
    flops: array[float] = field(default_factory=lambda: array("d"))
    from_shapes: array[int] = field(default_factory=lambda: array("b"))
    #: bytes a matmul from shapes reads and writes (:func:`matmul_bytes`), 0 when unknown
    nbytes: array[float] = field(default_factory=lambda: array("d"))

    def __len__(self) -> int:
        return len(self.ts)


#: matrix multiplications whose FLOPs are computed from their input shapes (``computeFlops`` in torch)
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})


def _dims(v: Any) -> list[int] | None:
    if type(v) is not list or not all(type(d) is int and 0 <= d < _INT_RANGE for d in v):
        return None
    return v


def matmul_flops(name: str, input_dims: Any) -> float | None:
    """The FLOPs of one matrix multiplication from its ``Input Dims`` (torch's ``computeFlops`` formulas:
    ``aten::mm(A[M,K], B[K,N])`` and ``aten::addmm(C, A[M,K], B[K,N])`` = 2MKN; ``aten::bmm(A[b,M,K], B[b,K,N])``
    and ``aten::baddbmm(C, A, B)`` = 2bMKN); ``None`` when the shapes do not fit the op."""
    if type(input_dims) is not list:
        return None
    first = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    if len(input_dims) < first + 2:
        return None
    a, b = _dims(input_dims[first]), _dims(input_dims[first + 1])
    if a is None or b is None:
        return None
    if name in ("aten::mm", "aten::addmm") and len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        return 2.0 * a[0] * a[1] * b[1]
    if name in ("aten::bmm", "aten::baddbmm") and len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        return 2.0 * a[0] * a[1] * a[2] * b[2]
    return None


#: bytes per element of the ``Input type`` names torch's profiler records (``c10::ScalarType`` names)
ELEMENT_BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
}


def matmul_bytes(name: str, input_dims: Any, input_types: Any) -> float | None:
    """The least bytes a matrix multiplication moves: its two operands read and its result written once
    (``(MK + KN + MN) x element size``, times the batch for ``bmm``; the bias of ``addmm`` left out), at the
    element size of its first operand's ``Input type``; ``None`` when the shapes or the type are unknown."""
    if matmul_flops(name, input_dims) is None or type(input_types) is not list:
        return None
    first = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    if len(input_types) <= first or input_types[first] not in ELEMENT_BYTES:
        return None
    size = ELEMENT_BYTES[input_types[first]]
    a, b = input_dims[first], input_dims[first + 1]
    batch = a[0] if len(a) == 3 else 1
    m, k, n = a[-2], a[-1], b[-1]
    return float(size * batch * (m * k + k * n + m * n))


@dataclass
class Launches:
    """CUDA runtime/driver calls that carry a correlation id (launches, memcpy calls): start, duration (us)."""

    correlation: array[int] = field(default_factory=lambda: array("q"))
    ts: array[float] = field(default_factory=lambda: array("d"))
    dur: array[float] = field(default_factory=lambda: array("d"))

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class ProfilerStep:
    """One ``ProfilerStep#N`` span on the CPU: step number, start and duration (us), thread."""

    number: int
    ts: float
    dur: float
    tid: int


@dataclass
class KinetoTrace:
    """What fleetdx keeps of one rank's trace. Times are microseconds on the trace's clock."""

    source: str
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    host: str | None = None
    steps: list[ProfilerStep] = field(default_factory=list)
    markers: dict[Marker, Spans] = field(default_factory=lambda: {m: Spans() for m in Marker})
    cpu_ops: Spans = field(default_factory=Spans)
    launches: Launches = field(default_factory=Launches)
    gpu: GpuActivities = field(default_factory=GpuActivities)
    flop_ops: FlopOps = field(default_factory=FlopOps)
    #: CUDA device names in ``deviceProperties`` (one per visible device, in id order)
    devices: list[str] = field(default_factory=list)
    with_flops: bool = False  #: the profiler ran with ``with_flops=True``
    #: start (us) of the latest ``ProfilerStep#N`` written on the GPU timeline (``gpu_user_annotation``, newer
    #: Kineto), which HTA counts among the steps (:func:`fleetdx.orchestrator.steps.decompose.temporal_breakdown`)
    gpu_step_last_ts: float | None = None
    events: int = 0  #: trace events read (any phase)
    skipped: int = 0  #: complete events dropped for a missing or non-finite ts/dur

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu) > 0


def _int(v: Any, default: int = -1) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else default
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str):
        try:
            i = int(v)
        except ValueError:
            return default
        return i if -(2**63) <= i < 2**63 else default
    return default


_INT_RANGE = 2**63
#: names remembered per CPU span category (a trace of unique names must not grow the cache without bound)
_MAX_CACHED_NAMES = 1 << 16


class _Markers(dict[str, "Marker | None"]):
    """One category's CPU span names and their :func:`marker_of`, computed once per distinct name."""

    def __init__(self, cat: str) -> None:
        super().__init__()
        self.cat = cat

    def __missing__(self, name: str) -> Marker | None:
        mk = marker_of(name, self.cat)
        if len(self) < _MAX_CACHED_NAMES:
            self[name] = mk
        return mk


#: timestamps and durations beyond this (us; 3e4 years) are not real and would overflow the float columns
_MAX_US = 1e18


class _Reader:
    """Turns trace events into the :class:`KinetoTrace` columns (the hot loop: kept short and branch-light)."""

    def __init__(self, trace: KinetoTrace, max_events: int) -> None:
        self.t = trace
        self.max_events = max_events
        self.kept = 0
        self.name_ids: dict[str, tuple[int, int]] = {}  #: GPU activity name: (index in names, GpuKind)
        #: CPU span category: {name: its stage marker or None} (marker_of, computed once per distinct name)
        self.marker_ids = {c: _Markers(c) for c in ("cpu_op", "user_annotation", "python_function")}

    def _keep(self) -> None:
        self.kept += 1
        if self.kept > self.max_events:
            raise ParseError(
                FMT, None, f"at most {self.max_events} kept events (raise --max-events for a genuine trace)"
            )

    def event(self, e: Any) -> None:
        t = self.t
        t.events += 1
        if type(e) is not dict or e.get("ph") != "X":
            return
        name, cat = e.get("name"), e.get("cat")
        if type(name) is not str or type(cat) is not str:
            return
        ts: Any = e.get("ts")
        dur: Any = e.get("dur")
        if (
            type(ts) not in _NUMBER
            or type(dur) not in _NUMBER
            or not (-_MAX_US < ts < _MAX_US)
            or not (0 <= dur < _MAX_US)
        ):
            t.skipped += 1
            return
        if cat == "cpu_op" or cat == "user_annotation" or cat == "python_function":
            tid = e.get("tid")
            if type(tid) is not int:
                tid = _int(tid)
            if name.startswith("ProfilerStep"):
                m = _STEP_RE.match(name)
                if m is not None:
                    self._keep()
                    t.steps.append(ProfilerStep(number=int(m.group(1)), ts=ts, dur=dur, tid=tid))
                    return
            if cat == "cpu_op":
                self._keep()
                t.cpu_ops.add(ts, dur, tid)
                args = e.get("args")
                if type(args) is dict:
                    self._flops(name, ts, args)
            mk = self.marker_ids[cat][name]
            if mk is not None:
                self._keep()
                t.markers[mk].add(ts, dur, tid)
            return
        if cat == "gpu_user_annotation":
            if name.startswith("ProfilerStep") and _STEP_RE.match(name) is not None:
                self._keep()
                t.gpu_step_last_ts = ts if t.gpu_step_last_ts is None else max(t.gpu_step_last_ts, ts)
            return
        args = e.get("args")
        if type(args) is not dict:
            args = {}
        if cat == "cuda_runtime" or cat == "cuda_driver":
            corr = _int(args.get("correlation"))
            if corr >= 0:
                self._keep()
                la = t.launches
                la.correlation.append(corr)
                la.ts.append(ts)
                la.dur.append(dur)
            return
        if cat == "kernel" or cat == "gpu_memcpy" or cat == "gpu_memset":
            self._gpu(name, ts, dur, args)

    def _gpu(self, name: str, ts: float, dur: float, args: dict[str, Any]) -> None:
        """One kernel, memcpy or memset; its name's index and kind are computed once per distinct name."""
        self._keep()
        g = self.t.gpu
        known = self.name_ids.get(name)
        if known is None:
            known = self.name_ids[name] = (len(g.names), int(gpu_kind(name)))
            g.names.append(name)
        g.ts.append(ts)
        g.dur.append(dur)
        g.stream.append(_int(args.get("stream")))
        g.correlation.append(_int(args.get("correlation")))
        g.kind.append(known[1])
        g.nbytes.append(max(0, _int(args.get("bytes"), 0)))
        g.name.append(known[0])
        occ: Any = args.get("est. achieved occupancy %")
        g.occupancy.append(float(occ) if type(occ) in _NUMBER and 0 <= occ <= 100 else -1.0)

    def _flops(self, name: str, ts: float, args: dict[str, Any]) -> None:
        """A CPU op's FLOPs: ``args.flops``, else a matrix multiplication's from its shapes."""
        fl: Any = args.get("flops")
        shapes, nbytes = 0, None
        if type(fl) not in _NUMBER or not (0 < fl < 1e30):
            if name not in MATMUL_OPS:
                return
            dims = args.get("Input Dims")
            fl = matmul_flops(name, dims)
            if fl is None or not (0 < fl < 1e30):
                return
            shapes, nbytes = 1, matmul_bytes(name, dims, args.get("Input type"))
        self._keep()
        f = self.t.flop_ops
        f.ts.append(ts)
        f.flops.append(float(fl))
        f.from_shapes.append(shapes)
        f.nbytes.append(nbytes or 0.0)

    def device_properties(self, props: Any, with_flops: Any) -> None:
        if isinstance(props, list):
            self.t.devices = [p["name"] for p in props if isinstance(p, dict) and isinstance(p.get("name"), str)]
        self.t.with_flops = with_flops in (1, "1", True, "true")

    def distributed_info(self, info: Any) -> None:
        if not isinstance(info, dict):
            return
        rank, world = _int(info.get("rank")), _int(info.get("world_size"))
        self.t.rank = rank if rank >= 0 else None
        self.t.world_size = world if world > 0 else None
        backend = info.get("backend")
        self.t.backend = backend if isinstance(backend, str) else None


_NUMBER = {int, float}
#: characters read at a time
_CHUNK_CHARS = 1 << 20
#: the tight loop refills the buffer once fewer characters than this are left in it
_MARGIN_CHARS = 1 << 16
_WS = re.compile(r"[ \t\n\r]*")
#: an item's separator and the whitespace after it
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_DECODE = json.JSONDecoder().raw_decode
_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # the C scanner raw_decode calls, without its wrapper


class _Malformed(Exception):
    """Raised inside :class:`_TopLevel`; turned into a ParseError by the caller."""


class _TopLevel:
    """A streaming reader of one top-level JSON object: the items of one array member go one by one to a
    callback, each decoded by the standard library's C decoder (``json.JSONDecoder.raw_decode``); the other
    members are decoded whole and only the names asked for are kept. The text buffer holds one chunk plus the
    item being read, and never more than ``max_item`` characters of one item."""

    def __init__(self, f: IO[str], chunk: int | None = None, max_item: int = 64 << 20) -> None:
        self.f, self.chunk, self.max_item = f, chunk or _CHUNK_CHARS, max_item
        self.buf, self.pos, self.eof = "", 0, False

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.f.read(self.chunk)
        if not data:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + data
        self.pos = 0
        return True

    def _peek(self) -> str:
        while True:
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m is not None else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def _expect(self, c: str) -> None:
        got = self._peek()
        if got != c:
            raise _Malformed(f"{c!r} (got {got or 'the end'!r})")
        self.pos += 1

    def _value(self) -> Any:
        self._peek()
        while True:
            try:
                v, end = _DECODE(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if len(self.buf) - self.pos > self.max_item:
                    raise _Malformed(f"a JSON value under {self.max_item} characters") from None
                if not self._fill():
                    raise _Malformed(f"a JSON value ({e.msg})") from None
                continue
            if end >= len(self.buf) and self._fill():  # a number may go on in the next chunk
                continue
            self.pos = end
            return v

    def _items(self, array_key: str, on_item: Callable[[Any], None]) -> None:
        """The items of an array up to its ``]``: a tight loop over the current buffer; an item or separator
        that reaches the buffer's end is read again by the careful methods, which refill the buffer."""
        scan, ws, comma = _SCAN, _WS.match, _COMMA.match
        while True:
            buf = self.buf
            n = len(buf)
            pos = ws(buf, self.pos).end()  # type: ignore[union-attr]
            # an item starting past ``low`` may be cut by the buffer's end: the buffer is refilled before it is
            # read (a cut item's JSONDecodeError counts the lines of the whole buffer before it, twice)
            low = n if self.eof else n - _MARGIN_CHARS
            while True:
                try:
                    item, end = scan(buf, pos)
                except (StopIteration, ValueError):
                    break  # cut by the buffer end, or malformed: the careful path decides
                m = comma(buf, end)  # the common case, one match: a comma and the next item's start in the buffer
                if m is not None and m.end() < n:
                    on_item(item)
                    pos = m.end()
                    if pos < low:
                        continue
                    break
                sep = ws(buf, end).end()  # type: ignore[union-attr]
                if sep >= n:
                    break  # a number may go on, or the separator is in the next chunk
                on_item(item)
                c = buf[sep]
                if c == "]":
                    self.pos = sep + 1
                    return
                if c != ",":
                    raise _Malformed(f"',' or ']' after an item of {array_key} (got {c!r})")
                pos = ws(buf, sep + 1).end()  # type: ignore[union-attr]
            self.pos = pos
            if pos > 0 and self._fill():
                continue  # the item at pos now starts the buffer: the tight loop again
            on_item(self._value())
            c = self._peek()
            self.pos += 1
            if c == "]":
                return
            if c != ",":
                raise _Malformed(f"',' or ']' after an item of {array_key} (got {c or 'the end'!r})")

    def read(self, array_key: str, on_item: Callable[[Any], None], keep: frozenset[str]) -> dict[str, Any]:
        """Read the whole object; returns the kept members and ``array_key: True`` when the array was seen."""
        top: dict[str, Any] = {}
        self._expect("{")
        if self._peek() == "}":
            self.pos += 1
        else:
            while True:
                key = self._value()
                if type(key) is not str:
                    raise _Malformed("an object key")
                self._expect(":")
                if key == array_key and self._peek() == "[":
                    top[key] = True
                    self.pos += 1
                    if self._peek() == "]":
                        self.pos += 1
                    else:
                        self._items(array_key, on_item)
                else:
                    value = self._value()
                    if key in keep:
                        top[key] = value
                c = self._peek()
                self.pos += 1
                if c == "}":
                    break
                if c != ",":
                    raise _Malformed(f"',' or '}}' after a member (got {c or 'the end'!r})")
        if self._peek() != "":
            raise _Malformed("nothing after the top-level object")
        return top


def _open(raw: IO[bytes]) -> IO[bytes]:
    head = raw.read(2)
    raw.seek(-len(head), io.SEEK_CUR)
    if head == b"\x1f\x8b":
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    return raw


#: the top-level members kept (the rest are read and dropped)
_TOP_KEYS = frozenset({"distributedInfo", "host_name", "deviceProperties", "with_flops"})


def parse_kineto_stream(raw: IO[bytes], source: str = "<stream>", max_events: int = DEFAULT_MAX_EVENTS) -> KinetoTrace:
    """Parse one trace from a seekable binary stream (plain or gzip JSON, UTF-8). See the module docstring."""
    trace = KinetoTrace(source=source)
    reader = _Reader(trace, max_events)
    try:
        text = io.TextIOWrapper(_open(raw), encoding="utf-8", errors="strict")
        top = _TopLevel(text).read("traceEvents", reader.event, _TOP_KEYS)
    except ParseError:
        raise
    except _Malformed as e:
        raise ParseError(FMT, None, f"a JSON Chrome trace: {e}") from None
    except (OSError, EOFError, zlib.error) as e:
        raise ParseError(FMT, None, "readable gzip or plain JSON", str(e)) from None
    except (UnicodeDecodeError, ValueError, TypeError, RecursionError, OverflowError) as e:
        raise ParseError(FMT, None, "a JSON Chrome trace", f"{type(e).__name__}: {e}") from None
    if not top.get("traceEvents") or trace.events == 0:
        raise ParseError(FMT, None, "a JSON object with a non-empty traceEvents array")
    reader.distributed_info(top.get("distributedInfo"))
    reader.device_properties(top.get("deviceProperties"), top.get("with_flops"))
    host_name = top.get("host_name")
    if isinstance(host_name, str) and host_name:
        trace.host = host_name
    trace.steps.sort(key=lambda s: s.ts)
    return trace


def parse_kineto_bytes(data: bytes, source: str = "<bytes>", max_events: int = DEFAULT_MAX_EVENTS) -> KinetoTrace:
    """Parse one trace held in memory (tests, fuzzing)."""
    return parse_kineto_stream(io.BytesIO(data), source, max_events)
