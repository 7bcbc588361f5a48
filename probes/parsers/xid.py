"""Parser for kernel log NVRM Xid lines. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class XidLog(Contract):
    """(stub)"""


def parse_xid(text: str) -> XidLog:
    """(stub)"""
    raise NotImplementedError
