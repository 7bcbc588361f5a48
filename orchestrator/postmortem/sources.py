"""Evidence sources of a postmortem: each reads its inputs into parsed logs, and says what it could not read.

A source is anything with ``collect(ctx) -> Evidence`` (:class:`EvidenceSource`); the postmortem runs a list of
them, so a new kind of evidence (Flight Recorder dumps, profiler traces) is one more source, not a change here:
it gives parsed logs, or causes of its own (:class:`Evidence`).

* :class:`LogFiles`: the job's own output (one file per rank, or all interleaved), streamed line by line through
  both the job-log and the kernel-log parser (a dmesg pasted into, or given as, a job log is read too);
* :class:`Bundles`: node bundles (``fleetdx collect``, or a directory of raw outputs) read with
  :func:`fleetdx.probes.bundle.read_bundle`; their kernel logs (``dmesg_nvrm.txt``, and any ``dmesg*``,
  ``journalctl*``, ``kern.log*``, ``syslog*``, ``messages*`` file) through the kernel-log parser, the host being
  the bundle's. ``dmesg_nvrm.txt`` as ``fleetdx collect`` writes it keeps only the XID/NVRM/AER lines: link
  flaps need a full kernel log in the bundle. Their nccl-tests outputs become busbw curves
  (:func:`fleetdx.orchestrator.postmortem.bandwidth.bundle_curves`) for the report's bandwidth section.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from operator import methodcaller
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.postmortem.bandwidth import MAX_CURVES, bundle_curves
from fleetdx.orchestrator.postmortem.contracts import BandwidthCurve, TimelineEntry
from fleetdx.probes.contracts import Severity
from fleetdx.probes.errors import BundleError, ParseError
from fleetdx.probes.parsers.hardwrap import Unwrapper
from fleetdx.probes.parsers.joblog import JobLog, JobLogScanner
from fleetdx.probes.parsers.joblog_kernel import KernelLogScanner, parse_kernel_log
from fleetdx.probes.parsers.logline import MAX_LINE
from fleetdx.probes.rawfile import RawFileError, check_regular

if TYPE_CHECKING:  # a bundle's reader, its facts and the pre-flight diagnosis load only when bundles are read
    from fleetdx.probes.bundle import BundleData

#: bundle files read as kernel logs
KERNEL_FILE_RE = re.compile(r"^(?:dmesg|journalctl.*-k|journal.*kernel|kern\.log|kernel|syslog|messages)", re.I)


@dataclass(frozen=True)
class Context:
    """What every source may use: ``year`` dates yearless stamps (glog, syslog) when a file prints none."""

    year: int | None = None


#: a source's own judgement, made once the rank -> host map of every log is known (merged with the job's)
CauseMaker = Callable[[Mapping[int, str]], list[Finding]]
TimelineMaker = Callable[[Mapping[int, str]], list[TimelineEntry]]


@dataclass
class Evidence:
    """What a source read: parsed logs (job and kernel), and one line per input it could not read or that
    holds nothing it could use.

    A source that judges its inputs itself (Flight Recorder dumps name the rank that hung a collective) gives
    ``causes`` and ``timeline`` as functions of the rank -> host map: the postmortem calls them once every
    source has been read, and ranks those causes before the causes that only observe a failure (timeouts,
    lost connections) and after the decisive ones (hardware, OOM, crashes)."""

    logs: list[JobLog] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    causes: CauseMaker | None = None
    timeline: TimelineMaker | None = None
    kernel_hosts: set[str] = field(default_factory=set)  #: hosts whose kernel log was read
    kernel_logs: int = 0  #: kernel logs read (given, or found among the job logs by their kernel events)
    curves: list[BandwidthCurve] = field(default_factory=list)  #: busbw curves of the nodes (bundles' nccl-tests)


class EvidenceSource(Protocol):
    def collect(self, ctx: Context) -> Evidence: ...


def _mtime_year(path: Path) -> int | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).year
    except OSError:
        return None


class _LineReader:
    """The lines of a file, without their newlines, each cut at :data:`MAX_LINE` bytes (the rest of a longer line
    is skipped), decoded as UTF-8 with bad bytes replaced, in blocks of about :data:`BLOCK_BYTES`: bounded memory
    whatever the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[str]:
        for block in self.blocks():
            yield from block

    def blocks(self) -> Iterator[list[str]]:
        for lines, _ in self.blocks_read():
            yield lines

    def blocks_read(self) -> Iterator[tuple[list[str], bytes]]:
        """The blocks, each with its lines as read: their bytes (each cut at :data:`MAX_LINE`) joined by
        ``b"\\n"`` (what :meth:`KernelLogScanner.feed_lines` gates without encoding the lines again)."""
        with open(self.path, "rb") as f:
            carry = b""  # the line the last read cut: at most MAX_LINE bytes of it are kept
            while chunk := f.read(BLOCK_BYTES):
                parts = chunk.split(b"\n")
                if len(carry) < MAX_LINE:
                    parts[0] = carry + parts[0]
                else:  # a line longer than MAX_LINE goes on: its first MAX_LINE bytes are all it keeps
                    parts[0] = carry
                carry = parts.pop()[: MAX_LINE + 1]  # after the last newline: the start of a line, or b""
                if parts:
                    if max(map(len, parts)) > MAX_LINE:
                        parts = [raw[:MAX_LINE] for raw in parts]
                    yield list(map(_DECODE, parts)), b"\n".join(parts)
            if carry:  # the last line, without a newline
                yield [_DECODE(carry[:MAX_LINE])], carry[:MAX_LINE]


#: bytes read at once (the lines of a block are read together: :meth:`KernelLogScanner.feed_lines`)
BLOCK_BYTES = 1 << 20
_DECODE = methodcaller("decode", "utf-8", "replace")


@dataclass
class LogFiles:
    """The job's logs (``--logs``); ``names``, when given, name each path in the evidence (an upload's own file
    names rather than where the service unpacked them)."""

    paths: Sequence[Path]
    names: Sequence[str] | None = None

    def collect(self, ctx: Context) -> Evidence:
        ev = Evidence()
        for i, path in enumerate(self.paths):
            name = self.names[i] if self.names is not None else str(path)
            try:
                check_regular(Path(path))
                year = ctx.year or _mtime_year(Path(path))
                job = JobLogScanner(name, year, year_assumed=ctx.year is None)
                kernel: KernelLogScanner | None = KernelLogScanner(name, year=year)
                unwrap: Unwrapper | None = None  # a paste hard-wrapped at a fixed width: judged on the first block
                for i_block, (block, read) in enumerate(_LineReader(Path(path)).blocks_read()):
                    unwrap = Unwrapper.detect(block) if i_block == 0 else unwrap
                    _feed(job, block, unwrap)
                    if kernel is not None:
                        try:
                            kernel.feed_lines(block, read)
                        except ParseError as e:  # a garbled NVRM line costs the kernel reading, not the job log
                            ev.missing.append(f"{name}: kernel-log lines not read after line {kernel.lines - 1}: {e}")
                            kernel = None
                for line, span in unwrap.end() if unwrap is not None else ():
                    job.feed(line, span)
            except (RawFileError, ParseError) as e:
                ev.missing.append(f"{name}: not read: {e}")
                continue
            except OSError as e:
                ev.missing.append(f"{name}: not read: {e.strerror}")
                continue
            j, k = job.result(), None
            if kernel is not None:
                try:
                    k = kernel.result()
                except ParseError as e:
                    ev.missing.append(f"{name}: kernel-log lines at its end not read: {e}")
            ev.logs += [j] + ([k] if k is not None else [])
            if k is not None and k.events:
                ev.kernel_logs += 1
                ev.kernel_hosts.update(k.hosts)
            if not j.events and not (k is not None and k.events):
                ev.missing.append(f"{name}: {j.lines_read} lines, none telling of a failure")
        return ev


def _feed(job: JobLogScanner, block: Sequence[str], unwrap: Unwrapper | None) -> None:
    """Feed ``job`` one block of a file's lines: as they are, or joined again by ``unwrap`` (a hard-wrapped
    paste, :mod:`~fleetdx.probes.parsers.hardwrap`)."""
    if unwrap is None:
        for line in block:
            job.feed(line)
    else:
        for line, span in unwrap.lines(block):
            job.feed(line, span)


#: bundle findings left to the kernel-log path (which ties an XID to its rank): not repeated as causes
_KERNEL_CODES = frozenset({FindingCode.GPU_XID})


def bundle_findings(bundle: BundleData) -> list[Finding]:
    """The pre-flight diagnosis of one node bundle (a foreign process on a GPU, a GPU missing, ECC counters, ...,
    :func:`fleetdx.orchestrator.diagnosis.engine.diagnose`), its WARNING and CRITICAL findings naming the bundle's
    host, but those the bundle's kernel log gives as events (XIDs). Raises what the diagnosis raises (a bug)."""
    from fleetdx.orchestrator.diagnosis.base import Fleet
    from fleetdx.orchestrator.diagnosis.engine import diagnose
    from fleetdx.probes.facts import node_facts

    diagnosis = diagnose(Fleet(nodes=[node_facts(bundle)]))
    return [
        f.model_copy(update={"nodes": list(dict.fromkeys([bundle.host, *f.nodes]))})
        for f in diagnosis.findings
        if f.severity in (Severity.WARNING, Severity.CRITICAL) and f.code not in _KERNEL_CODES
    ]


@dataclass
class Bundles:
    """Node bundles (``--bundles``, the epilog's bundles of ``--job``): their kernel logs, the host being the
    bundle's, and (``findings``) what the pre-flight diagnosis finds in each (:func:`bundle_findings`), given as
    causes placed after the decisive events of the logs."""

    dirs: Sequence[Path]
    findings: bool = True

    def collect(self, ctx: Context) -> Evidence:
        from fleetdx.probes.bundle import read_bundle

        ev = Evidence()
        found: list[Finding] = []
        for d in self.dirs:
            try:
                bundle = read_bundle(Path(d))
            except BundleError as e:
                ev.missing.append(f"{d}: bundle not read: {e}")
                continue
            if self.findings:
                found += bundle_findings(bundle)
            year = ctx.year or (bundle.created_at.year if bundle.created_at else None)
            curves, notes = bundle_curves(bundle, str(d))
            ev.missing += notes
            room = MAX_CURVES - len(ev.curves)
            if len(curves) > room:
                ev.missing.append(f"{d}: {len(curves) - room} nccl-tests curves left out (at most {MAX_CURVES})")
            ev.curves += curves[: max(room, 0)]
            names = [n for n in bundle.files if KERNEL_FILE_RE.match(n)]
            for n, why in bundle.unreadable.items():
                if KERNEL_FILE_RE.match(n):
                    ev.missing.append(f"{d}/{n}: not read: {why}")
            if not names:
                ev.missing.append(f"{d}: no kernel log in the bundle (host {bundle.host}): its XIDs and link events")
            for n in names:
                try:
                    ev.logs.append(parse_kernel_log(bundle.files[n], f"{d}/{n}", host=bundle.host, year=year))
                except ParseError as e:
                    ev.missing.append(f"{d}/{n}: not read: {e}")
                    continue
                ev.kernel_logs += 1
                ev.kernel_hosts.add(bundle.host)
        if found:
            ev.causes = lambda _rank_hosts: found
        return ev
