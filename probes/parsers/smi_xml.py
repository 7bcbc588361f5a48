"""Parser for nvidia-smi -q -x. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class SmiReport(Contract):
    """(stub)"""


def parse_smi_xml(text: str) -> SmiReport:
    """(stub)"""
    raise NotImplementedError
