"""Parser for NCCL_DEBUG=INFO logs. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class NcclLog(Contract):
    """(stub)"""


def parse_nccl_log(text: str) -> NcclLog:
    """(stub)"""
    raise NotImplementedError
