"""Bandwidth evidence of a postmortem: the busbw-vs-size curves of the job's nodes, for the report's heat map and
curves (``PostmortemReport.bandwidth``).

* :func:`bundle_curves`: the nccl-tests outputs a node bundle holds (the files the probe catalog reads as
  nccl-tests, ``<collective>_perf_*.txt|json``), one curve per table with rows: its nodes are the hosts the
  table's ``#  Rank r ... on HOST device d`` lines name when they are several, else the bundle's host (a
  one-node run may print ``localhost``); the points are the
  out-of-place rows (busbw and algbw in GB/s = 1e9 B/s as nccl-tests prints them, nccl-tests
  doc/PERFORMANCE.md), the first row of each size (``-d all`` prints one per data type);
* :func:`stored_curves`: the curves of the newest stored pre-flight or bandwidth run of each blamed host that
  has one on that host (``Store.get_run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timezone
from typing import TYPE_CHECKING

from fleetdx.orchestrator.postmortem.contracts import BandwidthCurve
from fleetdx.orchestrator.report import BusbwCurve, BusbwPoint, CurveBackend
from fleetdx.orchestrator.store import NodeHistory
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_tests import NcclTestsRun, collective_from_name, parse_nccl_tests

if TYPE_CHECKING:  # the store (SQLAlchemy, about 0.3 s of CPU) and the bundle reader load only when used
    from fleetdx.orchestrator.store import Store
    from fleetdx.probes.bundle import BundleData

#: curves kept from bundles and from the store, each (the rest are counted in a note)
MAX_CURVES = 256


def run_curve(run: NcclTestsRun, host: str) -> BusbwCurve | None:
    """The busbw curve of one nccl-tests table, or ``None`` when it has no collective, no rank count or no
    measured row."""
    if run.collective is None or not run.nranks:
        return None
    points: dict[int, BusbwPoint] = {}
    for r in run.rows:
        t = r.out_of_place
        if r.size in points or t.time_us is None or t.algbw_gbps is None or t.busbw_gbps is None:
            continue
        points[r.size] = BusbwPoint(size=r.size, time_us=t.time_us, algbw_gbps=t.algbw_gbps, busbw_gbps=t.busbw_gbps)
    if not points:
        return None
    hosts = sorted({d.host for d in run.devices})
    if len(hosts) <= 1:  # one node: the bundle's host (nccl-tests may print "localhost" or a container's name)
        hosts = [host]
    return BusbwCurve(
        collective=run.collective,
        nodes=hosts,
        nranks=run.nranks,
        backend=CurveBackend.NCCL_TESTS,
        points=sorted(points.values(), key=lambda p: p.size),
    )


def bundle_curves(bundle: BundleData, where: str) -> tuple[list[BandwidthCurve], list[str]]:
    """The nccl-tests curves of ``bundle`` (read from ``where``), and one line per nccl-tests file that could
    not be read."""
    from fleetdx.probes.catalog import rows_reading  # the bundle files' readers, loaded with a bundle

    curves: list[BandwidthCurve] = []
    notes: list[str] = []
    started = bundle.created_at.astimezone(timezone.utc).timestamp() if bundle.created_at else None
    for name in sorted(bundle.files):
        if not any(spec.fact == "nccl_tests" for spec in rows_reading(name)):
            continue
        try:
            report = parse_nccl_tests(bundle.files[name], collective_from_name(name))
        except ParseError as e:
            notes.append(f"{where}/{name}: nccl-tests output not read: {e}")
            continue
        for run in report.runs:
            c = run_curve(run, bundle.host)
            if c is not None:
                curves.append(
                    BandwidthCurve(
                        source=f"bundle {where}/{name}", started_at=started, simulated=bundle.replayed, curve=c
                    )
                )
    return curves, notes


def stored_curves(store: Store, history: Sequence[NodeHistory]) -> list[BandwidthCurve]:
    """For each host of ``history`` (the blamed hosts, most likely first), the curves naming it of its newest
    stored run that has any; each run's curve once. Raises the store's ``StoreError``."""
    out: list[BandwidthCurve] = []
    seen: set[tuple[str, int]] = set()
    loaded: dict[str, list[BusbwCurve]] = {}
    for h in history:
        for entry in h.entries:
            if entry.run_id not in loaded:
                loaded[entry.run_id] = list(store.get_run(entry.run_id).curves)
            mine = [(i, c) for i, c in enumerate(loaded[entry.run_id]) if h.host in c.nodes and c.points]
            if not mine:
                continue
            for i, c in mine:
                if (entry.run_id, i) not in seen and len(out) < MAX_CURVES:
                    seen.add((entry.run_id, i))
                    out.append(
                        BandwidthCurve(
                            source=f"store run {entry.run_id} ({entry.kind.value})",
                            started_at=entry.started_at,
                            simulated=entry.simulated,
                            curve=c,
                        )
                    )
            break
    return out
