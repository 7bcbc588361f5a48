"""The shared contracts: Nagios verdict ordering and serialisation."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import Contract, Severity, Verdict, VerdictName


class _V(Contract):
    verdict: VerdictName


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([], Verdict.OK),
        ([Verdict.OK, Verdict.OK], Verdict.OK),
        ([Verdict.OK, Verdict.UNKNOWN], Verdict.UNKNOWN),
        ([Verdict.UNKNOWN, Verdict.WARNING], Verdict.WARNING),
        ([Verdict.WARNING, Verdict.CRITICAL, Verdict.UNKNOWN], Verdict.CRITICAL),
    ],
)
def test_worst_orders_critical_over_warning_over_unknown(verdicts: list[Verdict], expected: Verdict) -> None:
    assert Verdict.worst(verdicts) is expected


def test_verdict_values_are_nagios_exit_codes() -> None:
    assert [int(v) for v in (Verdict.OK, Verdict.WARNING, Verdict.CRITICAL, Verdict.UNKNOWN)] == [0, 1, 2, 3]


def test_verdict_serialises_as_name_and_reads_name_or_number() -> None:
    assert json.loads(_V(verdict=Verdict.CRITICAL).model_dump_json()) == {"verdict": "CRITICAL"}
    assert _V.model_validate({"verdict": "warning"}).verdict is Verdict.WARNING
    assert _V.model_validate({"verdict": 3}).verdict is Verdict.UNKNOWN


def test_severity_maps_to_verdict() -> None:
    assert Severity.CRITICAL.verdict is Verdict.CRITICAL
    assert Severity.INFO.verdict is Verdict.OK


def test_finding_is_frozen_and_rejects_unknown_fields() -> None:
    f = Finding(code=FindingCode.GPU_XID, severity=Severity.CRITICAL, node="n1", subject="GPU0", message="m")
    with pytest.raises(ValidationError):
        f.message = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Finding.model_validate({**f.model_dump(), "colour": "red"})


def test_a_report_with_a_non_integer_schema_version_is_a_validation_error() -> None:
    import pydantic

    from fleetdx.orchestrator.report import RunReport

    with pytest.raises(pydantic.ValidationError):
        RunReport.model_validate({"schema_version": "two", "run_id": "r", "kind": "preflight"})
