"""The service's fleet page (``GET /``) and node pages (``GET /nodes/{host}``), read from the store.

The fleet page shows every node as one small cell (a link to its page), grouped by its state
(:mod:`fleetdx.orchestrator.diagnosis.node_states`: quarantined, retesting, suspect, returned, ok; a node only
bandwidth or analyze runs named has none) and coloured by its latest verdict, so a fleet of thousands of nodes
is one screen of cells (about 80 bytes each: 5,000 nodes make a page of about half a megabyte, see
tests/test_fleet_pages.py). Below: the count of nodes per state and verdict (a plotly bar chart), the nodes
fleetdx quarantined or is retesting and why, the open findings (those of each node's latest run) by code, and
the jobs. A node page is its state, its transitions and its runs as a timeline.

Pages are rendered with the reports' Jinja2 environment (:mod:`.page`); the service passes the URL it serves
plotly.js at, on its own origin, so a page loads nothing from another origin.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import quote

from fleetdx.orchestrator.diagnosis.node_states import Actor, NodeState, NodeStatus, Transition
from fleetdx.orchestrator.htmlreport import charts
from fleetdx.orchestrator.htmlreport.page import Figure, chart_label, figure_json, fmt_hosts, render
from fleetdx.orchestrator.report import NodeHistoryEntry
from fleetdx.orchestrator.store import PostmortemRecord, Store
from fleetdx.orchestrator.store import states as node_states
from fleetdx.orchestrator.store.fleet import FleetState, fleet_state
from fleetdx.orchestrator.store.jobs import JobSummary, list_jobs
from fleetdx.probes.contracts import Severity, Verdict

#: the groups of the grid, most urgent first; "none": nodes no pre-flight or event has given a state
STATE_ORDER = ["quarantined", "retesting", "suspect", "returned", "ok", "none"]
VERDICT_ORDER = [Verdict.CRITICAL, Verdict.WARNING, Verdict.UNKNOWN, Verdict.OK]
SEVERITY_ORDER = [Severity.CRITICAL, Severity.WARNING, Severity.UNKNOWN, Severity.INFO]
#: the colour of a state's marker on a node's timeline, by the verdict it stands for
STATE_COLOUR = {
    "state quarantined": "CRITICAL",
    "state retesting": "UNKNOWN",
    "state suspect": "WARNING",
    "state returned": "OK",
    "state ok": "OK",
}
#: rows of the tables of quarantined nodes and open findings, jobs listed, and runs on a node page
MAX_ROWS = 500
MAX_JOBS = 100
#: the fleet page's live watch: jobs whose state was pushed in the last hour
LIVE_WINDOW_S = 3600.0
NODE_RUNS = 100
NODE_TRANSITIONS = 200


def utc(ts: float | None) -> str:
    """A Unix time as ``YYYY-MM-DD HH:MM:SS`` UTC ("-" for none)."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class Cell:
    """One node of the grid: its host, latest verdict name ("NONE": no run), state name, and the host as a URL
    path segment."""

    host: str
    verdict: str
    state: str
    path: str


_PLAIN_HOST = re.compile(r"[A-Za-z0-9._-]+")


def url_segment(host: str) -> str:
    """``host`` as one URL path segment: as it is when it is letters, digits, ``.``, ``_`` and ``-`` (every
    real host name; percent-encoding 5,000 of them was a fifth of the fleet page's time), else
    percent-encoded (RFC 3986)."""
    return host if _PLAIN_HOST.fullmatch(host) else quote(host, safe="")


@dataclass
class Group:
    """The cells of one state, in host order."""

    state: str
    cells: list[Cell] = field(default_factory=list)


@dataclass(frozen=True)
class CodeRow:
    """An open finding code: its severity, the hosts whose latest run has it, and how many findings."""

    code: str
    severity: str
    hosts: str
    host_count: int
    findings: int


@dataclass(frozen=True)
class HeldRow:
    """A node fleetdx took out (quarantined or retesting): why, since when, by whom, its lemon score."""

    status: NodeStatus
    lemon_score: int
    since: str


def grid(state: FleetState) -> list[Group]:
    """Every node the store knows (a run named it or it has a state), grouped by state (:data:`STATE_ORDER`),
    each group sorted by host."""
    verdicts = {n.host: n.verdict.name for n in state.nodes}
    states = {s.host: s.state.value for s in state.states}
    groups = {s: Group(s) for s in STATE_ORDER}
    for host in sorted({*verdicts, *states}):
        st = states.get(host, "none")
        groups[st].cells.append(Cell(host, verdicts.get(host, "NONE"), st, url_segment(host)))
    return [g for g in groups.values() if g.cells]


def counts(groups: Sequence[Group]) -> dict[str, dict[str, int]]:
    """state -> verdict name -> how many nodes (every state and verdict present, zeros included)."""
    names = [v.name for v in VERDICT_ORDER] + ["NONE"]
    out = {s: dict.fromkeys(names, 0) for s in STATE_ORDER}
    for g in groups:
        for c in g.cells:
            out[g.state][c.verdict] += 1
    return out


def counts_figure(table: dict[str, dict[str, int]]) -> Figure | None:
    """Nodes per state, stacked by latest verdict (a plotly bar chart); ``None`` for an empty fleet."""
    states = [s for s in STATE_ORDER if sum(table[s].values())]
    if not states:
        return None
    segments = {v: [table[s][v] for s in states] for v in table[states[0]] if any(table[s][v] for s in states)}
    fig = charts.count_bars("nodes by state and latest verdict", states, segments, "nodes")
    return Figure("fig-states", figure_json(fig))


def open_findings(state: FleetState) -> list[CodeRow]:
    """Each open finding code and severity with the hosts whose latest run has it, most severe first."""
    by: dict[tuple[str, Severity], list[tuple[str, int]]] = {}
    for f in state.open_findings:
        by.setdefault((f.code.value, f.severity), []).append((f.host, f.count))
    rows = [
        CodeRow(code, sev.value, fmt_hosts([h for h, _ in hosts]), len(hosts), sum(n for _, n in hosts))
        for (code, sev), hosts in by.items()
    ]
    rank = {s.value: i for i, s in enumerate(SEVERITY_ORDER)}
    return sorted(rows, key=lambda r: (rank[r.severity], -r.host_count, r.code))


def held(store: Store) -> list[HeldRow]:
    """Nodes in state quarantined or retesting (fleetdx's or a person's doing, ``by`` says), newest first."""
    out = [
        HeldRow(r.status, r.lemon_score, utc(r.status.since))
        for r in node_states.list_nodes(store)
        if r.status.state in (NodeState.QUARANTINED, NodeState.RETESTING)
    ]
    return sorted(out, key=lambda r: -r.status.since)


def render_fleet(store: Store, *, plotly_src: str | None = None, root: str = "") -> str:
    """The fleet page (see the module doc) as HTML. ``root``: the relative path from the page to the service's
    root ("" at ``/``), put before every link. Raises the store's ``StoreError``."""
    state = fleet_state(store)
    groups = grid(state)
    table = counts(groups)
    rows = held(store)
    codes = open_findings(state)
    jobs: list[JobSummary] = list_jobs(store, limit=MAX_JOBS)
    live = store.list_live_jobs(since=time.time() - LIVE_WINDOW_S, limit=MAX_ROWS)
    total = sum(len(g.cells) for g in groups)
    return render(
        "fleet.html.j2",
        plotly_src=plotly_src,
        title="fleetdx: the fleet",
        root=root,
        total=total,
        groups=groups,
        table=table,
        verdict_names=[v.name for v in VERDICT_ORDER] + ["NONE"],
        figure=counts_figure(table),
        held=rows[:MAX_ROWS],
        held_left_out=max(0, len(rows) - MAX_ROWS),
        fleetdx_actor=Actor.FLEETDX,
        codes=codes[:MAX_ROWS],
        codes_left_out=max(0, len(codes) - MAX_ROWS),
        jobs=jobs,
        live=live,
        retests={k.value: v for k, v in state.retests.items()},
        utc=utc,
        sources=[],
    )


def node_timeline(
    history: Sequence[NodeHistoryEntry], moves: Sequence[Transition], postmortems: Sequence[PostmortemRecord]
) -> Figure | None:
    """A node's runs (one row per run kind, one colour per verdict), state transitions (row "state") and the
    postmortems that blamed it, on one time axis; ``None`` when there is nothing to draw."""
    series: dict[str, charts.Points] = {}

    def add(name: str, at: float, row: str, label: str) -> None:
        s = series.setdefault(name, charts.Points(name))
        s.x.append(datetime.fromtimestamp(at, tz=timezone.utc).isoformat())
        s.y.append(row)
        s.labels.append(chart_label(label, 300))

    for e in history:
        label = f"{utc(e.started_at)} {e.kind.value} {e.run_id}: {e.verdict.name}"
        label += "".join(f"<br>{f.severity.value} {f.code.value} {f.subject}" for f in e.findings[:5])
        add(e.verdict.name, e.started_at, e.kind.value, label)
    for t in moves:
        frm = t.from_state.value if t.from_state else "new"
        add(
            f"state {t.to_state.value}",
            t.at,
            "state",
            f"{utc(t.at)} {frm} -> {t.to_state.value} by {t.by.value}: {t.reason}",
        )
    for p in postmortems:
        add(
            "postmortem",
            p.created_at,
            "postmortem",
            f"{utc(p.created_at)} postmortem of job {p.job_id}: {p.verdict.name}",
        )
    if not series:
        return None
    rows = [
        r
        for r in ("state", "preflight", "bandwidth", "analyze", "postmortem")
        if any(r in s.y for s in series.values())
    ]
    fig = charts.timeline(list(series.values()), rows, "time (UTC)", x_is_time=True)
    for trace in fig.data:  # a verdict in its badge's colour; a state in its verdict's (quarantined: critical)
        name = STATE_COLOUR.get(trace.name, trace.name)
        if name in charts.VERDICT_COLOURS:
            trace.marker.color = charts.VERDICT_COLOURS[name]
    fig.update_layout(height=140 + 40 * len(rows))
    return Figure("fig-node-timeline", figure_json(fig))


def render_node(store: Store, host: str, *, plotly_src: str | None = None, root: str = "../") -> str | None:
    """A node's page: its state, lemon score, transitions, runs (newest :data:`NODE_RUNS`) with their findings
    and the postmortems that blamed it, the first three as a timeline. ``None`` when the store knows nothing of
    ``host``. Raises the store's ``StoreError``."""
    status = node_states.get(store, host)
    history = store.node_history(host, limit=NODE_RUNS)
    postmortems = store.list_postmortems(limit=NODE_RUNS, host=host)
    if status is None and not history and not postmortems:
        return None
    moves = node_states.transitions(store, host, limit=NODE_TRANSITIONS)
    lemon = next((r.lemon_score for r in node_states.list_nodes(store) if r.status.host == host), 0)
    return render(
        "node.html.j2",
        plotly_src=plotly_src,
        title=f"fleetdx: node {host}",
        root=root,
        host=host,
        status=status,
        lemon=lemon,
        history=history,
        moves=moves,
        postmortems=postmortems,
        figure=node_timeline(history, moves, postmortems),
        utc=utc,
        sources=[],
    )
