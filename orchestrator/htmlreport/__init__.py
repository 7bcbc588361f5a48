"""Self-contained HTML reports for the CLI: ``fleetdx postmortem --html OUT`` and ``fleetdx steps --html OUT``.

One file per report, readable offline: Jinja2 templates shipped as package data (``*.html.j2`` beside these
modules), charts drawn by plotly.js, inlined from the ``plotly`` Python package
(:func:`plotly.offline.get_plotlyjs`), figures built with plotly's own Python API. The page fetches nothing: a
Content-Security-Policy ``<meta>`` refuses every network load, so a forgotten URL fails loudly in a browser
rather than leaking a request.

Everything from the inputs is hostile text (log lines, host names, file names): Jinja2 autoescapes it, the
figures' JSON is embedded with ``<``, ``>``, ``&`` and ``'`` as ``\\uXXXX`` escapes, and chart labels are
HTML-escaped for plotly (which reads a subset of HTML in labels). Huge inputs stay bounded: every list is cut
at :class:`Limits` and the page says how many entries were left out.

This package renders contracts only (:mod:`fleetdx.orchestrator.postmortem.contracts`,
:mod:`fleetdx.orchestrator.steps.contracts`, store records, :class:`~fleetdx.orchestrator.report.BusbwCurve`);
it computes no diagnosis.
"""

from __future__ import annotations

from fleetdx.orchestrator.htmlreport.page import Limits, write_html
from fleetdx.orchestrator.htmlreport.postmortem import render_postmortem
from fleetdx.orchestrator.htmlreport.steps import render_steps

__all__ = ["Limits", "render_postmortem", "render_steps", "write_html"]
