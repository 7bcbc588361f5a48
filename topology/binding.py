"""Per-local-rank binding (GPU, CPUs, NUMA node, NIC) and the ready-to-paste lines of ``fleetdx topo advise``.

Conventions used in the generated lines:

- ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA number GPUs as nvidia-smi does (CUDA's default,
  ``FASTEST_FIRST``, may not; CUDA C Programming Guide, "CUDA Environment Variables").
- ``NCCL_IB_HCA`` takes a comma list of HCAs; a leading ``=`` asks for exact names, so ``mlx5_1`` does not
  also select ``mlx5_10`` (NCCL documentation, "Environment Variables", NCCL_IB_HCA).
- ``UCX_NET_DEVICES`` takes ``device:port`` (UCX documentation, "UCX_NET_DEVICES"); ``topo -m`` lists devices
  and not ports, so the port is the caller's ``ib_port`` (1 unless told).
- ``numactl --cpunodebind=N --membind=N`` when the GPU has a single NUMA node, else ``--physcpubind=LIST``
  (numactl(8)), or ``taskset -c LIST`` (taskset(1)); Slurm's ``--cpu-bind=mask_cpu:M0,M1,...`` gives one
  hexadecimal CPU mask per local task (srun(1), ``--cpu-bind``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fleetdx.probes.parsers.numactl import NumaTopology
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.analyses import affinity_issues, assign_rails, nearest_nics, numa_node_of
from fleetdx.topology.contracts import AffinityIssueKind, GpuExclusion, RankBinding, TopoAdvice
from fleetdx.topology.subset import NotEnoughGpus, best_subset


def cpu_list(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (the cpulist syntax of numactl, taskset -c and ``topo -m``; also how
    fleetdx writes any set of ranks); ``""`` for none."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def cpu_mask(cpus: list[int]) -> str:
    """CPU ids -> hexadecimal mask for Slurm ``--cpu-bind=mask_cpu`` (``[0, 1, 4]`` -> ``"0x13"``)."""
    return hex(sum(1 << c for c in set(cpus)))


def gpu_index(name: str) -> int:
    """``"GPU3"`` -> 3 (the nvidia-smi index)."""
    return int(name.removeprefix("GPU"))


def bind_ranks(topo: TopoMatrix, gpus: list[str], numa: NumaTopology | None = None) -> list[RankBinding]:
    """One binding per local rank, rank ``i`` on ``gpus[i]``: CPU affinity, NUMA node
    (:func:`fleetdx.topology.analyses.numa_node_of`, using ``numa`` from ``numactl -H`` when given), rail NIC."""
    by_name = {g.name: g for g in topo.gpus}
    near = {g: c for g, c in nearest_nics(topo).items() if g in gpus}
    rails = {r.gpu: r for r in assign_rails(topo, near)}
    out: list[RankBinding] = []
    for i, name in enumerate(gpus):
        g = by_name[name]
        rail = rails.get(name)
        out.append(
            RankBinding(
                local_rank=i,
                gpu=name,
                cpus=list(g.cpu_affinity),
                numa_node=numa_node_of(g, numa),
                nic=rail.nic if rail else None,
                nic_link=rail.link if rail else None,
            )
        )
    return out


def _numactl(r: RankBinding) -> str | None:
    if r.numa_node is not None:
        return f"numactl --cpunodebind={r.numa_node} --membind={r.numa_node} --"
    if r.cpus:
        return f"numactl --physcpubind={cpu_list(r.cpus)} --"
    return None


def advise(
    topo: TopoMatrix,
    k: int,
    ib_port: int = 1,
    numa: NumaTopology | None = None,
    excluded: Sequence[GpuExclusion] = (),
) -> TopoAdvice:
    """Choose ``k`` GPUs (:func:`fleetdx.topology.subset.best_subset`), bind each local rank, and write the env lines.

    ``numa`` (a parsed ``numactl -H``) resolves the NUMA node of GPUs whose ``topo -m`` row gives none or
    several. ``excluded`` are GPUs that must not be advised (health evidence, given by the caller): the best
    subset is chosen among the others; when fewer than ``k`` remain the advice has ``satisfied=False`` and
    no GPU (never a bad GPU to make up the number). An exclusion naming a GPU that the matrix lacks is kept
    and warned about.

    Raises:
        fleetdx.topology.subset.SubsetError: ``k`` outside ``1..number of GPUs``.
    """
    merged = merge_exclusions(excluded)
    names = set(topo.gpu_names)
    stray = [e for e in merged if e.gpu not in names]
    stray_warnings = [
        f"{e.gpu} is not a GPU row of topo -m; its exclusion ({'; '.join(e.reasons)}) cannot be mapped" for e in stray
    ]
    try:
        choice = best_subset(topo, k, exclude={e.gpu for e in merged})
    except NotEnoughGpus as e:
        left = ", ".join(e.healthy) or "none"
        return TopoAdvice(
            requested=k,
            satisfied=False,
            excluded=merged,
            gpus=[],
            min_link=None,
            ranks=[],
            env={},
            rank_env=[],
            commands=[],
            reasons=[f"{k} GPU(s) needed, only {len(e.healthy)} of {e.total} healthy ({left}): no GPU advised"]
            + [f"{x.gpu} excluded: {'; '.join(x.reasons)}" for x in merged if x.gpu in names],
            warnings=stray_warnings,
        )
    ranks = bind_ranks(topo, choice.gpus, numa)
    env = {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(str(gpu_index(g)) for g in choice.gpus),
    }
    nics = list(dict.fromkeys(r.nic for r in ranks if r.nic is not None))
    if nics:
        env["NCCL_IB_HCA"] = "=" + ",".join(nics)
    rank_env = [{"UCX_NET_DEVICES": f"{r.nic}:{ib_port}"} if r.nic else {} for r in ranks]
    reasons = [
        f"weakest link among {', '.join(choice.gpus)}: {choice.min_link or 'n/a (one GPU)'}"
        + (f"; {choice.ties} other subset(s) are equally good" if choice.ties else ""),
    ]
    reasons += [f"local rank {r.local_rank} ({r.gpu}): NIC {r.nic} at {r.nic_link}" for r in ranks if r.nic]
    reasons += [f"{x.gpu} excluded: {'; '.join(x.reasons)}" for x in merged if x.gpu in names]
    commands = [f"export {k_}={v}" for k_, v in env.items()]
    for r in ranks:
        prefix = _numactl(r)
        if prefix:
            commands.append(f"# local rank {r.local_rank}: {prefix} <command>")
    for r in ranks:
        if r.cpus:
            commands.append(f"# local rank {r.local_rank}: taskset -c {cpu_list(r.cpus)} <command>")
    if all(r.cpus for r in ranks):
        masks = ",".join(cpu_mask(r.cpus) for r in ranks)
        commands.append(f"srun --ntasks-per-node={k} --cpu-bind=mask_cpu:{masks} <command>")
    issues = [i for i in affinity_issues(topo) if i.gpu in choice.gpus]
    warnings = [_issue_text(i.gpu, i.kind, i.raw) for i in issues] + stray_warnings
    return TopoAdvice(
        requested=k,
        excluded=merged,
        gpus=choice.gpus,
        min_link=choice.min_link,
        ranks=ranks,
        env=env,
        rank_env=rank_env,
        commands=commands,
        reasons=reasons,
        warnings=warnings,
    )


def merge_exclusions(excluded: Sequence[GpuExclusion]) -> list[GpuExclusion]:
    """One exclusion per GPU (reasons and codes of the same GPU joined, duplicates dropped), in GPU index
    order (``GPU2`` before ``GPU10``), names that are not ``GPU<n>`` last."""
    reasons: dict[str, list[str]] = {}
    codes: dict[str, list[str]] = {}
    for e in excluded:
        reasons.setdefault(e.gpu, []).extend(e.reasons)
        codes.setdefault(e.gpu, []).extend(e.codes)

    def order(name: str) -> tuple[int, int, str]:
        digits = name.removeprefix("GPU")
        return (0, int(digits), name) if name.startswith("GPU") and digits.isdigit() else (1, 0, name)

    return [
        GpuExclusion(gpu=g, reasons=list(dict.fromkeys(reasons[g])), codes=list(dict.fromkeys(codes[g])))
        for g in sorted(reasons, key=order)
    ]


def _issue_text(gpu: str, kind: AffinityIssueKind, raw: str | None) -> str:
    if kind is AffinityIssueKind.SHARED_ACROSS_SYS:
        return (
            f"{gpu}: CPU affinity {raw!r} is shared with a GPU on another socket (SYS): "
            "it reflects a job cpuset, "
            "not the GPU's socket; bind by NUMA node from numactl -H instead"
        )
    what = "empty (cgroup-restricted?)" if kind is AffinityIssueKind.EMPTY else "missing"
    return f"{gpu}: CPU affinity is {what}; no CPU binding can be derived from topo -m"
