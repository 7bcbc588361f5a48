"""``GET /metrics``: the fleet's health in the Prometheus text exposition format, through ``prometheus-client``.

Names follow the Prometheus naming conventions (prometheus.io/docs/practices/naming: an application prefix,
base units, ``_seconds``, ``_total`` for counters, ``_timestamp_seconds`` for a point in time), so they sit
next to DCGM-exporter's ``DCGM_FI_*`` series in the same Prometheus without clashing:

=================================================  =========  ================================================
name                                               type       labels / value
=================================================  =========  ================================================
``fleetdx_node_verdict``                           gauge      ``node``; the Nagios value of the node's verdict
                                                              in its latest run (0 OK, 1 WARNING,
                                                              2 CRITICAL, 3 UNKNOWN)
``fleetdx_node_open_findings``                     gauge      ``node``, ``code``, ``severity``; findings of the
                                                              node's latest run that name it
``fleetdx_node_last_preflight_timestamp_seconds``  gauge      ``node``; Unix time its newest pre-flight finished
``fleetdx_findings_total``                         counter    ``code``, ``severity``; findings in all stored
                                                              runs (grows as reports arrive)
``fleetdx_node_state``                             gauge      ``node``, ``state`` (ok, suspect, quarantined,
                                                              retesting, returned); 1 for the node's current
                                                              state: one sample per node
``fleetdx_node_state_since_timestamp_seconds``     gauge      ``node``; Unix time of its last state transition
``fleetdx_retests_total``                          counter    ``result`` (pass, fail); retests of quarantined
                                                              nodes over the whole history (an inconclusive
                                                              one is neither)
``fleetdx_http_request_duration_seconds``          histogram  ``method``, ``route`` (the path template, e.g.
                                                              ``/runs/{run_id}``), ``status``
=================================================  =========  ================================================

The node, finding and pre-flight series are read from the database at each scrape
(:func:`fleetdx.orchestrator.store.fleet.fleet_state`): any worker answers the same. Request latency is the
one figure kept in process memory: with one process it covers that process; with several uvicorn workers,
``fleetdx serve --workers N`` points ``PROMETHEUS_MULTIPROC_DIR`` at a shared directory and each scrape sums
every worker's histogram (prometheus-client's multiprocess mode). To join with DCGM-exporter (whose node label
is ``Hostname``), relabel one side, e.g. ``label_replace(DCGM_FI_DEV_GPU_TEMP, "node", "$1", "Hostname",
"(.*)")``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from fleetdx.orchestrator.store.fleet import FleetState

# no ``*_created`` series beside the histogram: a second time series per label set, that the classic text
# format's consumers (Prometheus without created-timestamp ingestion) store as a plain gauge
disable_created_metrics()  # type: ignore[no-untyped-call]

#: the Content-Type of the text exposition format 0.0.4
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: request latency buckets (s): 1 ms to 10 s, finer below 100 ms where the API's answers are
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class FleetCollector(Collector):
    """The series of one :class:`FleetState` (see the module doc)."""

    def __init__(self, state: FleetState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        verdict = GaugeMetricFamily(
            "fleetdx_node_verdict",
            "Verdict of the node in its latest fleetdx run: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (Nagios).",
            labels=["node"],
        )
        for n in self.state.nodes:
            verdict.add_metric([n.host], float(int(n.verdict)))
        yield verdict

        open_findings = GaugeMetricFamily(
            "fleetdx_node_open_findings",
            "Findings of the node's latest fleetdx run that name the node, by code and severity.",
            labels=["node", "code", "severity"],
        )
        for f in self.state.open_findings:
            open_findings.add_metric([f.host, f.code.value, f.severity.value], float(f.count))
        yield open_findings

        last = GaugeMetricFamily(
            "fleetdx_node_last_preflight_timestamp_seconds",
            "Unix time the node's newest fleetdx pre-flight finished.",
            labels=["node"],
        )
        for host, t in sorted(self.state.last_preflight.items()):
            last.add_metric([host], t)
        yield last

        total = CounterMetricFamily(
            "fleetdx_findings",  # the _total suffix is added by prometheus-client
            "Findings in every stored fleetdx run, by code and severity.",
            labels=["code", "severity"],
        )
        for c in self.state.findings:
            total.add_metric([c.code.value, c.severity.value], float(c.count))
        yield total
        yield from self._states()

    def _states(self) -> Iterator[Metric]:
        """The node state series (:mod:`fleetdx.orchestrator.diagnosis.node_states`): one sample per node,
        not one per possible state, so ``count by (state) (fleetdx_node_state)`` counts nodes."""
        state = GaugeMetricFamily(
            "fleetdx_node_state",
            "The node's current fleetdx state (value 1): ok, suspect, quarantined, retesting or returned.",
            labels=["node", "state"],
        )
        since = GaugeMetricFamily(
            "fleetdx_node_state_since_timestamp_seconds",
            "Unix time of the node's last fleetdx state transition.",
            labels=["node"],
        )
        for n in self.state.states:
            state.add_metric([n.host, n.state.value], 1.0)
            since.add_metric([n.host], n.since)
        yield state
        yield since
        retests = CounterMetricFamily(
            "fleetdx_retests",  # the _total suffix is added by prometheus-client
            "Retests of quarantined nodes by result (pass, fail), over the stored history.",
            labels=["result"],
        )
        for result, count in sorted(self.state.retests.items()):
            retests.add_metric([result.value], float(count))
        yield retests


class RequestMetrics:
    """The request latency histogram of this process (or of every worker, in multiprocess mode)."""

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        """``multiprocess_dir``: the ``PROMETHEUS_MULTIPROC_DIR`` every worker writes to (it must be set in the
        environment before ``prometheus_client`` is first imported), or ``None`` for one process."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "fleetdx_http_request_duration_seconds",
            "Time the fleetdx API took to answer a request, by method, route template and status code.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.multiprocess_dir = multiprocess_dir

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.latency.labels(method, route, str(status)).observe(seconds)

    def exposition(self) -> bytes:
        """The histogram in the text format: this process's, or every worker's summed."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(merged)


def exposition(state: FleetState, requests: RequestMetrics) -> bytes:
    """The whole ``/metrics`` answer: the fleet's series, then the request latency."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(state))
    return generate_latest(registry) + requests.exposition()
