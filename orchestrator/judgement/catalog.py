"""The code catalog: every :class:`~fleetdx.orchestrator.judgement.findings.FindingCode` once, as data
(``codes.yaml`` beside this module), with the job that emits it, its scope, default severity (and every
severity it may take), its placement policy, a one-line description, the action to take and the public source
of its threshold or meaning.

What reads it: :class:`~fleetdx.orchestrator.judgement.findings.Finding` (default scope and action), the report
assembler (``group_only``), placement (``exclude-node`` / ``exclude-gpu`` and their severities), ``fleetdx
codes`` and the README's table (``fleetdx codes --markdown``).

Errors: :class:`~fleetdx.probes.errors.ConfigError` at first use when the file and the enum disagree (a code
without a row, a row without a code) or a row is malformed: a packaging or editing mistake, never input.
"""

from __future__ import annotations

import functools
from enum import Enum
from importlib import resources

from pydantic import Field, ValidationError

from fleetdx.orchestrator.judgement.codes import FindingCode, Scope
from fleetdx.probes.contracts import SCHEMA_VERSION, Contract, Severity
from fleetdx.probes.errors import ConfigError


class JobKind(str, Enum):
    """The job that emits a code (``preflight`` covers ``analyze`` of the same bundles)."""

    PREFLIGHT = "preflight"
    BANDWIDTH = "bandwidth"
    POSTMORTEM = "postmortem"
    STEPS = "steps"


class Placement(str, Enum):
    """What an open finding of the code does to placement."""

    EXCLUDE_NODE = "exclude-node"  #: the node is unfit (a finding of ``placement_severities`` naming it alone)
    EXCLUDE_GPU = "exclude-gpu"  #: the GPU it names is never advised
    NONE = "none"


class CodeSpec(Contract):
    """One row of the catalog (see the module doc)."""

    code: FindingCode
    job: JobKind
    scope: Scope
    severity: Severity  #: the default
    severities: list[Severity] = Field(default_factory=list)  #: every severity it may take (default: [severity])
    placement: Placement
    placement_severities: list[Severity] = Field(default_factory=list)  #: empty: critical (node), any (GPU)
    group_only: bool = False
    description: str = Field(min_length=1)
    action: str = Field(min_length=1)
    source: str = Field(min_length=1)


class CodeCatalog(Contract):
    """``fleetdx codes --json``."""

    schema_version: int = SCHEMA_VERSION
    codes: list[CodeSpec]


@functools.cache
def _rows() -> dict[FindingCode, CodeSpec]:
    import yaml

    text = resources.files("fleetdx.orchestrator.judgement").joinpath("codes.yaml").read_text(encoding="utf-8")
    try:  # libyaml's loader where PyYAML was built with it: 2.8 ms here against 24 ms for the pure-Python one
        raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise ConfigError(f"codes.yaml: {e}") from e
    if not isinstance(raw, dict):
        raise ConfigError("codes.yaml: not a mapping of code -> row")
    rows: dict[FindingCode, CodeSpec] = {}
    try:
        for name, body in raw.items():
            row = CodeSpec.model_validate({"code": name, **(body or {})})
            if not row.severities:
                row = row.model_copy(update={"severities": [row.severity]})
            elif row.severity not in row.severities:
                raise ConfigError(f"codes.yaml: {name}: default severity {row.severity.value} not in severities")
            rows[row.code] = row
    except ValidationError as e:
        raise ConfigError(f"codes.yaml: {e}") from e
    missing = [c.value for c in FindingCode if c not in rows]
    if missing:
        raise ConfigError(f"codes.yaml: no row for {', '.join(missing)}")
    return {c: rows[c] for c in FindingCode}


def spec(code: FindingCode) -> CodeSpec:
    """The catalog row of ``code``."""
    return _rows()[code]


def catalog() -> CodeCatalog:
    """Every row, in the enum's order."""
    return CodeCatalog(codes=list(_rows().values()))


def group_only_codes() -> frozenset[FindingCode]:
    """Codes that, when a finding names several nodes, judge the group and not each member."""
    return frozenset(c for c, r in _rows().items() if r.group_only)


def node_unfit_codes() -> list[FindingCode]:
    """Codes whose open critical finding naming a node alone makes it unfit for placement."""
    return [c for c, r in _rows().items() if r.placement is Placement.EXCLUDE_NODE]


def gpu_excluding() -> dict[FindingCode, frozenset[Severity] | None]:
    """Code -> severities at which a finding excludes the GPU it names (``None``: every severity)."""
    return {
        c: (frozenset(r.placement_severities) or None)
        for c, r in _rows().items()
        if r.placement is Placement.EXCLUDE_GPU
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The README's table of codes, one table per job (generated; tests/test_code_catalog.py checks the README
    carries it verbatim)."""
    titles = {
        JobKind.PREFLIGHT: "Pre-flight and analyze (node health, topology)",
        JobKind.BANDWIDTH: "Collective bandwidth (`fleetdx bandwidth`, pre-flight at level full)",
        JobKind.POSTMORTEM: "Causes of `fleetdx postmortem` (`evidence` is the log lines; `nodes` the hosts)",
        JobKind.STEPS: "Step-time findings of `fleetdx steps`",
    }
    out: list[str] = []
    for job, title in titles.items():
        out += [f"{title}:", "", "| code | scope | severity | placement | meaning | action |", "|---" * 6 + "|"]
        for r in _rows().values():
            if r.job is not job:
                continue
            sev = " / ".join(s.value for s in r.severities)
            out.append(
                f"| `{r.code.value}` | {r.scope.value} | {sev} | {r.placement.value} | {_cell(r.description)} "
                f"| {_cell(r.action)} |"
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"

