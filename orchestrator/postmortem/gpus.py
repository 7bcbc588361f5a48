"""Which GPU a rank used: the rank -> host -> GPU map of a postmortem, from what the job printed. Pure.

Sources, most reliable first (:class:`~fleetdx.probes.parsers.joblog.GpuSource`):

1. NCCL's communicator init line (``NCCL_DEBUG=INFO``: ``rank R nranks N cudaDev C nvmlDev M busId B``): the
   CUDA device, NVML's index and the PCI bus id of the process that printed it. The process is the line's
   ``host:pid``; its global rank is the launcher prefix's (``[rank3]:``, ``[1,3]<stdout>:``), else ``R`` when the
   communicator spans the whole job (``N`` is the job's rank count, or the largest ``nranks`` printed when the
   job model does not say): in a smaller communicator (tensor or pipeline parallel) ``R`` is not the global
   rank and is not used as one;
2. the ``[C]`` of an NCCL line's ``host:pid:tid [C]`` (the CUDA device of the process that printed the event),
   and a CUDA error naming its device (``GPU 3 has a total capacity``);
3. the job model's rank placement (``Job.ranks[].gpu``);
4. the local rank (``LOCAL_RANK=3`` printed beside a rank, torchrun's ``[default3]:``, a ChildFailedError
   entry's ``local_rank``): CUDA device ``cuda:LOCAL_RANK``, the convention of ``torch.cuda.set_device
   (LOCAL_RANK)`` that torchrun's and PyTorch's DDP documentation use; the source says it is this convention.

``CUDA_VISIBLE_DEVICES``, when printed for the rank, its host, or once for the whole log, maps the CUDA index
to the physical one (``CUDA_VISIBLE_DEVICES=4,5,6,7`` and ``cuda:1`` -> GPU 5; a one-entry list is ``cuda:0``
whatever the local rank). NVML's ``nvmlDev`` is the physical index itself. Nothing is ever inferred from a
rank number (``rank % 8`` is not a GPU): when no line says it, the GPU is ``None``.

A kernel XID names a PCI address on a host; :meth:`GpuMap.rank_of_bus` finds the rank whose NCCL init line
printed the same bus id on that host (compared as (domain, bus, device): the XID omits the function).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleetdx.orchestrator.judgement import EvidenceLine
from fleetdx.orchestrator.postmortem.contracts import GpuRef
from fleetdx.probes.contracts import Job
from fleetdx.probes.parsers.joblog import EventKind, GpuFact, GpuSource, JobEvent
from fleetdx.probes.parsers.smi_values import bus_key


@dataclass(frozen=True)
class Resolved:
    """The GPU of an event, and the line that says it (``None`` when it is the event's own line)."""

    ref: GpuRef
    line: EvidenceLine | None = None


def _line(f: GpuFact) -> EvidenceLine:
    return EvidenceLine(file=f.file, line=f.line, text=f.text)


class GpuMap:
    """The GPU facts of every log of a job, indexed (see the module doc)."""

    def __init__(self, facts: Iterable[GpuFact], job: Job | None = None) -> None:
        self.job = job
        facts = list(facts)
        inits = [f for f in facts if f.source is GpuSource.NCCL_INIT]
        world = len({p.rank for p in job.ranks}) if job is not None and job.ranks else 0
        self.world = world or max((f.nranks or 0 for f in inits), default=0)
        self._by_proc: dict[tuple[str, int], GpuFact] = {}
        self._by_rank: dict[int, GpuFact] = {}
        for f in inits:
            if f.host is not None and f.pid is not None:
                self._by_proc.setdefault((f.host, f.pid), f)
            rank = f.rank if f.rank is not None else (f.comm_rank if f.nranks == self.world else None)
            if rank is not None:
                self._by_rank.setdefault(rank, f)
        self._local: dict[int, GpuFact] = {}
        self._cvd_rank: dict[int, GpuFact] = {}
        self._cvd_host: dict[str, GpuFact] = {}
        unscoped: dict[str, GpuFact] = {}
        for f in facts:
            if f.source is GpuSource.LOCAL_RANK and f.rank is not None:
                self._local.setdefault(f.rank, f)
            elif f.source is GpuSource.CUDA_VISIBLE_DEVICES and f.visible_devices:
                if f.rank is not None:
                    self._cvd_rank.setdefault(f.rank, f)
                elif f.host is not None:
                    self._cvd_host.setdefault(f.host, f)
                else:
                    unscoped.setdefault(f.visible_devices, f)
        #: a CUDA_VISIBLE_DEVICES printed without rank or host counts for every rank only when it is the only one
        self._cvd_all = next(iter(unscoped.values())) if len(unscoped) == 1 else None

    # ---------------------------------------------------------------------------------------------------------
    def _init_of(self, rank: int | None, host: str | None, pid: int | None) -> GpuFact | None:
        if host is not None and pid is not None and (host, pid) in self._by_proc:
            return self._by_proc[(host, pid)]
        f = self._by_rank.get(rank) if rank is not None else None
        if f is not None and (host is None or f.host is None or f.host == host):
            return f
        return None

    def _cvd(self, rank: int | None, host: str | None) -> GpuFact | None:
        if rank is not None and rank in self._cvd_rank:
            return self._cvd_rank[rank]
        if host is not None and host in self._cvd_host:
            return self._cvd_host[host]
        return self._cvd_all

    def _remapped(
        self, index: int | None, rank: int | None, host: str | None, source: GpuSource, local_rank: bool = False
    ) -> tuple[GpuRef, GpuFact | None]:
        """A CUDA index with its physical index when a CUDA_VISIBLE_DEVICES applies (``local_rank``: the index
        is a local rank, which a one-entry list makes 0)."""
        cvd = self._cvd(rank, host)
        if cvd is None or not cvd.visible_devices:
            return GpuRef(index=index, source=source), None
        entries = cvd.visible_devices.split(",")
        if local_rank and len(entries) == 1:
            index = 0
        entry = entries[index] if index is not None and 0 <= index < len(entries) else None
        return (
            GpuRef(
                index=index,
                physical_index=int(entry) if entry is not None and entry.isdigit() else None,
                visible_devices=cvd.visible_devices,
                source=source,
            ),
            cvd,
        )

    def of_init(self, f: GpuFact, rank: int | None = None) -> Resolved:
        """The GPU an NCCL init line names (its physical index: ``nvmlDev``, else through CUDA_VISIBLE_DEVICES)."""
        ref = GpuRef(
            index=f.index, physical_index=f.physical_index, bus_id=f.bus_id, source=GpuSource.NCCL_INIT, rank=rank
        )
        if f.physical_index is None:
            remapped, _ = self._remapped(f.index, rank, f.host, GpuSource.NCCL_INIT)
            ref = ref.model_copy(
                update={"physical_index": remapped.physical_index, "visible_devices": remapped.visible_devices}
            )
        return Resolved(ref, _line(f))

    def for_event(self, e: JobEvent) -> Resolved | None:
        """The GPU ``e`` is about, or ``None`` when nothing printed says it (see the module doc)."""
        d = e.details
        if e.kind in (EventKind.XID, EventKind.GPU_LOST, EventKind.AER):
            return self.for_bus(e.host, str(d.get("pci") or "")) if d.get("pci") else None
        pid = d.get("pid") if isinstance(d.get("pid"), int) else None
        init = self._init_of(e.rank, e.host, pid)  # type: ignore[arg-type]
        if init is not None:
            return self.of_init(init, e.rank)
        if isinstance(d.get("cuda_device"), int):
            ref, cvd = self._remapped(int(d["cuda_device"]), e.rank, e.host, GpuSource.NCCL_PREFIX)  # type: ignore[arg-type]
            return Resolved(ref.model_copy(update={"rank": e.rank}), _line(cvd) if cvd else None)
        dev = d.get("gpu") if isinstance(d.get("gpu"), int) else d.get("dev")  # torch's GPU N, HIP's (dev)
        if e.kind is EventKind.OOM_GPU and isinstance(dev, int):
            ref, cvd = self._remapped(dev, e.rank, e.host, GpuSource.MESSAGE)
            return Resolved(ref.model_copy(update={"rank": e.rank}), _line(cvd) if cvd else None)
        if self.job is not None and e.rank is not None:
            for p in self.job.ranks:
                if p.rank == e.rank and p.gpu:
                    return Resolved(GpuRef(name=p.gpu, index=None, source=GpuSource.JOB_MODEL, rank=e.rank))
        local, said = e.local_rank, None
        if local is None and e.rank is not None and e.rank in self._local:
            said = self._local[e.rank]
            local = said.local_rank
        if local is None:
            return None
        ref, cvd = self._remapped(local, e.rank, e.host, GpuSource.LOCAL_RANK, local_rank=True)
        line = _line(said) if said is not None else (_line(cvd) if cvd is not None else None)
        return Resolved(ref.model_copy(update={"rank": e.rank}), line)

    def for_bus(self, host: str | None, pci: str) -> Resolved:
        """The GPU at PCI address ``pci`` on ``host`` (a kernel log's): with the rank whose NCCL init line printed
        that bus id on that host, when one did."""
        key = bus_key(pci)
        for (h, _pid), f in self._by_proc.items():
            if host is not None and h == host and key is not None and f.bus_id and bus_key(f.bus_id) == key:
                # the process's global rank: from any of its init lines (its first may be a smaller communicator's)
                rank = next(
                    (r for r, g in self._by_rank.items() if g is f or (g.host == f.host and g.pid == f.pid)), f.rank
                )
                res = self.of_init(f, rank)
                return Resolved(res.ref.model_copy(update={"bus_id": f.bus_id, "kernel_match": True}), res.line)
        return Resolved(GpuRef(bus_id=pci, source=GpuSource.KERNEL))

    def by_rank(self) -> dict[int, GpuFact]:
        """The NCCL init line of each global rank (a prefix's rank, or ``R`` of a whole-job communicator)."""
        return dict(self._by_rank)

    def ranks_on(self, host: str) -> list[tuple[int, GpuFact]]:
        """The ranks whose NCCL init line names a GPU on ``host``, by rank."""
        return sorted(((r, f) for r, f in self._by_rank.items() if f.host == host), key=lambda p: p[0])


def label(ref: GpuRef) -> str:
    """The short form of ``Cause.gpu``: the job model's name (``GPU3``), ``cuda:N`` (the CUDA device the
    process saw), else ``PCI:dddd:bb:dd`` (a kernel log's address)."""
    if ref.name:
        return ref.name
    if ref.index is not None:
        return f"cuda:{ref.index}"
    return f"PCI:{ref.bus_id}" if ref.bus_id else "?"


def describe(ref: GpuRef) -> str:
    """One phrase saying which GPU and how it is known (for a cause's message)."""
    parts = [label(ref)]
    if ref.physical_index is not None and ref.physical_index != ref.index:
        parts.append(f"physical GPU {ref.physical_index}")
    if ref.visible_devices:
        parts.append(f"CUDA_VISIBLE_DEVICES={ref.visible_devices}")
    if ref.bus_id and not label(ref).startswith("PCI:"):
        parts.append(f"bus {ref.bus_id}")
    how = {
        GpuSource.NCCL_INIT: "NCCL's init line",
        GpuSource.NCCL_PREFIX: "the NCCL line's [device]",
        GpuSource.MESSAGE: "the error message",
        GpuSource.JOB_MODEL: "the job model",
        GpuSource.LOCAL_RANK: "the local rank (cuda:LOCAL_RANK convention)",
        GpuSource.KERNEL: "the kernel log",
        GpuSource.CUDA_VISIBLE_DEVICES: "CUDA_VISIBLE_DEVICES",
    }[ref.source]
    return f"{parts[0]}" + (f" ({', '.join(parts[1:])})" if len(parts) > 1 else "") + f", from {how}"
