"""The bandwidth job: ``run(BandwidthRequest) -> RunReport``, what ``fleetdx bandwidth`` runs: connect to Ray
(the given address, ``RAY_ADDRESS``, else a local Ray for this run), read each host's busbw history from the
store, measure and judge (:func:`fleetdx.orchestrator.preflight.bandwidth.run_bandwidth`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import Field, field_validator

from fleetdx.orchestrator.cluster.collective import TORCH_COLLECTIVES, Backend
from fleetdx.orchestrator.preflight.detection import DetectionPolicy
from fleetdx.orchestrator.report import CurveBackend, RunReport, Schedule
from fleetdx.orchestrator.store.records import BusbwHistoryPoint
from fleetdx.probes.contracts import Collective, Contract
from fleetdx.probes.errors import ConfigError

_SIZE = re.compile(r"^(\d+)([KMG]?)B?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_sizes(text: str) -> list[int]:
    """``"4M,16M,64M"`` -> bytes, sorted, each once. K/M/G are powers of 1024, as nccl-tests' ``-b``/``-e`` read
    them.

    Raises:
        ConfigError: an entry that is not a size.
    """
    out = []
    for part in text.split(","):
        m = _SIZE.match(part.strip())
        if not m or int(m.group(1)) <= 0:
            raise ConfigError(f"--sizes: {part.strip()!r} is not a size like 4M, 64K or 1048576")
        out.append(int(m.group(1)) * _UNITS[m.group(2).upper()])
    return sorted(set(out))


def history_values(points: Sequence[BusbwHistoryPoint], backend: CurveBackend, nranks: int = 2) -> list[float]:
    """The past busbw figures (GB/s) comparable with this run's: same backend, same group size, measured."""
    return [
        p.peak_busbw_gbps
        for p in points
        if p.backend == backend and p.nranks == nranks and p.peak_busbw_gbps is not None
    ]


class BandwidthRequest(Contract):
    """What to measure: ``nodes`` a Slurm hostlist of Ray hosts (default every alive node); ``collectives``
    (the first judges against the reference and history); ``sizes`` in bytes (the largest judges);
    ``backend`` (default nccl when every node has a GPU, else gloo); ``iters`` timed iterations per size;
    ``timeout_s`` per round before a group is a hang; ``reference_gbps`` the SKU's expected busbw; ``db`` the
    store read for history (``read_history``)."""

    nodes: str | None = None
    schedule: Schedule = Schedule.LOCALISE
    collectives: list[Collective] = Field(default_factory=lambda: [Collective.ALL_REDUCE], min_length=1)
    sizes: list[int] = Field(default_factory=lambda: [4 << 20, 16 << 20, 64 << 20], min_length=1)
    backend: Backend | None = None
    iters: int = Field(default=10, ge=1)
    timeout_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    reference_gbps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    ray_address: str | None = None
    db: str | None = None
    read_history: bool = True

    @field_validator("collectives")
    @classmethod
    def _measured(cls, v: list[Collective]) -> list[Collective]:
        if bad := [c.value for c in v if c not in TORCH_COLLECTIVES]:
            raise ValueError(f"not measured by the torch.distributed probe: {', '.join(bad)}")
        return v


def _history(db_url: str | None, hosts: list[str], collective: str, backend: CurveBackend) -> dict[str, list[float]]:
    """Each host's recent busbw (GB/s) for ``collective``.

    Raises:
        StoreError: the store cannot be read.
    """
    from fleetdx.orchestrator.store import Store

    with Store.open(db_url) as store:
        return {h: history_values(store.recent_busbw(h, collective), backend) for h in hosts}


def run(request: BandwidthRequest) -> tuple[RunReport, DetectionPolicy]:
    """Measure and judge what ``request`` names; the report and the detection policy that judged it (its
    cut-offs colour the CLI's heat map). A store that cannot be read for history is said in the report's
    ``missing_evidence`` (the run is judged without it).

    Raises:
        ConfigError: a bad hostlist, Ray that cannot be reached.
    """
    import ray

    from fleetdx.orchestrator.cluster.collective import ray_hosts
    from fleetdx.orchestrator.preflight.bandwidth import run_bandwidth
    from fleetdx.orchestrator.scheduler.targets import expand_hostlist
    from fleetdx.orchestrator.store import StoreError

    hosts = expand_hostlist(request.nodes) if request.nodes else None
    started_ray = False
    if not ray.is_initialized():
        from fleetdx.orchestrator.cluster.connect import connect

        connect(request.ray_address, default="auto")
        started_ray = True
    missing: list[str] = []
    try:
        known = ray_hosts()
        names = hosts or [h.name for h in known]
        chosen = [h for h in known if h.name in names]  # run_bandwidth's default backend is theirs
        be = request.backend or (Backend.NCCL if all(h.gpus for h in chosen) else Backend.GLOO)
        policy = DetectionPolicy.for_backend(be.curve)
        history: dict[str, list[float]] = {}
        if request.read_history:
            try:
                history = _history(request.db, names, request.collectives[0].value, be.curve)
            except StoreError as e:  # history is optional evidence: the run is judged without it
                missing.append(f"the nodes' busbw history: the store could not be read ({e})")
        report = run_bandwidth(
            hosts,
            schedule=request.schedule,
            collectives=request.collectives,
            sizes=request.sizes,
            backend=be,
            policy=policy,
            iters=request.iters,
            timeout_s=request.timeout_s,
            reference_gbps=request.reference_gbps,
            history=history,
        )
    finally:
        if started_ray:
            ray.shutdown()
    if missing:
        report = report.model_copy(update={"missing_evidence": [*report.missing_evidence, *missing]})
    return report, policy
