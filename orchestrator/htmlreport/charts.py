"""The reports' charts as plotly figures (``plotly.graph_objects``), built from already-cut, already-escaped
data: this module decides how a chart looks, not what is in it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

#: one template for every chart, white background so the page prints well
TEMPLATE = "plotly_white"
#: the stages' colours, in :data:`fleetdx.orchestrator.steps.contracts.STAGE_ORDER` order (Okabe-Ito's
#: colour-blind-safe palette, then greys for checkpoint and other)
STAGE_COLOURS = {
    "data": "#E69F00",
    "h2d": "#56B4E9",
    "forward": "#009E73",
    "backward": "#0072B2",
    "grad_sync": "#D55E00",
    "optimizer": "#CC79A7",
    "checkpoint": "#999999",
    "other": "#CCCCCC",
}


def _layout(fig: go.Figure, title: str, height: int, **kw: Any) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        hoverlabel={"align": "left"},
        **kw,
    )
    return fig


def integer_dtick(lo: float, hi: float, most: int = 10) -> int:
    """The spacing of ticks on whole numbers between ``lo`` and ``hi``: 1, 2 or 5 times a power of ten, the
    smallest that gives at most ``most`` intervals. Plotly's own choice on a short range is 0.5 or 0.2, which an
    integer tick format then prints as ``0 1 1 2 2``."""
    span = max(hi - lo, 1.0)
    power = 1
    while True:
        for m in (1, 2, 5):
            if span / (m * power) <= most:
                return m * power
        power *= 10


@dataclass
class Points:
    """One series of markers: x, y and the hover label of each point (labels already HTML-escaped)."""

    name: str
    x: list[Any] = field(default_factory=list)
    y: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


#: the ring drawn around the first failure's marker
FIRST_COLOUR = "#C00000"


def timeline(
    series: Sequence[Points],
    rows: Sequence[str],
    x_title: str,
    x_is_time: bool,
    highlight: tuple[int, int] | None = None,
) -> go.Figure:
    """Events as markers, one row per host/rank (``rows`` in display order, top first), one colour per kind;
    ``highlight`` (series, point): the first failure, drawn larger with a red ring and labelled."""
    fig = go.Figure()
    symbols = ["circle", "diamond", "square", "x", "triangle-up", "cross", "star", "triangle-down"]
    for i, s in enumerate(series):
        marker: dict[str, Any] = {"size": 9, "symbol": symbols[(i // 10) % len(symbols)], "line": {"width": 0.5}}
        if highlight is not None and highlight[0] == i:
            k = highlight[1]
            marker["size"] = [16 if j == k else 9 for j in range(len(s.x))]
            marker["line"] = {
                "width": [3 if j == k else 0.5 for j in range(len(s.x))],
                "color": [FIRST_COLOUR if j == k else "#444" for j in range(len(s.x))],
            }
        fig.add_trace(
            go.Scatter(
                x=s.x,
                y=s.y,
                mode="markers",
                name=s.name,
                marker=marker,
                hovertext=s.labels,
                hovertemplate="%{hovertext}<extra>" + s.name + "</extra>",
            )
        )
    fig.update_yaxes(
        type="category", categoryorder="array", categoryarray=list(reversed(rows)), title=None, automargin=True
    )
    fig.update_xaxes(title=x_title, type="date" if x_is_time else "linear", automargin=True)
    xs = [x for s in series for x in s.x]
    if not x_is_time and xs:  # positions 1, 2, 3...: ticks on whole numbers only
        fig.update_xaxes(tickformat="d", rangemode="tozero", tick0=0, dtick=integer_dtick(0, max(xs)))
    if highlight is not None:
        s = series[highlight[0]]
        fig.add_annotation(
            x=s.x[highlight[1]],
            y=s.y[highlight[1]],
            text="first failure",
            showarrow=True,
            arrowhead=2,
            arrowcolor=FIRST_COLOUR,
            font={"color": FIRST_COLOUR},
            ax=40,
            ay=-30,
        )
    return _layout(fig, "timeline", min(160 + 22 * max(len(rows), 1), 2800))


@dataclass
class Matrix:
    """A square matrix of pair values (GB/s), ``None`` where a pair was not measured."""

    title: str
    hosts: list[str]
    z: list[list[float | None]]
    labels: list[list[str]]


def heat_map(m: Matrix) -> go.Figure:
    """Pair busbw between hosts (red low, green high)."""
    fig = go.Figure(
        go.Heatmap(
            z=m.z,
            x=m.hosts,
            y=m.hosts,
            colorscale="RdYlGn",
            colorbar={"title": {"text": "GB/s"}},
            hovertext=m.labels,
            hovertemplate="%{hovertext}<extra></extra>",
            hoverongaps=False,
        )
    )
    fig.update_yaxes(autorange="reversed", type="category", automargin=True)
    fig.update_xaxes(type="category", automargin=True)
    side = min(220 + 18 * len(m.hosts), 1600)
    return _layout(fig, m.title, side)


@dataclass
class Line:
    """One line: x, y, its name and hover labels."""

    name: str
    x: list[float]
    y: list[float]
    labels: list[str] | None = None
    width: float = 1.5
    dash: str | None = None
    colour: str | None = None


def lines(
    title: str,
    series: Sequence[Line],
    x_title: str,
    y_title: str,
    log_x: bool = False,
    height: int = 420,
    integer_x: bool = False,
) -> go.Figure:
    """Lines with markers (busbw vs message size, step time vs step); ``integer_x``: ticks on whole numbers
    only (step numbers), about ten of them."""
    fig = go.Figure()
    for s in series:
        line: dict[str, Any] = {"width": s.width}
        if s.dash:
            line["dash"] = s.dash
        if s.colour:
            line["color"] = s.colour
        fig.add_trace(
            go.Scatter(
                x=s.x,
                y=s.y,
                mode="lines+markers",
                name=s.name,
                line=line,
                marker={"size": 4},
                hovertext=s.labels,
                hovertemplate=("%{hovertext}" if s.labels else "%{x}: %{y:.3g}") + "<extra>" + s.name + "</extra>",
            )
        )
    fig.update_xaxes(title=x_title, type="log" if log_x else "linear", automargin=True)
    xs = [x for s in series for x in s.x]
    if integer_x and xs:
        fig.update_xaxes(tick0=0, dtick=integer_dtick(min(xs), max(xs)), tickformat="d")
    fig.update_yaxes(title=y_title, rangemode="tozero", automargin=True)
    return _layout(fig, title, height)


def stacked_bars(title: str, categories: list[str], stages: dict[str, list[float]], y_title: str) -> go.Figure:
    """One stacked bar per category (a rank), one segment per stage, in the dict's order."""
    fig = go.Figure()
    for stage, values in stages.items():
        fig.add_trace(
            go.Bar(
                x=categories,
                y=values,
                name=stage,
                marker={"color": STAGE_COLOURS.get(stage)},
                hovertemplate="%{x}: " + stage + " %{y:.2f} ms<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack", bargap=0.15)
    fig.update_xaxes(type="category", automargin=True)
    fig.update_yaxes(title=y_title, automargin=True)
    return _layout(fig, title, 440)


#: a verdict's colour, as the pages' badges draw it ("NONE": a node no run judged)
VERDICT_COLOURS = {
    "CRITICAL": "#b42318",
    "WARNING": "#b54708",
    "UNKNOWN": "#6941c6",
    "OK": "#067647",
    "NONE": "#98a2b3",
}


def count_bars(title: str, categories: list[str], segments: dict[str, list[int]], y_title: str) -> go.Figure:
    """One stacked bar per category (a node state), one segment per verdict (coloured by
    :data:`VERDICT_COLOURS`), counts as whole numbers."""
    fig = go.Figure()
    for name, values in segments.items():
        fig.add_trace(
            go.Bar(
                x=categories,
                y=values,
                name=name,
                marker={"color": VERDICT_COLOURS.get(name, "#98a2b3")},
                hovertemplate="%{x}: %{y} " + name + "<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack", bargap=0.3)
    fig.update_xaxes(type="category", automargin=True)
    top = max((sum(col) for col in zip(*segments.values(), strict=True)), default=1)
    fig.update_yaxes(title=y_title, automargin=True, tickformat="d", rangemode="tozero", dtick=integer_dtick(0, top, 5))
    return _layout(fig, title, 260)
