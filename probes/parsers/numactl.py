"""Parser for ``numactl -H`` / ``numactl --hardware`` (the NUMA nodes, their CPUs and memory, the distance
matrix).

The format, as numactl's ``hardware()`` prints it (numactl.c, ``print_node_cpus`` / ``print_distances``)::

    available: 2 nodes (0-1)
    node 0 cpus: 0 2 4 6 ...
    node 0 size: 515192 MB
    node 0 free: 506918 MB
    node 1 cpus: 1 3 5 7 ...
    ...
    node distances:
    node   0   1
      0:  10  20
      1:  20  10

Quirks seen in real outputs (tests/fixtures/host/): distance lines ending with a trailing space, interleaved
CPU numbering (node 0 = even CPUs), a node with no CPUs (``node 2 cpus:`` with nothing after it: a memory-only
node, e.g. CXL or GPU memory exposed as NUMA), no final newline. Distances are the ACPI SLIT relative costs
(10 = local).

The same facts read from sysfs (``sysfs_numa.txt``, written by :func:`fleetdx.probes.sysfs.read_numa` for nodes
without numactl) are accepted too, autodetected: ``PATH:VALUE`` lines for
``/sys/devices/system/node/nodeN/cpulist`` (a cpulist such as ``0-31,64-95``), ``.../distance`` (the SLIT
row, space-separated, in node order) and ``.../meminfo`` (``Node N MemTotal:  7301336 kB``, ``MemFree``;
sizes converted kB -> MiB by floor division, as numactl prints ``size >> 20`` of the same figure). Kernel ABI:
``Documentation/ABI/stable/sysfs-devices-node``.
"""

from __future__ import annotations

import re
from enum import Enum

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.topo import MAX_CPU_ID, MAX_NUMA_ID, expand_id_list

FMT = "numactl"

#: generous bounds that reject garbage before it becomes a huge list (the kernel Kconfig limits are cited at
#: :data:`fleetdx.probes.parsers.topo.MAX_CPU_ID`)
MAX_NODE_ID = MAX_NUMA_ID

_AVAILABLE = re.compile(r"^available:\s+([0-9]{1,5})\s+nodes?\s*(?:\((.*)\))?\s*$")
_CPUS = re.compile(r"^node\s+([0-9]{1,5})\s+cpus:((?:\s+[0-9]{1,6})*)\s*$")
_MEM = re.compile(r"^node\s+([0-9]{1,5})\s+(size|free):\s+([0-9]{1,12})\s+MB\s*$")
_DIST_TITLE = re.compile(r"^node\s+distances:\s*$")
_DIST_HEADER = re.compile(r"^node((?:\s+[0-9]{1,5})+)\s*$")
_DIST_ROW = re.compile(r"^\s*([0-9]{1,5}):((?:\s+[0-9]{1,4})+)\s*$")


_SYSFS = re.compile(r"^/sys/devices/system/node/node([0-9]{1,5})/(cpulist|distance|meminfo):(.*)$")
_SYSFS_MEM = re.compile(r"^Node\s+([0-9]{1,5})\s+(MemTotal|MemFree):\s+([0-9]{1,15})\s+kB\s*$")


class NumaFormat(str, Enum):
    NUMACTL = "numactl"
    SYSFS = "sysfs"


class NumaNode(Contract):
    """One NUMA node. ``cpus`` sorted ascending (empty for a memory-only node); sizes in MiB as numactl prints
    them ("MB" in its output is 2^20 bytes: numactl divides the byte count by 1024*1024)."""

    node: int
    cpus: list[int] = Field(default_factory=list)
    size_mb: int | None = None
    free_mb: int | None = None


class NumaTopology(Contract):
    """A parsed ``numactl -H``.

    ``distances[i][j]`` is the SLIT distance from ``nodes[i]`` to ``nodes[j]`` (same order as ``nodes``);
    empty when the output has no distance table.
    """

    nodes: list[NumaNode]
    distances: list[list[int]] = Field(default_factory=list)
    source_format: NumaFormat = NumaFormat.NUMACTL

    @property
    def node_ids(self) -> list[int]:
        return [n.node for n in self.nodes]

    def node_of_cpu(self, cpu: int) -> int | None:
        """The NUMA node holding ``cpu``, or ``None`` if no node lists it."""
        return next((n.node for n in self.nodes if cpu in n.cpus), None)

    def distance(self, a: int, b: int) -> int:
        """SLIT distance between node ids ``a`` and ``b``. Raises ``KeyError`` if either is unknown or the
        output had no distance table."""
        ids = self.node_ids
        if a not in ids or b not in ids or not self.distances:
            raise KeyError((a, b))
        return self.distances[ids.index(a)][ids.index(b)]


def _node_range(text: str, lineno: int) -> list[int]:
    """Expand ``0-1`` / ``0,2-3`` from the ``available:`` line (a cpulist; blanks around an item allowed)."""
    items = ",".join(part.strip() for part in text.split(","))
    try:
        return expand_id_list(items, fmt=FMT, line=lineno, limit=MAX_NODE_ID)
    except ParseError as e:
        raise ParseError(FMT, lineno, f"a node list such as (0-1) ({e.expected})", text) from None


def _check_node(node: int, lineno: int, line: str) -> int:
    if node > MAX_NODE_ID:
        raise ParseError(FMT, lineno, f"a node id no greater than {MAX_NODE_ID}", line)
    return node


def _distances(lines: list[str], start: int, ids: list[int]) -> list[list[int]]:
    """Read the distance table after ``node distances:`` (``lines[start]`` is its header, 0-based index)."""
    if start >= len(lines) or (hm := _DIST_HEADER.match(lines[start])) is None:
        raise ParseError(
            FMT, start + 1, "the distance header 'node   0   1'", lines[start] if start < len(lines) else ""
        )
    cols = [int(x) for x in hm.group(1).split()]
    if cols != ids:
        raise ParseError(FMT, start + 1, f"distance columns for nodes {ids}", lines[start])
    rows: list[list[int]] = []
    for k, node in enumerate(ids):
        i = start + 1 + k
        m = _DIST_ROW.match(lines[i]) if i < len(lines) else None
        if m is None or int(m.group(1)) != node:
            raise ParseError(
                FMT, i + 1, f"the distance row '{node}: ...'", lines[i] if i < len(lines) else ""
            )
        vals = [int(x) for x in m.group(2).split()]
        if len(vals) != len(ids):
            raise ParseError(FMT, i + 1, f"{len(ids)} distances", lines[i])
        rows.append(vals)
    for j in range(start + 1 + len(ids), len(lines)):
        if lines[j].strip():
            raise ParseError(FMT, j + 1, "nothing after the distance table", lines[j])
    return rows


def _parse_sysfs(lines: list[str]) -> NumaTopology:
    cpus: dict[int, list[int]] = {}
    dist: dict[int, list[int]] = {}
    mem: dict[tuple[int, str], int] = {}
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _SYSFS.match(line)
        if m is None:
            raise ParseError(FMT, i, "'/sys/devices/system/node/nodeN/cpulist|distance|meminfo:VALUE'", line)
        node, attr, value = _check_node(int(m.group(1)), i, line), m.group(2), m.group(3).strip()
        if attr == "cpulist":
            cpus[node] = expand_id_list(value, fmt=FMT, line=i, limit=MAX_CPU_ID) if value else []
        elif attr == "distance":
            if not re.fullmatch(r"[0-9]{1,4}(\s+[0-9]{1,4})*", value):
                raise ParseError(FMT, i, "a SLIT row of integers", line)
            dist[node] = [int(x) for x in value.split()]
        else:
            mm = _SYSFS_MEM.match(value)
            if mm is None or int(mm.group(1)) != node:
                raise ParseError(FMT, i, f"'Node {node} MemTotal|MemFree: N kB'", line)
            mem[(node, "size" if mm.group(2) == "MemTotal" else "free")] = int(mm.group(3)) // 1024
    ids = sorted(set(cpus) | set(dist) | {n for n, _ in mem})
    missing = [n for n in ids if n not in cpus]
    if not ids or missing:
        raise ParseError(FMT, None, f"a cpulist line for every node (missing {missing})")
    if dist and (sorted(dist) != ids or any(len(row) != len(ids) for row in dist.values())):
        raise ParseError(FMT, None, f"a distance row of {len(ids)} entries for each of nodes {ids}")
    nodes = [
        NumaNode(node=n, cpus=cpus[n], size_mb=mem.get((n, "size")), free_mb=mem.get((n, "free")))
        for n in ids
    ]
    return NumaTopology(
        nodes=nodes, distances=[dist[n] for n in ids] if dist else [], source_format=NumaFormat.SYSFS
    )


def parse_numactl(text: str) -> NumaTopology:
    """Parse ``numactl -H`` output (or the sysfs NUMA dump, see the module doc) into a :class:`NumaTopology`
    (nodes in the order of the ``available:`` line; ascending ids for sysfs).

    Raises:
        ParseError: no ``available: N nodes`` line or a count that disagrees with its list; a line that is
            none of the known shapes; a node without its ``cpus`` line; a CPU listed by two nodes; a
            distance table whose columns or rows do not match the nodes.
    """
    lines = text.splitlines()
    idx = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if idx is not None and lines[idx].startswith("/sys/"):
        return _parse_sysfs(lines)
    if idx is None or (am := _AVAILABLE.match(lines[idx])) is None:
        raise ParseError(
            FMT,
            None if idx is None else idx + 1,
            "'available: N nodes (...)'",
            "" if idx is None else lines[idx],
        )
    count = int(am.group(1))
    ids = _node_range(am.group(2), idx + 1) if am.group(2) else list(range(count))
    if len(ids) != count or len(set(ids)) != count:
        raise ParseError(FMT, idx + 1, f"{count} distinct node ids", lines[idx])
    cpus: dict[int, list[int]] = {}
    mem: dict[tuple[int, str], int] = {}
    distances: list[list[int]] = []
    for i in range(idx + 1, len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        if m := _CPUS.match(line):
            node = _check_node(int(m.group(1)), i + 1, line)
            ids_cpu = [int(x) for x in m.group(2).split()]
            if node not in ids or node in cpus or any(c > MAX_CPU_ID for c in ids_cpu):
                raise ParseError(FMT, i + 1, "one cpus line per available node, CPU ids in range", line)
            cpus[node] = sorted(set(ids_cpu))
        elif m := _MEM.match(line):
            node = _check_node(int(m.group(1)), i + 1, line)
            if node not in ids:
                raise ParseError(FMT, i + 1, f"a node among {ids}", line)
            mem[(node, m.group(2))] = int(m.group(3))
        elif _DIST_TITLE.match(line):
            distances = _distances(lines, i + 1, ids)
            break
        else:
            raise ParseError(FMT, i + 1, "a 'node N cpus|size|free' line or 'node distances:'", line)
    missing = [n for n in ids if n not in cpus]
    if missing:
        raise ParseError(FMT, None, f"a 'node N cpus:' line for every node (missing {missing})")
    seen: set[int] = set()
    for n in ids:
        if seen & set(cpus[n]):
            raise ParseError(FMT, None, "each CPU on one node", f"node {n}: {sorted(seen & set(cpus[n]))}")
        seen.update(cpus[n])
    nodes = [
        NumaNode(node=n, cpus=cpus[n], size_mb=mem.get((n, "size")), free_mb=mem.get((n, "free")))
        for n in ids
    ]
    return NumaTopology(nodes=nodes, distances=distances)
