"""Parsers for NVIDIA DCGM's ``dcgmi diag`` (text and ``-j`` JSON) and ``dcgmi health -c`` outputs.

``dcgmi diag -r 1|2|3`` runs the DCGM diagnostic (NVVS) at a run level: 1 the deployment/software checks
(seconds), 2 adds short PCIe/memory/... plugins (about two minutes), 3 adds the stress plugins (about half an
hour) -- the DCGM user guide's "Run Levels" table. Formats read, autodetected:

* the text table (``dcgmi/Diag.cpp``): ``|-----  Deployment  ---...|`` category rows, ``| Name | Result |``
  rows. DCGM 3.x writes one result per test (``Pass``, ``Skip - All``, ``Fail - GPU: 0``); DCGM 4.x adds
  per-GPU rows (``|   | GPU0: Pass |``) and ``| Warning | ... |`` rows whose text wraps over following rows.
  ``Error: ...`` lines (the diagnostic could not run) are kept in ``errors``.
* the JSON of ``-j``: DCGM 3.x ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_ids", "status", "warnings", "info"}]}]}], "version"}}`` (``tests`` may hold ``null``
  entries, and text may precede the object), DCGM 4.x ``{"DCGM Diagnostic": {"test_categories": [...
  "results": [{"entity_id", "status", "warnings": [{"warning", "error_id"}]}], "test_summary"}]},
  "metadata": {"version", "Driver Version Detected"}}`` (``testing/python3/dcgm_diag_schema.json``).

Statuses are read case-insensitively: pass, fail, warn(ing), skip(ped); anything else is ``not_run`` (never a
pass). ``dcgmi health -c`` (``dcgmi/Health.cpp``) prints a ``Health Monitor Report`` tree: ``Overall Health``
(Healthy, Warning, Failure), then per entity (``-> 0`` under ``GPU``) each watched system's health and its
message (``-> PCIe system | Warning``, wrapped text rows).

Errors: :class:`~fleetdx.probes.errors.ParseError` for text that holds no diagnostic table, JSON document or
``Error:`` line (diag), or no ``Overall Health`` row and no ``Error:`` line (health).
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT_DIAG = "dcgm-diag"
FMT_HEALTH = "dcgm-health"
#: messages kept per test (a failing memory test on 8 GPUs prints many)
MAX_MESSAGES = 50
#: the longest line read as a table row (dcgmi's rows are 78 columns, some pasted with trailing blanks): a longer
#: one is not a row, and the row patterns never scan it (bounded time on hostile input)
MAX_ROW = 512


class DcgmStatus(str, Enum):
    """A DCGM test result."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    NOT_RUN = "not_run"  #: "Not Run", an unknown word, or no result: never read as a pass


_STATUS_WORDS = {
    "pass": DcgmStatus.PASS,
    "passed": DcgmStatus.PASS,
    "fail": DcgmStatus.FAIL,
    "failed": DcgmStatus.FAIL,
    "warn": DcgmStatus.WARN,
    "warning": DcgmStatus.WARN,
    "skip": DcgmStatus.SKIP,
    "skipped": DcgmStatus.SKIP,
}
#: worst first, for a test's status over its results
_RANK = {DcgmStatus.FAIL: 4, DcgmStatus.WARN: 3, DcgmStatus.NOT_RUN: 2, DcgmStatus.PASS: 1, DcgmStatus.SKIP: 0}


def status_of(word: str) -> DcgmStatus:
    """``"Pass"``, ``"PASS"``, ``"Skip - All"``, ``"Fail - GPU: 0"`` -> the status of its first word."""
    first = re.split(r"[\s\-:]+", word.strip(), maxsplit=1)[0].lower() if word.strip() else ""
    return _STATUS_WORDS.get(first, DcgmStatus.NOT_RUN)


def worst(statuses: list[DcgmStatus]) -> DcgmStatus:
    """The worst status (fail > warn > not run > pass > skip); ``not_run`` for none."""
    return max(statuses, key=lambda s: _RANK[s]) if statuses else DcgmStatus.NOT_RUN


class DcgmResult(Contract):
    """One result of a test: ``gpus`` it covers (``[]``: all GPUs of the run, as a 3.x ``Pass - All`` or a
    software test's one result), its status, and the warning/info texts attached."""

    gpus: list[int] = Field(default_factory=list)
    status: DcgmStatus
    warnings: list[str] = Field(default_factory=list)
    info: list[str] = Field(default_factory=list)


class DcgmTest(Contract):
    """One test (plugin) of a category: ``status`` is the worst of its results (or its own row's)."""

    category: str
    name: str
    status: DcgmStatus
    results: list[DcgmResult] = Field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [w for r in self.results for w in r.warnings]

    @property
    def gpus(self) -> list[int]:
        """The GPUs whose result is this test's status (``[]``: all, or unknown)."""
        return sorted({g for r in self.results if r.status is self.status for g in r.gpus})


class DcgmDiag(Contract):
    """A ``dcgmi diag`` run: ``format`` ``"text"`` or ``"json"``, DCGM and driver versions, the tests in
    output order, and the errors that kept tests from running (``Error: ...`` lines, ``runtime_error``)."""

    format: str
    version: str | None = None
    driver_version: str | None = None
    tests: list[DcgmTest] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    @property
    def failed(self) -> list[DcgmTest]:
        return [t for t in self.tests if t.status is DcgmStatus.FAIL]

    @property
    def warned(self) -> list[DcgmTest]:
        return [t for t in self.tests if t.status is DcgmStatus.WARN]


# ------------------------------------------------------------------------------------------------ text
_CATEGORY_RE = re.compile(r"^[|+]-{3,}\s+(?P<name>[A-Za-z][\w /]*?)\s+-+\+")
_ROW_RE = re.compile(r"^\|\s?(?P<left>[^|]*?)\s*\|\s?(?P<right>.*?)\s*\|\s*$")
_GPU_RESULT_RE = re.compile(r"^GPU\s?(?P<gpu>[0-9]+):\s*(?P<status>\w[\w ]*?)\s*$")
_GPU_LIST_RE = re.compile(r"GPUs?:\s*(?P<ids>[0-9][0-9,\s]*)")
_META_KEYS = {"DCGM Version": "version", "Driver Version Detected": "driver_version"}


class _TestBuilder:
    def __init__(self, category: str, name: str, status: DcgmStatus, gpus: list[int]) -> None:
        self.category, self.name, self.status, self.gpus = category, name, status, gpus
        self.results: list[tuple[list[int], DcgmStatus]] = []
        self.messages: list[tuple[str, list[str]]] = []  # (kind, wrapped pieces)

    def build(self) -> DcgmTest:
        texts = {"warning": [_unwrap(p) for k, p in self.messages if k == "warning"][:MAX_MESSAGES]}
        infos = [_unwrap(p) for k, p in self.messages if k == "info"][:MAX_MESSAGES]
        if self.results:
            results = [DcgmResult(gpus=g, status=s) for g, s in self.results]
            status = worst([s for _, s in self.results] + [self.status])
        else:
            results = [DcgmResult(gpus=self.gpus, status=self.status)]
            status = self.status
        # the messages belong to the test; attach them to its worst result
        i = max(range(len(results)), key=lambda j: _RANK[results[j].status])
        results[i] = results[i].model_copy(update={"warnings": texts["warning"], "info": infos})
        return DcgmTest(category=self.category, name=self.name, status=status, results=results)


def _unwrap(pieces: list[str]) -> str:
    """Join a message dcgmi wrapped at a fixed column (``non-ze`` / ``ro status``): a piece as long as the
    widest one was cut mid-text and joins without a space."""
    width = max(len(p) for p in pieces)
    out = ""
    for i, p in enumerate(pieces):
        out += p
        if i < len(pieces) - 1 and len(p) < width:
            out += " "
    return re.sub(r"\s+", " ", out).strip()


def _gpu_list(text: str) -> list[int]:
    m = _GPU_LIST_RE.search(text)
    return sorted({int(x) for x in re.findall(r"[0-9]+", m.group("ids"))}) if m else []


class _TextReader:
    """Reads the text table line by line (one method per kind of row)."""

    def __init__(self) -> None:
        self.meta: dict[str, str] = {}
        self.errors: list[str] = []
        self.tests: dict[tuple[str, str], _TestBuilder] = {}
        self.category = ""
        self.cur: _TestBuilder | None = None
        self.msg: list[str] | None = None

    def line(self, line: str) -> None:
        if line.startswith("Error:"):
            self.errors.append(line[len("Error:") :].strip())
            return
        if len(line) > MAX_ROW:
            return
        c = _CATEGORY_RE.match(line)
        if c is not None:
            self.category, self.cur, self.msg = c.group("name").strip(), None, None
            return
        r = _ROW_RE.match(line)
        if r is None or (line.startswith("| Diagnostic") and "Result" in line):
            return
        left, right = r.group("left").strip(), r.group("right")
        if self.category == "Metadata":
            if left in _META_KEYS:
                self.meta[_META_KEYS[left]] = right.strip()
        elif left in ("Warning", "Info"):
            self.message(left.lower(), right)
        elif not left:
            self.continuation(right)
        elif self.category:
            self.test(left, right)

    def message(self, kind: str, text: str) -> None:
        if self.cur is not None:
            self.msg = [text.rstrip()]
            self.cur.messages.append((kind, self.msg))

    def continuation(self, right: str) -> None:
        g = _GPU_RESULT_RE.match(right.strip())
        if g is not None and self.cur is not None:
            self.cur.results.append(([int(g.group("gpu"))], status_of(g.group("status"))))
            self.msg = None
        elif self.msg is not None and right.strip():
            self.msg.append(right.rstrip())

    def test(self, name: str, result: str) -> None:
        key = (self.category, name)
        status = status_of(result)
        b = self.tests.get(key)
        if b is None:
            b = self.tests[key] = _TestBuilder(self.category, name, status, _gpu_list(result))
        else:  # the same test in a second table (two runs in one output): the worse result stands
            b.status = worst([b.status, status])
        self.cur, self.msg = b, None


def _parse_text(text: str) -> DcgmDiag:
    reader = _TextReader()
    for raw in text.splitlines():
        reader.line(raw.rstrip("\r").rstrip())
    if not reader.tests and not reader.errors:
        raise ParseError(FMT_DIAG, None, "a dcgmi diag result table, a JSON document or an 'Error:' line", text[:80])
    return DcgmDiag(
        format="text",
        version=reader.meta.get("version"),
        driver_version=reader.meta.get("driver_version"),
        tests=[b.build() for b in reader.tests.values()],
        errors=reader.errors,
    )


# ------------------------------------------------------------------------------------------------ JSON
def _texts(items: Any) -> list[str]:
    out: list[str] = []
    for it in items if isinstance(items, list) else []:
        if isinstance(it, str):
            out.append(it)
        elif isinstance(it, dict):
            t = it.get("warning") or it.get("message") or it.get("info")
            if isinstance(t, str):
                out.append(t)
    return out[:MAX_MESSAGES]


def _ids(v: Any) -> list[int]:
    if isinstance(v, bool):
        return []
    if isinstance(v, int):
        return [v]
    if isinstance(v, str):
        return sorted({int(x) for x in re.findall(r"[0-9]+", v)})
    return []


def _json_result(r: dict[str, Any]) -> DcgmResult:
    gpus = _ids(r.get("gpu_ids", r.get("gpu_id", r.get("entity_id"))))
    if r.get("entity_group") not in (None, "GPU"):
        gpus = []
    return DcgmResult(
        gpus=gpus,
        status=status_of(str(r.get("status", ""))),
        warnings=_texts(r.get("warnings")),
        info=_texts(r.get("info")),
    )


def _parse_json(doc: dict[str, Any]) -> DcgmDiag:
    root = doc.get("DCGM GPU Diagnostic") or doc.get("DCGM Diagnostic")
    if not isinstance(root, dict):
        raise ParseError(FMT_DIAG, None, "a 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' object", str(list(doc))[:80])
    found = doc.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    tests: list[DcgmTest] = []
    for cat in root.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        for t in cat.get("tests") or []:
            if not isinstance(t, dict):
                continue  # DCGM 3.x writes null between tests
            results = [_json_result(r) for r in t.get("results") or [] if isinstance(r, dict)]
            summary = t.get("test_summary")
            statuses = [r.status for r in results]
            if isinstance(summary, dict) and "status" in summary:
                statuses.append(status_of(str(summary["status"])))
            tests.append(
                DcgmTest(
                    category=str(cat.get("category", "")),
                    name=str(t.get("name", "")),
                    status=worst(statuses),
                    results=results,
                )
            )
    errors = [str(root["runtime_error"])] if root.get("runtime_error") else []
    version = root.get("version") or meta.get("version")
    driver = root.get("Driver Version Detected") or meta.get("Driver Version Detected")
    if not tests and not errors:
        raise ParseError(FMT_DIAG, None, "a test or a runtime_error in the DCGM diagnostic", "neither")
    return DcgmDiag(
        format="json",
        version=str(version) if version is not None else None,
        driver_version=str(driver) if driver is not None else None,
        tests=tests,
        errors=errors,
    )


def parse_dcgm_diag(text: str) -> DcgmDiag:
    """``dcgmi diag`` output, text or ``-j`` JSON (autodetected: a ``{`` opening a line) -> :class:`DcgmDiag`.
    Raises :class:`ParseError` (see the module doc)."""
    start = re.search(r"^\s*\{", text, re.MULTILINE)
    if start is not None:
        try:
            doc = json.loads(text[start.start() :])
        except (json.JSONDecodeError, RecursionError) as e:
            raise ParseError(FMT_DIAG, getattr(e, "lineno", None), "valid JSON", str(e)) from None
        if not isinstance(doc, dict):
            raise ParseError(FMT_DIAG, None, "a JSON object", type(doc).__name__)
        out = _parse_json(doc)
        lead = [ln[len("Error:") :].strip() for ln in text[: start.start()].splitlines() if ln.startswith("Error:")]
        return out.model_copy(update={"errors": lead + out.errors}) if lead else out
    return _parse_text(text)


# ------------------------------------------------------------------------------------------------ health
class DcgmHealthResult(str, Enum):
    """``dcgmi health`` results (``Health::HelperHealthToString``)."""

    HEALTHY = "Healthy"
    WARNING = "Warning"
    FAILURE = "Failure"
    INTERNAL_ERROR = "Internal error"


class DcgmHealthIncident(Contract):
    """One watched system's incident on one entity: ``entity`` e.g. ``"GPU 0"``, ``system`` e.g.
    ``"PCIe system"``, its health and message."""

    entity: str
    system: str
    health: DcgmHealthResult
    message: str = ""


class DcgmHealth(Contract):
    """``dcgmi health -c``: the overall health (``None`` when the check could not run: ``errors`` says why)
    and each incident."""

    overall: DcgmHealthResult | None = None
    incidents: list[DcgmHealthIncident] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


_HEALTH_WORDS = {h.value.lower(): h for h in DcgmHealthResult}
_ENTITY_RE = re.compile(r"^->\s*(?P<id>\S+)$")


class _HealthReader:
    """Reads the ``Health Monitor Report`` tree row by row."""

    def __init__(self) -> None:
        self.overall: DcgmHealthResult | None = None
        self.errors: list[str] = []
        self.incidents: list[DcgmHealthIncident] = []
        self.group = ""
        self.entity = ""
        self.cur: tuple[str, DcgmHealthResult] | None = None
        self.msg: list[str] = []

    def flush(self) -> None:
        if self.cur is not None:
            text = re.sub(r"\s+", " ", " ".join(self.msg)).strip()  # Health.cpp breaks its text at word ends
            self.incidents.append(
                DcgmHealthIncident(entity=self.entity, system=self.cur[0], health=self.cur[1], message=text)
            )
        self.cur, self.msg = None, []

    def line(self, line: str) -> None:
        if line.startswith("Error:"):
            self.errors.append(line[len("Error:") :].strip())
            return
        r = _ROW_RE.match(line) if len(line) <= MAX_ROW else None
        if r is None:
            return
        left, right = r.group("left").strip(), r.group("right").strip()
        word = _HEALTH_WORDS.get(right.lower())
        if left == "Overall Health":
            self.overall = word or DcgmHealthResult.INTERNAL_ERROR
        elif not left:
            if self.cur is not None and right:
                self.msg.append(right)
        elif left.startswith("->"):
            self.arrow(left[2:].strip(), word)
        elif not right:
            self.flush()
            self.group = left

    def arrow(self, name: str, word: DcgmHealthResult | None) -> None:
        if name == "Errors":
            return
        if " " not in name and _ENTITY_RE.match(f"-> {name}"):
            self.flush()
            self.entity = f"{self.group} {name}".strip()
        elif word is not None:
            self.flush()
            self.cur = (name, word)


def parse_dcgm_health(text: str) -> DcgmHealth:
    """``dcgmi health -c`` text -> :class:`DcgmHealth`. Raises :class:`ParseError` when it holds neither an
    ``Overall Health`` row nor an ``Error:`` line."""
    reader = _HealthReader()
    for raw in text.splitlines():
        reader.line(raw.rstrip("\r").rstrip())
    reader.flush()
    if reader.overall is None and not reader.errors:
        raise ParseError(FMT_HEALTH, None, "an 'Overall Health' row or an 'Error:' line", text[:80])
    return DcgmHealth(overall=reader.overall, incidents=reader.incidents, errors=reader.errors)
