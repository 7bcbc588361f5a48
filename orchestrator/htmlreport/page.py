"""The page machinery shared by the reports: the Jinja2 environment, the inlined plotly.js, safe embedding of
figures, clipping of hostile text, the size limits, and writing the file."""

from __future__ import annotations

import html
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import hostlist
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from fleetdx import __version__
from fleetdx.probes.errors import ConfigError

#: the page loads nothing from anywhere: scripts and styles are inline, images only ``data:`` (plotly's
#: "download as PNG" button); a browser refuses any other load (W3C Content Security Policy Level 3)
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:"
#: a page the service serves loads plotly.js from the service itself (one cached file instead of 4.8 MB inlined
#: in every page): the same policy with the page's own origin allowed for scripts
SERVED_CSP = CSP.replace("script-src 'unsafe-inline'", "script-src 'self' 'unsafe-inline'")


@dataclass(frozen=True)
class Limits:
    """How much of a huge input a page shows; whatever is cut is counted on the page ("N left out").

    The defaults keep a 1,024-rank postmortem or a 128-rank x 200-step analysis a few MB over plotly.js's own
    size (about 4.8 MB) and quick to draw in a browser.
    """

    causes: int = 50  #: causes shown (the most likely first)
    evidence: int = 40  #: evidence lines per cause
    text_chars: int = 2000  #: characters of one log line or message; the rest is cut and counted
    label_chars: int = 300  #: characters of one chart hover label
    timeline_rows: int = 1000  #: rows of the timeline table
    timeline_points: int = 5000  #: events drawn on the timeline chart
    chart_rows: int = 120  #: host/rank rows of the timeline chart
    history_hosts: int = 64  #: hosts in the nodes' history
    history_runs: int = 20  #: past runs per host
    curves: int = 48  #: busbw-vs-size curves drawn
    heatmap_hosts: int = 128  #: hosts on each side of the bandwidth heat map
    ranks: int = 256  #: ranks in the stage bars and the rank table
    series_ranks: int = 16  #: ranks drawn one line each in the step-time series (more: flagged ranks + envelope)
    findings: int = 200  #: findings shown
    evidence_items: int = 60  #: key/value items of one finding's evidence


@dataclass(frozen=True)
class Clipped:
    """A text cut to a limit: what is shown and how many characters were cut."""

    text: str
    cut: int


def clip(text: str, limit: int) -> Clipped:
    """``text`` cut to ``limit`` characters (the cut counted, never silent)."""
    return Clipped(text, 0) if len(text) <= limit else Clipped(text[:limit], len(text) - limit)


def short(text: object, limit: int = 200) -> str:
    """A name-like text (host, file, job id, stage) cut to ``limit`` characters, the cut counted in the text:
    the ``short`` filter of the templates (autoescaped as any other text)."""
    t = "" if text is None else str(text)
    return t if len(t) <= limit else f"{t[:limit]} … (+{len(t) - limit} chars)"


def chart_label(text: str, limit: int) -> str:
    """A hover label for plotly: cut to ``limit`` characters and HTML-escaped (plotly renders a subset of HTML
    in labels, ``<a href>`` included, and decodes ``&lt;``, ``&gt;`` and ``&amp;``, so the escaped text shows as
    written; quotes stay as they are: plotly does not decode ``&quot;``)."""
    c = clip(text.replace("\r", ""), limit)
    return html.escape(c.text, quote=False) + (f" … (+{c.cut} chars)" if c.cut else "")


@dataclass
class Figure:
    """A chart to draw: its element id and its JSON, with notes on what it leaves out (an empty ``json``: no
    chart, only the notes, when everything was left out)."""

    id: str
    json: Markup
    notes: list[str] = field(default_factory=list)


def fmt_hosts(hosts: Sequence[str]) -> str:
    """Hosts as a Slurm hostlist (``gpu[01-04]``), or comma-separated when a name is not hostlist syntax."""
    if not hosts:
        return ""
    try:
        return str(hostlist.collect_hostlist(list(hosts)))
    except hostlist.BadHostlist:
        return ", ".join(hosts)


@lru_cache(maxsize=1)
def plotly_js() -> Markup:
    """plotly.js (minified, about 4.8 MB) as shipped inside the ``plotly`` Python package."""
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    if "</script" in js.lower():  # cannot happen with a real bundle; it would end the inline script early
        raise ConfigError("the plotly package's plotly.min.js contains '</script': it cannot be inlined")
    return Markup(js)


def figure_json(fig: Any) -> Markup:
    """A plotly figure as JSON that is safe inside an inline ``<script>``: ``<``, ``>``, ``&``, ``'`` and the
    JavaScript line separators as ``\\uXXXX`` escapes (what Jinja2's ``tojson`` filter does), so no text of the
    input can close the script or open a tag."""
    import plotly.io as pio

    text: str = pio.to_json(fig, validate=False, pretty=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(ch, esc)
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("fleetdx.orchestrator.htmlreport", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["clip"] = clip
    env.filters["short"] = short
    return env


def render(template: str, plotly_src: str | None = None, **context: Any) -> str:
    """Render ``template`` (a file of ``templates/``) with the page furniture every report has. ``plotly_src``:
    the URL (on the page's own origin) the service serves plotly.js at (:data:`SERVED_CSP`); ``None``: plotly.js
    inlined, a self-contained file."""
    return (
        _env()
        .get_template(template)
        .render(
            csp=CSP if plotly_src is None else SERVED_CSP,
            plotly_js=plotly_js() if plotly_src is None else "",
            plotly_src=plotly_src,
            fleetdx_version=__version__,
            generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            **context,
        )
    )


def write_html(path: Path, page: str) -> None:
    """Write ``page`` to ``path`` atomically (a temporary file in the same folder, then a rename), so an
    interrupted write never leaves half a report.

    Raises:
        ConfigError: the folder does not exist or is not writable, or ``path`` is a folder.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder; --html wants a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write the report there ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot write the report ({e.strerror or e})") from None
