"""Node rules on host facts: InfiniBand / RoCE port state.

``IB_PORT_DOWN``:

* **critical** for a port whose link layer is InfiniBand and whose logical state is not ``Active``
  (Down, Initializing, Armed, ActiveDefer): only an Active port carries traffic (IBTA logical port states;
  Initializing/Armed mean no subnet manager has brought it up). A job whose NCCL picks that HCA fails or falls
  back to another rail.
* **warning** for an Ethernet (RoCE) port that is not Active while its physical state is not ``Disabled``
  (e.g. ``Polling``: a cable is expected but no link trains). A RoCE port that is administratively
  ``Disabled`` is commonly an unused front-end port (three such on the fixture node) and gives no finding.

A port with no link layer (older ibstat) is judged as InfiniBand. Evidence: CA, port, state, physical state,
rate (Gb/s), link layer, CA type and the bundle file the IB facts were parsed from
(:attr:`fleetdx.probes.facts.NodeFacts.sources`).
"""

from __future__ import annotations

from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.ibstat import IbCa, IbPort, LinkLayer, PhysState, PortState


def _severity(port: IbPort) -> Severity | None:
    if port.state is PortState.ACTIVE:
        return None
    if port.link_layer is LinkLayer.ETHERNET:
        return None if port.phys_state is PhysState.DISABLED else Severity.WARNING
    return Severity.CRITICAL


def _finding(node: NodeFacts, ca: IbCa, port: IbPort, severity: Severity) -> Finding:
    layer = port.link_layer.value if port.link_layer else "InfiniBand (assumed)"
    phys = port.phys_state.value if port.phys_state else None
    return Finding(
        code=FindingCode.IB_PORT_DOWN,
        severity=severity,
        nodes=[node.host],
        subject=f"{ca.name}/{port.port}",
        message=f"{ca.name} port {port.port} ({layer}) is {port.state.value}"
        + (f", physical state {phys}" if phys else ""),
        details={
            "ca": ca.name,
            "port": port.port,
            "state": port.state.value,
            "phys_state": phys,
            "rate_gbps": port.rate_gbps,
            "link_layer": layer,
            "ca_type": ca.ca_type,
            "file": node.sources.get("ib"),
        },
    )


def ib_port_down(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """``IB_PORT_DOWN`` findings for the node's HCA ports (see the module doc); none without IB facts."""
    if node.ib is None:
        return []
    out: list[Finding] = []
    for ca in node.ib.cas:
        for port in ca.ports:
            sev = _severity(port)
            if sev is not None:
                out.append(_finding(node, ca, port, sev))
    return out


RULES: list[Rule] = [ib_port_down]
