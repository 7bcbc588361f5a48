"""The message catalog: the failure messages that training jobs, their launchers and their libraries print, as
data (``messages.yaml`` beside this module), and the table-driven extraction that reads them from log lines.

Each row (:class:`MessageRow`) is one message as its source prints it: the project and file that print it and
the versions in which the string exists (:class:`MessageSource`: ``nccl src/bootstrap.cc 2.10-2.29``), the
``template`` (the format string, printf/fmt placeholders kept), a ``literal`` (a fixed substring every matching
line holds: the prefilter), a ``pattern`` (a Python regex whose named groups come from :data:`GROUPS`), the
:class:`~fleetdx.probes.parsers.joblog.EventKind` value it becomes (``kind``), whether the line names the cause
(``role``: ``decisive``) or reports its consequence on another process (``observer``) or is read only when the
log holds nothing else (``fallback``: a C++ frame of the function that threw, whose message the paste lost), a short
``failure_class`` (:data:`FAILURE_CLASSES`) and a ``fixture``: a real line (``fixture_source`` says where it was
published) or the template filled with realistic values (``fixture_source: template ...``).

``extractor`` says what reads a row: ``catalog`` rows become events through :meth:`Catalog.scan` (wired into
:mod:`fleetdx.probes.parsers.joblog`'s per-line path); ``joblog`` rows are read by joblog's hand-written
regexes and ``kernel`` rows by :mod:`fleetdx.probes.parsers.joblog_kernel` (catalogued so the table is the one
reviewed list, and tested against their fixtures).

Extraction (:meth:`Catalog.scan`): an Aho-Corasick automaton of every row's literal
(:class:`~fleetdx.probes.parsers.literals.Literals`) decides in a single pass whether a line may hold any
catalogued message (:meth:`Catalog.may_match`) and which literals it holds; only those rows' patterns run.
Patterns are written without unbounded spans that can overlap (``.{0,N}`` rather than ``.*``), so every pattern
runs in time linear in the line's length (tests/test_message_catalog.py checks it on 1 MB hostile lines).

Errors: :class:`~fleetdx.probes.errors.ConfigError` when the yaml cannot be read or a row is invalid (an
unknown group name, a pattern that does not compile, a fixture without its literal).

``python -m fleetdx.probes.parsers.msgcatalog --stats`` prints the rows per source project and version range.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Literal, NamedTuple, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from fleetdx.probes.contracts import Contract, JsonScalar
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.literals import Literals

#: the catalog file, packaged beside this module (pyproject's package-data ships ``*.yaml``)
CATALOG_PATH = Path(__file__).with_name("messages.yaml")

#: the named groups a pattern may use, and what each holds (the event detail of the same name)
GROUPS: dict[str, str] = {
    "rank": "the printing process's global rank as the message states it",
    "local_rank": "the printing or failed process's rank on its node (a launcher's child index), never a global rank",
    "culprit_rank": "the rank the message blames (Flight Recorder's 'from rank N': the rank that timed out)",
    "seq": "a collective's sequence number (SeqNum)",
    "op": "a collective's op type (ALLREDUCE, ...)",
    "numel": "elements of a collective's input (NumelIn)",
    "timeout_ms": "a collective's timeout, milliseconds",
    "ran_for_ms": "how long a collective ran before it timed out, milliseconds",
    "last_enqueued": "the last enqueued work's sequence number",
    "last_completed": "the last completed work's sequence number",
    "peer": "the other end: a peer host:port or rank as printed",
    "host": "the host (node) the message names",
    "dev": "a GPU's device index",
    "device": "a network device (HCA, netdev) as printed: mlx5_0:1",
    "bus_id": "a PCI address as printed",
    "status": "an IB work-completion status or NCCL result code",
    "vendor_err": "an IB vendor error (syndrome)",
    "xid": "an NVIDIA XID code",
    "pid": "a process id",
    "exit_code": "a process exit code",
    "signal": "a signal name or number as printed",
    "task": "a Slurm task id",
    "tasks": "a Slurm task list (0-3,5)",
    "step": "a Slurm step id (1234.0) or job id",
    "seconds": "a duration, seconds",
    "bytes": "a size as printed with its unit (2.00 GiB): read as bytes",
    "iface": "a network interface name (NCCL_SOCKET_IFNAME)",
    "count": "how many events the message counts",
    "world_size": "how many processes the job or store expects (the N of 'M/N clients joined')",
    "error": "the error text the message carries",
    "time": "a time stamp the message carries",
}
_INT_GROUPS = frozenset(
    {
        "rank",
        "local_rank",
        "culprit_rank",
        "seq",
        "numel",
        "timeout_ms",
        "ran_for_ms",
        "last_enqueued",
        "last_completed",
        "dev",
        "status",
        "vendor_err",
        "xid",
        "pid",
        "exit_code",
        "task",
        "count",
        "world_size",
    }
)
#: the failure classes rows are sorted into (the correlation's cause rules read them)
FailureClass = Literal[
    "oom_host",
    "oom_gpu",
    "nccl_timeout",
    "nccl_error",
    "config_error",
    "bus_error",
    "shm_too_small",
    "hw_fault",
    "network",
    "crash",
    "time_limit",
    "preempted",
    "cancelled",
    "node_failure",
]
FAILURE_CLASSES: tuple[str, ...] = get_args(FailureClass)
#: the joblog kinds a catalog event may replace when found on the same line: the catch-alls that say less (the
#: NET/OFI completion pattern reads any aws-ofi-nccl WARN naming an error)
SUPERSEDABLE = frozenset({"nccl-warn", "nccl-internal-error", "python-exception", "cuda-error", "nccl-ib-completion"})
_VERSIONS_RE = re.compile(r"^(?:>=|<=|<)?\d+(?:\.\d+)*(?:-\d+(?:\.\d+)*)?$")
_GROUP_NAME_RE = re.compile(r"\(\?P<(\w+)>")
_BYTES_RE = re.compile(r"^([\d.]+)\s*([KMGTP]?)(i?)B$")
_UNITS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


class MessageSource(Contract):
    """Where a message is printed: ``project`` (``nccl``, ``pytorch``, ``slurm``, ...), ``path`` (the file in
    that project's repository, or the public document for strings with no repository), ``versions`` (the
    range in which the string exists: ``>=2.2``, ``2.10-2.22``, ``<=20.02``)."""

    project: str = Field(pattern=r"^[a-z][a-z0-9\-]*$")
    path: str = Field(min_length=3)
    versions: str

    @field_validator("versions")
    @classmethod
    def _versions(cls, v: str) -> str:
        if not _VERSIONS_RE.match(v):
            raise ValueError(f"version range {v!r}: expected >=X.Y, X.Y-Z.W or <=X.Y")
        return v

    @property
    def label(self) -> str:
        """``project versions``: ``nccl 2.10-2.29``."""
        return f"{self.project} {self.versions}"


class MessageRow(Contract):
    """One catalogued message (see the module doc for the fields)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")
    source: MessageSource
    template: str = Field(min_length=4)
    literal: str = Field(min_length=5)
    pattern: str
    kind: str = Field(pattern=r"^[a-z][a-z0-9\-]*$")
    role: Literal["decisive", "observer", "fallback"]
    failure_class: FailureClass
    extractor: Literal["catalog", "joblog", "kernel"] = "catalog"
    #: joblog catch-all kinds (:data:`SUPERSEDABLE`) this row's event replaces on the same line
    supersedes: list[str] = Field(default_factory=list)
    #: constant details every event of the row carries (``signal: SIGBUS``)
    constants: dict[str, str | int | bool] = Field(default_factory=dict)
    fixture: str
    fixture_source: str = Field(pattern=r"^(?:public|template)\b")
    note: str | None = None

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"pattern does not compile: {e}") from e
        unknown = sorted(set(_GROUP_NAME_RE.findall(v)) - set(GROUPS))
        if unknown:
            raise ValueError(f"pattern groups {unknown} not in the vocabulary ({', '.join(GROUPS)})")
        return v

    @field_validator("supersedes")
    @classmethod
    def _supersedes(cls, v: list[str]) -> list[str]:
        bad = sorted(set(v) - SUPERSEDABLE)
        if bad:
            raise ValueError(f"supersedes {bad}: only {sorted(SUPERSEDABLE)} may be superseded")
        return v

    @model_validator(mode="after")
    def _fixture_has_literal(self) -> MessageRow:
        if self.literal not in self.fixture:
            raise ValueError(f"fixture does not hold the literal {self.literal!r}")
        return self


class CatalogFile(Contract):
    """The yaml document: ``rows``, ids unique."""

    rows: list[MessageRow]

    @model_validator(mode="after")
    def _unique(self) -> CatalogFile:
        dup = [i for i, n in Counter(r.id for r in self.rows).items() if n > 1]
        if dup:
            raise ValueError(f"duplicate row ids: {dup}")
        return self


class CatalogMatch(NamedTuple):
    """One row matched on one line: the row, and the details read from its named groups (ints for counts,
    ranks and codes; ``bytes`` as an int of bytes; ``seconds`` a float; the rest as printed) merged with the
    row's ``constants``."""

    row: MessageRow
    details: dict[str, JsonScalar]


def to_bytes(text: str) -> int | None:
    """``"2.00 GiB"`` -> 2147483648, ``"978.00 MiB"``, ``"512 KB"`` (binary multiples for both spellings, as
    torch's allocator prints them), ``"0 bytes"`` -> 0; ``None`` when unreadable."""
    t = text.strip()
    if t.endswith(" bytes") and t[:-6].strip().isdigit():
        return int(t[:-6])
    m = _BYTES_RE.match(t)
    if m is None:
        return None
    try:
        return int(float(m.group(1)) * 1024 ** _UNITS[m.group(2)])
    except ValueError:
        return None


def _typed(name: str, value: str) -> JsonScalar:
    if name in _INT_GROUPS:
        try:
            return int(value)
        except ValueError:
            return value
    if name == "seconds":
        try:
            return float(value)
        except ValueError:
            return value
    if name == "bytes":
        b = to_bytes(value)
        return b if b is not None else value
    return value


class Catalog:
    """The compiled catalog: :meth:`may_match` (the one-pass literal prefilter) and :meth:`scan`.

    ``rows`` keep the yaml's order; a line's matches come in that order."""

    def __init__(self, rows: Sequence[MessageRow]) -> None:
        self.rows = list(rows)
        self._patterns = [re.compile(r.pattern) for r in self.rows]
        by_literal: dict[str, list[int]] = {}
        for i, r in enumerate(self.rows):
            by_literal.setdefault(r.literal, []).append(i)
        self._by_literal = by_literal
        self._gate = Literals(by_literal)

    @property
    def literals(self) -> list[str]:
        """Every row's literal, each once (for a caller that folds them into a gate of its own)."""
        return list(self._by_literal)

    def may_match(self, line: str) -> bool:
        """Whether ``line`` holds any row's literal (one pass over the line)."""
        return self._gate.any_in(line)

    def scan(self, line: str, extractors: frozenset[str] = frozenset({"catalog"})) -> list[CatalogMatch]:
        """The rows (of the given ``extractors``) whose pattern matches ``line``, with their details, in
        catalog order. Lines without any literal cost one regex pass."""
        hits: list[tuple[int, CatalogMatch]] = []
        for lit in self._literals_in(line):
            for i in self._by_literal[lit]:
                row = self.rows[i]
                if row.extractor not in extractors:
                    continue
                m = self._patterns[i].search(line)
                if m is None:
                    continue
                det: dict[str, JsonScalar] = dict(row.constants)
                for k, v in m.groupdict().items():
                    if v is not None:
                        det[k] = _typed(k, v)
                hits.append((i, CatalogMatch(row, det)))
        return [cm for _, cm in sorted(hits, key=lambda h: h[0])]

    def _literals_in(self, line: str) -> set[str]:
        """Every row literal ``line`` holds (one pass over the line, :class:`Literals`)."""
        return self._gate.found_in(line)

    def stats(self) -> dict[str, int]:
        """Rows per ``project versions`` label, sorted by label."""
        return dict(sorted(Counter(r.source.label for r in self.rows).items()))


def load_rows(path: Path | None = None) -> list[MessageRow]:
    """The validated rows of the catalog at ``path`` (default :data:`CATALOG_PATH`).

    Raises:
        ConfigError: the file cannot be read or parsed, or a row is invalid.
    """
    import yaml

    p = path or CATALOG_PATH
    try:
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{p.name}: {e}") from e
    try:
        return CatalogFile.model_validate(raw).rows
    except ValidationError as e:
        raise ConfigError(f"{p.name}: {e}") from e


@cache
def catalog() -> Catalog:
    """The packaged catalog, compiled once.

    Raises:
        ConfigError: as :func:`load_rows`.
    """
    return Catalog(load_rows())


def main(argv: Sequence[str] | None = None) -> int:
    """``--stats``: rows per source project and version range, then per failure class and extractor."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["--stats"]:
        print("usage: python -m fleetdx.probes.parsers.msgcatalog --stats", file=sys.stderr)
        return 2
    cat = catalog()
    print(f"{len(cat.rows)} rows")
    print("rows per source (project, versions):")
    for label, n in cat.stats().items():
        print(f"  {label:<28} {n:>3}")
    for title, counts in (
        ("per project", Counter(r.source.project for r in cat.rows)),
        ("per failure class", Counter(r.failure_class for r in cat.rows)),
        ("per extractor", Counter(r.extractor for r in cat.rows)),
    ):
        print(f"{title}:")
        for k, n in sorted(counts.items()):
            print(f"  {k:<28} {n:>3}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
