"""Parser for nccl-tests text output and -J JSON. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class NcclTestsReport(Contract):
    """(stub)"""


def parse_nccl_tests(text: str) -> NcclTestsReport:
    """(stub)"""
    raise NotImplementedError
