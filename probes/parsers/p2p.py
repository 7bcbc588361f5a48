"""Parser for nvidia-smi topo -p2p r|w|n|a. (stub: being written)"""

from __future__ import annotations

from probes.contracts import Contract


class P2PMatrix(Contract):
    """(stub)"""


def parse_p2p(text: str) -> P2PMatrix:
    """(stub)"""
    raise NotImplementedError
