"""Link classes of ``nvidia-smi topo -m``, their ranking, and one table of nominal bandwidths with its
sources.

Link classes, best to worst, as the ``nvidia-smi topo -m`` legend defines them:

====== =====================================================================================================
NV#    a bonded set of # NVLinks
PIX    at most one PCIe bridge (older drivers: "a single PCIe switch")
PXB    several PCIe bridges, no PCIe host bridge
PHB    through a PCIe host bridge (typically the CPU)
NODE   across PCIe host bridges within one NUMA node
SYS    across the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric); older drivers print SOC
====== =====================================================================================================

Nominal bandwidths are per direction, in GB/s (1e9 B/s, the unit nccl-tests prints), and are *nominal* (the
signalling rate after line coding), never measured figures: a link that delivers less is what the bandwidth
probes find. Sources, one per row of :data:`GENERATIONS`:

- NVLink 1 (P100): 4 links, 160 GB/s bidirectional in total -> 20 GB/s per link per direction
  (NVIDIA Tesla P100 whitepaper, 2016, "NVLink High Speed Interconnect").
- NVLink 2 (V100): 6 links, 300 GB/s bidirectional -> 25 GB/s per link per direction
  (NVIDIA Tesla V100 GPU Architecture whitepaper, 2017).
- NVLink 3 (A100): 12 links, 600 GB/s bidirectional -> 25 GB/s per link per direction
  (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020).
- NVLink 3 bridge (GA102: RTX A6000, RTX 3090, A40): 4 links, 112.5 GB/s bidirectional -> 14.0625 GB/s per
  link per direction (NVIDIA RTX A6000 datasheet, "NVLink: 112.5 GB/s (bidirectional)").
- NVLink 4 (H100/H200): 18 links, 900 GB/s bidirectional -> 25 GB/s per link per direction
  (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022).
- NVLink 5 (B200/GB200): 18 links, 1.8 TB/s bidirectional -> 50 GB/s per link per direction
  (NVIDIA Blackwell architecture technical brief, 2024).
- PCIe x16 per direction after 128b/130b coding: Gen3 8 GT/s -> 15.75 GB/s, Gen4 16 GT/s -> 31.5 GB/s, Gen5 32
  GT/s -> 63.0 GB/s (PCI-SIG PCI Express Base Specification 3.0/4.0/5.0). The GPU's own x16 link bounds every
  PCIe class (PIX ... SYS): P2P traffic crosses it whatever sits between.
- SMP interconnect, per link per direction: Intel QPI 9.6 GT/s -> 19.2 GB/s, UPI 10.4 GT/s -> 20.8 GB/s,
  UPI 16 GT/s -> 32.0 GB/s (Intel Xeon Scalable platform briefs). ``topo -m`` does not name the CPU, so a SYS
  edge gets ``min(PCIe, SMP)`` only when the caller passes the SMP figure; otherwise the PCIe bound alone.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import NamedTuple

from fleetdx.probes.contracts import Contract


class LinkKind(str, Enum):
    """The class of one ``topo -m`` cell, without the NVLink count."""

    NV = "NV"
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"


#: rank of the PCIe classes, higher is better; every NV# ranks above all of them (see :func:`link_rank`)
_PCIE_RANK = {LinkKind.SYS: 0, LinkKind.NODE: 1, LinkKind.PHB: 2, LinkKind.PXB: 3, LinkKind.PIX: 4}
_NV_BASE = 10
_CELL = re.compile(r"^(?:NV(?P<n>[0-9]+)|(?P<k>PIX|PXB|PHB|NODE|SYS|SOC))$")


class Link(NamedTuple):
    """One parsed cell: ``kind`` and, for NVLink, the number of bonded links (``0`` otherwise)."""

    kind: LinkKind
    nvlinks: int = 0

    def __str__(self) -> str:
        return f"NV{self.nvlinks}" if self.kind is LinkKind.NV else self.kind.value

    @property
    def rank(self) -> int:
        return link_rank(self)

    @property
    def is_nvlink(self) -> bool:
        return self.kind is LinkKind.NV

    @property
    def remote(self) -> bool:
        """True for NODE and SYS: the path leaves the device's PCIe host bridge."""
        return self.kind in (LinkKind.NODE, LinkKind.SYS)


def parse_link(cell: str) -> Link:
    """``"NV12"`` -> ``Link(NV, 12)``, ``"PXB"`` -> ``Link(PXB)``; ``SOC`` (old drivers) reads as SYS.

    Raises:
        ValueError: ``cell`` is not a link class (the parser has already rejected such cells in a TopoMatrix).
    """
    m = _CELL.match(cell.strip())
    if m is None:
        raise ValueError(f"not a topo -m link class: {cell!r}")
    if m.group("n") is not None:
        return Link(LinkKind.NV, int(m.group("n")))
    k = m.group("k")
    return Link(LinkKind.SYS if k == "SOC" else LinkKind(k))


def link_rank(link: Link) -> int:
    """Total order of link classes, higher is better: SYS 0 < NODE 1 < PHB 2 < PXB 3 < PIX 4 < NV1 11 < NV2 12
    ...

    A bond of more NVLinks ranks above a bond of fewer; any NVLink bond ranks above any PCIe path (the order
    of the ``topo -m`` legend).
    """
    if link.kind is LinkKind.NV:
        return _NV_BASE + link.nvlinks
    return _PCIE_RANK[link.kind]


def link_from_rank(rank: int) -> Link:
    """Inverse of :func:`link_rank`."""
    if rank >= _NV_BASE:
        return Link(LinkKind.NV, rank - _NV_BASE)
    for kind, r in _PCIE_RANK.items():
        if r == rank:
            return Link(kind)
    raise ValueError(f"no link class has rank {rank}")


class GpuGeneration(str, Enum):
    """GPU families that differ in NVLink and PCIe generation."""

    KEPLER = "kepler"
    PASCAL_PCIE = "pascal-pcie"
    PASCAL_SXM = "pascal-sxm"
    VOLTA = "volta"
    AMPERE_GA100 = "ampere-ga100"
    AMPERE_GA102 = "ampere-ga102"
    ADA = "ada"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"


class GenerationSpec(Contract):
    """Nominal link figures of one GPU generation: GB/s per direction (1e9 B/s)."""

    nvlink_gbps_per_link: float | None  #: None: this generation has no NVLink
    pcie_gen: int
    pcie_x16_gbps: float
    source: str


#: PCIe x16 per-direction GB/s after 128b/130b line coding (PCI-SIG base specifications)
PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0}

GENERATIONS: dict[GpuGeneration, GenerationSpec] = {
    GpuGeneration.KEPLER: GenerationSpec(
        nvlink_gbps_per_link=None, pcie_gen=3, pcie_x16_gbps=PCIE_X16_GBPS[3], source="Tesla K80 datasheet"
    ),
    GpuGeneration.PASCAL_PCIE: GenerationSpec(
        nvlink_gbps_per_link=None, pcie_gen=3, pcie_x16_gbps=PCIE_X16_GBPS[3], source="Tesla P40 datasheet"
    ),
    GpuGeneration.PASCAL_SXM: GenerationSpec(
        nvlink_gbps_per_link=20.0, pcie_gen=3, pcie_x16_gbps=PCIE_X16_GBPS[3], source="Tesla P100 whitepaper"
    ),
    GpuGeneration.VOLTA: GenerationSpec(
        nvlink_gbps_per_link=25.0, pcie_gen=3, pcie_x16_gbps=PCIE_X16_GBPS[3], source="Tesla V100 whitepaper"
    ),
    GpuGeneration.AMPERE_GA100: GenerationSpec(
        nvlink_gbps_per_link=25.0, pcie_gen=4, pcie_x16_gbps=PCIE_X16_GBPS[4], source="A100 whitepaper"
    ),
    GpuGeneration.AMPERE_GA102: GenerationSpec(
        nvlink_gbps_per_link=14.0625, pcie_gen=4, pcie_x16_gbps=PCIE_X16_GBPS[4], source="RTX A6000 datasheet"
    ),
    GpuGeneration.ADA: GenerationSpec(
        nvlink_gbps_per_link=None, pcie_gen=4, pcie_x16_gbps=PCIE_X16_GBPS[4], source="L40S datasheet"
    ),
    GpuGeneration.HOPPER: GenerationSpec(
        nvlink_gbps_per_link=25.0, pcie_gen=5, pcie_x16_gbps=PCIE_X16_GBPS[5], source="H100 whitepaper"
    ),
    GpuGeneration.BLACKWELL: GenerationSpec(
        nvlink_gbps_per_link=50.0,
        pcie_gen=5,
        pcie_x16_gbps=PCIE_X16_GBPS[5],
        source="Blackwell technical brief",
    ),
}

#: product-name patterns (as nvidia-smi prints ``product_name``), first match wins
_NAME_PATTERNS: list[tuple[re.Pattern[str], GpuGeneration]] = [
    (re.compile(r"\b(GB|B)(100|200|300)\b", re.I), GpuGeneration.BLACKWELL),
    (re.compile(r"\b(GH|H)(100|200|800|20)\b", re.I), GpuGeneration.HOPPER),
    (re.compile(r"\bA(100|800|30)\b", re.I), GpuGeneration.AMPERE_GA100),
    (re.compile(r"\b(RTX )?A(6000|5000|40|10)\b|\b3090\b", re.I), GpuGeneration.AMPERE_GA102),
    (re.compile(r"\bL(40S?|4|20)\b|\b4090\b|RTX 6000 Ada", re.I), GpuGeneration.ADA),
    (re.compile(r"\bV100\b", re.I), GpuGeneration.VOLTA),
    (re.compile(r"\bP100\b", re.I), GpuGeneration.PASCAL_SXM),
    (re.compile(r"\bP(40|4|6)\b", re.I), GpuGeneration.PASCAL_PCIE),
    (re.compile(r"\bK(80|40|20)\b", re.I), GpuGeneration.KEPLER),
]


def generation_of(product_name: str | None) -> GpuGeneration | None:
    """The generation of a GPU product name (``"NVIDIA H100 80GB HBM3"`` -> HOPPER); ``None`` when unknown."""
    if not product_name:
        return None
    for pattern, gen in _NAME_PATTERNS:
        if pattern.search(product_name):
            return gen
    return None


def nominal_table(
    cells: list[str], generation: GpuGeneration | None, smp_gbps: float | None = None
) -> dict[str, float]:
    """Nominal per-direction GB/s of each distinct link class in ``cells``, best class first
    (``{"NV12": 300.0, "PXB": 31.5}``); classes whose figure is unknown are left out."""
    out: dict[str, float] = {}
    for cell in sorted(set(cells), key=lambda c: -link_rank(parse_link(c))):
        gbps = nominal_gbps(parse_link(cell), generation, smp_gbps)
        if gbps is not None:
            out[str(parse_link(cell))] = gbps
    return out


def nominal_gbps(link: Link, generation: GpuGeneration | None, smp_gbps: float | None = None) -> float | None:
    """Nominal per-direction bandwidth of one GPU link in GB/s, or ``None`` when it cannot be known.

    NV#: ``#`` x the generation's per-link figure. PIX/PXB/PHB/NODE: the GPU's PCIe x16 figure. SYS: the same,
    bounded by ``smp_gbps`` (the SMP interconnect) when given. ``None`` when the generation is unknown, or an
    NV# cell is reported for a generation without NVLink (never a guessed number).
    """
    if generation is None:
        return None
    spec = GENERATIONS[generation]
    if link.kind is LinkKind.NV:
        if spec.nvlink_gbps_per_link is None:
            return None
        return link.nvlinks * spec.nvlink_gbps_per_link
    if link.kind is LinkKind.SYS and smp_gbps is not None:
        return min(spec.pcie_x16_gbps, smp_gbps)
    return spec.pcie_x16_gbps
