"""The job knows its ranks: which host each rank (and each Slurm task) ran on, and the line that says so. Pure.

Sources, first found wins for a rank:

1. a line carrying both a rank and a host (a launcher's ``HOST: [rankN]:``, Ray's ``(pid=N, ip=ADDR)`` prefix
   before ``[rankN]:``, a torchrun/elastic ``ChildFailedError`` entry's ``host``, an Open MPI rank prefix before
   NCCL's ``host:pid:tid``): the event's own line;
2. NCCL's communicator init line (``NCCL_DEBUG=INFO``: ``host:pid:tid`` prefix and ``rank R nranks N`` of a
   communicator of the whole job, :mod:`fleetdx.orchestrator.postmortem.gpus`);
3. Slurm's ``srun: error: HOST: task N: ...`` lines (``src/srun/srun_job.c`` / ``step_launch.c``: the task ids of
   ``HOST`` that ended badly) and the host NCCL's own ``host:pid:tid`` prefix names behind a task's ``N: `` prefix,
   with the task -> rank pairs the log showed (``N: [rankR]:`` under ``srun -l``);
   when every pair the log shows is ``task N = rank N`` (``srun`` starting one process per rank, rank taken from
   ``SLURM_PROCID``), a task the log shows no pair for is that rank too: a task printing no ``[rankN]:`` is no
   reason to give up the layout its siblings show. When the log shows no pair at all and no launcher that starts
   several ranks per task (torchrun/elastic's ChildFailedError or agent lines, a ``local_rank``, DeepSpeed's or
   accelerate's launcher), the task is the rank as well (srun(1): ``SLURM_PROCID`` is the task id, which
   frameworks take as the global rank), said as such in the event's details (``rank_is_task_id``);
4. the job model's rank placement (``Job.ranks``: Slurm's block layout from its tasks per node), which is also the
   task layout: task ``N`` runs on ``Job.ranks[N].host``;
5. a launcher's local rank (torch elastic's ``local_rank: N``, DeepSpeed's ``'--local_rank=N'``) is the rank of
   an event that names no other when the evidence shows a one-node job (one host at most, no rank whose local
   rank differs): the local rank is then the global rank (torchrun: ``RANK = node_rank x nproc_per_node +
   LOCAL_RANK``, with node_rank 0), said in the event's details (``rank_from_local_rank``);
6. a line Slurm prints for the whole job or step with no host (``slurmstepd: error: Job N exceeded memory
   limit``, its oom-kill count) ran on the host of that job's ``*** JOB N ON HOST CANCELLED ***`` line
   (``src/slurmd/slurmstepd/req.c``: the step daemon names its own node) when that is the only host the logs
   name: on a one-node job no other stepd could have printed it; a Slurm line that names no job either
   (``slurmstepd: error: execve(): torchrun: No such file or directory``) ran on the host of the first such
   line or of ``srun: error: HOST: task N: ...``, on a one-node job the same way;
7. a process's own report of its failure printed with no rank (an unprefixed ``CUDA out of memory`` traceback, a
   CUDA error, an exception) is the rank's of the only rank the logs name, when they show a one-node job (as in
   5) and every rank or local rank they name is that one (a launcher's line that one child failed, the rank's
   own prefixed lines): no other rank of the job left a line, so no other printed it; said in the event's
   details (``rank_from_only_rank``);
8. a process id: on a one-node job (as in 5), a pid printed with a host (UCX's ``[host:pid:thread:tid]``, NCCL's
   ``host:pid:tid``) and a pid printed with a rank or local rank (torch elastic's ``local_rank: N (pid: P)``,
   Ray's ``(pid=P, ...)`` before ``[rankN]:``) are one process: an event naming only the pid takes that host and
   rank, said in the event's details (``host_from_pid``, ``rank_from_pid``). A pid printed with two hosts or two
   ranks names neither (containers on one host reuse small pids);
9. a host and a process id together, on any job: an event printed with both (Open MPI's ``[host:pid] Signal:``
   line) and one printed with both and a global rank (``mpirun noticed that process rank N with PID P on node
   HOST``) are one process: the first takes that rank, said in its details (``rank_from_host_pid``). A (host, pid)
   printed with two ranks names none.

A rank's host is never guessed from a number: when none of these names it, it stays unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from fleetdx.orchestrator.judgement import EvidenceLine
from fleetdx.probes.contracts import Job
from fleetdx.probes.parsers.joblog import EventKind, GpuFact, JobEvent

_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: at most this many tasks are expanded from one srun line's task list (``0-1023``)
MAX_TASKS = 65536


def task_ids(text: str) -> list[int]:
    """Slurm's task list as srun prints it (``"2"``, ``"0-3,7"``) -> ``[2]``, ``[0, 1, 2, 3, 7]``; ``[]`` when it
    is not one."""
    out: list[int] = []
    for part in text.split(","):
        m = _RANGE_RE.match(part.strip())
        if m is None:
            return []
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or len(out) + hi - lo + 1 > MAX_TASKS:
            return []
        out += range(lo, hi + 1)
    return out


#: words of a launcher that starts several ranks per srun task (its lines, or a rank's own arguments)
_LAUNCHER_WORDS = ("torch.distributed.elastic", "torchrun", "local_rank", "launch.py", "deepspeed", "accelerate")


def _launcher(e: JobEvent) -> bool:
    """Whether ``e`` shows a launcher that starts several ranks per task (module doc, source 3)."""
    if e.kind is EventKind.CHILD_FAILED or e.local_rank is not None or "local_rank" in e.details:
        return True
    text = e.text.lower()
    return any(w in text for w in _LAUNCHER_WORDS)


def _task_layout(task_ranks: Mapping[int, int], events: Sequence[JobEvent]) -> RankMap:
    """An empty map with the task -> rank layout (module doc, source 3)."""
    m = RankMap(task_ranks=dict(task_ranks))
    m.identity = bool(task_ranks) and all(t == r for t, r in task_ranks.items())
    if not task_ranks and not any(_launcher(e) for e in events):
        m.identity = m.assumed = True
    return m


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _local_rank(e: JobEvent) -> int | None:
    """The launcher's local rank of ``e``: its prefix's, else the one its details read (torch elastic's
    ``local_rank: N``, DeepSpeed's ``'--local_rank=N'``)."""
    return e.local_rank if e.local_rank is not None else _int_or_none(e.details.get("local_rank"))


def _single_node(events: Sequence[JobEvent], rank_hosts: Mapping[int, str], job: Job | None) -> bool:
    """Whether the evidence shows a one-node job: at most one host named (events, rank prefixes, the job model)
    and no event whose rank and local rank differ (module doc, source 5)."""
    hosts = {e.host for e in events if e.host} | set(rank_hosts.values()) | set(job.nodes if job else [])
    if len(hosts) > 1:
        return False
    return not any(e.rank is not None and e.local_rank is not None and e.rank != e.local_rank for e in events)


def _line(e: JobEvent | GpuFact) -> EvidenceLine:
    return EvidenceLine(file=e.file, line=e.line, text=e.text)


@dataclass
class RankMap:
    """rank -> host and task -> host, each with the line that named it (``None``: the job model's placement, or a
    pair a prefix showed on a line that is no event)."""

    hosts: dict[int, str] = field(default_factory=dict)
    lines: dict[int, EvidenceLine | None] = field(default_factory=dict)
    task_hosts: dict[int, str] = field(default_factory=dict)
    task_lines: dict[int, EvidenceLine | None] = field(default_factory=dict)
    task_ranks: dict[int, int] = field(default_factory=dict)
    identity: bool = False  #: every task -> rank pair the logs showed is task N = rank N
    #: no pair shown and no multi-rank launcher seen: task N taken as rank N (module doc, source 3)
    assumed: bool = False
    #: the logs show one host at most and no rank whose local rank differs: a local rank is the rank (source 5)
    single_node: bool = False
    #: Slurm job id -> the host of its ``*** JOB N ON HOST CANCELLED ***`` line and that line (source 6)
    job_hosts: dict[str, tuple[str, EvidenceLine]] = field(default_factory=dict)
    #: the one rank a one-node job's logs name, if they name exactly one (source 7)
    only_rank: int | None = None
    #: pid -> the one host and the one rank printed with it on a one-node job, and the line (source 8)
    pid_hosts: dict[int, tuple[str, EvidenceLine]] = field(default_factory=dict)
    pid_ranks: dict[int, int] = field(default_factory=dict)
    #: (host, pid) -> the one global rank printed with both, on any job (source 9)
    host_pid_ranks: dict[tuple[str, int], int] = field(default_factory=dict)

    def add(self, rank: int, host: str, line: EvidenceLine | None) -> None:
        if rank not in self.hosts:
            self.hosts[rank] = host
            self.lines[rank] = line

    def rank_of_task(self, task: int) -> int | None:
        """The rank of Slurm task ``task``: the pair the logs showed, else ``task`` itself when every pair is
        an identity (module doc, source 3)."""
        if task in self.task_ranks:
            return self.task_ranks[task]
        return task if self.identity else None

    def place(self, events: Sequence[JobEvent]) -> tuple[list[JobEvent], dict[tuple[str, int], EvidenceLine]]:
        """``events`` with the rank of a task-only event and the host of a host-less one filled; and, per
        filled event (file, line), the line that named its host."""
        out: list[JobEvent] = []
        named: dict[tuple[str, int], EvidenceLine] = {}
        for e in events:
            update: dict[str, object] = {}
            pid = _int_or_none(e.details.get("pid"))
            rank, said = self._rank_of(e, pid)  # said: how the rank was found (details flags)
            if e.rank is None and rank is not None:
                update["rank"] = rank
            if e.host is None and (found := self._host_of(e, rank, pid)) is not None:
                update["host"], line, flag = found
                if flag:
                    said[flag] = True
                if line is not None and (line.file, line.line) != (e.file, e.line):
                    named[(e.file, e.line)] = line
            if said:
                update["details"] = {**e.details, **said}
            out.append(e.model_copy(update=update) if update else e)
        return out, named

    def _rank_of(self, e: JobEvent, pid: int | None) -> tuple[int | None, dict[str, object]]:
        """The rank of event ``e`` (printed by ``pid``) and the details flags that say how it was found when the
        event did not name it (the module doc's sources 3, 5, 7, 8 and 9); ``None`` when none names it."""
        if e.rank is not None:
            return e.rank, {}
        rank = self.rank_of_task(e.task) if e.task is not None else None
        local = _local_rank(e)
        if rank is None and local is not None and self.single_node:
            return local, {"rank_from_local_rank": True}
        if rank is None and e.task is None and self.only_rank is not None and e.kind in _OWN_REPORT_KINDS:
            return self.only_rank, {"rank_from_only_rank": True}
        if rank is not None:
            return rank, {"rank_from_task": True, **({"rank_is_task_id": True} if self.assumed else {})}
        if pid in self.pid_ranks:
            return self.pid_ranks[pid], {"rank_from_pid": True}
        if e.host is not None and pid is not None and (e.host, pid) in self.host_pid_ranks:
            return self.host_pid_ranks[(e.host, pid)], {"rank_from_host_pid": True}
        return None, {}

    def _host_of(self, e: JobEvent, rank: int | None, pid: int | None) -> tuple[str, EvidenceLine | None, str] | None:
        """The host of host-less event ``e`` (of ``rank``, printed by ``pid``), the line that named it and the
        details flag that says how (``""``: its rank's or task's host), or ``None`` when no source names it."""
        if rank is not None and rank in self.hosts:
            return self.hosts[rank], self.lines.get(rank), ""
        if e.task is not None and e.task in self.task_hosts:
            return self.task_hosts[e.task], self.task_lines.get(e.task), ""
        if _slurm_line(e) and (job_host := self.job_hosts.get(_slurm_job(e))) is not None:
            return job_host[0], job_host[1], ""
        if e.task is None and pid is not None and pid in self.pid_hosts:
            return self.pid_hosts[pid][0], self.pid_hosts[pid][1], "host_from_pid"
        return None


def _slurm_line(e: JobEvent) -> bool:
    """A line Slurm itself printed (a catalog row of Slurm's)."""
    return str(e.details.get("catalog") or "").startswith("slurm.")


def _slurm_job(e: JobEvent) -> str:
    """The Slurm job id of a line Slurm itself printed (its ``step`` or ``job`` detail, a step's ``.N`` cut);
    ``""`` for any other line."""
    return _job_id(e) if str(e.details.get("catalog") or "").startswith("slurm.") else ""


def _job_id(e: JobEvent) -> str:
    return str(e.details.get("step") or e.details.get("job") or "").split(".", 1)[0]


def _srun_tasks(m: RankMap, e: JobEvent, host: str) -> None:
    """The tasks an ``srun: error: HOST: task N`` line names ran on ``host``; so did their ranks."""
    tasks = [e.task] if e.task is not None else task_ids(str(e.details.get("tasks") or ""))
    for t in tasks:
        m.task_hosts.setdefault(t, host)
        m.task_lines.setdefault(t, _line(e))
        rank = m.rank_of_task(t)
        if rank is not None:
            m.add(rank, host, _line(e))


@dataclass(frozen=True)
class LogPairs:
    """What the logs showed of the job's layout beside their events (the job-log scanner's pairs, merged over
    every log, first seen wins): rank -> host, Slurm task -> rank, Slurm task -> host."""

    rank_hosts: Mapping[int, str] = field(default_factory=dict)
    task_ranks: Mapping[int, int] = field(default_factory=dict)
    task_hosts: Mapping[int, str] = field(default_factory=dict)


def rank_map(
    events: Iterable[JobEvent],
    pairs: LogPairs = LogPairs(),
    inits: Mapping[int, GpuFact] = {},
    job: Job | None = None,
) -> RankMap:
    """The rank and task placement of a job from its events, the logs' ``pairs``, the NCCL init lines of
    whole-job communicators by rank (``inits``) and the job model (module doc)."""
    events = list(events)
    m = _task_layout(pairs.task_ranks, events)
    m.single_node = _single_node(events, pairs.rank_hosts, job)
    for e in events:  # source 1: a line naming both
        if e.rank is not None and e.host is not None and e.kind is not EventKind.SRUN_TASK_EXIT:
            m.add(e.rank, e.host, _line(e))
    for r, h in pairs.rank_hosts.items():  # the logs' pairs whose line is not an event's (a prefix seen further)
        m.add(r, h, None)
    for r, f in sorted(inits.items()):  # source 2
        if f.host is not None:
            m.add(r, f.host, _line(f))
    for e in events:  # source 3
        if e.kind is EventKind.SRUN_TASK_EXIT and e.host is not None:
            _srun_tasks(m, e, e.host)
    _task_hosts(m, pairs.task_hosts)
    for p in job.ranks if job is not None else []:  # source 4
        m.add(p.rank, p.host, None)
        m.task_hosts.setdefault(p.rank, p.host)
        m.task_lines.setdefault(p.rank, None)
    m.host_pid_ranks = _host_pid_ranks(events)  # source 9
    if m.single_node:
        m.job_hosts = _cancelled_hosts(events)  # source 6
        m.only_rank = _only_rank(events)  # source 7
        m.pid_hosts, m.pid_ranks = _pid_places(events)  # source 8
    return m


_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def _unambiguous(pairs: Iterable[tuple[_K, _V]], same: Callable[[_V], object] = lambda v: v) -> dict[_K, _V]:
    """The first value of each key, for the keys printed with one value only (``same``: what two values must share
    to be one; a key seen with two is dropped: containers on one host reuse small pids)."""
    first: dict[_K, _V] = {}
    bad: set[_K] = set()
    for k, v in pairs:
        if same(first.setdefault(k, v)) != same(v):
            bad.add(k)
    return {k: v for k, v in first.items() if k not in bad}


def _pid_places(events: Sequence[JobEvent]) -> tuple[dict[int, tuple[str, EvidenceLine]], dict[int, int]]:
    """pid -> (host, the first line naming both) and pid -> rank (or local rank), for the pids printed with
    exactly one host and one rank (source 8)."""
    pids = [(pid, e) for e in events if (pid := _int_or_none(e.details.get("pid"))) is not None]
    hosts = _unambiguous(((pid, (e.host, _line(e))) for pid, e in pids if e.host is not None), lambda v: v[0])
    ranks = _unambiguous(
        (pid, r) for pid, e in pids if (r := e.rank if e.rank is not None else _local_rank(e)) is not None
    )
    return hosts, ranks


def _host_pid_ranks(events: Sequence[JobEvent]) -> dict[tuple[str, int], int]:
    """(host, pid) -> the global rank printed with both, for the pairs printed with exactly one rank (source 9)."""
    return _unambiguous(
        ((e.host, pid), e.rank)
        for e in events
        if e.host is not None and e.rank is not None and (pid := _int_or_none(e.details.get("pid"))) is not None
    )


def _task_hosts(m: RankMap, task_hosts: Mapping[int, str]) -> None:
    """The logs' task -> host pairs whose line is no event's (NCCL's own prefix behind a task's prefix: source
    3); so do the ranks of those tasks, where the layout says them."""
    for t, h in task_hosts.items():
        m.task_hosts.setdefault(t, h)
        m.task_lines.setdefault(t, None)
        if (rank := m.rank_of_task(t)) is not None:
            m.add(rank, h, None)


#: the kinds of line a process prints about its own failure (source 7)
_OWN_REPORT_KINDS = frozenset({EventKind.OOM_GPU, EventKind.CUDA_ERROR, EventKind.PYTHON_EXCEPTION})


def _only_rank(events: Sequence[JobEvent]) -> int | None:
    """The one rank (or local rank) the events name, ``None`` when they name none or several, or name a Slurm
    task (whose rank needs the layout)."""
    seen: set[int] = set()
    for e in events:
        if e.task is not None:
            return None
        local = _local_rank(e)
        for r in (e.rank, local):
            if r is not None:
                seen.add(r)
                if len(seen) > 1:
                    return None
    return next(iter(seen)) if seen else None


def _cancelled_hosts(events: Iterable[JobEvent]) -> dict[str, tuple[str, EvidenceLine]]:
    """Slurm job id -> the host of its first ``*** JOB N ON HOST CANCELLED ***`` line, and that line; ``""`` (a
    Slurm line that names no job) -> the host of the first of those or of ``srun: error: HOST: task N`` lines."""
    out: dict[str, tuple[str, EvidenceLine]] = {}
    for e in events:
        if e.kind is EventKind.SLURM_CANCELLED and e.host is not None and (jid := _job_id(e)):
            out.setdefault(jid, (e.host, _line(e)))
        if e.kind in (EventKind.SLURM_CANCELLED, EventKind.SRUN_TASK_EXIT) and e.host is not None:
            out.setdefault("", (e.host, _line(e)))
    return out
