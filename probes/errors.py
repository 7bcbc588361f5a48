"""The one error hierarchy of fleetdx.

Parsers raise :class:`ParseError` and nothing else; the CLI turns any :class:`FleetdxError` into a message and
exit code 2 (usage/input error) without a traceback.
"""

from __future__ import annotations


class FleetdxError(Exception):
    """Base class of every error fleetdx raises on purpose."""


class ParseError(FleetdxError):
    """A tool output could not be read.

    Attributes:
        fmt: the format being parsed (``"topo"``, ``"nccl-tests"``, ...).
        line: 1-based line number where parsing failed, or ``None`` when the whole input is at fault.
        expected: what the parser expected to find there.
        detail: optional extra text (e.g. the offending line, truncated).
    """

    def __init__(self, fmt: str, line: int | None, expected: str, detail: str = "") -> None:
        self.fmt = fmt
        self.line = line
        self.expected = expected
        self.detail = detail
        where = f"line {line}" if line is not None else "input"
        msg = f"{fmt}: {where}: expected {expected}"
        if detail:
            msg += f" (got {detail[:120]!r})"
        super().__init__(msg)


class BundleError(FleetdxError):
    """A bundle directory is missing, unreadable or holds nothing fleetdx recognises."""


class ConfigError(FleetdxError):
    """Bad user input: a malformed hostlist, an impossible option combination, a missing file."""
