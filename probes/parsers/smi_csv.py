"""Parser for nvidia-smi --query-gpu / --query-compute-apps / --query-remapped-rows --format=csv. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class SmiCsv(Contract):
    """(stub)"""


def parse_smi_csv(text: str) -> SmiCsv:
    """(stub)"""
    raise NotImplementedError
