"""Per-GPU-model reference figures for the micro-benchmark rules (GEMM_SLOW, HBM_SLOW, H2D_SLOW).

Two kinds of figure:

* **spec**: the vendor's peak, from NVIDIA's data sheets (dense, i.e. without the 2:4 sparsity doubling the
  sheets print first): H100 ("NVIDIA H100 Tensor Core GPU" datasheet: SXM5 BF16 989.4 TFLOP/s, 3.35 TB/s HBM3;
  PCIe 756 TFLOP/s, 2.0 TB/s; NVL 835 TFLOP/s, 3.9 TB/s), H200 ("NVIDIA H200 Tensor Core GPU" datasheet:
  989 TFLOP/s, 4.8 TB/s; NVL 835 TFLOP/s, 4.8 TB/s), A100 ("NVIDIA A100 Tensor Core GPU" datasheet: BF16
  312 TFLOP/s; 2,039 GB/s SXM4-80GB, 1,935 GB/s PCIe-80GB, 1,555 GB/s 40GB), L40S ("NVIDIA L40S" datasheet:
  BF16 362 TFLOP/s, 864 GB/s GDDR6). PCIe x16 per direction: Gen5 64 GB/s, Gen4 32 GB/s (PCI-SIG; the data
  sheets print the bidirectional 128/64 GB/s).
* **measured**: what ``fleetdx.probes.microbench`` measured on a healthy, idle GPU of that model
  (/work/bench/MEASUREMENTS.md, H100 80GB HBM3: bf16 8192^3 GEMM 773 TFLOP/s, device copy 3006 GB/s read+write,
  pinned H2D 54.6 GB/s).

A spec peak is never reached; where no measured figure exists the expected figure is the spec scaled by the
efficiency measured on the H100 80GB HBM3 (GEMM 773/989.4 = 0.78, copy 3006/3350 = 0.90, pinned H2D
54.6/64 = 0.85), an assumption flagged in the evidence as ``basis="spec_scaled"`` and judged with a wider
tolerance.

Tolerances (fraction below the expected figure that counts as slow):

* ``MEASURED_TOLERANCE`` 0.10: well above the run-to-run spread of a median-of-20 measurement on one GPU
  (bench/MEASUREMENTS.md vs the h100-vm-idle fixture, same GPU: GEMM 773 vs 772.6, copy 3006 vs 2992, H2D 54.6 vs 54.7,
  all within 0.5%) and below the effect of a contending process (h100-vm-busy fixture: GEMM -13%, copy -47%).
* ``SCALED_TOLERANCE`` 0.25: the efficiency of another model may differ from the H100's.
* ``PEER_TOLERANCE`` 0.10: slower than 0.90 x the median of peers with the same GPU model (same reasoning as
  the measured tolerance; peers share driver, clocks and method, so they are the better baseline).
"""

from __future__ import annotations

from enum import Enum

from fleetdx.probes.contracts import Contract

MEASURED_TOLERANCE = 0.10
SCALED_TOLERANCE = 0.25
PEER_TOLERANCE = 0.10

#: efficiencies measured on H100 80GB HBM3 (bench/MEASUREMENTS.md) relative to its data-sheet peaks
GEMM_EFFICIENCY = 773 / 989.4
COPY_EFFICIENCY = 3006 / 3350
H2D_EFFICIENCY = 54.6 / 64

GEN5_X16_GBPS = 64.0
GEN4_X16_GBPS = 32.0


class Basis(str, Enum):
    """Where an expected figure comes from."""

    MEASURED = "measured"
    SPEC_SCALED = "spec_scaled"


class GpuSpec(Contract):
    """Data-sheet peaks of one GPU model (dense BF16 TFLOP/s, memory GB/s, host link GB/s per direction) and,
    where fleetdx has measured a healthy one, the measured figures."""

    name: str  #: as nvidia-smi and torch print it
    bf16_tflops: float
    mem_gbps: float
    pcie_gbps: float
    measured_bf16_tflops: float | None = None
    measured_d2d_gbps: float | None = None
    measured_h2d_gbps: float | None = None


class Expected(Contract):
    """An expected figure and the tolerance that goes with it."""

    value: float
    basis: Basis
    tolerance: float

    @property
    def threshold(self) -> float:
        return self.value * (1 - self.tolerance)


REFERENCES: tuple[GpuSpec, ...] = (
    GpuSpec(
        name="NVIDIA H100 80GB HBM3",
        bf16_tflops=989.4,
        mem_gbps=3350,
        pcie_gbps=GEN5_X16_GBPS,
        measured_bf16_tflops=773,
        measured_d2d_gbps=3006,
        measured_h2d_gbps=54.6,
    ),
    GpuSpec(name="NVIDIA H100 PCIe", bf16_tflops=756, mem_gbps=2000, pcie_gbps=GEN5_X16_GBPS),
    GpuSpec(name="NVIDIA H100 NVL", bf16_tflops=835, mem_gbps=3900, pcie_gbps=GEN5_X16_GBPS),
    GpuSpec(name="NVIDIA H200", bf16_tflops=989, mem_gbps=4800, pcie_gbps=GEN5_X16_GBPS),
    GpuSpec(name="NVIDIA H200 NVL", bf16_tflops=835, mem_gbps=4800, pcie_gbps=GEN5_X16_GBPS),
    GpuSpec(name="NVIDIA A100-SXM4-80GB", bf16_tflops=312, mem_gbps=2039, pcie_gbps=GEN4_X16_GBPS),
    GpuSpec(name="NVIDIA A100-SXM4-40GB", bf16_tflops=312, mem_gbps=1555, pcie_gbps=GEN4_X16_GBPS),
    GpuSpec(name="NVIDIA A100 80GB PCIe", bf16_tflops=312, mem_gbps=1935, pcie_gbps=GEN4_X16_GBPS),
    GpuSpec(name="NVIDIA A100-PCIE-40GB", bf16_tflops=312, mem_gbps=1555, pcie_gbps=GEN4_X16_GBPS),
    GpuSpec(name="NVIDIA L40S", bf16_tflops=362, mem_gbps=864, pcie_gbps=GEN4_X16_GBPS),
)


def _norm(name: str) -> str:
    return " ".join(name.lower().split())


_BY_NAME = {_norm(s.name): s for s in REFERENCES}


def spec_for(gpu_name: str | None) -> GpuSpec | None:
    """The reference of a GPU model by its exact printed name (case, spacing ignored); ``None`` if unknown."""
    return None if gpu_name is None else _BY_NAME.get(_norm(gpu_name))


class Metric(str, Enum):
    """What is compared."""

    GEMM_BF16 = "gemm_bf16_tflops"
    D2D = "d2d_gbps"
    H2D_PINNED = "h2d_pinned_gbps"
    D2H_PINNED = "d2h_pinned_gbps"


def expected(spec: GpuSpec, metric: Metric) -> Expected:
    """The expected figure of ``metric`` on ``spec``: measured where known, else spec x H100 efficiency."""
    measured = {
        Metric.GEMM_BF16: spec.measured_bf16_tflops,
        Metric.D2D: spec.measured_d2d_gbps,
        Metric.H2D_PINNED: spec.measured_h2d_gbps,
        Metric.D2H_PINNED: spec.measured_h2d_gbps,  # bench/MEASUREMENTS.md: pinned D2H 54.8 ~ H2D 54.6 GB/s
    }[metric]
    if measured is not None:
        return Expected(value=measured, basis=Basis.MEASURED, tolerance=MEASURED_TOLERANCE)
    scaled = {
        Metric.GEMM_BF16: spec.bf16_tflops * GEMM_EFFICIENCY,
        Metric.D2D: spec.mem_gbps * COPY_EFFICIENCY,
        Metric.H2D_PINNED: spec.pcie_gbps * H2D_EFFICIENCY,
        Metric.D2H_PINNED: spec.pcie_gbps * H2D_EFFICIENCY,
    }[metric]
    return Expected(value=scaled, basis=Basis.SPEC_SCALED, tolerance=SCALED_TOLERANCE)
