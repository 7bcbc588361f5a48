"""Evidence of a hang: ask every rank for its Flight Recorder dump, wait a bounded time, analyse what came.

**The request**: the watcher writes :data:`~fleetdx.probes.steptimer.TRIGGER_NAME` (``.fleetdx-dump-request``)
in every folder that holds StepTimer logs, a JSON object ``{"request_id", "requested_unix_s", "dump_dir"}``;
``dump_dir`` is one absolute folder for the whole job, ``fleetdx-fr-<UTC stamp>`` beside the first folder's
StepTimer logs (the ranks see it when they write their logs to a shared file system, as the watcher reads
them). Each rank's :class:`~fleetdx.probes.steptimer.StepTimer` answers from a daemon thread (see there): a
dump ``<prefix><rank>`` and a ``status-rank-<rank>.json`` saying what it did or why it could not.

**Collection** (:class:`DumpCollection`, polled by the watch loop, which keeps following the files
meanwhile): done when every rank known to the watcher has answered, or after ``wait_s``. The dumps that came
are matched across ranks by the postmortem's analysis (``fleetdx postmortem --fr``,
:func:`fleetdx.orchestrator.postmortem.flight.analyze_dir`): its causes (``NCCL_TIMEOUT``: the rank that never
issued the collective the others wait in; ``CONFIG_ERROR``: a collective desync) are findings of their own,
and a second ``STEP_HANG`` finding (``details.phase`` ``evidence``) says what was collected and what could not
be: ranks that dumped, ranks whose StepTimer answered without a dump (and why), ranks that never answered (a
process gone, a StepTimer made with ``dump_on_request=False``, a thread that cannot run), and the analysis'
own missing evidence. Nothing is inferred for a rank without a dump.

**NCCL's RAS** (NCCL 2.24 and later; :func:`ras_evidence`): at the hang the watcher also runs ``ncclras`` (on the
job's node, ``--ras-host``, default this one) through the runner, within :data:`RAS_TIMEOUT_S`; when its report
names missing or dead processes (:func:`fleetdx.probes.parsers.nccl_ras.unresponsive`), a ``STEP_HANG``
finding (``details.phase`` ``ras``) names them with their rank, node, pid and GPU. Without ``ncclras`` (or with
no RAS listening: an older NCCL, ``NCCL_RAS_ENABLE=0``) one line says why it was not queried.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.postmortem.flight import analyze_dir, missing_evidence, to_causes
from fleetdx.probes.contracts import EvidenceValue, JsonScalar, Severity
from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.nccl_ras import parse_nccl_ras, unresponsive
from fleetdx.probes.runner import Runner
from fleetdx.probes.steptimer import TRIGGER_NAME

#: ranks named in a message (the rest counted)
MAX_NAMED = 16
#: how long ``ncclras`` may take to answer (its own ``-t``; the runner allows 5 s more)
RAS_TIMEOUT_S = 10


def ras_evidence(runner: Runner, host: str | None = None) -> tuple[list[Finding], str]:
    """Query NCCL's RAS at a hang (module doc): the ``STEP_HANG`` finding naming the processes it reports
    missing or dead (none when every process answered), and one line saying what was done or why not."""
    argv = ["ncclras", "-t", str(RAS_TIMEOUT_S), *(["-h", host] if host else [])]
    res = runner.run(argv, timeout_s=RAS_TIMEOUT_S + 5)
    if not res.ok:
        why = res.reason or (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        return [], f"NCCL RAS not queried: {' '.join(argv)}: {why[:200]}"
    try:
        rep = parse_nccl_ras(res.stdout)
    except ParseError as e:
        return [], f"NCCL RAS answer not read: {e}"
    procs = unresponsive(rep)
    if not procs:
        return [], f"NCCL RAS ({rep.nccl_version or 'version not said'}): every process answered"
    named = [p for p in procs if p.pid is not None]
    bare = sorted({p.rank for p in procs if p.pid is None and p.rank is not None})
    said = [
        (f"rank {p.rank} " if p.rank is not None else "") + f"(pid {p.pid} on {p.host}, GPU {p.gpu})"
        for p in named[:MAX_NAMED]
    ]
    if len(named) > MAX_NAMED:
        said.append(f"{len(named) - MAX_NAMED} more")
    if bare:
        said.append(f"missing ranks {bare[:MAX_NAMED]} (their processes not named beside them)")
    kinds = sorted({p.kind for p in rep.problems if p.severity == "error"})
    errors = [
        f"{p.kind} {p.comm or ''} {' / '.join(p.lines[:2])}".strip() for p in rep.problems if p.severity == "error"
    ]
    finding = Finding(
        code=FindingCode.STEP_HANG,
        severity=Severity.CRITICAL,
        subject="job",
        message=f"NCCL RAS ({', '.join(kinds)}): unresponsive " + "; ".join(said),
        nodes=sorted({p.host for p in procs if p.host}),
        rank=next((p.rank for p in procs if p.rank is not None), None),
        details={
            "phase": "ras",
            "nccl_version": rep.nccl_version or "",
            "ras_errors": [e[:300] for e in errors[:MAX_NAMED]],
            "unresponsive_processes": len(named),
            "unresponsive_ranks": _scalars(sorted({p.rank for p in procs if p.rank is not None})[:MAX_NAMED]),
        },
    )
    summary = f"NCCL RAS: {len(named)} unresponsive process(es)" + (
        f", missing ranks {bare[:MAX_NAMED]}" if bare else ""
    )
    return [finding], summary


def _scalars(xs: list[int]) -> list[JsonScalar]:
    out: list[JsonScalar] = []
    out.extend(xs)
    return out


def request_dumps(step_dirs: list[Path], now_unix: float | None = None) -> tuple[str, Path, list[str]]:
    """Write the dump request in every folder of ``step_dirs``; ``(request id, dump folder, folders that could
    not be written to, with why)``."""
    now_unix = time.time() if now_unix is None else now_unix
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_unix))
    rid = f"{stamp}-{int(now_unix * 1000) % 1000:03d}"
    dump_dir = (step_dirs[0] / f"fleetdx-fr-{stamp}").resolve()
    failed: list[str] = []
    body = json.dumps({"request_id": rid, "requested_unix_s": round(now_unix, 3), "dump_dir": str(dump_dir)})
    for d in step_dirs:
        tmp = d / f"{TRIGGER_NAME}.tmp"
        try:
            tmp.write_text(body, encoding="utf-8")
            tmp.replace(d / TRIGGER_NAME)
        except OSError as e:
            failed.append(f"{d}: {e.strerror or e}")
    return rid, dump_dir, failed


@dataclass
class DumpCollection:
    """One hang's dump request being collected (module doc)."""

    request_id: str
    dump_dir: Path
    ranks: list[int]  #: the ranks the watcher knows
    hosts: dict[int, str]
    deadline: float  #: monotonic seconds
    write_failures: list[str] = field(default_factory=list)

    def answered(self) -> dict[int, dict[str, object]]:
        """rank -> its status (only the answers to this request)."""
        out: dict[int, dict[str, object]] = {}
        for r in self.ranks:
            try:
                st = json.loads((self.dump_dir / f"status-rank-{r}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(st, dict) and st.get("request_id") in (self.request_id, None):
                out[r] = st
        return out

    def poll(self, now: float) -> list[Finding] | None:
        """``None`` while ranks may still answer; then the findings of what was collected (once)."""
        answers = self.answered()
        if len(answers) < len(self.ranks) and now < self.deadline:
            return None
        return self.finish(answers)

    def finish(self, answers: dict[int, dict[str, object]]) -> list[Finding]:
        dumped = sorted(r for r, st in answers.items() if st.get("dumped"))
        failed = {r: str(st.get("why") or "no reason given") for r, st in answers.items() if not st.get("dumped")}
        notes = {r: str(st["why"]) for r, st in answers.items() if st.get("dumped") and st.get("why")}
        silent = sorted(set(self.ranks) - set(answers))
        causes: list[Finding] = []
        missing: list[str] = []
        analysis = "no dump to analyse"
        if dumped:
            try:
                fr = analyze_dir(self.dump_dir, world_size=max(self.ranks) + 1 if self.ranks else None, jobs=1)
            except ConfigError as e:
                analysis = f"the dumps could not be analysed: {e}"
            else:
                causes = to_causes(fr, self.hosts)
                missing = missing_evidence(fr)
                analysis = causes[0].message if causes else (missing[-1] if missing else "no divergence")
        parts = [f"Flight Recorder dumps asked for at the hang ({self.dump_dir}): {len(dumped)} of {len(self.ranks)}"]
        if dumped:
            parts.append(f"dumped: ranks {dumped[:MAX_NAMED]}")
        if failed:
            first = next(iter(failed.items()))
            parts.append(f"answered without a dump: ranks {sorted(failed)[:MAX_NAMED]} (rank {first[0]}: {first[1]})")
        if silent:
            parts.append(
                f"no answer from ranks {silent[:MAX_NAMED]}"
                + (f" (+{len(silent) - MAX_NAMED})" if len(silent) > MAX_NAMED else "")
                + " (process gone, StepTimer without dump_on_request, or its thread could not run)"
            )
        if self.write_failures:
            parts.append(f"request not written in {self.write_failures[:3]}")
        parts.append(f"analysis: {analysis}")
        details: dict[str, EvidenceValue] = {
            "phase": "evidence",
            "dump_dir": str(self.dump_dir),
            "request_id": self.request_id,
            "dumped_ranks": _scalars(dumped[:MAX_NAMED]),
            "dumped_count": len(dumped),
            "no_dump": {str(r): why[:200] for r, why in list(failed.items())[:MAX_NAMED]},
            "notes": {str(r): why[:200] for r, why in list(notes.items())[:MAX_NAMED]},
            "silent_ranks": _scalars(silent[:MAX_NAMED]),
            "silent_count": len(silent),
            "fr_missing_evidence": [m[:300] for m in missing[:MAX_NAMED]],
            "fr_causes": [f"{c.code.value}: {c.message}"[:300] for c in causes[:MAX_NAMED]],
        }
        culprits = sorted({c.rank for c in causes if c.rank is not None})
        hang = Finding(
            code=FindingCode.STEP_HANG,
            severity=Severity.CRITICAL,
            subject="job",
            rank=culprits[0] if len(culprits) == 1 else None,
            nodes=sorted({n for c in causes for n in c.nodes}),
            message="; ".join(parts),
            evidence=[e for c in causes for e in c.evidence][:MAX_NAMED],
            details=details,
        )
        return [hang, *causes]
