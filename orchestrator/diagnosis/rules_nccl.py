"""Diagnosis rules over the nccl-tests outputs and NCCL_DEBUG=INFO logs of a node's bundle (NCCL_*).

``RULES`` (in order):

* :func:`wrong_results_rule` NCCL_WRONG_RESULTS (critical): ``#wrong`` > 0 in any row, a non-zero or
  ``FAILED`` ``Out of bounds values`` footer, or a pre-2.13 ``error`` value >= :data:`OLD_ERROR_LIMIT`;
* :func:`failed_run_rule` NCCL_TEST_FAILED (critical): nccl-tests error lines (``Test NCCL failure``,
  ``Test CUDA failure``, ``Test failure``, ``Invalid number of GPUs``, MPI aborts), a process that aborted
  or died on a signal (even before nccl-tests printed anything: the abort lines are the evidence), or a
  ``FAILED`` average (``NCCL_TESTS_MIN_BW``);
* :func:`misconfigured_rule` NCCL_TEST_MISCONFIGURED (warning): nccl-tests refused its own arguments (more
  GPUs requested than the node has): a configuration mistake, never evidence against the node;
* :func:`hang_rule` NCCL_TEST_HANG (critical): a run that started (banner or table) and printed neither a
  footer nor an error: it hung, was killed, or the capture was cut;
* :func:`not_mpi_rule` NCCL_TESTS_NOT_MPI (critical): a build without MPI ran one-rank tables, one per
  process, so its figures measure no traffic between GPUs or nodes (nccl-tests README: multi-process runs
  need ``MPI=1``);
* :func:`transport_fallback_rule` NCCL_TRANSPORT_FALLBACK (warning): NCCL used TCP sockets (or was told
  ``NCCL_IB_DISABLE=1``/``NCCL_NET=Socket``, in its log or on a multi-node nccl-tests command line) although
  its log lists IB/RoCE devices, the command names HCAs, or the node's ``ibstat`` facts show Active RDMA
  ports; NET connections without GPU Direct RDMA although IB devices are present; CollNet (SHARP)
  requested but NCCL fell back to point-to-point.

A node without nccl-tests files or NCCL logs gives no finding. Rules never raise on odd facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import EvidenceValue, JsonScalar, Severity
from fleetdx.probes.facts import NamedNcclLog, NamedNcclTests, NodeFacts
from fleetdx.probes.parsers.ibstat import IbReport, PortState
from fleetdx.probes.parsers.nccl_log import Connection, NcclLog, TransportKind
from fleetdx.probes.parsers.nccl_tests import HANDLER_PREFIX_RE, NcclTestsRun, Row, abort_signal

#: Pre-2.13 nccl-tests printed ``error``, the largest deviation of any element from the expected value.
#: Correct runs print rounding noise (fixtures: ``2e-07``, ``5e-07`` for float). The loosest rounding of
#: any type nccl-tests checks is bfloat16's machine epsilon, 2^-7 = 7.8e-3 (8-bit significand), so a
#: deviation of 1e-2 or more is not rounding but wrong data (corruption prints values like ``3e+02``;
#: tests/fixtures/nccl/README.md, nccl-tests text-format history).
OLD_ERROR_LIMIT = 1e-2

#: Lines of evidence kept from a capture (error lines, last lines of a hung run).
EVIDENCE_LINES = 6


def _scalars(values: Iterable[JsonScalar]) -> list[JsonScalar]:
    return list(values)


def _subject(run: NcclTestsRun) -> str:
    return run.collective.value if run.collective is not None else "nccl-tests"


def _run_evidence(named: NamedNcclTests, index: int, run: NcclTestsRun) -> dict[str, EvidenceValue]:
    return {
        "file": named.file,
        "run": index,
        "collective": run.collective.value if run.collective is not None else None,
        "nranks": run.nranks,
        "rows": len(run.rows),
        "nccl_version": run.nccl_version,
    }


def _bad_rows(run: NcclTestsRun) -> list[Row]:
    out = []
    for row in run.rows:
        sides = [t for t in (row.out_of_place, row.in_place) if t is not None]
        if any((t.wrong or 0) > 0 or (t.error is not None and t.error >= OLD_ERROR_LIMIT) for t in sides):
            out.append(row)
    return out


def wrong_results_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_WRONG_RESULTS: one finding per run whose data validation failed."""
    findings = []
    for named in node.nccl_tests:
        for i, run in enumerate(named.report.runs):
            bad = _bad_rows(run)
            oob_bad = (run.out_of_bounds or 0) > 0 or run.out_of_bounds_ok is False
            if not bad and not oob_bad:
                continue
            evidence = _run_evidence(named, i, run)
            evidence["wrong_total"] = run.wrong_total
            evidence["max_old_format_error"] = run.max_error
            evidence["out_of_bounds"] = run.out_of_bounds
            evidence["bad_row_sizes_bytes"] = _scalars(r.size for r in bad[:EVIDENCE_LINES])
            evidence["old_error_limit"] = OLD_ERROR_LIMIT
            findings.append(
                Finding(
                    code=FindingCode.NCCL_WRONG_RESULTS,
                    severity=Severity.CRITICAL,
                    nodes=[node.host],
                    subject=_subject(run),
                    message=(
                        f"{_subject(run)} returned wrong data: {run.wrong_total} wrong elements, "
                        f"out-of-bounds tests {run.out_of_bounds}, {len(bad)} bad row(s) in {named.file}"
                    ),
                    details=evidence,
                )
            )
    return findings


#: nccl-tests' own checks of its arguments against the machine (src/common.cu: "Invalid number of GPUs: %d
#: requested but only %d were found", then "Test failure"): the command asked for what the node does not have.
#: Such a run measured nothing and says nothing about the hardware.
CONFIG_ERROR_RE = re.compile(
    r"Invalid number of GPUs|Please check the number of processes and GPUs per process|Test failure common\.cu"
)


def _misconfigured(errors: list[str]) -> list[str]:
    """The lines that show a misconfigured test, when every error line is of that kind (else ``[]``: a
    hardware or NCCL failure among them keeps the run a failure)."""
    config = [e for e in errors if CONFIG_ERROR_RE.search(e)]
    shown = [e for e in config if "Invalid number of GPUs" in e]
    return config if shown and len(config) == len(errors) else []


#: the host an nccl-tests failure line names: ``h100-4: Test NCCL failure common.cu:1057 ...`` or
#: `` .. h100-4 pid 739790: Test failure common.cu:893`` (src/common.cu prints the failing process's host)
FAILURE_HOST_RE = re.compile(r"^\s*(?:\.\.\s+)?([A-Za-z0-9][\w.-]*)(?:\s+pid\s+\d+)?:\s+Test (?:NCCL |CUDA )?failure")


def failing_hosts(named: NamedNcclTests, fallback: str) -> list[str]:
    """The hosts the failure lines name, when they are hosts of the run (its ``Rank ... on HOST`` lines):
    in a multi-node run the node whose process failed, not the bundle that holds the capture; else
    ``[fallback]``."""
    ran_on = {d.host for r in named.report.runs for d in r.devices}
    named_hosts = {m.group(1) for e in named.report.errors if (m := FAILURE_HOST_RE.match(e))}
    found = sorted(named_hosts & ran_on)
    return found or [fallback]


def misconfigured_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_TEST_MISCONFIGURED (warning): a run that nccl-tests refused because it asked for more GPUs than
    the node has (``-g``/``-t`` x processes). A configuration mistake, never evidence against the node: fix
    the command and run it again."""
    findings = []
    for named in node.nccl_tests:
        lines = _misconfigured(named.report.errors)
        if not lines:
            continue
        run = named.report.runs[0] if named.report.runs else None
        findings.append(
            Finding(
                code=FindingCode.NCCL_TEST_MISCONFIGURED,
                severity=Severity.WARNING,
                nodes=[node.host],
                subject=_subject(run) if run is not None else "nccl-tests",
                message=f"the test in {named.file} was misconfigured, not failed: {lines[0]}",
                details={
                    "file": named.file,
                    "errors": _scalars(lines[:EVIDENCE_LINES]),
                    "ngpus": run.ngpus if run is not None else None,
                    "nthreads": run.nthreads if run is not None else None,
                },
            )
        )
    return findings


def failed_run_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_TEST_FAILED: one finding per file with error lines or a run below ``NCCL_TESTS_MIN_BW`` (a
    misconfigured test is :func:`misconfigured_rule`'s, not a failure)."""
    findings = []
    for named in node.nccl_tests:
        report = named.report
        below_min = [i for i, r in enumerate(report.runs) if r.avg_busbw_ok is False]
        if _misconfigured(report.errors) and not below_min:
            continue
        if not report.errors and not below_min:
            continue
        aborted = [r for r in report.runs if r.aborted]
        failed = aborted[0] if aborted else report.runs[0] if report.runs else None
        subject = _subject(failed) if failed is not None else "nccl-tests"
        first = report.errors[0] if report.errors else "average busbw below NCCL_TESTS_MIN_BW (FAILED)"
        abort_lines = [e for e in report.errors if abort_signal(e) is not None]
        signal = next((r.signal for r in aborted if r.signal), None)
        if aborted:
            when = "before printing any result" if not any(r.rows for r in aborted) else "during the run"
            what = f"aborted ({signal})" if signal else "aborted"
            said = HANDLER_PREFIX_RE.sub("", abort_lines[0]) if abort_lines else first  # [host:pid] in evidence
            message = f"{subject} {what} {when} in {named.file}: {said}"
        else:
            message = f"{subject} failed in {named.file}: {first}"
        findings.append(
            Finding(
                code=FindingCode.NCCL_TEST_FAILED,
                severity=Severity.CRITICAL,
                nodes=failing_hosts(named, node.host),
                subject=subject,
                message=message,
                details={
                    "file": named.file,
                    "errors": _scalars(report.errors[:EVIDENCE_LINES]),
                    "error_count": len(report.errors),
                    "runs_below_min_bw": _scalars(below_min),
                    "signal": signal,
                    "abort_lines": _scalars(abort_lines[:EVIDENCE_LINES]),
                },
            )
        )
    return findings


def hang_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_TEST_HANG: a started run with no footer and no error line (in the run or the file)."""
    findings = []
    for named in node.nccl_tests:
        if named.report.errors:
            continue  # a crash that printed a message is NCCL_TEST_FAILED
        for i, run in enumerate(named.report.runs):
            if run.complete or run.errors:
                continue
            evidence = _run_evidence(named, i, run)
            evidence["last_size_bytes"] = run.rows[-1].size if run.rows else None
            evidence["last_lines"] = _scalars(run.last_lines[-EVIDENCE_LINES:])
            where = f"after {len(run.rows)} row(s)" if run.rows else "before the first row"
            findings.append(
                Finding(
                    code=FindingCode.NCCL_TEST_HANG,
                    severity=Severity.CRITICAL,
                    nodes=[node.host],
                    subject=_subject(run),
                    message=(
                        f"{_subject(run)} stopped {where} with neither footer nor error in {named.file}: "
                        "hung, killed, or the capture was cut"
                    ),
                    details=evidence,
                )
            )
    return findings


def not_mpi_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_TESTS_NOT_MPI: one finding per file where a build without MPI ran one-rank tables."""
    findings = []
    for named in node.nccl_tests:
        solo = [r for r in named.report.runs if r.non_mpi_build]
        if not solo:
            continue
        procs = sorted({f"{d.host}:{d.pid}" for r in solo for d in r.devices})
        findings.append(
            Finding(
                code=FindingCode.NCCL_TESTS_NOT_MPI,
                severity=Severity.CRITICAL,
                nodes=[node.host],
                subject=_subject(solo[0]),
                message=(
                    f"nccl-tests built without MPI: {len(solo)} one-rank table(s) in {named.file}; "
                    "rebuild with MPI=1, these figures measure no traffic between GPUs"
                ),
                details={
                    "file": named.file,
                    "one_rank_runs": len(solo),
                    "processes": _scalars(procs[:EVIDENCE_LINES]),
                    "nranks": _scalars(r.nranks for r in solo),
                },
            )
        )
    return findings


def _ib_devices(log: NcclLog) -> list[str]:
    return sorted({f"{d.name}/{d.link_layer}" for d in log.net_devices if d.net == "IB"})


def _fallback(
    node: NodeFacts, named: NamedNcclLog, subject: str, message: str, extra: dict[str, EvidenceValue]
) -> Finding:
    evidence: dict[str, EvidenceValue] = {
        "file": named.file,
        "networks": _scalars(named.log.networks),
        "transports": _scalars(named.log.transports),
        "ib_devices": _scalars(_ib_devices(named.log)),
    }
    evidence.update(extra)
    return Finding(
        code=FindingCode.NCCL_TRANSPORT_FALLBACK,
        severity=Severity.WARNING,
        nodes=[node.host],
        subject=subject,
        message=f"{message} ({named.file})",
        details=evidence,
    )


def _is_net(c: Connection, socket: bool) -> bool:
    return c.kind is TransportKind.NET and c.net_name is not None and (c.net_name == "Socket") == socket


def _active_rdma_ports(ib: IbReport | None) -> list[str]:
    """``ca/port`` of every Active port (InfiniBand or RoCE) in the node's ibstat facts."""
    if ib is None:
        return []
    return [f"{ca.name}/{p.port}" for ca in ib.cas for p in ca.ports if p.state is PortState.ACTIVE]


def _socket_fallback(node: NodeFacts, named: NamedNcclLog) -> Finding | None:
    log = named.log
    socket_conns = [c for c in log.connections if _is_net(c, socket=True)]
    on_sockets = bool(socket_conns) or "Socket" in log.networks or log.env.get("NCCL_IB_DISABLE") == "1"
    ib = _ib_devices(log)
    active = _active_rdma_ports(node.ib)
    if not on_sockets or not (ib or active):
        return None
    seen = f"IB/RoCE devices {', '.join(ib)}" if ib else f"{len(active)} Active RDMA port(s) in ibstat"
    return _fallback(
        node,
        named,
        "NET/Socket",
        f"NCCL used TCP sockets although the node has {seen}",
        {
            "socket_connections": len(socket_conns),
            "NCCL_IB_DISABLE": log.env.get("NCCL_IB_DISABLE"),
            "active_rdma_ports": _scalars(active[:EVIDENCE_LINES]),
        },
    )


def _log_fallbacks(node: NodeFacts, named: NamedNcclLog) -> list[Finding]:
    log = named.log
    socket = _socket_fallback(node, named)
    out = [] if socket is None else [socket]
    ib = _ib_devices(log)
    net_ib = [c for c in log.connections if _is_net(c, socket=False)]
    if ib and net_ib and not any(c.gdrdma for c in net_ib):
        out.append(
            _fallback(
                node,
                named,
                "GDRDMA",
                f"{len(net_ib)} NET connection(s) over {net_ib[0].net_name} without GPU Direct RDMA: "
                "data is staged through host memory",
                {
                    "NCCL_NET_GDR_LEVEL": log.env.get("NCCL_NET_GDR_LEVEL"),
                    "example": net_ib[0].transport,
                    "gdr_disabled": _scalars(log.gdr_disabled),
                },
            )
        )
    if log.collnet_fallback:
        out.append(
            _fallback(
                node,
                named,
                "CollNet",
                "CollNet (SHARP) was requested but NCCL fell back to the point-to-point network",
                {
                    "NCCL_COLLNET_ENABLE": log.env.get("NCCL_COLLNET_ENABLE"),
                    "warnings": _scalars(w.text for w in log.warnings[:EVIDENCE_LINES]),
                },
            )
        )
    return out


def _told_sockets(env: dict[str, str]) -> list[str]:
    """The settings that put NCCL's network traffic on TCP sockets (NCCL environment variables doc:
    ``NCCL_IB_DISABLE=1`` disables the IB/RoCE transport, ``NCCL_NET=Socket`` selects the socket one)."""
    out = []
    if env.get("NCCL_IB_DISABLE") == "1":
        out.append("NCCL_IB_DISABLE=1")
    if env.get("NCCL_NET", "").lower() == "socket":
        out.append(f"NCCL_NET={env['NCCL_NET']}")
    return out


def _tests_socket_fallback(node: NodeFacts, named: NamedNcclTests) -> Finding | None:
    """A multi-node nccl-tests run whose command line or environment put it on sockets although the node has
    RDMA: its command names HCAs (``NCCL_IB_HCA``) or the node's ibstat facts show Active ports."""
    report = named.report
    told = _told_sockets(report.env)
    hosts = sorted({d.host for r in report.runs for d in r.devices})
    if not told or len(hosts) < 2:
        return None  # one node: its traffic never took the network transport
    hca = report.env.get("NCCL_IB_HCA")
    active = _active_rdma_ports(node.ib)
    if not (hca or active):
        return None
    seen = f"HCAs {hca} named on the same command line" if hca else f"{len(active)} Active RDMA port(s) in ibstat"
    peaks = [row.out_of_place.busbw_gbps for r in report.runs for row in r.rows if row.out_of_place.busbw_gbps]
    peak = max(peaks, default=None)
    return Finding(
        code=FindingCode.NCCL_TRANSPORT_FALLBACK,
        severity=Severity.WARNING,
        nodes=[node.host],
        subject="NET/Socket",
        message=(
            f"a {len(hosts)}-node run was told to use TCP sockets ({', '.join(told)}) although the node has "
            f"{seen}" + (f"; peak busbw {peak:g} GB/s" if peak is not None else "") + f" ({named.file})"
        ),
        details={
            "file": named.file,
            "settings": _scalars(told),
            "NCCL_IB_HCA": hca,
            "NCCL_SOCKET_IFNAME": report.env.get("NCCL_SOCKET_IFNAME"),
            "hosts": _scalars(hosts),
            "peak_busbw_gbps": peak,
            "active_rdma_ports": _scalars(active[:EVIDENCE_LINES]),
        },
    )


def transport_fallback_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_TRANSPORT_FALLBACK: NCCL used a slower transport than the node has: per its own log, or per a
    multi-node nccl-tests run's command line and environment."""
    found = [f for named in node.nccl_logs for f in _log_fallbacks(node, named)]
    found += [f for named in node.nccl_tests if (f := _tests_socket_fallback(node, named)) is not None]
    return found


#: sizes at and above this (bytes) are in nccl-tests' bandwidth-bound region (doc/PERFORMANCE.md: small sizes
#: measure latency, and their busbw says nothing about the links)
FABRIC_MIN_SIZE = 64 * 2**20
#: a multi-node busbw below this fraction of the node's network line rate is NCCL_BUSBW_LOW (the same factor the
#: bandwidth screen uses for its critical verdict: robust.DetectionConfig.critical_ratio)
FABRIC_LOW_RATIO = 0.5


def _fabric_gbps(node: NodeFacts) -> tuple[float, list[str]] | None:
    """The node's network line rate in GB/s (1e9 B/s) over its Active RDMA ports (InfiniBand or RoCE), with
    those ports; ``None`` when ibstat facts are missing or give no rate. ibstat's ``Rate`` is the signalling
    rate in Gb/s of the link's data lanes (400 for NDR 4x, 200 for HDR 4x; IBTA), so GB/s = rate / 8."""
    if node.ib is None:
        return None
    ports = [(f"{ca.name}/{p.port}", p.rate_gbps) for ca in node.ib.cas for p in ca.ports
             if p.state is PortState.ACTIVE and p.rate_gbps]
    if not ports:
        return None
    return sum(r for _, r in ports if r) / 8, [n for n, _ in ports]


def fabric_busbw_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """NCCL_BUSBW_LOW (warning) for a multi-node nccl-tests run on this node whose peak busbw is below
    :data:`FABRIC_LOW_RATIO` x the node's network line rate (:func:`_fabric_gbps`).

    The reference: nccl-tests' busbw is defined so that it "reflects how optimally the hardware is used" and is
    comparable to the bottleneck link's speed (nccl-tests doc/PERFORMANCE.md, "Bus bandwidth"); in a multi-node
    run whose ranks' traffic crosses the network, that bottleneck is the node's NICs, whose per-direction rate
    ibstat prints. Hierarchical algorithms (NVLS, CollNet/SHARP, tree) can exceed it, which only makes the
    test conservative: it flags a run that is slow, never a fast one. Peak = the highest out-of-place busbw
    at sizes of at least :data:`FABRIC_MIN_SIZE` (the bandwidth-bound region). A run told to use sockets is
    left to NCCL_TRANSPORT_FALLBACK, which explains it better. Warning, never critical: the NICs NCCL used are
    not known from nccl-tests' output alone, and one run is one measurement.
    """
    fabric = _fabric_gbps(node)
    if fabric is None:
        return []
    line_gbps, ports = fabric
    out = []
    for named in node.nccl_tests:
        if _told_sockets(named.report.env):
            continue
        for i, run in enumerate(named.report.runs):
            hosts = sorted({d.host for d in run.devices})
            peaks = [
                r.out_of_place.busbw_gbps
                for r in run.rows
                if r.size >= FABRIC_MIN_SIZE and r.out_of_place.busbw_gbps is not None
            ]
            if len(hosts) < 2 or not peaks or max(peaks) >= FABRIC_LOW_RATIO * line_gbps:
                continue
            peak = max(peaks)
            out.append(
                Finding(
                    code=FindingCode.NCCL_BUSBW_LOW,
                    severity=Severity.WARNING,
                    nodes=hosts,
                    subject=_subject(run),
                    message=(
                        f"peak busbw {peak:g} GB/s across {len(hosts)} nodes is {peak / line_gbps:.0%} of the "
                        f"network line rate {line_gbps:g} GB/s of {node.host}'s {len(ports)} Active RDMA "
                        f"port(s) (expected at least {FABRIC_LOW_RATIO:.0%}; {named.file})"
                    ),
                    details={
                        **_run_evidence(named, i, run),
                        "peak_busbw_gbps": peak,
                        "line_rate_gbps": line_gbps,
                        "ratio": round(peak / line_gbps, 3),
                        "rdma_ports": _scalars(ports[:EVIDENCE_LINES]),
                        "reference": "network line rate (ibstat Rate / 8), nccl-tests doc/PERFORMANCE.md",
                    },
                )
            )
    return out


RULES: list[Rule] = [
    wrong_results_rule,
    failed_run_rule,
    misconfigured_rule,
    hang_rule,
    not_mpi_rule,
    transport_fallback_rule,
    fabric_busbw_rule,
]
