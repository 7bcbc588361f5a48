"""The postmortem of each real job log (tests/fixtures/joblogs/): the cause class, the first failing rank and
host where the log shows them (read by eye), UNKNOWN-rank with the missing evidence named where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.judgement.envelope import FINDING_KEYS
from fleetdx.orchestrator.postmortem.contracts import PostmortemReport
from fleetdx.orchestrator.postmortem.flight import FlightRecorderDumps
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles
from fleetdx.probes.contracts import Severity, Verdict

FIX = Path(__file__).parent / "fixtures" / "joblogs"

#: file prefix -> (first cause's code, rank, host, evidence line numbers of the first cause, leading first)
EXPECTED: dict[str, tuple[F, int | None, str | None, list[int]]] = {
    "01": (F.NCCL_TIMEOUT, None, None, [1, 2, 3, 4]),
    "02": (F.NCCL_TIMEOUT, None, None, [3, 5, 1, 4, 2]),
    "03": (F.NCCL_NETWORK_ERROR, None, "kp-ddp-worker-0", [1, 6, 11]),
    "04": (F.OOM_HOST, 0, "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker", [18]),
    "05": (F.GPU_HW_FAULT, None, None, [13, 1, 2, 4, 5, 6, 8]),
    "06": (F.NCCL_TIMEOUT, None, None, [1, 3, 2, 4]),
    "07": (F.NCCL_NETWORK_ERROR, None, "H100-2", [1]),
    "08": (F.CUDA_ERROR, 0, None, [3]),
    "09": (F.SLURM_TIME_LIMIT, None, None, [1]),  # job-wide: the host that printed it is details["printed_on"]
    "10": (F.NCCL_TIMEOUT, None, None, [2, 3, 4, 5, 6]),
    "13": (F.NCCL_TIMEOUT, None, None, [1, 2, 3, 4]),
    "17": (F.NCCL_TIMEOUT, None, None, [1, 5, 2]),
    "19": (F.NCCL_NETWORK_ERROR, None, "a100-st-p4d24xlarge-22", [1, 7, 8]),
    "22": (F.NCCL_NETWORK_ERROR, 12, "container-e275-1553839402050-12124-01-000057", [1, 5, 9]),
    "25": (F.OOM_GPU, None, "ng30903", [14]),
    "27": (F.PROCESS_CRASH, 0, None, [1]),
    "28": (F.PROCESS_CRASH, 0, "n136-117-136.byted.org", [15]),
    "29": (F.OOM_HOST, 0, "node107", [1, 2]),  # srun task 0, no launcher in the log: rank 0 (SLURM_PROCID)
    "32": (F.GPU_HW_FAULT, None, None, [1, 5, 2, 7, 3, 6, 4]),  # one cause for the four GPUs' burst
    "34": (F.NCCL_TRANSPORT_FALLBACK, None, None, [1]),
    "36": (F.CUDA_ERROR, 0, None, [10]),
    "40": (F.NCCL_TIMEOUT, None, None, [4]),
}


def _path(prefix: str) -> Path:
    (p,) = FIX.glob(prefix + "_*.log")
    return p


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(p.name[:2] for p in FIX.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("prefix", sorted(EXPECTED))
def test_first_cause(prefix: str) -> None:
    code, rank, host, lines = EXPECTED[prefix]
    report = run_postmortem([LogFiles([_path(prefix)])])
    first = report.causes[0]
    assert (first.code, first.rank, first.host) == (code, rank, host)
    assert [e.line for e in first.evidence] == lines
    assert all(e.file == str(_path(prefix)) for e in first.evidence)
    want = Verdict.WARNING if code is F.NCCL_TRANSPORT_FALLBACK else Verdict.CRITICAL
    assert report.verdict is want and report.exit_code == int(want)
    assert first.action  # every cause says what to do
    if prefix == "09":
        assert first.nodes == [] and first.details["printed_on"] == "c0700a-s1"


@pytest.mark.parametrize("prefix", ["01", "02", "13", "17", "40"])
def test_uniform_timeouts_name_no_reporter_and_say_what_is_missing(prefix: str) -> None:
    report = run_postmortem([LogFiles([_path(prefix)])])
    assert report.causes[0].rank is None
    assert any("never reached" in m and "--fr" in m for m in report.missing_evidence)


def test_01_message_names_the_collective_and_the_last_completed_work() -> None:
    msg = run_postmortem([LogFiles([_path("01")])]).causes[0].message
    assert "ALLREDUCE SeqNum 1580" in msg and "last completed work 1579" in msg and "ranks 0,3-4" in msg


def test_06_groups_of_different_guids_are_not_compared() -> None:
    report = run_postmortem([LogFiles([_path("06")])])
    assert "several process groups" in report.causes[0].message and report.causes[0].rank is None


def test_25_the_connection_closed_printer_is_the_observer() -> None:
    causes = run_postmortem([LogFiles([_path("25")])]).causes
    assert causes[0].code is F.OOM_GPU and causes[0].gpu == "cuda:3"
    (observed,) = [c for c in causes if c.code is F.NCCL_NETWORK_ERROR]
    # issue 20: the peer ng30903-ib is ng30903's own IB name: another process of the observer's host, not a node
    # the reader is sent to as if it were another one
    assert observed.nodes == ["ng30903"] and "same host (ng30903" in observed.message
    assert "-ib" not in observed.action and "other ranks on ng30903" in observed.action


def test_28_root_cause_before_the_other_failure() -> None:
    causes = run_postmortem([LogFiles([_path("28")])]).causes
    assert [(c.code, c.rank) for c in causes] == [(F.PROCESS_CRASH, 0), (F.PROCESS_CRASH, 1)]


def test_05_aer_surprise_down_folds_into_the_lost_gpu() -> None:
    (cause,) = run_postmortem([LogFiles([_path("05")])]).causes
    assert cause.gpu == "PCI:0000:02:00" and "Surprise Down Error" in cause.message and "XID 79" in cause.message
    assert cause.action.startswith("drain")


def test_32_xid45_judged_by_the_nvlink_xid_it_follows() -> None:
    causes = run_postmortem([LogFiles([_path("32")])]).causes
    # issue 20: a burst of XID 45 teardowns on four GPUs of one host is one cause with its count, not four
    (c,) = causes
    assert c.code is F.GPU_HW_FAULT and c.severity is Severity.CRITICAL and "NVLink" in c.message
    assert "4 GPUs of this host alike" in c.message and "7 lines" in c.message
    assert c.details["count"] == 7 and c.details["gpus"] == 4


def test_kernel_log_among_logs_silences_the_missing_kernel_note() -> None:
    report = run_postmortem([LogFiles([_path("01"), _path("05")])])
    assert not any("no kernel log" in m for m in report.missing_evidence)
    assert report.causes[0].code is F.GPU_HW_FAULT  # hardware outranks the timeouts it explains
    assert any(c.code is F.NCCL_TIMEOUT for c in report.causes)


def test_json_shape_is_the_report_envelope_with_the_postmortem_body() -> None:
    """Schema version 3 (issue 19): the envelope every job shares, then the postmortem's body; ``causes`` is the
    deprecated alias of ``findings`` (the same objects), and a cause is a finding with the one key set."""
    doc = run_postmortem([LogFiles([_path("22")])]).model_dump(mode="json")
    assert set(doc) == {
        "schema_version",
        "kind",
        "verdict",
        "exit_code",
        "job",
        "findings",
        "missing_evidence",
        "timeline",
        "history",
        "bandwidth",
        "causes",
    }
    assert doc["schema_version"] == 3 and doc["kind"] == "postmortem" and doc["causes"] == doc["findings"]
    assert doc["bandwidth"] == [] and doc["history"] == []
    assert doc["verdict"] == "CRITICAL" and doc["job"] is None
    assert set(doc["findings"][0]) == FINDING_KEYS
    assert set(doc["findings"][0]["evidence"][0]) == {"file", "line", "text"}
    assert set(doc["timeline"][0]) == {"time", "host", "rank", "kind", "text"}
    assert doc["findings"][0]["time"] == "2019-06-02T16:13:44.884Z"
    # a version-2 document (no schema_version, causes with host and gpu_detail) still reads, host first in nodes
    old = {k: v for k, v in doc.items() if k not in ("schema_version", "kind", "findings")}
    first = {k: v for k, v in doc["findings"][0].items() if k not in ("scope", "subject", "details")}
    first.update(host="h9", gpu_detail=None, nodes=["h1"])
    back = PostmortemReport.model_validate({**old, "causes": [first]})
    assert back.findings[0].nodes == ["h9", "h1"] and back.findings[0].code is F.NCCL_NETWORK_ERROR


# --- a real NCCL watchdog timeout captured on a lent H100 (tests/fixtures/flight_recorder/README.md) ---

NCCL_STALL = Path(__file__).parent / "fixtures" / "flight_recorder" / "nccl_1rank_gpu_stall"


def test_h100_stall_with_fr_the_gpu_that_never_started_and_no_crash_of_the_teardown() -> None:
    report = run_postmortem([LogFiles([NCCL_STALL / "stderr.txt"]), FlightRecorderDumps(NCCL_STALL / "pickle")])
    first = report.causes[0]
    assert (first.code, first.rank) == (F.NCCL_TIMEOUT, 0)
    assert "rank 0 enqueued nccl:all_reduce #5 of group 0:default_pg but its GPU never started it" in first.message
    # "terminate called after throwing an instance of 'c10::DistBackendError'" is ProcessGroupNCCL taking the
    # process down after the timeout: evidence of the timeout, not a PROCESS_CRASH of its own
    assert [c.code for c in report.causes] == [F.NCCL_TIMEOUT, F.NCCL_TIMEOUT]
    assert 30 in [e.line for e in report.causes[1].evidence]
    assert report.verdict is Verdict.CRITICAL


def test_h100_stall_without_fr_the_timeout_of_rank_0_first() -> None:
    report = run_postmortem([LogFiles([NCCL_STALL / "stderr.txt"])])
    (cause,) = report.causes
    assert cause.code is F.NCCL_TIMEOUT
    assert "rank 0 waited in ALLREDUCE SeqNum 5, last completed work 4" in cause.message
    # one rank's log cannot tell which rank hung the collective (the Flight Recorder can: the test above)
    assert cause.rank is None and any("never reached" in m and "--fr" in m for m in report.missing_evidence)
    # the timeout, the watchdog's "thread terminated" line, the what(), the work progress, the terminate line
    assert [e.line for e in cause.evidence] == [5, 20, 31, 6, 30]
