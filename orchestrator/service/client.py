"""The client side of ``POST /reports``: a node or a prolog pushes its report to the central service
(``fleetdx preflight --report-to URL --token-file F``), and spools it locally when the service cannot take it.

The body is :class:`~fleetdx.orchestrator.service.ingest.ReportUpload` JSON, gzip-compressed. The push is
*stored* when the service answers 201 (stored now) or 200 (already stored: a retry after a lost answer).
Anything else (the service down, a timeout, a TLS failure, 5xx, and also 401/403/4xx: a refused report must
not be lost either) writes the report and its raw outputs to a spool file, exactly as when the database is
down (:func:`fleetdx.orchestrator.store.write_spool`): the outcome's message names the file and how to load it.

TLS: an ``https://`` URL is verified against certifi's CA bundle (httpx's default); a private CA is given with
``SSL_CERT_FILE=ca.pem`` (httpx reads it).
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

import httpx

from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.service.ingest import ReportUpload
from fleetdx.orchestrator.store import SaveOutcome, write_spool
from fleetdx.orchestrator.store.records import LiveJobRecord
from fleetdx.orchestrator.store.settings import resolve_spool_dir

#: seconds to connect, and to wait for each read/write, before the push is given up and spooled
PUSH_TIMEOUT_S = 30.0


def reports_url(base: str) -> str:
    """The ingestion endpoint under the service's base URL: ``https://fleetdx:8443`` -> ``.../reports``."""
    return base.rstrip("/") + "/reports"


def push_report(
    base_url: str,
    token: str,
    report: RunReport,
    raw: Mapping[str, Mapping[str, str]] | None = None,
    timeout_s: float = PUSH_TIMEOUT_S,
) -> str | None:
    """POST the report to the service; ``None`` when it is stored there, else why not (one line)."""
    upload = ReportUpload(report=report, raw={h: dict(f) for h, f in (raw or {}).items()})
    body = gzip.compress(upload.model_dump_json().encode("utf-8"), compresslevel=6, mtime=0)
    url = reports_url(base_url)
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
    }
    try:
        r = httpx.post(url, content=body, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as e:
        return f"cannot reach {url}: {e or type(e).__name__}"
    if r.status_code in (200, 201):
        return None
    try:
        detail = r.json().get("detail", r.text)
    except ValueError:
        detail = r.text
    return f"{url} answered {r.status_code}: {str(detail)[:300]}"


def push_live(base_url: str, token: str, record: LiveJobRecord, timeout_s: float = 10.0) -> str | None:
    """POST a running job's live state to the service's ``/live``; ``None`` when kept, else why not (one line)."""
    url = base_url.rstrip("/") + "/live"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        r = httpx.post(url, content=record.model_dump_json().encode("utf-8"), headers=headers, timeout=timeout_s)
    except httpx.HTTPError as e:
        return f"cannot reach {url}: {e or type(e).__name__}"
    if r.status_code == 200:
        return None
    try:
        detail = r.json().get("detail", r.text)
    except ValueError:
        detail = r.text
    return f"{url} answered {r.status_code}: {str(detail)[:300]}"


def push_or_spool(
    base_url: str,
    token: str,
    report: RunReport,
    raw: Mapping[str, Mapping[str, str]] | None = None,
    spool_dir: Path | str | None = None,
    timeout_s: float = PUSH_TIMEOUT_S,
) -> SaveOutcome:
    """Push the report (:func:`push_report`) or, if the service does not store it, spool it to ``spool_dir``
    (None: ``$FLEETDX_SPOOL_DIR``, else ``<user data dir>/spool``). Never raises for a network or disk
    failure: the outcome says what happened (``database`` is the endpoint the report went to)."""
    error = push_report(base_url, token, report, raw, timeout_s)
    if error is None:
        return SaveOutcome(saved=True, database=reports_url(base_url))
    try:
        path = write_spool(report, raw, resolve_spool_dir(spool_dir))
    except OSError as e:
        return SaveOutcome(saved=False, error=f"{error}; writing the spool file failed too: {e}")
    return SaveOutcome(saved=False, spool_path=path, error=error)
