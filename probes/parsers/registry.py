"""The explicit map from parser kind (``fleetdx parse KIND``) to parser function. Every parser is pure
``text -> model`` and raises only :class:`fleetdx.probes.errors.ParseError`."""

from __future__ import annotations

import functools
from collections.abc import Callable

from pydantic import BaseModel

from fleetdx.probes.commands import ParserKind
from fleetdx.probes.parsers.ibstat import parse_ibstat
from fleetdx.probes.parsers.lscpu import parse_lscpu
from fleetdx.probes.parsers.microbench import parse_microbench
from fleetdx.probes.parsers.nccl_log import parse_nccl_log
from fleetdx.probes.parsers.nccl_tests import collective_from_name, parse_nccl_tests
from fleetdx.probes.parsers.numactl import parse_numactl
from fleetdx.probes.parsers.p2p import parse_p2p
from fleetdx.probes.parsers.smi_csv import parse_smi_csv
from fleetdx.probes.parsers.smi_xml import parse_smi_xml
from fleetdx.probes.parsers.topo import parse_topo
from fleetdx.probes.parsers.xid import parse_xid

Parser = Callable[[str], BaseModel]

PARSERS: dict[ParserKind, Parser] = {
    ParserKind.TOPO: parse_topo,
    ParserKind.P2P: parse_p2p,
    ParserKind.SMI_XML: parse_smi_xml,
    ParserKind.SMI_CSV: parse_smi_csv,
    ParserKind.NCCL_TESTS: parse_nccl_tests,
    ParserKind.NCCL_LOG: parse_nccl_log,
    ParserKind.NUMACTL: parse_numactl,
    ParserKind.LSCPU: parse_lscpu,
    ParserKind.IBSTAT: parse_ibstat,
    ParserKind.XID: parse_xid,
    ParserKind.MICROBENCH: parse_microbench,
}


def parser_for(kind: ParserKind, file_name: str | None = None) -> Parser:
    """The parser function of ``kind``.

    ``file_name`` is the raw file's name where known: older nccl-tests outputs never print which collective
    they ran, so the binary name in the file name (``all_gather_perf_-b8.txt``) is passed as a hint.
    """
    if kind is ParserKind.NCCL_TESTS and file_name is not None:
        hint = collective_from_name(file_name)
        if hint is not None:
            return functools.partial(parse_nccl_tests, collective_hint=hint)
    return PARSERS[kind]
