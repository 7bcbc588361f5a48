"""The postmortem page (``fleetdx postmortem --html OUT``): the causes first (the most likely one above the
fold), then the timeline per host/rank, the nodes' history, and the bandwidth heat map and busbw-vs-size
curves when there are any."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from markupsafe import Markup

from fleetdx.orchestrator.htmlreport import charts
from fleetdx.orchestrator.htmlreport.page import (
    Clipped,
    Figure,
    Limits,
    chart_label,
    clip,
    figure_json,
    fmt_hosts,
    render,
)
from fleetdx.orchestrator.judgement import Finding
from fleetdx.orchestrator.postmortem.contracts import BandwidthCurve, PostmortemReport, TimelineEntry, gpu_ref
from fleetdx.orchestrator.postmortem.gpus import describe
from fleetdx.orchestrator.report import BusbwCurve, NodeHistory
from fleetdx.probes.contracts import Job


@dataclass
class EvidenceView:
    file: str
    line: int
    text: Clipped


@dataclass
class CauseView:
    cause: Finding
    where: list[tuple[str, str]]
    nodes: str
    message: Clipped
    action: Clipped
    evidence: list[EvidenceView]
    evidence_left_out: int


@dataclass
class HistoryRow:
    when: str
    kind: str
    verdict: str
    simulated: bool
    job_id: str | None
    run_id: str
    findings: list[tuple[str, str, Clipped]]
    findings_left_out: int


#: findings listed per past run in the nodes' history (the rest are counted)
FINDINGS_PER_RUN = 20
#: characters of a chart row's label (host · rank): longer names are cut so the chart keeps its width
ROW_CHARS = 80


def _utc(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cause_view(c: Finding, lim: Limits) -> CauseView:
    ref = gpu_ref(c)
    where = [
        (k, v)
        for k, v in (
            ("rank", "" if c.rank is None else str(c.rank)),
            ("host", c.host or ""),
            ("GPU", describe(ref) if ref is not None else c.gpu or ""),
            ("time", c.time or ""),
        )
        if v
    ]
    shown = c.evidence[: lim.evidence]
    return CauseView(
        cause=c,
        where=where,
        nodes=fmt_hosts(c.nodes),
        message=clip(c.message, lim.text_chars),
        action=clip(c.action, lim.text_chars),
        evidence=[EvidenceView(e.file, e.line, clip(e.text, lim.text_chars)) for e in shown],
        evidence_left_out=len(c.evidence) - len(shown),
    )


def _iso(text: str | None) -> datetime | None:
    """A timeline time that has a full date (ISO 8601; no zone: UTC), else ``None`` (a stamp as printed)."""
    if not text:
        return None
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.astimezone(timezone.utc) if dt.tzinfo else dt


def _row(e: TimelineEntry, by_host: bool) -> str:
    """The chart row of an event: ``host · rank N``, ``rank N`` (host unknown), or the host alone (rank
    unknown, e.g. a kernel log line, or ``by_host``)."""
    if by_host or e.rank is None:
        return e.host or "host ?"
    return f"{e.host} · rank {e.rank}" if e.host else f"rank {e.rank}"


def first_failure(entries: Sequence[TimelineEntry], cause: Finding | None) -> int | None:
    """The position in ``entries`` of the event the first cause rests on (its first evidence line: same text,
    and same rank and host when the cause names them), or ``None``."""
    if cause is None or not cause.evidence:
        return None
    text = cause.evidence[0].text.split("\n", 1)[0][:300]
    for i, e in enumerate(entries):
        if (
            e.text == text
            and (cause.rank is None or e.rank in (None, cause.rank))
            and (cause.host is None or e.host in (None, cause.host))
        ):
            return i
    return None


def timeline_figure(entries: Sequence[TimelineEntry], lim: Limits, first_cause: Finding | None = None) -> Figure | None:
    """The events on one chart, a row per host/rank (a row per host when there are more than
    ``lim.chart_rows`` host/rank pairs), in the timeline's order; x is UTC time when every drawn event has a
    full date, else the position on the merged timeline (the correlator's order). The event ``first_cause``
    rests on (:func:`first_failure`) is ringed in red and labelled "first failure"."""
    if not entries:
        return None
    notes: list[str] = []
    first_at = first_failure(entries, first_cause)
    first = entries[first_at] if first_at is not None else None
    drawn = list(entries[: lim.timeline_points])
    if len(entries) > len(drawn):
        notes.append(f"{len(entries) - len(drawn)} later events are not drawn (the first {len(drawn)} are)")
    by_host = len({_row(e, False) for e in drawn}) > lim.chart_rows
    if by_host:
        notes.append(f"more than {lim.chart_rows} host/rank pairs: one row per host")
    order: dict[str, int] = {}
    for e in drawn:
        order.setdefault(_row(e, by_host), len(order))
    rows = list(order)[: lim.chart_rows]
    if len(order) > len(rows):
        kept = set(rows)
        cut = sum(1 for e in drawn if _row(e, by_host) not in kept)
        notes.append(
            f"{len(order) - len(rows)} rows ({cut} events) are not drawn: the {len(rows)} rows drawn are "
            "those with the earliest events"
        )
        drawn = [e for e in drawn if _row(e, by_host) in kept]
    times = [_iso(e.time) for e in drawn]
    x_is_time = all(t is not None for t in times)
    if not x_is_time:
        notes.append(
            "not every event has a full date: x is the position on the merged timeline; each event's "
            "time as printed is in its label and in the table"
        )
    series: dict[str, charts.Points] = {}
    rows_sorted = sorted(rows, key=_row_key)
    highlight: tuple[int, int] | None = None
    for i, (e, t) in enumerate(zip(drawn, times, strict=True)):
        pts = series.setdefault(e.kind, charts.Points(name=chart_label(e.kind, 40)))
        if e is first and highlight is None:
            highlight = (list(series).index(e.kind), len(pts.x))
        pts.x.append(t.strftime("%Y-%m-%d %H:%M:%S.%f") if x_is_time and t is not None else i + 1)
        pts.y.append(chart_label(_row(e, by_host), ROW_CHARS))
        head = " ".join(x for x in (e.time or "", e.host or "", "" if e.rank is None else f"rank {e.rank}") if x)
        pts.labels.append(chart_label(head, 120) + "<br>" + chart_label(e.text, lim.label_chars))
    fig = charts.timeline(
        list(series.values()),
        [chart_label(r, ROW_CHARS) for r in rows_sorted],
        "time (UTC)" if x_is_time else "position on the merged timeline",
        x_is_time,
        highlight,
    )
    if highlight is not None:
        notes.append("the ringed marker is the event the first cause rests on (its first evidence line)")
    elif first is not None:
        notes.append("the first cause's event is not drawn (see the table)")
    return Figure("timeline-chart", figure_json(fig), notes)


def _row_key(label: str) -> tuple[str, int, str]:
    """Rows sorted by host, then rank numerically."""
    host, _, rest = label.partition(" · rank ")
    if label.startswith("rank "):
        host, rest = "", label[5:]
    return (host, int(rest) if rest.isdigit() else -1, label)


def bandwidth_figures(
    curves: Sequence[BusbwCurve],
    lim: Limits,
    sources: Sequence[str] | None = None,
    job_hosts: Collection[str] = (),
) -> list[Figure]:
    """The pair heat map of each collective (busbw at each two-node curve's largest message size, the last
    measurement of a pair winning) and the busbw-vs-size curves (one line per curve: per host for a bundle's
    single-node nccl-tests run); ``sources`` (one per curve) says in each line's legend and label where the
    curve was read.

    A one-rank curve (a single GPU) is left out of the curves, with a note: its busbw is 0 by definition
    (nccl-tests' bus bandwidth factor is 0 with one rank, doc/PERFORMANCE.md). When ``job_hosts`` is given, a
    curve or heat-map host outside it (the other end of a blamed host's stored pair curve) is drawn dotted and
    named "outside the job", with a note."""
    out: list[Figure] = []
    outside = sorted({h for c in curves for h in c.nodes if job_hosts and h not in job_hosts})
    pairs: dict[str, dict[tuple[str, str], tuple[float, int, str]]] = {}
    for c in curves:
        if len(c.nodes) == 2 and c.points:
            top = max(c.points, key=lambda p: p.size)
            a, b = sorted(c.nodes)
            pairs.setdefault(c.collective.value, {})[(a, b)] = (top.busbw_gbps, top.size, c.backend.value)
    for n, (coll, values) in enumerate(sorted(pairs.items())):
        hosts = sorted({h for p in values for h in p})
        notes = []
        if len(hosts) > lim.heatmap_hosts:
            notes.append(f"{len(hosts) - lim.heatmap_hosts} hosts left out (the first {lim.heatmap_hosts} by name)")
            hosts = hosts[: lim.heatmap_hosts]
        not_ours = [h for h in hosts if h in outside]
        if not_ours:
            notes.append(
                f"marked *: {len(not_ours)} host(s) outside the job ({fmt_hosts(not_ours)}), measured with one of "
                "its nodes"
            )
        z: list[list[float | None]] = []
        labels: list[list[str]] = []
        for a in hosts:
            zr: list[float | None] = []
            lr: list[str] = []
            for b in hosts:
                v = values.get((min(a, b), max(a, b)))
                zr.append(None if v is None else v[0])
                lr.append("" if v is None else chart_label(f"{a} ↔ {b}: {v[0]:.3g} GB/s at {v[1]} B ({v[2]})", 200))
            z.append(zr)
            labels.append(lr)
        m = charts.Matrix(
            f"{chart_label(coll, 40)}: pair busbw at the largest size (GB/s)",
            [chart_label(h, ROW_CHARS) + (" *" if h in outside else "") for h in hosts],
            z,
            labels,
        )
        out.append(Figure(f"heatmap-{n}", figure_json(charts.heat_map(m)), notes))
    where = list(sources) if sources is not None and len(sources) == len(curves) else ["" for _ in curves]
    measured = [(c, w) for c, w in zip(curves, where, strict=True) if c.points]
    single = [c for c, _ in measured if c.nranks <= 1]
    drawable = [(c, w) for c, w in measured if c.nranks > 1]
    drawn = drawable[: lim.curves]
    notes = []
    if single:
        notes.append(
            f"{len(single)} single-GPU curve(s) left out ({fmt_hosts(sorted({h for c in single for h in c.nodes}))}):"
            " with one rank busbw is 0 by definition (nccl-tests' bus bandwidth factor, doc/PERFORMANCE.md);"
            " their algbw is in --json"
        )
    if drawn:
        lines = [_curve_line(c, w, [h for h in c.nodes if h in outside]) for c, w in drawn]
        if len(drawable) > len(drawn):
            notes.append(f"{len(drawable) - len(drawn)} curves left out (the first {len(drawn)} are drawn)")
        far = sorted({h for c, _ in drawn for h in c.nodes if h in outside})
        if far:
            notes.append(
                f"dotted: curves naming host(s) outside the job ({fmt_hosts(far)}), stored pair runs of a blamed "
                "host with a node the job did not use"
            )
        fig = charts.lines("busbw vs message size", lines, "message size (bytes)", "busbw (GB/s)", log_x=True)
        out.append(Figure("curves", figure_json(fig), notes))
    elif notes:
        out.append(Figure("curves-none", Markup(""), notes))
    return out


def _curve_line(c: BusbwCurve, where: str, outside: Sequence[str]) -> charts.Line:
    """One busbw-vs-size line: its name says the collective, hosts, backend and ranks, and the hosts outside
    the job (drawn dotted); its labels say each point and where the curve was read."""
    off = f", {fmt_hosts(outside)} outside the job" if outside else ""
    name = chart_label(f"{c.collective.value} {fmt_hosts(c.nodes)} ({c.backend.value}, {c.nranks} ranks{off})", 120)
    src = chart_label(f" · {where}", 160) if where else ""
    pts = sorted(c.points, key=lambda p: p.size)
    return charts.Line(
        name=name,
        x=[float(p.size) for p in pts],
        y=[p.busbw_gbps for p in pts],
        labels=[f"{p.size} B: busbw {p.busbw_gbps:.3g} GB/s, algbw {p.algbw_gbps:.3g} GB/s{src}" for p in pts],
        dash="dot" if outside else None,
    )


def _history(history: Sequence[NodeHistory], lim: Limits) -> tuple[list[tuple[str, list[HistoryRow], int]], int]:
    """The report's hosts in its order (the first cause's first), each with its newest runs; and how many
    hosts were left out."""
    out = []
    for h in history[: lim.history_hosts]:
        rows = [
            HistoryRow(
                when=_utc(e.started_at),
                kind=e.kind.value
                + (f" ({e.level.value})" if e.level else "")
                + (f" ({e.schedule.value})" if e.schedule else ""),
                verdict=e.verdict.name,
                simulated=e.simulated,
                job_id=e.job_id,
                run_id=e.run_id,
                findings=[
                    (f.severity.value, f.code.value, clip(f.message, 400)) for f in e.findings[:FINDINGS_PER_RUN]
                ],
                findings_left_out=max(0, len(e.findings) - FINDINGS_PER_RUN),
            )
            for e in h.entries[: lim.history_runs]
        ]
        out.append((h.host, rows, len(h.entries) - len(rows)))
    return out, max(0, len(history) - lim.history_hosts)


def _source(b: BandwidthCurve) -> str:
    """Where a curve was read, and when it was measured (``simulated`` when nothing was)."""
    when = f", {_utc(b.started_at)}" if b.started_at is not None else ""
    return f"{b.source}{when}" + (" (simulated)" if b.simulated else "")


def _bandwidth_sources(curves: Sequence[BandwidthCurve], lim: Limits) -> list[Clipped]:
    """The distinct places the report's curves were read from, for the section's foot."""
    return [clip(s, lim.text_chars) for s in dict.fromkeys(_source(b) for b in curves)]


def _job(job: Job | None) -> list[tuple[str, str]]:
    if job is None:
        return []
    items = [
        ("job", job.job_id or ""),
        ("name", job.name or ""),
        ("user", job.user or ""),
        ("scheduler", job.scheduler.value),
        ("nodes", f"{fmt_hosts(job.nodes)} ({len(job.nodes)})" if job.nodes else ""),
        ("state", job.state or ""),
        ("exit code", "" if job.exit_code is None else str(job.exit_code)),
        ("signal", "" if job.signal is None else str(job.signal)),
        ("start", _utc(job.start_time)),
        ("end", _utc(job.end_time)),
    ]
    return [(k, v) for k, v in items if v]


def render_postmortem(
    report: PostmortemReport,
    *,
    curves: Sequence[BusbwCurve] = (),
    sources: Sequence[str] = (),
    limits: Limits | None = None,
    plotly_src: str | None = None,
) -> str:
    """The postmortem as one self-contained HTML page (a ``str``, about 5 MB: plotly.js is inlined; with
    ``plotly_src``, the service's URL of plotly.js, the page loads it from there instead).

    Args:
        report: what ``fleetdx postmortem --json`` prints; its ``history`` (the blamed hosts' stored runs, when
            a store was read) is the nodes' history section.
        curves: busbw curves of the job's nodes (a bandwidth run's or pre-flight's ``RunReport.curves``): a
            pair heat map per collective from the two-node curves, and every curve's busbw vs message size;
            when not given, the report's own ``bandwidth`` (its bundles' nccl-tests results and the blamed
            hosts' stored curves), each labelled with where it was read.
        sources: the inputs as given on the command line, listed at the foot of the page.
        limits: how much of each list is shown (:class:`Limits`); what is cut is counted on the page.
    """
    lim = limits or Limits()
    causes = [_cause_view(c, lim) for c in report.findings[: lim.causes]]
    hist, hist_left_out = _history(report.history, lim)
    rows = report.timeline[: lim.timeline_rows]
    timeline = timeline_figure(report.timeline, lim, report.findings[0] if report.findings else None)
    first_row = first_failure(rows, report.findings[0] if report.findings else None)
    ours = report.job.nodes if report.job is not None else ()
    if curves:
        bandwidth = bandwidth_figures(curves, lim, job_hosts=ours)
    else:
        where = [_source(b) for b in report.bandwidth]
        bandwidth = bandwidth_figures([b.curve for b in report.bandwidth], lim, where, job_hosts=ours)
    return render(
        "postmortem.html.j2",
        plotly_src=plotly_src,
        title="fleetdx postmortem" + (f" of job {report.job.job_id}" if report.job and report.job.job_id else ""),
        report=report,
        verdict=report.verdict.name,
        job=_job(report.job),
        causes=causes,
        causes_left_out=len(report.findings) - len(causes),
        missing=[clip(m, lim.text_chars) for m in report.missing_evidence],
        timeline=timeline,
        timeline_rows=[(e, clip(e.text, lim.text_chars), i == first_row) for i, e in enumerate(rows)],
        timeline_left_out=len(report.timeline) - len(rows),
        history=hist,
        history_left_out=hist_left_out,
        bandwidth=bandwidth,
        bandwidth_sources=_bandwidth_sources(report.bandwidth, lim) if not curves else [],
        sources=list(sources),
        limits=lim,
    )
