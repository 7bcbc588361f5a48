"""Parser for ``nvidia-smi topo -m`` (the GPU/NIC link matrix with CPU/NUMA affinity).

Link classes are as the ``nvidia-smi topo -m`` legend defines them: ``X`` (self), ``NV#`` (a bonded set of #
NVLinks), ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS`` (older drivers print ``SOC``; it is normalised to ``SYS``).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StringConstraints

from probes.contracts import Contract

#: one cell of the matrix after normalisation (SOC -> SYS); self cells are not stored
LINK_RE = r"^(NV[0-9]+|PIX|PXB|PHB|NODE|SYS)$"
LinkCell = Annotated[str, StringConstraints(pattern=LINK_RE)]
_LINK = re.compile(LINK_RE)


class TopoGpu(Contract):
    """One GPU row. ``cpu_affinity`` is the expanded CPU list (``[]`` when the cell is empty or ``N/A``, as under
    a cgroup-restricted job); ``numa_affinity`` is ``None`` when the column is absent or ``N/A``;
    ``gpu_numa_id`` is ``None`` when absent or ``N/A``."""

    name: str  # "GPU0"
    cpu_affinity: list[int] = Field(default_factory=list)
    cpu_affinity_raw: str | None = None  # the cell as printed, e.g. "0-31,64-95", "N/A", "" -> None
    numa_affinity: list[int] | None = None
    gpu_numa_id: int | None = None


class TopoNic(Contract):
    """One NIC column/row. ``name`` is the real device name (``mlx5_0``, ``mlx5_bond_0``); ``label`` is the
    ``NICn`` column label when the output used a NIC Legend, else ``None``."""

    name: str
    label: str | None = None


class TopoMatrix(Contract):
    """A parsed ``nvidia-smi topo -m``.

    ``links[a][b]`` is the link class between devices ``a`` and ``b`` keyed by real device names (GPUs and
    NICs, rows as printed; self cells omitted). ``legend`` is ``"legacy"`` (SOC era), ``"middle"``
    (SYS and NODE, PIX/PXB say "PCIe switch"), ``"modern"`` (PIX/PXB say "PCIe bridge(s)") or ``None``
    when the output has no legend.
    """

    gpus: list[TopoGpu]
    nics: list[TopoNic] = Field(default_factory=list)
    links: dict[str, dict[str, LinkCell]]
    legend: str | None = None
    warnings: list[str] = Field(default_factory=list)

    def link(self, a: str, b: str) -> str:
        """Link class between ``a`` and ``b`` (``"X"`` when ``a == b``). Raises ``KeyError`` if unknown."""
        if a == b:
            return "X"
        return self.links[a][b]

    @property
    def gpu_names(self) -> list[str]:
        return [g.name for g in self.gpus]

    @property
    def nic_names(self) -> list[str]:
        return [n.name for n in self.nics]


def parse_topo(text: str) -> TopoMatrix:
    """Parse the text of ``nvidia-smi topo -m``.

    Raises:
        ParseError: the text holds no GPU matrix, or a row cannot be read.
    """
    raise NotImplementedError  # filled in by the topo parser work


def is_link_cell(cell: str) -> bool:
    return bool(_LINK.match(cell))
