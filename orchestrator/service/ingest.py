"""What ``POST /reports`` accepts: one run's report and its raw tool outputs, checked so that no client mistake
reaches the database as a server error.

Body: JSON of :class:`ReportUpload` (``{"report": RunReport, "raw": {host: {file name: text}}}``), at most
the service's body limit once decoded (:data:`MAX_UPLOAD_BYTES` unless set otherwise), optionally
``Content-Encoding: gzip`` (decompressed with the same cap: a small bomb cannot inflate past it).
:func:`parse_upload` raises :class:`UploadRejected` with an HTTP status and a one-line reason for everything a
client can get wrong:

- 413: the body (or its decompressed form) is over the cap;
- 415: a ``Content-Type`` other than ``application/json``, or a ``Content-Encoding`` other than gzip/identity;
- 400: gzip that does not decompress, text that is not UTF-8 JSON, JSON nested too deeply for the parser
  (about 1000 levels; no report is nested more than a few);
- 422: JSON that is not a report (the first pydantic error, with its location), or a report the database
  would refuse: a text field longer than its column (``run_id`` 64 characters; hosts, subjects, probe and
  file names 255), a NUL character (PostgreSQL text cannot hold one) or a lone UTF-16 surrogate (``"\\ud800"``:
  no database can encode it) anywhere, raw outputs included, a time that is not finite, an
  ``exit_code`` other than the verdict's Nagios value, a host twice in ``nodes``, an integer beyond its
  column (``nranks``, ``schema_version``: 32 bits; message sizes: 64 bits).

SQLite enforces none of the length limits; they are checked here so both databases take the same reports.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterator
from typing import Any

from pydantic import Field, ValidationError

from fleetdx.orchestrator.report import RunReport
from fleetdx.probes.contracts import Contract

#: largest accepted body once decoded (bytes): a pre-flight of a few hundred nodes with their raw outputs
MAX_UPLOAD_BYTES = 64 * 1024 * 1024
#: column widths of the store (orchestrator/store/models.py)
RUN_ID_MAX = 64
NAME_MAX = 255
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: a lone UTF-16 surrogate: text with one has no UTF-8 encoding, so no database (nor a JSON answer) takes it
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class ReportUpload(Contract):
    """The body of ``POST /reports``: a report and (optional) raw outputs, host -> bundle file name -> text."""

    report: RunReport
    raw: dict[str, dict[str, str]] = Field(default_factory=dict)


class IngestResult(Contract):
    """The answer of ``POST /reports``: ``inserted`` false when the run was already stored (the stored one is
    kept: ingestion is idempotent by ``run_id``)."""

    run_id: str
    inserted: bool


class UploadRejected(Exception):
    """A client mistake: ``status`` (4xx) and a one-line ``reason``."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def decode_body(
    body: bytes, content_type: str | None, content_encoding: str | None, limit: int = MAX_UPLOAD_BYTES
) -> bytes:
    """The JSON bytes of a request body: checks the media type and undoes gzip within ``limit`` bytes.

    Raises:
        UploadRejected: 415 (media type, encoding), 400 (gzip that does not decompress), 413 (over ``limit``).
    """
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UploadRejected(415, f"Content-Type must be application/json, not {media or 'missing'!r}")
    return inflate(body, content_encoding, limit, "the report")


def inflate(body: bytes, content_encoding: str | None, limit: int, what: str = "the body") -> bytes:
    """``body`` with its ``Content-Encoding`` (gzip or identity) undone, within ``limit`` bytes.

    Raises:
        UploadRejected: 415 (another encoding), 400 (gzip that does not decompress), 413 (over ``limit``).
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        data = body
    elif encoding == "gzip":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = inflater.decompress(body, limit + 1)
        except zlib.error as e:
            raise UploadRejected(400, f"the gzip body does not decompress: {e}") from None
        if not inflater.eof and len(data) <= limit:
            raise UploadRejected(400, "the gzip body is truncated")
    else:
        raise UploadRejected(415, f"Content-Encoding must be gzip or identity, not {encoding!r}")
    if len(data) > limit:
        raise UploadRejected(413, f"{what} is over {limit} bytes")
    return data


def parse_upload(data: bytes) -> ReportUpload:
    """The upload in ``data`` (JSON bytes), checked against what the database can hold (see the module doc)."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise UploadRejected(400, f"the body is not UTF-8 JSON: {e}") from None
    except RecursionError:  # the C decoder's own depth guard: a clean exception, nothing half-built is kept
        raise UploadRejected(400, "the body's JSON is nested too deeply (a report nests a few levels)") from None
    if isinstance(doc, dict) and "report" not in doc and "run_id" in doc:
        doc = {"report": doc}  # a bare RunReport (`fleetdx preflight --json`) is an upload without raw outputs
    try:
        upload = ReportUpload.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise UploadRejected(422, f"not a fleetdx report: {where}: {first['msg']} ({e.error_count()} errors)") from None
    except TypeError as e:  # a contract's "before" validator met a value of the wrong type (pydantic passes it on)
        raise UploadRejected(422, f"not a fleetdx report: {e}") from None
    problem = _problem(upload)
    if problem is not None:
        raise UploadRejected(422, f"report {upload.report.run_id[:RUN_ID_MAX]!r}: {problem}")
    return upload


def _problem(upload: ReportUpload) -> str | None:
    r = upload.report
    if not r.run_id or len(r.run_id) > RUN_ID_MAX:
        return f"run_id must be 1-{RUN_ID_MAX} characters"
    if r.exit_code != int(r.verdict):
        return f"exit_code {r.exit_code} is not the Nagios value of verdict {r.verdict.name} ({int(r.verdict)})"
    if not (0 <= r.schema_version <= INT32_MAX):
        return f"schema_version {r.schema_version} is out of range"
    hosts = [n.host for n in r.nodes]
    if len(set(hosts)) != len(hosts):
        return "a host appears twice in nodes"
    names = [
        *(("host", h) for h in hosts),
        *(("probe name", p.name) for n in r.nodes for p in n.probes),
        *(("finding subject", f.subject) for f in r.findings),
        *(("finding node", h) for f in r.findings for h in f.nodes),
        *(("recommendation subject", x.subject) for x in r.recommendations),
        *(("recommendation node", x.node or "") for x in r.recommendations),
        *(("raw host", h) for h in upload.raw),
        *(("raw file name", name) for files in upload.raw.values() for name in files),
    ]
    for what, name in names:
        if len(name) > NAME_MAX:
            return f"{what} {name[:40]!r}... is over {NAME_MAX} characters"
        problem = text_problem(name)
        if problem is not None:
            return f"{what} {name[:40]!r} {problem}"
    for c in r.curves:
        if not (0 <= c.nranks <= INT32_MAX):
            return f"curve nranks {c.nranks} is out of range"
        if any(not (0 <= p.size <= INT64_MAX) for p in c.points):
            return "a curve point's size is out of range"
    for where, value in _leaves(r.model_dump(mode="python"), "report"):
        problem = text_problem(value) if isinstance(value, str) else None
        if problem is not None:
            return f"{where} {problem}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where} is {value} (not a finite number)"
    for host, files in upload.raw.items():
        for name, text in files.items():
            problem = text_problem(text)
            if problem is not None:
                return f"raw output {name[:40]!r} of {host[:40]!r} {problem}"
    return None


def text_problem(text: str) -> str | None:
    """Why no text column can hold ``text`` ("holds a NUL character": PostgreSQL; "holds a lone surrogate"),
    else ``None``. Linear in ``len(text)``; ASCII text (``isascii`` is a flag) skips the surrogate scan."""
    if "\x00" in text:
        return "holds a NUL character"
    if not text.isascii() and _SURROGATE.search(text) is not None:
        return "holds a lone surrogate (not encodable as UTF-8)"
    return None


def _leaves(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every scalar in a dumped contract with its location, keys included (evidence keys are text too)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{where}.{k}", str(k)
            yield from _leaves(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{where}[{i}]")
    else:
        yield where, value
