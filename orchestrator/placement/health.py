"""Which GPUs of a node must not be advised, from findings: the bridge from diagnosis to topology's advice.

A GPU is excluded (never advised, by ``fleetdx topo advise`` or any placement answer) when a finding names it
with one of these codes (:data:`GPU_EXCLUDING`):

============================  ==========================  ====================================================
code                          severities that exclude     why
============================  ==========================  ====================================================
``GPU_FOREIGN_PROCESS``       any                         another process holds the GPU (memory, SM time)
``GPU_ECC_UNCORRECTABLE``     any                         volatile uncorrectable ECC: needs a GPU reset
``GPU_ROW_REMAP_FAILURE``     any                         no spare row left (NVIDIA sends it to RMA)
``GPU_XID``                   critical                    a critical XID class (:mod:`..diagnosis.xid_table`)
``GPU_LOST``                  any                         fell off the bus / not initialised
``GPU_CLOCKS_THROTTLED``      critical                    hardware, thermal or power-brake slowdown (a power
                                                          cap at full load is INFO and does not exclude)
``PCIE_LINK_DEGRADED``        any                         fewer lanes than the GPU's maximum, or a lower
                                                          generation under load
``TOPO_NVLINK_DEGRADED``      any                         an NVLink pair or GPU below the node's pattern; for a
                                                          pair (``GPU2-GPU5``) both ends are left out, as
                                                          ``topo -m`` cannot say which end is at fault
============================  ==========================  ====================================================

A finding whose subject is not a ``GPU<n>`` (``PCI:0000:3b:00.0``: a device the inventory does not list) cannot
be mapped to a GPU row: it is returned as a warning, never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import run_rules
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.judgement.catalog import gpu_excluding
from fleetdx.probes.contracts import Contract, Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.topology.contracts import GpuExclusion

#: code -> severities that exclude the GPU it names (``None``: every severity): the code catalog's
#: ``exclude-gpu`` codes and their ``placement_severities`` (orchestrator/judgement/codes.yaml)
GPU_EXCLUDING: dict[FindingCode, frozenset[Severity] | None] = gpu_excluding()

_GPU = re.compile(r"GPU\d+")


class GpuHealth(Contract):
    """The GPUs of one node that must not be advised (``excluded``) and findings that excluded a GPU the
    matrix cannot name (``unmapped``: one sentence each)."""

    excluded: list[GpuExclusion]
    unmapped: list[str]


def excludes_gpu(f: Finding) -> bool:
    """True when ``f`` has a code and severity of :data:`GPU_EXCLUDING`."""
    if f.code not in GPU_EXCLUDING:
        return False
    sev = GPU_EXCLUDING[f.code]
    return sev is None or f.severity in sev


def gpu_health(findings: Iterable[Finding], host: str | None = None) -> GpuHealth:
    """The GPU exclusions of ``findings`` (only those about ``host`` when it is given).

    ``GPU3`` -> GPU3; ``GPU2-GPU5`` (a pair) -> both; any other subject -> ``unmapped``.
    """
    excluded: list[GpuExclusion] = []
    unmapped: list[str] = []
    for f in findings:
        if host is not None and host not in f.nodes:
            continue
        if not excludes_gpu(f):
            continue
        parts = f.subject.split("-")
        gpus = parts if all(_GPU.fullmatch(p) for p in parts) else []
        if not gpus:
            unmapped.append(f"{f.code.value} ({f.severity.value}) about {f.subject}: {f.message}")
            continue
        reason = f"{f.code.value} ({f.severity.value}): {f.message}"
        if len(gpus) > 1:
            reason += f" (a link between {' and '.join(gpus)}: both ends left out)"
        excluded += [GpuExclusion(gpu=g, reasons=[reason], codes=[f.code]) for g in gpus]
    return GpuHealth(excluded=excluded, unmapped=unmapped)


def bundle_gpu_health(facts: NodeFacts) -> GpuHealth:
    """Diagnose one node's bundle on its own (every rule, the node its only peer) and return its GPU
    exclusions. Peer comparisons cannot fire with one node; the node's own evidence is what counts."""
    findings = run_rules(facts, Fleet(nodes=[facts]))
    return gpu_health(findings)
