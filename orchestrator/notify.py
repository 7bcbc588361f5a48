"""Webhook notifications: a generic JSON body or a Slack-compatible ``{"text": ...}``, sent in the background
with bounded retries, so that whoever raises an event (ingestion of a CRITICAL pre-flight, a node put in
quarantine, a live job that hangs) is never blocked or failed by a slow or dead webhook.

Use: :func:`notify` (``notify(Event(kind=EventKind.NODE_QUARANTINED, summary=..., hosts=[host]))``) sends to
the process's notifier: the one :func:`configure` installed (``fleetdx serve`` does, from ``--webhook``), else
one made on first use from ``$FLEETDX_WEBHOOKS`` (URLs separated by spaces, commas or newlines) and
``$FLEETDX_WEBHOOK_FORMAT`` (``generic``, the default, or ``slack``); with neither, nothing is sent.
:class:`Notifier` is the same thing for code that is handed one (tests, the service's app).

Delivery: one daemon thread per notifier takes events from a bounded queue (:data:`MAX_QUEUE`; an event over it
is dropped with a warning, never blocking the caller) and POSTs each to every webhook. A webhook that times out
(:data:`TIMEOUT_S`), cannot be reached, or answers 408, 429 or 5xx is tried again after 1, 2, 4, ... s
(:data:`BACKOFF_S` doubling, at most :data:`MAX_BACKOFF_S`, with jitter), :data:`ATTEMPTS` tries in all; any
other 4xx is given up at once (the same body would be refused again). So one event costs a dead webhook at
most ``ATTEMPTS x TIMEOUT_S`` plus the waits (about 1 min with the defaults); a short-lived process (a CLI
command) waits for its queue at exit at most :data:`EXIT_FLUSH_S`. Delivery is at most once per success:
nothing is kept on disk, so events queued when a process dies are lost (the store and /metrics still hold the
facts).

Secrets: a webhook URL is a credential (Slack's carries its secret in the path, others in the query string or
user info). Log lines name a webhook only as :func:`redact` gives it: scheme, host and port, and a short hash
of the whole URL to tell two webhooks apart.

The generic body is :class:`Event` as JSON (``schema_version`` 1). The Slack body follows Slack's incoming
webhooks (api.slack.com/messaging/webhooks: a JSON object with ``text``; ``&``, ``<`` and ``>`` escaped as
Slack's message formatting asks), which Mattermost and Microsoft Teams' Slack-compatible endpoints also take.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import Field

from fleetdx.probes.contracts import Contract

#: tries per event and webhook, the first included
ATTEMPTS = 5
#: seconds before the second try; doubled for each next one, at most MAX_BACKOFF_S
BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
#: seconds one POST may take (connect, send, answer)
TIMEOUT_S = 10.0
#: events waiting to be sent, at most; more are dropped with a warning
MAX_QUEUE = 1000
#: how long a process waits at exit for its queued events to be sent
EXIT_FLUSH_S = 30.0
#: statuses worth another try: the request timed out, too many requests, the server's trouble
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))

WEBHOOKS_ENV = "FLEETDX_WEBHOOKS"
WEBHOOK_FORMAT_ENV = "FLEETDX_WEBHOOK_FORMAT"

log = logging.getLogger("fleetdx.notify")


class EventKind(str, Enum):
    """What happened: a pushed pre-flight was CRITICAL, a node was put in quarantine (drained by fleetdx), a
    running job's ranks stopped making progress."""

    PREFLIGHT_CRITICAL = "preflight.critical"
    NODE_QUARANTINED = "node.quarantined"
    JOB_HANG = "job.hang"


class WebhookFormat(str, Enum):
    """The body sent: ``generic`` (the :class:`Event` as JSON) or ``slack`` (``{"text": ...}``)."""

    GENERIC = "generic"
    SLACK = "slack"


class Event(Contract):
    """One notification. ``summary``: one line a person reads (the Slack text is built from it); ``hosts``:
    the nodes concerned; ``codes``: the finding codes behind it (``fleetdx codes``); ``run_id``/``job_id``:
    where to look (``GET /runs/{run_id}``); ``time``: Unix seconds; ``details``: anything else, as JSON."""

    schema_version: int = 1
    kind: EventKind
    summary: str = Field(min_length=1)
    verdict: str | None = None
    hosts: list[str] = Field(default_factory=list)
    codes: list[str] = Field(default_factory=list)
    run_id: str | None = None
    job_id: str | None = None
    time: float = Field(default_factory=time.time)
    details: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Webhook:
    """Where events go and in which body format."""

    url: str
    format: WebhookFormat = WebhookFormat.GENERIC

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"webhook {redact(self.url)}: not an http:// or https:// URL")


def redact(url: str) -> str:
    """``url`` as it may be logged: ``scheme://host[:port]/…#hash8`` (path, query string and user info left
    out; ``hash8`` the first 8 hex digits of the URL's SHA-256, to tell webhooks apart)."""
    digest = hashlib.sha256(url.encode("utf-8", "backslashreplace")).hexdigest()[:8]
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return f"(unparsable URL)#{digest}"
    return f"{parts.scheme or '?'}://{host}{port}/…#{digest}"


def body(event: Event, fmt: WebhookFormat) -> dict[str, Any]:
    """The JSON body of ``event`` in format ``fmt``."""
    if fmt is WebhookFormat.SLACK:
        return {"text": slack_text(event)}
    return event.model_dump(mode="json")


def slack_text(event: Event) -> str:
    """The Slack message of ``event``: its summary, then hosts, codes and run (Slack's escapes applied)."""
    lines = [f"*fleetdx {_slack_escape(event.kind.value)}*: {_slack_escape(event.summary)}"]
    if event.hosts:
        shown = ", ".join(event.hosts[:20]) + (f" (+{len(event.hosts) - 20} more)" if len(event.hosts) > 20 else "")
        lines.append(f"nodes: {_slack_escape(shown)}")
    if event.codes:
        lines.append(f"codes: {_slack_escape(', '.join(event.codes))}")
    where = [f"run {event.run_id}"] if event.run_id else []
    where += [f"job {event.job_id}"] if event.job_id else []
    if where:
        lines.append(_slack_escape(", ".join(where)))
    return "\n".join(lines)


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def parse_webhooks(text: str | None, fmt: str | WebhookFormat = WebhookFormat.GENERIC) -> list[Webhook]:
    """The webhooks of ``text`` (URLs separated by whitespace or commas), each in format ``fmt``. Raises
    ValueError for a URL that is not http(s) or an unknown format (the message never holds the URL)."""
    try:
        kind = WebhookFormat(fmt)
    except ValueError:
        raise ValueError(f"webhook format {fmt!r}: not one of generic, slack") from None
    return [Webhook(url, kind) for url in re.split(r"[\s,]+", text or "") if url]


@dataclass(frozen=True)
class Retry:
    """How a delivery is retried: ``attempts`` tries in all, waiting ``backoff_s`` doubled at each try (at most
    ``max_backoff_s``, with +-20% jitter) between them; each try at most ``timeout_s``."""

    attempts: int = ATTEMPTS
    backoff_s: float = BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S
    timeout_s: float = TIMEOUT_S

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.timeout_s <= 0 or self.backoff_s < 0:
            raise ValueError(f"bad retry settings: {self}")

    def wait(self, attempt: int) -> float:
        """Seconds to wait after failed try ``attempt`` (1-based)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2))


class _RedactWebhooks(logging.Filter):
    """On the ``httpx`` logger, which logs each request's full URL at INFO: the webhooks' URLs redacted."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(str(a) in self.urls for a in record.args):
            record.args = tuple(redact(str(a)) if str(a) in self.urls else a for a in record.args)
        return True


_REDACT = _RedactWebhooks()
logging.getLogger("httpx").addFilter(_REDACT)


class Notifier:
    """Sends events to ``webhooks`` from a background thread (see the module doc). ``transport`` (tests): the
    httpx transport of its client; ``sleep``: how the backoff waits."""

    def __init__(
        self,
        webhooks: Sequence[Webhook],
        *,
        retry: Retry = Retry(),  # noqa: B008  (frozen, so one shared default is safe)
        max_queue: int = MAX_QUEUE,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.webhooks = list(webhooks)
        _REDACT.urls.update(str(httpx.URL(h.url)) for h in self.webhooks)
        self.retry = retry
        self.sleep = sleep
        self.sent = 0  #: deliveries that succeeded (one per event and webhook)
        self.failed = 0  #: deliveries given up
        self.dropped = 0  #: events dropped because the queue was full
        self._queue: queue.Queue[Event | None] = queue.Queue(maxsize=max_queue)
        self._transport = transport  # the client is made by the sending thread, when there is something to send
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def notify(self, event: Event) -> bool:
        """Queue ``event`` for every webhook and return at once: True when queued, False when there is no
        webhook, the notifier is closed or the queue is full (then a warning is logged)."""
        if not self.webhooks or self._closed:
            return False
        self._start()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            log.warning("webhook queue full (%d events): %s event dropped", self._queue.maxsize, event.kind.value)
            return False
        return True

    def close(self, timeout_s: float = EXIT_FLUSH_S) -> bool:
        """Send what is queued (waiting at most ``timeout_s``), then stop; True when everything was sent or
        given up in time. Events notified after this are not sent."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return True
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            return False
        thread.join(timeout_s)
        return not thread.is_alive()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fleetdx-webhooks", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        timeout = self.retry.timeout_s
        with httpx.Client(timeout=timeout, transport=self._transport, follow_redirects=False) as client:
            while (event := self._queue.get()) is not None:
                self._send(client, event)

    def _send(self, client: httpx.Client, event: Event) -> None:
        """``event`` to every webhook, counted."""
        for hook in self.webhooks:
            try:
                ok = self._deliver(client, hook, event)
            except Exception as e:  # the thread must outlive any one bad event  # noqa: BLE001
                what = type(e).__name__
                log.warning("webhook %s: %s event not sent: %s", redact(hook.url), event.kind.value, what)
                ok = False
            if ok:
                self.sent += 1
            else:
                self.failed += 1

    def _deliver(self, client: httpx.Client, hook: Webhook, event: Event) -> bool:
        """POST ``event`` to ``hook`` with retries; True when it answered 2xx."""
        payload = body(event, hook.format)
        where = redact(hook.url)
        attempts = self.retry.attempts
        for attempt in range(1, attempts + 1):
            try:
                answer = client.post(hook.url, json=payload)
                status: int | None = answer.status_code
                reason = f"HTTP {status}"
            except httpx.TimeoutException:
                status, reason = None, f"no answer within {self.retry.timeout_s:g} s"
            except httpx.HTTPError as e:  # connection refused, DNS, TLS, ...: never the URL (it may hold a secret)
                status, reason = None, type(e).__name__
            if status is not None and 200 <= status < 300:
                if attempt > 1:
                    log.info("webhook %s: %s event sent at try %d", where, event.kind.value, attempt)
                return True
            if status is not None and status not in RETRY_STATUSES:
                log.warning("webhook %s: %s event refused (%s), not retried", where, event.kind.value, reason)
                return False
            if attempt == attempts:
                break
            wait = self.retry.wait(attempt)
            log.info("webhook %s: try %d of %d failed (%s); again in %.1f s", where, attempt, attempts, reason, wait)
            self.sleep(wait)
        log.warning("webhook %s: %s event given up after %d tries (%s)", where, event.kind.value, attempts, reason)
        return False


_default: Notifier | None = None
_default_lock = threading.Lock()


def configure(webhooks: Sequence[Webhook], **options: Any) -> Notifier:
    """Make the process's notifier (the one :func:`notify` uses) send to ``webhooks``; the previous one is
    closed without waiting. ``options``: :class:`Notifier`'s. Returns the new notifier."""
    global _default
    notifier = Notifier(webhooks, **options)
    with _default_lock:
        old, _default = _default, notifier
    if old is not None:
        old.close(timeout_s=0)
    return notifier


def default_notifier() -> Notifier:
    """The process's notifier: the configured one, else one from ``$FLEETDX_WEBHOOKS`` (none: it sends
    nothing). A bad variable is logged (the URL left out) and sends nothing, never raises."""
    global _default
    with _default_lock:
        if _default is None:
            try:
                hooks = parse_webhooks(os.environ.get(WEBHOOKS_ENV), os.environ.get(WEBHOOK_FORMAT_ENV) or "generic")
            except ValueError as e:
                log.warning("$%s: %s; no webhook notifications", WEBHOOKS_ENV, e)
                hooks = []
            _default = Notifier(hooks)
        return _default


def notify(event: Event) -> bool:
    """Send ``event`` to the process's webhooks in the background (see :class:`Notifier.notify`); never
    blocks, never raises for a webhook's trouble."""
    return default_notifier().notify(event)


@atexit.register
def _flush_at_exit() -> None:
    """A CLI process's queued events get :data:`EXIT_FLUSH_S` at most to be sent."""
    if _default is not None:
        _default.close(EXIT_FLUSH_S)
