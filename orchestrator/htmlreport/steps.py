"""The step-time page (``fleetdx steps --html OUT``): the findings first (what each says, in a line or two),
then the charts (stacked stage bars per rank, the step-time series), the MFU and the GPU time by kernel class
(:func:`fleetdx.orchestrator.steps.mfu.summary_lines`), then each finding's evidence (collapsed,
in words and units: "this rank, median per step: 60.29 ms"), the rank table and the baseline comparison (job
medians, and the ranks whose own stage changed)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

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
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.steps.contracts import STAGE_ORDER, RankSteps, RankSummary, StepsReport
from fleetdx.orchestrator.steps.mfu import summary_lines
from fleetdx.topology.binding import cpu_list

#: the colour of a straggler rank's line in the step-time series
STRAGGLER_COLOUR = "#D55E00"


@dataclass
class FindingView:
    finding: Finding
    nodes: str
    message: Clipped
    evidence: list[tuple[str, Clipped]]  #: (what, value in words and units), in :data:`EVIDENCE_LABELS` order
    evidence_left_out: int
    straggler: bool


#: the words for the step findings' detail keys (``Finding.details``), in the order they read best; a key not
#: here reads as itself with spaces, and its unit from its suffix (``_ms``, ``_us``, ``_pct``)
EVIDENCE_LABELS = {
    "rank": "rank",
    "stage": "slow stage",
    "stage_ms": "this rank, median per step",
    "peers_median_ms": "its peers, median per step",
    "excess_ms": "excess per step",
    "z": "robust z-score (median/MAD of the peers)",
    "slow_steps": "steps where it was slow",
    "normal_steps": "steps where it was not",
    "job_step_median_ms": "job's median step time",
    "peers_wait_stage": "where the peers wait for it",
    "peers_wait_median_ms": "the peers' wait, median per step",
    "peers_grad_sync_median_ms": "the peers' grad_sync, median per step",
    "rank_grad_sync_median_ms": "this rank's grad_sync, median per step",
    "source": "read from",
}
_UNITS = {"_ms": " ms", "_us": " µs", "_pct": " %", "_gbps": " GB/s"}


def readable(key: str, value: object) -> tuple[str, str]:
    """A finding's detail as (what it is in words, the value with its unit): ``("stage_ms", 60.287)`` ->
    ``("this rank, median per step", "60.29 ms")``; lists joined with commas, objects as ``key: value``."""
    unit = next((u for suffix, u in _UNITS.items() if key.endswith(suffix)), "")
    label = EVIDENCE_LABELS.get(key)
    if label is None:
        bare = key
        for suffix in _UNITS:
            bare = bare.removesuffix(suffix)
        label = bare.replace("_", " ")
    sign = "+" if key == "excess_ms" and isinstance(value, int | float) and value > 0 else ""
    return label, sign + _value(value, unit)


def _value(value: object, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        a = abs(value)
        text = f"{value:.1f}" if a >= 100 else f"{value:.2f}" if a >= 1 else f"{value:.3g}"
        return text + unit
    if isinstance(value, int):
        return f"{value}{unit}"
    if isinstance(value, list | tuple):
        return ", ".join(_value(v, unit) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_value(v, unit)}" for k, v in value.items())
    return str(value)


def straggler_ranks(findings: Sequence[Finding]) -> list[int]:
    """The ranks ``STEP_STRAGGLER_RANK`` findings name (their evidence's ``rank``), in finding order."""
    out: list[int] = []
    for f in findings:
        r = f.details.get("rank")
        if f.code is FindingCode.STEP_STRAGGLER_RANK and isinstance(r, int) and r not in out:
            out.append(r)
    return out


def _finding_view(f: Finding, lim: Limits) -> FindingView:
    order = list(EVIDENCE_LABELS)
    items = sorted(f.details.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    shown = [readable(k, v) for k, v in items[: lim.evidence_items]]
    return FindingView(
        finding=f,
        nodes=fmt_hosts(f.nodes),
        message=clip(f.message, lim.text_chars),
        evidence=[(k, clip(v, lim.text_chars)) for k, v in shown],
        evidence_left_out=len(items) - len(shown),
        straggler=f.code is FindingCode.STEP_STRAGGLER_RANK,
    )


def stage_names(ranks: Sequence[RankSummary]) -> list[str]:
    """The stages with time on some rank, in step order, then custom stages by name."""
    shown = [s for s in STAGE_ORDER if any(r.stages_ms.get(s, 0) > 0 for r in ranks)]
    extra = sorted({k for r in ranks for k in r.stages_ms} - set(STAGE_ORDER))
    return shown + extra


def _pick_ranks(ranks: Sequence[RankSummary], flagged: Sequence[int], n: int) -> list[RankSummary]:
    """At most ``n`` ranks, the flagged ones always among them, in rank order."""
    chosen = [r for r in ranks if r.rank in flagged][:n]
    chosen += [r for r in ranks if r.rank not in flagged][: n - len(chosen)]
    return sorted(chosen, key=lambda r: r.rank)


def stage_bars(report: StepsReport, flagged: Sequence[int], lim: Limits) -> Figure | None:
    """Stacked bars of each rank's median stage times (ms per step)."""
    if not report.ranks:
        return None
    ranks = _pick_ranks(report.ranks, flagged, lim.ranks)
    notes = []
    if len(report.ranks) > len(ranks):
        notes.append(f"{len(report.ranks) - len(ranks)} ranks left out (the stragglers and the lowest ranks shown)")
    cats = [f"rank {r.rank}" + (" ⚑" if r.rank in flagged else "") for r in ranks]
    stages = {chart_label(s, 40): [r.stages_ms.get(s, 0.0) for r in ranks] for s in stage_names(ranks)}
    fig = charts.stacked_bars("median stage time per step, by rank", cats, stages, "ms per step")
    return Figure("stage-bars", figure_json(fig), notes)


def step_series(per_rank: Sequence[RankSteps], flagged: Sequence[int], lim: Limits) -> Figure | None:
    """Step time (ms) against step number: one line per rank when there are at most ``lim.series_ranks``;
    beyond, the flagged ranks one by one and the others as the median and the slowest rank at each step."""
    with_steps = [r for r in per_rank if r.steps]
    if not with_steps:
        return None
    notes: list[str] = []
    lines: list[charts.Line] = []
    one_by_one = with_steps if len(with_steps) <= lim.series_ranks else [r for r in with_steps if r.rank in flagged]
    if len(one_by_one) > lim.series_ranks:
        notes.append(f"{len(one_by_one) - lim.series_ranks} flagged ranks are not drawn one by one")
        one_by_one = one_by_one[: lim.series_ranks]
    if len(with_steps) > len(one_by_one):
        by_step: dict[int, list[float]] = {}
        for r in with_steps:
            for s in r.steps:
                by_step.setdefault(s.step, []).append(s.step_ms)
        xs = sorted(by_step)
        lines.append(
            charts.Line(
                "median of all ranks",
                [float(x) for x in xs],
                [statistics.median(by_step[x]) for x in xs],
                width=2.5,
                colour="#0072B2",
            )
        )
        lines.append(
            charts.Line(
                "slowest rank at each step",
                [float(x) for x in xs],
                [max(by_step[x]) for x in xs],
                dash="dot",
                colour="#555555",
            )
        )
        notes.append(
            f"{len(with_steps)} ranks: drawn as the median and the slowest rank at each step, and the "
            f"{len(one_by_one)} flagged ranks one by one"
        )
    for r in sorted(one_by_one, key=lambda r: r.rank):
        steps = sorted(r.steps, key=lambda s: s.step)
        strag = r.rank in flagged
        lines.append(
            charts.Line(
                name=f"rank {r.rank}" + (" (straggler)" if strag else ""),
                x=[float(s.step) for s in steps],
                y=[s.step_ms for s in steps],
                width=3 if strag else 1.2,
                colour=STRAGGLER_COLOUR if strag else None,
            )
        )
    fig = charts.lines("step time by step", lines, "step", "step time (ms)", height=400, integer_x=True)
    return Figure("step-series", figure_json(fig), notes)


def _missing(per_rank: Sequence[RankSteps], lim: Limits) -> list[tuple[str, Clipped]]:
    said: dict[str, list[int]] = {}
    for r in per_rank:
        for m in r.missing:
            said.setdefault(m, []).append(r.rank)
    out = []
    for m, ranks in list(said.items())[:50]:
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {cpu_list(ranks)}"
        out.append((who, clip(m, lim.text_chars)))
    return out


def render_steps(
    report: StepsReport,
    *,
    ranks: Sequence[RankSteps] = (),
    errors: Sequence[str] = (),
    sources: Sequence[str] = (),
    limits: Limits | None = None,
) -> str:
    """The step-time analysis as one self-contained HTML page (a ``str``; plotly.js is inlined).

    Args:
        report: what ``fleetdx steps --json`` prints.
        ranks: the decomposed ranks the report was made from (per-step times for the step-time series and
            what each input could not tell); without them the page has no series.
        errors: inputs that could not be used, one line each.
        sources: the inputs as given on the command line, listed at the foot of the page.
        limits: how much of each list is shown (:class:`Limits`); what is cut is counted on the page.
    """
    lim = limits or Limits()
    flagged = straggler_ranks(report.findings)
    findings = [_finding_view(f, lim) for f in report.findings[: lim.findings]]
    findings.sort(key=lambda v: not v.straggler)
    table = _pick_ranks(report.ranks, flagged, lim.ranks)
    stages = stage_names(table)
    job = report.job.model_dump(mode="json", exclude_defaults=True) if report.job is not None else {}
    return render(
        "steps.html.j2",
        title="fleetdx steps" + (f" of job {job['job_id']}" if job.get("job_id") is not None else ""),
        report=report,
        job=[(str(k), str(v)) for k, v in job.items()],
        flagged=flagged,
        flagged_text=cpu_list(flagged),
        findings=findings,
        findings_left_out=len(report.findings) - len(findings),
        bars=stage_bars(report, flagged, lim),
        series=step_series(ranks, flagged, lim),
        has_series_input=bool(ranks),
        table=table,
        table_left_out=len(report.ranks) - len(table),
        stages=stages,
        missing=_missing(ranks, lim),
        mfu_lines=summary_lines(report),
        errors=[clip(e, lim.text_chars) for e in errors],
        sources=list(sources),
        limits=lim,
    )
