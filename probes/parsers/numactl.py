"""Parser for numactl -H. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class NumaTopology(Contract):
    """(stub)"""


def parse_numactl(text: str) -> NumaTopology:
    """(stub)"""
    raise NotImplementedError
