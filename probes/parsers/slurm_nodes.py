"""Parsers for Slurm's view of its nodes: ``scontrol show node`` (multi-line or ``-o`` one line per node) and
``sinfo -N -h -o '%N|%P|%T|%G|%E'`` (the format fleetdx asks for: name, partition, long state, GRES, reason).

``scontrol show node`` prints one record per node, ``Key=Value`` pairs separated by spaces, a blank line
between records (``-o``: one record per line). Values may hold spaces: ``OS=Linux 6.1 #1 SMP ...`` and
``Reason=GPU3 ECC [root@2026-11-24T19:49:34]`` (the reason is the last pair of its line), so a value runs
to the next `` Key=`` token, never across a line. ``State=`` is a base state and ``+``-joined flags
(``IDLE``, ``MIXED``, ``ALLOCATED``, ``DOWN``, ... and ``DRAIN``, ``NOT_RESPONDING``, ``POWERED_DOWN``, ...;
scontrol(1), "NODE STATE"). ``sinfo``'s ``%T`` prints the long lower-case form (``drained``, ``draining``,
``mixed``) with a one-character suffix for some flags (``*`` not responding, ``~`` powered off, ``#``
powering up, ``!`` pending power down, ``%`` powering down, ``$`` maintenance, ``@`` pending reboot, ``^``
reboot issued, ``-`` planned; sinfo(1), "NODE STATE CODES"); a node in two partitions is printed once per
partition (the default partition carries a ``*``).

``scontrol show node -d`` (``--details``) adds ``GresUsed=gpu:2(IDX:0-1)``: the GPUs jobs hold, so a MIXED
node's free GPUs are known (:attr:`SlurmNode.gpus_free`).

Which nodes a placement may use is decided here, from the state alone (:attr:`SlurmNode.usable`): the base
state is IDLE or MIXED and no flag but CLOUD or COMPLETING is set. Drained, draining, down, failing,
not-responding, powered-down, reserved and rebooting nodes are never usable. Real captures of Slurm 22.05 are in
``tests/fixtures/placement/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

SCONTROL_FMT = "scontrol show node"
SINFO_FMT = "sinfo -N -h -o '%N|%P|%T|%G|%E'"
#: the ``sinfo`` format string :func:`parse_sinfo_nodes` reads
SINFO_FORMAT = "%N|%P|%T|%G|%E"

#: base states a job can be placed on
USABLE_BASE = frozenset({"IDLE", "MIXED"})
#: flags that do not stop a placement (a cloud node, a node finishing a job's epilog)
HARMLESS_FLAGS = frozenset({"CLOUD", "COMPLETING"})
#: sinfo %T long names -> (base, flags) in scontrol's words
_SINFO_LONG = {
    "drained": ("IDLE", ("DRAIN",)),
    "draining": ("MIXED", ("DRAIN",)),
    "drain": ("IDLE", ("DRAIN",)),
    "allocated": ("ALLOCATED", ()),
    "completing": ("IDLE", ("COMPLETING",)),
    "fail": ("DOWN", ("FAIL",)),
    "failing": ("MIXED", ("FAIL",)),
    "maint": ("IDLE", ("MAINTENANCE",)),
    "reserved": ("IDLE", ("RESERVED",)),
    "perfctrs": ("IDLE", ("PERFCTRS",)),
    "power_down": ("IDLE", ("POWER_DOWN",)),
    "powered_down": ("IDLE", ("POWERED_DOWN",)),
    "powering_down": ("IDLE", ("POWERING_DOWN",)),
    "powering_up": ("IDLE", ("POWERING_UP",)),
    "reboot_issued": ("IDLE", ("REBOOT_ISSUED",)),
    "reboot_requested": ("IDLE", ("REBOOT_REQUESTED",)),
    "inval": ("DOWN", ("INVALID_REG",)),
    "planned": ("IDLE", ("PLANNED",)),
}
_SINFO_SUFFIX = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "!": "POWER_DOWN",
    "%": "POWERING_DOWN",
    "$": "MAINTENANCE",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")
_GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:(\d+)")
_MAX_VALUE = 4096


class SlurmNode(Contract):
    """One node as Slurm reports it. ``state`` is the base state in capitals (``IDLE``, ``MIXED``, ...);
    ``flags`` the ``+``-joined flags (``DRAIN``, ``NOT_RESPONDING``, ...); ``raw_state`` the text as printed.
    ``gpus`` is the GPU count of its ``Gres=`` (``gpu:8``, ``gpu:h100:8``; summed over types), ``None``
    when it declares none. ``reason`` is the admin's reason (drain/down), without scontrol's ``[user@time]``."""

    name: str
    state: str
    flags: list[str] = Field(default_factory=list)
    raw_state: str
    partitions: list[str] = Field(default_factory=list)
    gpus: int | None = None
    gpus_used: int | None = None  #: GPUs held by jobs (``GresUsed=``, printed by ``scontrol show node -d``)
    reason: str | None = None

    @property
    def gpus_free(self) -> int | None:
        """GPUs no job holds, when both counts are known."""
        if self.gpus is None or self.gpus_used is None:
            return None
        return max(0, self.gpus - self.gpus_used)

    @property
    def usable(self) -> bool:
        """True when a job may be placed on it: IDLE or MIXED, with no flag but CLOUD/COMPLETING."""
        return self.state in USABLE_BASE and all(f in HARMLESS_FLAGS for f in self.flags)

    def why_unusable(self) -> str | None:
        """``None`` when :attr:`usable`, else the state in words, with the reason when Slurm has one."""
        if self.usable:
            return None
        text = f"Slurm state {self.raw_state}"
        return text + (f" (reason: {self.reason})" if self.reason else "")


def _pairs(line: str) -> Iterator[tuple[str, str]]:
    keys = list(_KEY.finditer(line))
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        yield m.group(1), line[m.end() : end].strip()


def _gpu_count(gres: str | None, zero_ok: bool = False) -> int | None:
    """GPUs of a GRES string (``gpu:8``, ``gpu:h100:8(S:0-1)``, ``gpu:2(IDX:0-1)``; types summed); ``None``
    when it names none. ``zero_ok``: an empty ``GresUsed`` (``(null)``) means 0 in use."""
    if not gres or gres in ("(null)", "none", "N/A"):
        return 0 if zero_ok and gres is not None else None
    counts = [int(c) for c in _GPU_GRES.findall(gres) if len(c) <= 6]
    return sum(counts) if counts else (0 if zero_ok else None)


def _reason(text: str | None) -> str | None:
    if text is None:
        return None
    text = re.sub(r"\s*\[[^\]]*@[^\]]*\]\s*$", "", text).strip()
    return None if text in ("", "none", "(null)") else text[:_MAX_VALUE]


def _split_state(raw: str, fmt: str, lineno: int) -> tuple[str, list[str]]:
    parts = [p for p in raw.strip().upper().split("+") if p]
    if not parts or not all(re.fullmatch(r"[A-Z_]+\*?", p) for p in parts):
        raise ParseError(fmt, lineno, "a node state such as IDLE or MIXED+DRAIN", raw)
    base, flags = parts[0], parts[1:]
    if base.endswith("*"):  # scontrol prints DOWN* for a node that does not respond
        base = base[:-1]
        flags.append("NOT_RESPONDING")
    return base, [f.rstrip("*") for f in flags]


def parse_scontrol_nodes(text: str) -> list[SlurmNode]:
    """Nodes of ``scontrol show node`` or ``scontrol show node -o`` output, in printed order.

    Raises:
        ParseError: a record without ``NodeName=`` or ``State=``, a malformed state, a node printed twice,
            or input that holds no node ("No nodes in the system" included).
    """
    records: list[tuple[int, dict[str, str]]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        pairs = list(_pairs(line))
        if not pairs:
            raise ParseError(SCONTROL_FMT, lineno, "Key=Value pairs", line)
        if pairs[0][0] == "NodeName":
            records.append((lineno, {}))
        elif not records:
            raise ParseError(SCONTROL_FMT, lineno, "a record starting with NodeName=", line)
        fields = records[-1][1]
        for k, v in pairs:
            fields.setdefault(k, v[:_MAX_VALUE])
    if not records:
        raise ParseError(SCONTROL_FMT, None, "at least one NodeName= record")
    out: list[SlurmNode] = []
    seen: set[str] = set()
    for lineno, f in records:
        name = f.get("NodeName", "")
        if not name or " " in name:
            raise ParseError(SCONTROL_FMT, lineno, "NodeName=NAME", name)
        if name in seen:
            raise ParseError(SCONTROL_FMT, lineno, "each node once", name)
        seen.add(name)
        if "State" not in f:
            raise ParseError(SCONTROL_FMT, lineno, f"State= in the record of {name}")
        base, flags = _split_state(f["State"], SCONTROL_FMT, lineno)
        parts = f.get("Partitions", "")
        out.append(
            SlurmNode(
                name=name,
                state=base,
                flags=flags,
                raw_state=f["State"],
                partitions=[p for p in parts.split(",") if p and p != "(null)"],
                gpus=_gpu_count(f.get("Gres")),
                gpus_used=_gpu_count(f.get("GresUsed"), zero_ok=True),
                reason=_reason(f.get("Reason")),
            )
        )
    return out


def _sinfo_state(raw: str, lineno: int) -> tuple[str, list[str]]:
    text = raw.strip().lower()
    flags: list[str] = []
    if text and text[-1] in _SINFO_SUFFIX:
        flags.append(_SINFO_SUFFIX[text[-1]])
        text = text[:-1]
    parts = [p for p in text.split("+") if p]
    if not parts or not all(re.fullmatch(r"[a-z_]+", p) for p in parts):
        raise ParseError(SINFO_FMT, lineno, "a node state such as idle, mixed or drained", raw)
    base = parts[0]
    if base in _SINFO_LONG:
        base_up, extra = _SINFO_LONG[base]
        flags = [*extra, *flags]
    else:
        base_up = base.upper()
    return base_up, flags + [p.upper() for p in parts[1:]]


def parse_sinfo_nodes(text: str) -> list[SlurmNode]:
    """Nodes of ``sinfo -N -h -o '%N|%P|%T|%G|%E'`` output (one line per node and partition), merged per
    node in first-seen order: its partitions (the default partition's ``*`` removed) in printed order.

    Raises:
        ParseError: a line without the five ``|``-separated fields, a malformed state, a node printed with
            two different states, or no node at all.
    """
    by_name: dict[str, SlurmNode] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", 4)
        if len(fields) != 5 or not fields[0].strip() or " " in fields[0].strip():
            raise ParseError(SINFO_FMT, lineno, "NODE|PARTITION|STATE|GRES|REASON", line)
        name, part, raw_state, gres, reason = (x.strip() for x in fields)
        base, flags = _sinfo_state(raw_state, lineno)
        part = part.rstrip("*")
        old = by_name.get(name)
        if old is None:
            by_name[name] = SlurmNode(
                name=name,
                state=base,
                flags=flags,
                raw_state=raw_state,
                partitions=[part] if part else [],
                gpus=_gpu_count(gres),
                reason=_reason(reason),
            )
            continue
        if old.raw_state != raw_state:
            raise ParseError(SINFO_FMT, lineno, f"the same state for {name} in every partition", raw_state)
        if part and part not in old.partitions:
            by_name[name] = old.model_copy(update={"partitions": [*old.partitions, part]})
    if not by_name:
        raise ParseError(SINFO_FMT, None, "at least one node line")
    return list(by_name.values())
