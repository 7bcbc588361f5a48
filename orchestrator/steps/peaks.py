"""Peak dense throughput of NVIDIA data-centre GPUs per data type: the denominator of MFU. Pure.

MFU (model FLOPs utilisation, Chowdhery et al. 2022, "PaLM: Scaling Language Modeling with Pathways",
arXiv:2204.02311, appendix B) is the model's FLOP/s over the hardware's theoretical peak FLOP/s. The peaks below
are NVIDIA's own datasheet figures in TFLOP/s per GPU, **dense**: the datasheets print the tensor-core figures
"with sparsity" (2:4 structured sparsity, twice the dense rate; their footnote says so), and training runs dense
math, so those figures are halved here. ``fp32`` is the plain (non-tensor-core, FFMA) rate; ``tf32``,
``bf16``/``fp16`` and ``fp8`` are tensor-core rates. ``None``: the GPU has no such tensor-core mode.

Sources (NVIDIA product pages and datasheets; the figure per GPU, boost clock):

* A100 (SXM4 and PCIe, 40 and 80 GB alike): FP32 19.5, TF32 156, BF16/FP16 312 (624 sparse), no FP8:
  https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
* H100 SXM5: FP32 67, TF32 494.5 (989 sparse), BF16/FP16 989.5 (1,979 sparse), FP8 1,979 (3,958 sparse);
  H100 PCIe: FP32 51, TF32 378 (756), BF16/FP16 756.5 (1,513), FP8 1,513 (3,026);
  H100 NVL: FP32 60, TF32 417.5 (835), BF16/FP16 835.5 (1,671), FP8 1,670.5 (3,341):
  https://www.nvidia.com/en-us/data-center/h100/ (and the H100 datasheet
  https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)
* H200 SXM: as H100 SXM5 (same GH100 math, faster HBM3e); H200 NVL: as H100 NVL:
  https://www.nvidia.com/en-us/data-center/h200/
* B200 (HGX B200, per GPU: the 8-GPU board's figures over 8): FP32 75, TF32 1,100 (2,200 sparse),
  BF16/FP16 2,250 (4,500), FP8 4,500 (9,000): https://www.nvidia.com/en-us/data-center/hgx/
* L40S: FP32 91.6, TF32 183 (366), BF16/FP16 362.05 (733), FP8 733 (1,466):
  https://www.nvidia.com/en-us/data-center/l40s/
* L4: FP32 30.3, TF32 60 (120), BF16/FP16 121 (242), FP8 242.5 (485): https://www.nvidia.com/en-us/data-center/l4/
* A10: FP32 31.2, TF32 62.5 (125), BF16/FP16 125 (250): https://www.nvidia.com/en-us/data-center/products/a10-gpu/
* A30: FP32 10.3, TF32 82 (165), BF16/FP16 165 (330): https://www.nvidia.com/en-us/data-center/products/a30-gpu/
* V100 SXM2: FP32 15.7, FP16 tensor 125 (no sparsity, no TF32/BF16); V100 PCIe: FP32 14, FP16 112:
  https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf
* T4: FP32 8.1, FP16 tensor 65: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf

Memory bandwidth (``hbm_tbps``, TB/s, the same datasheets; where a model comes with several memories, the
highest, so that its balance point is the lowest and a matmul called memory-bound is so on every variant):
A100 2.039 (80 GB SXM4; 80 GB PCIe 1.935, 40 GB 1.555), H100 SXM5 3.35, H100 PCIe 2.0, H100 NVL 3.9, H200 4.8,
B200 7.7 (HGX B200: 62 TB/s over 8 GPUs), L40S 0.864, L4 0.3, A10 0.6, A30 0.933, V100 0.9, T4 0.32.

A GPU model is found from the CUDA device name a trace's ``deviceProperties`` carries (``NVIDIA A100-SXM4-80GB``,
``NVIDIA H100 80GB HBM3``, ``NVIDIA H100 PCIe``) or from a name given (``--gpu H100-SXM``); a name matching no
row is unknown (no guess: the caller says MFU cannot be computed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the data types of the table, in the order printed
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model's dense peak TFLOP/s per data type (``None``: no such mode) and the datasheet's URL."""

    model: str
    fp32: float
    tf32: float | None
    bf16: float | None
    fp16: float | None
    fp8: float | None
    source: str
    #: memory bandwidth, TB/s (the datasheet's "GPU memory bandwidth"; of a model's memory variants the highest)
    hbm_tbps: float = 0.0

    def balance(self, dtype: str) -> float | None:
        """The balance point (the ridge of the roofline: Williams, Waterman & Patterson 2009, "Roofline", CACM
        52(4)) for ``dtype``: peak FLOP/s over memory bandwidth, in FLOPs per byte; ``None`` when either is
        unknown."""
        peak = self.tflops(dtype)
        return peak / self.hbm_tbps if peak and self.hbm_tbps > 0 else None

    def tflops(self, dtype: str) -> float | None:
        """The dense peak for ``dtype`` (one of :data:`DTYPES`), TFLOP/s; ``None`` when the GPU lacks it.

        Raises:
            ValueError: ``dtype`` not in :data:`DTYPES`.
        """
        if dtype not in DTYPES:
            raise ValueError(f"unknown data type {dtype!r}: one of {', '.join(DTYPES)}")
        value: float | None = getattr(self, dtype)
        return value


_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"

_T4 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
_B200 = "https://www.nvidia.com/en-us/data-center/hgx/"
_L40S = "https://www.nvidia.com/en-us/data-center/l40s/"
_L4 = "https://www.nvidia.com/en-us/data-center/l4/"
_A10 = "https://www.nvidia.com/en-us/data-center/products/a10-gpu/"
_A30 = "https://www.nvidia.com/en-us/data-center/products/a30-gpu/"

#: the table, by model name (what ``--gpu`` accepts besides a device name): fp32, tf32, bf16, fp16, fp8 TFLOP/s
PEAKS: dict[str, GpuPeak] = {
    p.model: p
    for p in (
        GpuPeak("A100", 19.5, 156.0, 312.0, 312.0, None, _A100, hbm_tbps=2.039),
        GpuPeak("H100-SXM", 67.0, 494.5, 989.5, 989.5, 1979.0, _H100, hbm_tbps=3.35),
        GpuPeak("H100-PCIe", 51.0, 378.0, 756.5, 756.5, 1513.0, _H100, hbm_tbps=2.0),
        GpuPeak("H100-NVL", 60.0, 417.5, 835.5, 835.5, 1670.5, _H100, hbm_tbps=3.9),
        GpuPeak("H200-SXM", 67.0, 494.5, 989.5, 989.5, 1979.0, _H200, hbm_tbps=4.8),
        GpuPeak("H200-NVL", 60.0, 417.5, 835.5, 835.5, 1670.5, _H200, hbm_tbps=4.8),
        GpuPeak("B200", 75.0, 1100.0, 2250.0, 2250.0, 4500.0, _B200, hbm_tbps=7.7),
        GpuPeak("L40S", 91.6, 183.0, 362.05, 362.05, 733.0, _L40S, hbm_tbps=0.864),
        GpuPeak("L4", 30.3, 60.0, 121.0, 121.0, 242.5, _L4, hbm_tbps=0.3),
        GpuPeak("A10", 31.2, 62.5, 125.0, 125.0, None, _A10, hbm_tbps=0.6),
        GpuPeak("A30", 10.3, 82.0, 165.0, 165.0, None, _A30, hbm_tbps=0.933),
        GpuPeak("V100-SXM2", 15.7, None, None, 125.0, None, _V100, hbm_tbps=0.9),
        GpuPeak("V100-PCIe", 14.0, None, None, 112.0, None, _V100, hbm_tbps=0.9),
        GpuPeak("T4", 8.1, None, None, 65.0, None, _T4, hbm_tbps=0.32),
    )
}

#: device-name patterns, tried in order (the first match wins): more specific names first
_NAME_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bH100\b.*\bNVL\b|\bH100NVL\b", re.I), "H100-NVL"),
    (re.compile(r"\bH100\b.*\bPCIe\b", re.I), "H100-PCIe"),
    (re.compile(r"\bH100\b", re.I), "H100-SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM5 board
    (re.compile(r"\bH200\b.*\bNVL\b", re.I), "H200-NVL"),
    (re.compile(r"\bH200\b", re.I), "H200-SXM"),
    (re.compile(r"\bB200\b", re.I), "B200"),
    (re.compile(r"\bA100\b", re.I), "A100"),  # SXM4 and PCIe have the same dense peaks
    (re.compile(r"\bL40S\b", re.I), "L40S"),
    (re.compile(r"\bL4\b", re.I), "L4"),
    (re.compile(r"\bA10\b", re.I), "A10"),  # not A10G (AWS's variant: not in NVIDIA's datasheets)
    (re.compile(r"\bA30\b", re.I), "A30"),
    (re.compile(r"\bV100\b.*\bPCIe\b", re.I), "V100-PCIe"),
    (re.compile(r"\bV100\b", re.I), "V100-SXM2"),
    (re.compile(r"\bT4\b", re.I), "T4"),
]


def lookup(name: str) -> GpuPeak | None:
    """The table's row for a model name (``H100-SXM``, any case) or a CUDA device name (``NVIDIA A100-SXM4-80GB``);
    ``None`` for a name matching no row."""
    key = name.strip()
    for model, peak in PEAKS.items():
        if key.lower() == model.lower():
            return peak
    for pattern, model in _NAME_RULES:
        if pattern.search(key.replace("_", " ")):
            return PEAKS[model]
    return None
