"""Parser for ibstat / ibstatus and sysfs InfiniBand facts. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class IbReport(Contract):
    """(stub)"""


def parse_ibstat(text: str) -> IbReport:
    """(stub)"""
    raise NotImplementedError
