"""InfiniBand / RoCE port counters: the sysfs collector and parsers on real public captures (goldens), the
arithmetic of two samples (resets), and the grey-failure findings (IB_PORT_ERRORS, IB_LINK_FLAP,
IB_LINK_DEGRADED) from a standard-level collection over a real sysfs tree whose counters move between the
two samples.

Fixtures and their origins: tests/fixtures/ib/SOURCES. The sysfs trees are the /sys/class/infiniband parts
of prometheus/node_exporter's and prometheus/procfs' ttar fixtures, extracted to a directory the collectors
read as they read /sys.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose, diagnose_stream
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.bundle import collect, read_bundle, write_bundle
from fleetdx.probes.catalog import SYSFS_IB_COUNTERS_FILE, parser_named
from fleetdx.probes.contracts import Level, RunStatus, Severity
from fleetdx.probes.errors import ParseError
from fleetdx.probes.facts import NodeFacts, node_facts
from fleetdx.probes.parsers.ib_counters import (
    CounterGroup,
    IbCounterSample,
    IbPortSample,
    fabric_mode,
    parse_ib_counters,
    parse_ibdiagnet,
    parse_perfquery,
    parse_rate,
    port_deltas,
)
from fleetdx.probes.parsers.ibstat import LinkLayer, PortState
from fleetdx.probes.runner import RunResult
from fleetdx.probes.sysfs import read_infiniband_counters
from tests.ttar import extract

FIX = Path(__file__).parent / "fixtures" / "ib"
GOLDEN = FIX / "golden"
#: ttar archive -> the path prefix its tree is stored under
TREES = {"node_exporter_sys_infiniband.ttar": "", "procfs_sys_infiniband.ttar": "fixtures/"}
PERFQUERY = ["perfquery_x_0x7cfe9003009ce5b0.txt", "perfquery_x_0x506b4b03005c2740.txt"]
IBDIAGNET = ["ibdiagnet_logParserTask.txt", "ibdiagnet_ar_summary_openai_recipe.txt"]


def _golden(name: str, got: object) -> None:
    """Compare ``got`` (JSON-able) with tests/fixtures/ib/golden/NAME.json; FLEETDX_REGEN_GOLDENS=1 rewrites it
    (then review the diff)."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if os.environ.get("FLEETDX_REGEN_GOLDENS") == "1":
        path.write_text(text)
    assert json.loads(path.read_text()) == json.loads(text), f"{name} differs from its golden"


def _tree(tmp_path: Path, archive: str) -> Path:
    root = tmp_path / "root"
    extract(FIX / archive, root, TREES[archive])
    return root


# ------------------------------------------------------------------------------------------ parsers, goldens
@pytest.mark.parametrize("archive", sorted(TREES))
def test_sysfs_collector_on_real_trees_matches_golden(tmp_path: Path, archive: str) -> None:
    lines = read_infiniband_counters(_tree(tmp_path, archive))
    assert lines is not None
    parsed = parse_ib_counters("\n".join(lines) + "\n")
    _golden(archive.removesuffix(".ttar"), {"lines": lines, "parsed": parsed.model_dump(mode="json")})


def test_node_exporter_tree_reads_no_pma_values_as_unavailable(tmp_path: Path) -> None:
    """i40iw (an iWARP NIC) has no PMA: its IBTA counters read "N/A (no PMA)" -- kept as text, never as 0."""
    lines = read_infiniband_counters(_tree(tmp_path, "node_exporter_sys_infiniband.ttar"))
    assert lines is not None
    ports = {p.key: p for p in parse_ib_counters("\n".join(lines)).samples[0].ports}
    i40 = ports[("i40iw0", 1)]
    assert i40.counters == {}
    assert i40.unavailable["symbol_error"] == "N/A (no PMA)"
    mlx4 = ports[("mlx4_0", 1)]
    assert mlx4.rate_gbps == 40.0 and mlx4.width == 4 and mlx4.speed == "QDR"
    assert mlx4.counters["port_rcv_data_64"] > 0  # counters_ext folded in


def test_procfs_tree_has_mlx5_hw_counters(tmp_path: Path) -> None:
    lines = read_infiniband_counters(_tree(tmp_path, "procfs_sys_infiniband.ttar"))
    assert lines is not None
    mlx5 = next(p for p in parse_ib_counters("\n".join(lines)).samples[0].ports if p.ca == "mlx5_0")
    assert mlx5.hw_counters["local_ack_timeout_err"] == 131
    assert mlx5.state is PortState.ACTIVE and mlx5.link_layer is LinkLayer.INFINIBAND
    assert (mlx5.rate_gbps, mlx5.width, mlx5.speed) == (25.0, 1, "EDR")


@pytest.mark.parametrize("name", PERFQUERY)
def test_perfquery_matches_golden(name: str) -> None:
    _golden(name.removesuffix(".txt"), parse_perfquery((FIX / name).read_text()).model_dump(mode="json"))


def test_perfquery_maps_names_to_sysfs_names() -> None:
    port = parse_perfquery((FIX / "perfquery_x_0x506b4b03005c2740.txt").read_text()).samples[0].ports[0]
    assert (port.ca, port.port, port.lid) == ("lid:2052", 1, 2052)
    assert port.counters["link_downed"] == 1
    assert port.counters["port_xmit_discards"] == 20046
    assert port.counters["port_xmit_data"] == 178791657177235


def test_perfquery_old_names_read_alike() -> None:
    """infiniband-diags' older short names (SymbolErrors, XmtData...) map to the same sysfs names."""
    old = "# Port counters: Lid 936 port 1\nPortSelect:......................1\nSymbolErrors:....................7\n"
    old += "LinkDowned:......................2\nXmtData:.........................905972985\n"
    port = parse_perfquery(old).samples[0].ports[0]
    assert port.counters == {"link_downed": 2, "port_xmit_data": 905972985, "symbol_error": 7}


@pytest.mark.parametrize("name", IBDIAGNET)
def test_ibdiagnet_matches_golden(name: str) -> None:
    _golden(name.removesuffix(".txt"), parse_ibdiagnet((FIX / name).read_text()).model_dump(mode="json"))


def test_ibdiagnet_real_run_with_width_errors() -> None:
    """The real capture (CRLF line ends) reports 15 Speed / Width errors and one 2x link."""
    s = parse_ibdiagnet((FIX / "ibdiagnet_logParserTask.txt").read_text())
    assert s.version == "IBDIAGNET 2.7.0.MLNX20210617.4883fca"
    stage = next(x for x in s.stages if x.stage == "Speed / Width checks")
    assert (stage.warnings, stage.errors) == (0, 15)
    assert s.errors == 15 and s.warnings == 19
    assert s.links_at["2x50"] == 1 and s.total_nodes == 42
    assert any("actual link width is 2x" in e for e in s.error_lines)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("ib-counters", "no counters here\n"),
        ("perfquery", "ibwarn: [1234] mad_rpc_open_port: can't open UMAD port ((null):0)\n"),
        ("perfquery", "# Port counters: Lid 1 port 1\n"),
        ("ibdiagnet", "-I- Discovering ... 42 nodes\n"),
    ],
)
def test_bad_input_is_a_parse_error(kind: str, text: str) -> None:
    with pytest.raises(ParseError):
        parser_named(kind).parse(text)


def test_rate_strings() -> None:
    assert parse_rate("400 Gb/sec (4X NDR)") == (400.0, 4, "NDR")
    assert parse_rate("10 Gb/sec (4X)") == (10.0, 4, None)
    assert parse_rate("2.5 Gb/sec (1X SDR)") == (2.5, 1, "SDR")
    assert parse_rate("") == (None, None, None)
    assert fabric_mode([400.0, 400.0, 200.0]) == 400.0
    assert fabric_mode([200.0, 400.0]) == 400.0  # a tie: the highest, so the slow half is flagged
    assert fabric_mode([]) is None


# ------------------------------------------------------------------------------------------ two samples
def _port(**counters: int) -> IbPortSample:
    return IbPortSample(ca="mlx5_0", port=1, state=PortState.ACTIVE, counters=counters)


def test_deltas_rates_and_resets() -> None:
    a = IbCounterSample(t_s=100.0, ports=[_port(symbol_error=5, port_rcv_errors=40, link_downed=1, port_xmit_data=10)])
    b = IbCounterSample(t_s=110.0, ports=[_port(symbol_error=25, port_rcv_errors=3, link_downed=1, port_xmit_data=10)])
    (d,) = port_deltas(a, b)
    assert d.elapsed_s == 10.0
    sym, rcv = d.get("symbol_error"), d.get("port_rcv_errors")
    assert sym is not None and (sym.delta, sym.per_s, sym.reset) == (20, 2.0, False)
    # went down: a reset (perfquery -R), never a negative rate; what was counted since is a lower bound
    assert rcv is not None and (rcv.delta, rcv.reset) == (3, True)
    assert d.get("link_downed") is None and d.get("port_xmit_data") is None  # unchanged counters are left out
    assert sym.group is CounterGroup.COUNTERS


# ------------------------------------------------------------------------------------------ collection + rules
class _Standin:
    """A runner for :func:`collect` in which no command exists (every run ``skipped``), except that the
    standard level's micro-benchmark run -- which falls between the two counter samples -- calls ``during``:
    the test's way to make counters move while the GPU work runs."""

    def __init__(self, during: Callable[[], None]) -> None:
        self.during = during

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        if any("microbench" in a for a in argv):
            self.during()
        return RunResult(argv=list(argv), status=RunStatus.SKIPPED, reason=f"{argv[0]}: not found on PATH")


def _bump(root: Path, ca: str, port: int, **by: int) -> None:
    for name, n in by.items():
        group = "hw_counters" if name in ("local_ack_timeout_err", "out_of_sequence") else "counters"
        f = root / "sys/class/infiniband" / ca / "ports" / str(port) / group / name
        f.write_text(f"{int(f.read_text()) + n}\n")


def _collect_node(tmp_path: Path, during: Callable[[], None]) -> NodeFacts:
    root = _tree(tmp_path, "procfs_sys_infiniband.ttar")
    data = collect(_Standin(during), Level.STANDARD, "ib-node", sysfs_root=root)
    out = write_bundle(data, tmp_path / "bundle")
    return node_facts(read_bundle(out))


def _codes(findings: list[Finding], *codes: FindingCode) -> list[Finding]:
    return [f for f in findings if f.code in codes]


def test_standard_level_samples_twice_and_flags_climbing_errors_and_a_flap(tmp_path: Path) -> None:
    def during() -> None:
        root = tmp_path / "root"
        _bump(root, "mlx4_0", 1, symbol_error=12, port_xmit_discards=3)
        _bump(root, "mlx4_0", 2, link_downed=1)
        _bump(root, "mlx5_0", 1, local_ack_timeout_err=9, out_of_sequence=50, link_downed=3, port_xmit_data=1000)

    node = _collect_node(tmp_path, during)
    meta = next(p for p in node.probes if p.name == SYSFS_IB_COUNTERS_FILE)
    assert meta.status is RunStatus.OK
    assert node.ib_counters is not None and len(node.ib_counters.samples) == 2
    t1, t2 = (s.t_s for s in node.ib_counters.samples)
    assert t1 is not None and t2 is not None and t2 - t1 >= 0.9  # IB_SAMPLE_MIN_S apart at least

    findings = diagnose(Fleet(nodes=[node])).findings
    errors = _codes(findings, FindingCode.IB_PORT_ERRORS)
    assert {f.subject for f in errors} == {"mlx4_0/1", "mlx5_0/1"}
    mlx4 = next(f for f in errors if f.subject == "mlx4_0/1")
    assert mlx4.severity is Severity.WARNING
    counters = mlx4.details["counters"]
    assert isinstance(counters, dict) and set(counters) == {"symbol_error", "port_xmit_discards"}
    assert "symbol_error +12" in mlx4.message
    mlx5 = next(f for f in errors if f.subject == "mlx5_0/1")
    assert "local_ack_timeout_err +9" in mlx5.message
    # data moved and out-of-order arrivals (adaptive routing's by design) are not errors
    assert "port_xmit_data" not in mlx5.message and "out_of_sequence" not in mlx5.message

    flaps = {f.subject: f for f in _codes(findings, FindingCode.IB_LINK_FLAP)}
    assert flaps["mlx4_0/2"].severity is Severity.WARNING  # down once
    assert flaps["mlx5_0/1"].severity is Severity.CRITICAL  # three times in one window: repeated
    assert "3 times" in flaps["mlx5_0/1"].message


def test_roce_port_flap_is_read_from_its_netdev(tmp_path: Path) -> None:
    """A RoCE port has no IBTA link_downed: its netdev's carrier_down_count counts the downs. The procfs tree's
    mlx5_0 is made a RoCE port here (link_layer edited to Ethernet) and given the netdev a real mlx5 function
    has, ``device/net/<netdev>/{dev_port,carrier_down_count}`` (kernel ABI sysfs-class-net; the ttar fixture
    does not carry the device symlink): its count goes 4 -> 5 between the samples."""
    root = tmp_path / "root"
    extract(FIX / "procfs_sys_infiniband.ttar", root, TREES["procfs_sys_infiniband.ttar"])
    mlx5 = root / "sys/class/infiniband/mlx5_0"
    (mlx5 / "ports/1/link_layer").write_text("Ethernet\n")
    nd = mlx5 / "device/net/ens1f0np0"
    nd.mkdir(parents=True)
    (nd / "dev_port").write_text("0\n")
    (nd / "carrier_down_count").write_text("4\n")

    def during() -> None:
        (nd / "carrier_down_count").write_text("5\n")

    data = collect(_Standin(during), Level.STANDARD, "roce-node", sysfs_root=root)
    node = node_facts(data)
    assert node.ib_counters is not None
    port = next(p for p in node.ib_counters.samples[0].ports if p.ca == "mlx5_0")
    assert (port.netdev, port.netdev_counters, port.link_layer) == (
        "ens1f0np0",
        {"carrier_down_count": 4},
        LinkLayer.ETHERNET,
    )
    (flap,) = _codes(diagnose(Fleet(nodes=[node])).findings, FindingCode.IB_LINK_FLAP)
    assert (flap.subject, flap.severity, flap.details["counter"], flap.details["netdev"]) == (
        "mlx5_0/1",
        Severity.WARNING,
        "carrier_down_count",
        "ens1f0np0",
    )
    assert "carrier_down_count of ens1f0np0" in flap.message


def test_quiet_counters_give_no_finding_and_totals_are_not_judged(tmp_path: Path) -> None:
    """The real tree's totals (mlx4 port_xmit_wait 3599, mlx5 resp_cqe_error 8109) do not move: no finding."""
    node = _collect_node(tmp_path, lambda: None)
    findings = diagnose(Fleet(nodes=[node])).findings
    assert _codes(findings, FindingCode.IB_PORT_ERRORS, FindingCode.IB_LINK_FLAP) == []


def _node_exporter_node(tmp_path: Path, host: str, rate_of_mlx4_port2: str | None = None) -> NodeFacts:
    root = tmp_path / host
    extract(FIX / "node_exporter_sys_infiniband.ttar", root)
    if rate_of_mlx4_port2 is not None:
        (root / "sys/class/infiniband/mlx4_0/ports/2/rate").write_text(rate_of_mlx4_port2 + "\n")
    return node_facts(collect(_Standin(lambda: None), Level.STANDARD, host, sysfs_root=root))


def test_link_below_the_fabric_rate_is_degraded(tmp_path: Path) -> None:
    """node_exporter's real tree on two nodes, one of them with mlx4_0 port 2 edited from 40 Gb/s (4X QDR) to
    10 Gb/s (1X QDR): three lanes lost. The run's MT4099 ports are mostly at 40: that port is degraded. The tree's
    i40iw0 (I40IW) port at 10 Gb/s is another CA type: compared with its own kind, never with the mlx4 rails."""
    good = _node_exporter_node(tmp_path, "node-a")
    bad = _node_exporter_node(tmp_path, "node-b", "10 Gb/sec (1X QDR)")
    assert good.ib is not None and bad.ib is not None
    fleet = Fleet(nodes=[good, bad])
    degraded = _codes(diagnose(fleet).findings, FindingCode.IB_LINK_DEGRADED)
    got = [(f.nodes, f.subject, f.details["rate_gbps"], f.details["expected_rate_gbps"]) for f in degraded]
    assert got == [(["node-b"], "mlx4_0/2", 10.0, 40.0)]
    assert degraded[0].severity is Severity.WARNING and degraded[0].details["ca_type"] == "MT4099"
    # one node alone (a prolog): its own MT4099 ports 40 and 10 tie, the highest wins: still flagged
    alone = _codes(diagnose(Fleet(nodes=[bad])).findings, FindingCode.IB_LINK_DEGRADED)
    assert [f.subject for f in alone] == ["mlx4_0/2"]
    # the streamed diagnosis (analyze of many bundles) keeps only the peer fields of a node: same finding
    streamed = _codes(diagnose_stream([good, bad]).findings, FindingCode.IB_LINK_DEGRADED)
    assert [f.model_dump() for f in streamed] == [f.model_dump() for f in degraded]
    # a configured fabric rate wins over the run's majority, for every CA type
    configured = Fleet(nodes=[good], extra={"ib_expected_rate_gbps": "100"})
    subjects = {f.subject for f in _codes(diagnose(configured).findings, FindingCode.IB_LINK_DEGRADED)}
    assert subjects == {"i40iw0/1", "mlx4_0/1", "mlx4_0/2"}


def test_quick_level_takes_no_counter_sample(tmp_path: Path) -> None:
    """The quick level (the prolog) is not slowed: no counter file, no wait."""
    root = _tree(tmp_path, "procfs_sys_infiniband.ttar")
    data = collect(_Standin(lambda: None), Level.QUICK, "ib-node", sysfs_root=root)
    assert SYSFS_IB_COUNTERS_FILE not in data.files
    assert all(c.file != SYSFS_IB_COUNTERS_FILE for c in data.commands)


def test_no_rdma_device_is_skipped_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    data = collect(_Standin(lambda: None), Level.STANDARD, "x", sysfs_root=tmp_path / "empty")
    meta = next(c for c in data.commands if c.file == SYSFS_IB_COUNTERS_FILE)
    assert meta.status is RunStatus.SKIPPED and "no RDMA device" in (meta.reason or "")


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("perfquery", "# Port counters: Lid 1 port 1\nSymbolErrorCounter:" + "." * 100_000 + " x\n"),
        ("ibdiagnet", "-I- Stage  Warnings  Errors\n-I- Discovery" + " " * 100_000 + "x\n"),
        ("ib-counters", "/" * 100_000 + "class/infiniband/mlx5_0/ports/1/counters/symbol_error:1\n"),
    ],
)
def test_hostile_long_lines_take_linear_time(kind: str, text: str) -> None:
    """A 100 KB line that once made a row pattern backtrack quadratically (minutes): now milliseconds of CPU.
    The bound is 5 CPU seconds, far from both."""
    t0 = time.process_time()
    try:
        parser_named(kind).parse(text)
    except ParseError:
        pass
    assert time.process_time() - t0 < 5.0
