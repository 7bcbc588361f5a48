"""Parser for lscpu (text) and lscpu -J. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class CpuInfo(Contract):
    """(stub)"""


def parse_lscpu(text: str) -> CpuInfo:
    """(stub)"""
    raise NotImplementedError
