"""Node choice for a job: ``place(request, ...) -> PlacementAnswer`` (``fleetdx place``, ``GET/POST /placement``).

Steps, each leaving out nodes with their reasons (:class:`ExcludedNode`):

1. **Candidates**: the scheduler's nodes (``candidates``, parsed from ``scontrol show node`` / ``sinfo``),
   limited to ``request.partition`` and ``request.hostlist``; or, with no scheduler, the request's hostlist.
2. **Scheduler state**: only IDLE or MIXED nodes without a drain/down/fail/... flag
   (:attr:`fleetdx.probes.parsers.slurm_nodes.SlurmNode.usable`), declaring at least ``gpus_per_node`` GPUs
   when they declare any. The caller's ``exclude`` list.
3. **Health** (:mod:`fleetdx.orchestrator.placement.policy`): latest verdict CRITICAL, or an open finding that
   makes the node unfit.
4. **Locality**: with a cluster topology, :meth:`fleetdx.topology.cluster.ClusterIndex.place` (fewest switch
   hops) with the history penalty as a tie-break under the same switch; without one, the lowest penalty, then
   the name (the answer warns that locality was not known).
5. **GPUs**: each chosen node's newest stored ``topo -m`` (and ``numactl -H``) gives the GPU subset, NIC per
   GPU, NUMA node and CPU list per local rank and the NCCL/UCX environment
   (:func:`fleetdx.topology.binding.advise`), minus the GPUs its open findings exclude. A chosen node with
   fewer healthy GPUs than needed is excluded and step 4 runs again without it (at most once per node).

Not enough fit nodes is an answer (``placed=False``, exit code 2), not an exception.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence

import hostlist

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.placement.contracts import (
    CandidateSource,
    ExcludedNode,
    ExclusionStage,
    NodeAdvice,
    PlacementAnswer,
    PlacementRequest,
    SlurmArgs,
)
from fleetdx.orchestrator.placement.policy import DEFAULT_POLICY, HealthPolicy, NodeJudgement, judge
from fleetdx.orchestrator.placement.snapshot import HealthSnapshot
from fleetdx.orchestrator.store.node_health import latest_raw, node_health
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.catalog import NUMACTL_FILE, SYSFS_NUMA_FILE, TOPO_FILE
from fleetdx.probes.contracts import Verdict
from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.numactl import NumaTopology, parse_numactl
from fleetdx.probes.parsers.slurm_nodes import SlurmNode
from fleetdx.probes.parsers.topo import parse_topo
from fleetdx.topology.binding import advise
from fleetdx.topology.cluster import ClusterIndex, ClusterTopology, Placement, PlacementError
from fleetdx.topology.contracts import GpuExclusion, TopoAdvice
from fleetdx.topology.subset import SubsetError

#: the node label Kubernetes sets to the node's host name (kubernetes.io/docs, "Well-Known Labels")
HOSTNAME_LABEL = "kubernetes.io/hostname"


class PlacementInputError(ConfigError):
    """A request that cannot be answered as asked: no candidate source, a bad hostlist."""


#: hostlists whose expansion is kept (a service is asked about the same few partitions' hostlists over and over)
EXPANDED_KEPT = 32
#: longest expansion kept, hosts
EXPANDED_MAX_HOSTS = 100_000
_expanded: dict[str, tuple[str, ...]] = {}
_expanded_lock = threading.Lock()


def _expand(text: str, what: str) -> list[str]:
    with _expanded_lock:
        kept = _expanded.get(text)
    if kept is not None:
        return list(kept)
    try:
        hosts = hostlist.expand_hostlist(text.strip())
    except hostlist.BadHostlist as e:
        raise PlacementInputError(f"{what}: bad hostlist {text!r}: {e}") from None
    hosts = list(dict.fromkeys(h for h in hosts if h))
    if not hosts:
        raise PlacementInputError(f"{what}: hostlist {text!r} names no host")
    if len(hosts) <= EXPANDED_MAX_HOSTS:
        with _expanded_lock:
            if len(_expanded) >= EXPANDED_KEPT:
                del _expanded[next(iter(_expanded))]  # the oldest
            _expanded[text] = tuple(hosts)
    return hosts


def place(
    request: PlacementRequest,
    *,
    store: Store | None,
    candidates: Sequence[SlurmNode] | None = None,
    cluster: ClusterTopology | ClusterIndex | None = None,
    now: float | None = None,
    policy: HealthPolicy | None = None,
    snapshot: HealthSnapshot | None = None,
) -> PlacementAnswer:
    """Answer ``request`` (see the module docstring).

    ``store``: health and history (``None``: none used, the answer warns). ``candidates``: the scheduler's
    nodes (``None``: ``request.hostlist`` is the candidate list). ``cluster``: the switch tree or blocks (a
    prebuilt :class:`ClusterIndex` saves rebuilding it per query). ``now``: Unix seconds (default: the clock).
    ``policy``: default :data:`DEFAULT_POLICY`. ``snapshot``: the judgements and raw outputs of ``store``
    kept across queries (:class:`HealthSnapshot`): the answer is the one its ``now`` and ``policy`` give.

    Raises:
        PlacementInputError: neither ``candidates`` nor ``request.hostlist``, or a bad hostlist.
        fleetdx.orchestrator.store.StoreError: the store failed (DatabaseUnreachable included).
        ValueError: a ``snapshot`` of another store, or with another policy than ``policy``.
    """
    if snapshot is not None:
        if store is not snapshot.store or (policy is not None and policy != snapshot.policy):
            raise ValueError("place(): the snapshot is of another store or policy")
        now, policy = snapshot.now, snapshot.policy
    now = time.time() if now is None else now
    policy = DEFAULT_POLICY if policy is None else policy
    excluded: list[ExcludedNode] = []
    warnings: list[str] = []
    wanted = _expand(request.hostlist, "hostlist") if request.hostlist else None
    by_name: dict[str, SlurmNode] = {c.name: c for c in candidates or ()}
    if candidates is not None:
        source = CandidateSource.SLURM
        hosts = _usable(request, candidates, wanted, excluded, warnings)
    elif wanted is not None:
        source = CandidateSource.HOSTLIST
        hosts = wanted
        warnings.append("candidates from the hostlist only: scheduler states (drain, down) were not checked")
        if request.partition:
            warnings.append(f"partition {request.partition!r} not checked: no scheduler node list")
    else:
        raise PlacementInputError("no candidates: give a hostlist, or read the scheduler's nodes (Slurm)")

    ruled_out = set(request.exclude)
    fit: list[str] = []
    for h in hosts:
        if h in ruled_out:
            reason = "in the request's exclude list"
            excluded.append(ExcludedNode(host=h, stage=ExclusionStage.REQUEST, reasons=[reason]))
        else:
            fit.append(h)

    judgements: dict[str, NodeJudgement] = {}
    if snapshot is not None:
        judgements = snapshot.judgements(fit)
    elif store is not None:
        records = node_health(
            store,
            fit,
            open_since=now - policy.open_finding_ttl_s,
            history_since=now - policy.history_window_s,
        )
        judgements = {h: judge(records.get(h), h, policy) for h in fit}
    else:
        warnings.append("no store: node health and history were not used")
        judgements = {
            h: NodeJudgement(host=h, fit=True, health="not checked (no store)", history="not checked") for h in fit
        }
    still: list[str] = []
    for h in fit:
        j = judgements[h]
        if j.fit:
            still.append(h)
        else:
            excluded.append(ExcludedNode(host=h, stage=ExclusionStage.HEALTH, reasons=j.reasons, codes=j.codes))
    fit = still

    index = ClusterIndex(cluster) if isinstance(cluster, ClusterTopology) else cluster
    if index is not None:
        still = []
        for h in fit:
            if h in index.node_group:
                still.append(h)
            else:
                excluded.append(
                    ExcludedNode(
                        host=h,
                        stage=ExclusionStage.TOPOLOGY,
                        reasons=["not in the cluster topology: its switch is unknown"],
                    )
                )
        fit = still
    else:
        warnings.append("no cluster topology: nodes ranked by history only, network locality unknown")

    penalty = {h: judgements[h].penalty for h in fit}
    gpu_cache: dict[str, tuple[TopoAdvice | None, str | None]] = {}
    while True:
        chosen, locality, why_not = _choose(request.nodes, fit, penalty, index)
        if chosen is None:
            return _answer(request, source, policy, excluded, warnings, [why_not or "cannot place"])
        todo = [h for h in chosen if h not in gpu_cache]
        _gpu_advice(request, todo, store, snapshot, judgements, gpu_cache, warnings)
        short = [h for h in chosen if _too_few(gpu_cache[h])]
        if not short:
            break
        for h in short:
            adv, note = gpu_cache[h]
            reasons = adv.reasons if adv is not None else [note or "too few GPUs"]
            excluded.append(
                ExcludedNode(
                    host=h,
                    stage=ExclusionStage.GPUS,
                    reasons=reasons,
                    codes=list(dict.fromkeys(c for x in judgements[h].gpu_exclusions for c in x.codes)),
                )
            )
        fit = [h for h in fit if h not in short]

    nodes = [
        NodeAdvice(
            host=h,
            node_rank=i,
            group=index.node_group.get(h) if index is not None else None,
            penalty=judgements[h].penalty,
            health=judgements[h].health,
            history=judgements[h].history,
            gpus=gpu_cache[h][0],
            gpu_note=gpu_cache[h][1],
            excluded_gpus=judgements[h].gpu_exclusions,
        )
        for i, h in enumerate(chosen)
    ]
    for h in chosen:
        warnings += [f"{h}: {u}" for u in judgements[h].unmapped]
    reasons = [locality.reason] if locality is not None else [f"{len(chosen)} fit node(s) of lowest history penalty"]
    if any(judgements[h].penalty for h in chosen):
        reasons.append(
            "history penalties of the chosen nodes: "
            + ", ".join(f"{h} {judgements[h].penalty:g}" for h in chosen if judgements[h].penalty)
        )
    slurm = _slurm_args(request, chosen, excluded, locality, source, by_name)
    return PlacementAnswer(
        request=request,
        source=source,
        placed=True,
        exit_code=int(Verdict.OK),
        nodes=nodes,
        excluded=excluded,
        locality=locality,
        slurm=slurm,
        kubernetes_affinity=_k8s_affinity(chosen),
        reasons=reasons,
        warnings=list(dict.fromkeys(warnings)),
        policy=policy,
    )


def _usable(
    request: PlacementRequest,
    candidates: Sequence[SlurmNode],
    wanted: list[str] | None,
    excluded: list[ExcludedNode],
    warnings: list[str],
) -> list[str]:
    """The scheduler's nodes of the request's partition and hostlist that a job can use now (state, declared
    and free GPUs); the others are appended to ``excluded`` with the reason."""
    pool = [c for c in candidates if not request.partition or request.partition in c.partitions]
    if request.partition and not pool:
        warnings.append(f"no scheduler node is in partition {request.partition!r}")
    if wanted is not None:
        known = {c.name for c in pool}
        where = f" of partition {request.partition}" if request.partition else ""
        for h in wanted:
            if h not in known:
                excluded.append(
                    ExcludedNode(host=h, stage=ExclusionStage.SCHEDULER, reasons=[f"not a scheduler node{where}"])
                )
        keep = set(wanted)
        pool = [c for c in pool if c.name in keep]
    hosts: list[str] = []
    k = request.gpus_per_node
    for c in pool:
        why = c.why_unusable()
        if why is None and c.gpus is not None and c.gpus < k:
            why = f"declares gpu:{c.gpus} in Slurm, {k} needed"
        free = c.gpus_free
        if why is None and free is not None and free < k:
            why = f"{c.gpus_used} of its {c.gpus} GPUs are held by jobs, {k} needed"
        if why is not None:
            excluded.append(ExcludedNode(host=c.name, stage=ExclusionStage.SCHEDULER, reasons=[why]))
        else:
            hosts.append(c.name)
    return hosts


def _choose(
    n: int, fit: list[str], penalty: dict[str, float], index: ClusterIndex | None
) -> tuple[list[str] | None, Placement | None, str | None]:
    if len(fit) < n:
        return None, None, f"{n} node(s) needed, only {len(fit)} fit"
    if index is None:
        order = sorted(fit, key=lambda h: (penalty[h], h))
        return order[:n], None, None
    keep = set(fit)
    try:
        p = index.place(n, exclude=[h for h in index.node_group if h not in keep], penalty=penalty)
    except PlacementError as e:
        return None, None, f"{n} node(s) needed: {e}"
    return p.nodes, p, None


def _too_few(entry: tuple[TopoAdvice | None, str | None]) -> bool:
    adv, note = entry
    return not adv.satisfied if adv is not None else (note or "").startswith("too few")


def _gpu_advice(
    request: PlacementRequest,
    hosts: list[str],
    store: Store | None,
    snapshot: HealthSnapshot | None,
    judgements: dict[str, NodeJudgement],
    cache: dict[str, tuple[TopoAdvice | None, str | None]],
    warnings: list[str],
) -> None:
    if not hosts:
        return
    wanted = [TOPO_FILE, NUMACTL_FILE, SYSFS_NUMA_FILE]
    if snapshot is not None:
        raw = snapshot.raw(hosts, wanted)
    else:
        raw = latest_raw(store, hosts, wanted) if store is not None else {}
    for h in hosts:
        files = raw.get(h, {})
        j = judgements[h]
        if TOPO_FILE not in files:
            where = "the store" if store is not None else "any store (none given)"
            note = f"no {TOPO_FILE} of {h} in {where}: GPU subset not advised; bind by the scheduler's GRES"
            if j.gpu_exclusions:
                note += " and keep off " + ", ".join(x.gpu for x in j.gpu_exclusions)
            cache[h] = (None, note)
            continue
        numa = next((files[n] for n in (NUMACTL_FILE, SYSFS_NUMA_FILE) if n in files), None)
        try:
            key = tuple((x.gpu, tuple(x.reasons), tuple(x.codes)) for x in j.gpu_exclusions)
            adv = _advise(files[TOPO_FILE], numa, request.gpus_per_node, request.ib_port, key)
        except ParseError as e:
            cache[h] = (None, f"the stored {TOPO_FILE} of {h} does not parse ({e}): GPU subset not advised")
            warnings.append(cache[h][1] or "")
            continue
        except SubsetError as e:
            cache[h] = (None, f"too few GPUs: {h}: {e}")
            continue
        cache[h] = (adv, None)


@functools.lru_cache(maxsize=256)
def _advise(
    topo_text: str,
    numa_text: str | None,
    k: int,
    ib_port: int,
    excluded: tuple[tuple[str, tuple[str, ...], tuple[FindingCode, ...]], ...],
) -> TopoAdvice:
    """:func:`advise` on raw texts, memoised: a fleet's nodes mostly share a handful of identical matrices, and
    the advice is an immutable model. Raises ParseError (topo -m) and SubsetError (k > GPUs)."""
    numa: NumaTopology | None = None
    if numa_text is not None:
        try:
            numa = parse_numactl(numa_text)
        except ParseError:
            numa = None  # the matrix still advises; NUMA nodes from topo -m only
    gone = [GpuExclusion(gpu=g, reasons=list(reasons), codes=list(codes)) for g, reasons, codes in excluded]
    return advise(parse_topo(topo_text), k, ib_port, numa, excluded=gone)


def _slurm_args(
    request: PlacementRequest,
    chosen: list[str],
    excluded: list[ExcludedNode],
    locality: Placement | None,
    source: CandidateSource,
    slurm_nodes: dict[str, SlurmNode],
) -> SlurmArgs:
    nodelist = hostlist.collect_hostlist(chosen)
    # sbatch rejects unknown node names: exclude only nodes Slurm listed (or, without Slurm, the hostlist's)
    names = [x.host for x in excluded if source is CandidateSource.HOSTLIST or x.host in slurm_nodes]
    exclude = hostlist.collect_hostlist(sorted(set(names))) if names else None
    switches = len(locality.groups) if locality is not None and locality.switch_hops is not None else None
    argv = [f"--nodes={request.nodes}", f"--nodelist={nodelist}"]
    if exclude:
        argv.append(f"--exclude={exclude}")
    if switches is not None:
        argv.append(f"--switches={switches}")
    return SlurmArgs(nodelist=nodelist, exclude=exclude, switches=switches, argv=argv)


def _k8s_affinity(chosen: list[str]) -> dict[str, object]:
    """A pod ``affinity`` that requires one of the chosen nodes (Kubernetes API, NodeAffinity /
    ``requiredDuringSchedulingIgnoredDuringExecution``, label ``kubernetes.io/hostname``)."""
    term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": list(chosen)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _answer(
    request: PlacementRequest,
    source: CandidateSource,
    policy: HealthPolicy,
    excluded: list[ExcludedNode],
    warnings: list[str],
    reasons: list[str],
) -> PlacementAnswer:
    return PlacementAnswer(
        request=request,
        source=source,
        placed=False,
        exit_code=int(Verdict.CRITICAL),
        excluded=excluded,
        reasons=reasons,
        warnings=list(dict.fromkeys(warnings)),
        policy=policy,
    )
