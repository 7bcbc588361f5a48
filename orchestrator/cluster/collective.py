"""Collective bandwidth probe through torch.distributed on Ray actors.

One actor per node (per GPU node: the actor drives GPU ``device_index``; on CPU nodes: gloo), pinned to its
Ray node with ``NodeAffinitySchedulingStrategy(soft=False)``. For each group of a round, rank 0's actor opens
a ``TCPStore`` on a free port of its node, every member joins with ``init_process_group(backend, store=...)``,
runs the size sweep and leaves the group; the groups of one round run concurrently.

Measurement method, as nccl-tests (``src/common.cu``) does it: per size, one validation pass (the result is
checked element by element: ``wrong`` counts mismatches, nccl-tests' ``#wrong``), ``warmup_iters`` untimed
operations, then ``iters`` back-to-back timed operations (CUDA events around the loop on GPU, a monotonic
clock on CPU); the per-operation time is the elapsed time / ``iters``, and the group's time is the **slowest
rank's** (an ``all_reduce(MAX)`` of the per-rank times). algbw = S / t and busbw = algbw x factor (nccl-tests
``doc/PERFORMANCE.md``): S is the total bytes of nccl-tests' ``size`` column; factor 2(n-1)/n for all_reduce,
(n-1)/n for all_gather and reduce_scatter, 1 for sendrecv. Units: bytes, microseconds, GB/s = 1e9 B/s.

torch and Ray are imported inside functions only: importing this module is cheap.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from enum import Enum
from typing import Any

from pydantic import Field, field_validator

from fleetdx.orchestrator.report import BusbwCurve, BusbwPoint, CurveBackend
from fleetdx.probes.contracts import Collective, Contract
from fleetdx.probes.errors import FleetdxError
from fleetdx.probes.parsers.nccl_tests import busbw_factor

#: element size of the float32 buffers the probe moves, bytes
ELEM_BYTES = 4
#: the Ray node label (or custom resource prefix ``fleetdx-host:``) that names a node; else its IP is its name
HOST_LABEL = "fleetdx.host"
HOST_RESOURCE_PREFIX = "fleetdx-host:"


#: the collectives this probe measures (of :class:`~fleetdx.probes.contracts.Collective`, the one collective
#: vocabulary); others are refused with a :class:`~fleetdx.probes.errors.ConfigError` by :class:`SweepSpec`
TORCH_COLLECTIVES = frozenset(
    {Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.SENDRECV}
)


class Backend(str, Enum):
    """The torch.distributed backend the probe runs on."""

    NCCL = "nccl"
    GLOO = "gloo"

    @property
    def curve(self) -> CurveBackend:
        """The same backend as a :class:`~fleetdx.orchestrator.report.BusbwCurve` names it."""
        return CurveBackend(self.value)


class BadTiming(FleetdxError):
    """A measured time per operation that no bandwidth can come from: not finite, or not positive (a
    clock that did not advance). The measurement fails; it never becomes a 0 GB/s point.

    Attributes:
        size: the message size, bytes.
        time_us: the time read, µs.
    """

    def __init__(self, size: int, time_us: float) -> None:
        super().__init__(f"size {size} B: time per operation {time_us!r} us is not a positive finite number")
        self.size = size
        self.time_us = time_us


def effective_size(collective: Collective, size: int, nranks: int) -> int:
    """The size (bytes) actually moved for a requested ``size``: the element count is rounded down to a
    multiple of ``nranks`` for all_gather and reduce_scatter, whose buffers are split per rank (nccl-tests
    does the same)."""
    count = size // ELEM_BYTES
    if collective in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        count -= count % nranks
    return count * ELEM_BYTES


def point(collective: Collective, size: int, nranks: int, time_us: float) -> BusbwPoint:
    """One curve point from a size (bytes) and a per-operation time (µs): algbw = size / time, busbw =
    algbw x the collective's factor (nccl-tests doc/PERFORMANCE.md), both GB/s = 1e9 B/s.

    Raises:
        BadTiming: ``time_us`` is not finite or not > 0.
    """
    if not (math.isfinite(time_us) and time_us > 0):
        raise BadTiming(size, time_us)
    algbw = size / (time_us * 1e-6) / 1e9
    return BusbwPoint(
        size=size, time_us=time_us, algbw_gbps=algbw, busbw_gbps=algbw * busbw_factor(collective, nranks)
    )


def curve_of(collective: Collective, backend: Backend, nodes: Sequence[str], rank0: RankResult) -> BusbwCurve:
    """The busbw curve of a group from rank 0's result (whose times are already the slowest rank's).

    Raises:
        BadTiming: a size whose time is not a positive finite number.
    """
    return BusbwCurve(
        collective=collective,
        nodes=list(nodes),
        nranks=len(nodes),
        backend=backend.curve,
        points=[point(collective, s, len(nodes), t) for s, t in zip(rank0.sizes, rank0.time_us, strict=True)],
    )


class SweepSpec(Contract):
    """What one group measures: a collective over sizes (bytes, nccl-tests' ``size`` column)."""

    collective: Collective = Collective.ALL_REDUCE
    sizes: list[int] = Field(default_factory=lambda: [4 << 20, 16 << 20, 64 << 20])
    warmup_iters: int = 2
    iters: int = 10
    check: bool = True

    @field_validator("collective")
    @classmethod
    def _measurable(cls, value: Collective) -> Collective:
        if value not in TORCH_COLLECTIVES:
            names = ", ".join(sorted(c.value for c in TORCH_COLLECTIVES))
            raise ValueError(f"the torch.distributed probe measures {names}, not {value.value}")
        return value


class RankResult(Contract):
    """What one rank returns: per size, the slowest rank's time per operation (µs) and the wrong elements it
    saw."""

    rank: int
    host: str
    sizes: list[int]
    time_us: list[float]
    wrong: list[int]


class GroupStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"
    HANG = "hang"


class GroupResult(Contract):
    """One group's sweep. ``curve`` is ``None`` unless ``status`` is ok; ``wrong`` sums all ranks and
    sizes."""

    nodes: list[str]
    collective: Collective
    backend: Backend
    status: GroupStatus
    curve: BusbwCurve | None = None
    wrong: int = 0
    error: str | None = None
    duration_s: float = 0.0


# ----------------------------------------------------------------------------------------------- in the actor
def iface_for_ip(ip: str) -> str | None:
    """The network interface that holds IPv4 ``ip`` on this host (``SIOCGIFADDR`` per interface), or
    ``None``."""
    import fcntl
    import socket
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == ip:
                return name
    return None


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _fill_and_expect(
    collective: Collective, count: int, rank: int, world: int, device: Any
) -> tuple[Any, Any, Any]:
    """(input, output, expected output) tensors for one validation pass; values are small integers so float32
    sums are exact."""
    import torch

    kw = {"dtype": torch.float32, "device": device}
    if collective is Collective.ALL_REDUCE:
        x = torch.full((count,), float(rank + 1), **kw)
        return x, x, torch.full((count,), float(world * (world + 1) // 2), **kw)
    if collective is Collective.ALL_GATHER:
        per = count // world
        x = torch.full((per,), float(rank + 1), **kw)
        expected = torch.arange(1, world + 1, **kw).repeat_interleave(per)
        return x, torch.empty(count, **kw), expected
    if collective is Collective.REDUCE_SCATTER:
        per = count // world
        x = torch.full((count,), float(rank + 1), **kw)
        return x, torch.empty(per, **kw), torch.full((per,), float(world * (world + 1) // 2), **kw)
    x = torch.full((count,), float(rank + 1), **kw)
    return x, torch.empty(count, **kw), torch.full((count,), float((rank - 1) % world + 1), **kw)


def _op(collective: Collective, x: Any, out: Any, rank: int, world: int) -> None:
    import torch.distributed as dist

    if collective is Collective.ALL_REDUCE:
        dist.all_reduce(out)
    elif collective is Collective.ALL_GATHER:  # torch >= 2.0 names (the *_single aliases are torch 2.12+ only)
        dist.all_gather_into_tensor(out, x)
    elif collective is Collective.REDUCE_SCATTER:
        dist.reduce_scatter_tensor(out, x)
    else:
        ops = [dist.P2POp(dist.isend, x, (rank + 1) % world), dist.P2POp(dist.irecv, out, (rank - 1) % world)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()


class CollectiveWorker:
    """The actor body (made a Ray actor by :func:`worker_class`). One per node; a straggler can be *injected*
    for tests with ``inject_delay_s``: the rank sleeps that long before each operation, as a slow rank
    would."""

    def __init__(
        self, host: str, backend: Backend, device_index: int | None = None, inject_delay_s: float = 0.0
    ) -> None:
        self.host = host
        self.backend = backend
        self.device_index = device_index
        self.inject_delay_s = inject_delay_s

    def address(self) -> tuple[str, int]:
        """This node's IP and a free TCP port on it (for the group's TCPStore when this actor is rank 0)."""
        import ray

        return ray.util.get_node_ip_address(), _free_port()

    def run(
        self, rank: int, world: int, master_addr: str, master_port: int, spec: SweepSpec, timeout_s: float
    ) -> RankResult:
        """Join the group, run the sweep, leave the group. Raises whatever torch.distributed raises."""
        import datetime

        import torch
        import torch.distributed as dist

        if self.backend is Backend.GLOO:
            ifname = iface_for_ip(_my_ip())
            if ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname
        device = torch.device("cpu")
        if self.backend is Backend.NCCL:
            device = torch.device("cuda", self.device_index or 0)
            torch.cuda.set_device(device)
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore(master_addr, master_port, world, rank == 0, timeout=timeout)  # type: ignore[attr-defined]
        dist.init_process_group(self.backend.value, store=store, rank=rank, world_size=world, timeout=timeout)
        try:
            times, wrongs, sizes = [], [], []
            for size in spec.sizes:
                t_us, wrong, eff = self._one_size(spec, size, rank, world, device)
                times.append(t_us)
                wrongs.append(wrong)
                sizes.append(eff)
            return RankResult(rank=rank, host=self.host, sizes=sizes, time_us=times, wrong=wrongs)
        finally:
            dist.destroy_process_group()

    def _one_size(
        self, spec: SweepSpec, size: int, rank: int, world: int, device: Any
    ) -> tuple[float, int, int]:
        import torch
        import torch.distributed as dist

        eff = effective_size(spec.collective, size, world)
        count = eff // ELEM_BYTES
        x, out, expected = _fill_and_expect(spec.collective, count, rank, world, device)
        wrong = 0
        if spec.check:
            _op(spec.collective, x, out, rank, world)
            wrong = int((out != expected).sum().item())
        for _ in range(spec.warmup_iters):
            _op(spec.collective, x, out, rank, world)
        dist.barrier()
        on_gpu = device.type == "cuda"
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
        t0 = time.perf_counter()
        for _ in range(spec.iters):
            if self.inject_delay_s:
                time.sleep(self.inject_delay_s)
            _op(spec.collective, x, out, rank, world)
        if on_gpu:
            end.record()
            torch.cuda.synchronize(device)
            elapsed_us = start.elapsed_time(end) * 1e3
        else:
            elapsed_us = (time.perf_counter() - t0) * 1e6
        t = torch.tensor([elapsed_us / spec.iters], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time
        w = torch.tensor([wrong], dtype=torch.int64, device=device)
        dist.all_reduce(w)
        return float(t.item()), int(w.item()), eff


def _my_ip() -> str:
    import ray

    return str(ray.util.get_node_ip_address())


def worker_class() -> Any:
    """:class:`CollectiveWorker` as a Ray actor class (created on first use, so Ray is not imported early)."""
    import ray

    global _WORKER_ACTOR
    if _WORKER_ACTOR is None:
        _WORKER_ACTOR = ray.remote(CollectiveWorker)
    return _WORKER_ACTOR


_WORKER_ACTOR: Any = None


# ------------------------------------------------------------------------------------------ driver side
class RayHost(Contract):
    """A Ray node as fleetdx names it."""

    name: str
    node_id: str
    ip: str
    gpus: int = 0


def _explicit_name(node: dict[str, Any]) -> str | None:
    labels = node.get("Labels") or {}
    if HOST_LABEL in labels:
        return str(labels[HOST_LABEL])
    for key in node.get("Resources") or {}:
        if str(key).startswith(HOST_RESOURCE_PREFIX):
            return str(key)[len(HOST_RESOURCE_PREFIX) :]
    return None


def host_names(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """fleetdx's name for each Ray node (entries of ``ray.nodes()``): its label ``fleetdx.host``, else a
    custom resource ``fleetdx-host:<name>``, else its host name (``NodeManagerHostname``, what Slurm hostlists
    use)
    when no other node shares it, else its IP."""
    hostnames = [str(n.get("NodeManagerHostname", "")) for n in nodes]
    out = []
    for node, hn in zip(nodes, hostnames, strict=True):
        name = _explicit_name(node)
        if name is None:
            name = hn if hn and hostnames.count(hn) == 1 else str(node["NodeManagerAddress"])
        out.append(name)
    return out


def ray_hosts() -> list[RayHost]:
    """The alive nodes of the connected Ray cluster, named by :func:`host_names`, sorted by name."""
    import ray

    alive = [n for n in ray.nodes() if n.get("Alive")]
    out = [
        RayHost(
            name=name,
            node_id=node["NodeID"],
            ip=node["NodeManagerAddress"],
            gpus=int(node.get("Resources", {}).get("GPU", 0)),
        )
        for node, name in zip(alive, host_names(alive), strict=True)
    ]
    return sorted(out, key=lambda h: h.name)


class RayCollectiveProbe:
    """Runs rounds of group sweeps on pinned actors. ``timeout_s`` bounds each round's collectives (a group
    still running then is a hang: its actors are killed and recreated); ``setup_timeout_s`` bounds starting
    the actors (a node whose actor does not answer is a failed group). ``inject_delay_s`` maps host -> seconds
    of injected delay per operation (tests only)."""

    def __init__(
        self,
        hosts: Sequence[RayHost],
        backend: Backend,
        spec: SweepSpec,
        timeout_s: float = 120.0,
        inject_delay_s: dict[str, float] | None = None,
        setup_timeout_s: float = 120.0,
    ) -> None:
        self.hosts = {h.name: h for h in hosts}
        self.setup_timeout_s = setup_timeout_s
        self.backend = backend
        self.spec = spec
        self.timeout_s = timeout_s
        self.inject = dict(inject_delay_s or {})
        self._actors: dict[str, Any] = {}

    def _actor(self, host: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if host not in self._actors:
            h = self.hosts[host]
            opts: dict[str, Any] = {
                "num_cpus": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=h.node_id, soft=False),
            }
            if self.backend is Backend.NCCL:
                opts["num_gpus"] = 1
            self._actors[host] = (
                worker_class()
                .options(**opts)
                .remote(
                    host,
                    self.backend,
                    0 if self.backend is Backend.NCCL else None,
                    self.inject.get(host, 0.0),
                )
            )
        return self._actors[host]

    def measure_round(self, groups: Sequence[Sequence[str]]) -> list[GroupResult]:
        """Run every group's sweep at once; one result per group, in order. Never raises for a group
        failure."""
        import ray

        ready, failed = self._ready([n for g in groups for n in g])
        t0 = time.monotonic()  # the deadline covers the collectives, not Ray starting actors
        launched: list[tuple[list[str], list[Any] | None, str | None]] = []
        for group in groups:
            nodes = list(group)
            missing = [n for n in nodes if n not in ready]
            if missing:
                slow = [n for n in missing if n not in failed]
                reasons = [f"actor on {n} failed: {failed[n]}" for n in missing if n in failed]
                if slow:
                    reasons.append(f"actor not ready within {self.setup_timeout_s:g} s on {', '.join(slow)}")
                err = "; ".join(reasons)
                launched.append((nodes, None, err))
                continue
            addr, port = ready[nodes[0]]
            refs = [
                self._actor(n).run.remote(r, len(nodes), addr, port, self.spec, self.timeout_s)
                for r, n in enumerate(nodes)
            ]
            launched.append((nodes, refs, None))
        all_refs = [r for _, refs, _ in launched if refs for r in refs]
        ray.wait(all_refs, num_returns=len(all_refs), timeout=self.timeout_s + 5.0)
        return [self._collect(nodes, refs, err, time.monotonic() - t0) for nodes, refs, err in launched]

    def _ready(self, hosts: Sequence[str]) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
        """Start (or reuse) the actors of ``hosts`` and wait up to ``setup_timeout_s`` for each to answer with
        its node IP and a free port. Returns (host -> (IP, port) for the hosts that answered, host -> the
        error of those whose actor failed); a host in neither did not answer in time. Never raises."""
        import ray

        refs = {h: self._actor(h).address.remote() for h in hosts}
        done, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=self.setup_timeout_s)
        done_set = set(done)
        out: dict[str, tuple[str, int]] = {}
        failed: dict[str, str] = {}
        for h, ref in refs.items():
            if ref in done_set:
                try:
                    addr, port = ray.get(ref)
                except Exception as e:  # edge: a dead actor or node is a failed group, reported by the caller
                    failed[h] = f"{type(e).__name__}: {str(e)[:500]}"
                    continue
                out[h] = (str(addr), int(port))
        return out, failed

    def _collect(self, nodes: list[str], refs: list[Any] | None, err: str | None, dur: float) -> GroupResult:
        import ray

        def result(
            status: GroupStatus, error: str | None = None, curve: BusbwCurve | None = None, wrong: int = 0
        ) -> GroupResult:
            return GroupResult(
                nodes=nodes,
                collective=self.spec.collective,
                backend=self.backend,
                status=status,
                curve=curve,
                wrong=wrong,
                error=error,
                duration_s=dur,
            )

        if refs is None:
            return result(GroupStatus.FAILED, err)
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=0)
        if pending:
            for n in nodes:  # a hung collective blocks its actor for good: replace it
                ray.kill(self._actors.pop(n))
            return result(GroupStatus.HANG, f"no result within {self.timeout_s:g} s")
        try:
            results: list[RankResult] = ray.get(refs)
        except Exception as e:
            return result(GroupStatus.FAILED, f"{type(e).__name__}: {str(e)[:500]}")
        r0 = results[0]
        try:
            curve = curve_of(self.spec.collective, self.backend, nodes, r0)
        except BadTiming as e:  # the group's measurement is unusable: it failed, with the reason
            return result(GroupStatus.FAILED, str(e), wrong=sum(r0.wrong))
        return result(GroupStatus.OK, curve=curve, wrong=sum(r0.wrong))

    def close(self) -> None:
        """Kill the actors this probe created."""
        import ray

        for a in self._actors.values():
            ray.kill(a)
        self._actors.clear()
