"""The spool: when the database cannot take a report, the run still completes and its report (with the raw
outputs) goes to a spool file that ``fleetdx db import FILE`` loads later.

A spool file is gzip-compressed JSON of :class:`SpoolFile`, named ``<run_id>.fleetdx-spool.json.gz``, written
atomically (a temporary file in the same directory, fsync, ``os.replace``), so a crash never leaves a
half-written spool file under the final name. Import is idempotent (``run_id`` is unique in the store) and a
file is removed only after the transaction that stored its run committed.

Spool files of the previous release (report ``schema_version`` 1) still import: the contracts upgrade the
report (``Finding.node`` -> ``nodes``, a bandwidth run's schedule out of ``level``), and :func:`upgrade_v1`
first gives the pair and group findings of the bandwidth screen their hosts, which version 1 kept only
comma-joined in the subject (as migration 0002 does for the rows of an old database).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import tempfile
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError

from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.store.errors import SpoolError, StoreError
from fleetdx.orchestrator.store.settings import resolve_db_url, resolve_flap_window_s, resolve_spool_dir
from fleetdx.probes.contracts import Contract
from fleetdx.probes.rawfile import RawFileError, check_regular

if TYPE_CHECKING:
    from fleetdx.orchestrator.store.records import ImportResult
    from fleetdx.orchestrator.store.store import Store

SPOOL_SUFFIX = ".fleetdx-spool.json.gz"
#: the most bytes of one spool file read, compressed and once decompressed: the same limit as a report pushed
#: to ``fleetdx serve`` (orchestrator.service.ingest.MAX_UPLOAD_BYTES, a pre-flight of a few hundred nodes with
#: their raw outputs); ``fleetdx db import --max-bytes`` raises it
MAX_SPOOL_BYTES = 64 * 1024 * 1024
SPOOL_VERSION = 1
#: codes whose findings the version-1 bandwidth screen wrote with ``node`` null and the hosts comma-joined in
#: ``subject`` (the same list as migration 0002's ``GROUP_CODES``)
V1_GROUP_CODES = frozenset({"NCCL_BUSBW_LOW", "NCCL_TEST_HANG", "NCCL_TEST_FAILED", "NCCL_WRONG_RESULTS"})


class SpoolFile(Contract):
    """The content of one spool file: a run's report and its raw outputs (host -> file name -> text)."""

    format: Literal["fleetdx-spool"] = "fleetdx-spool"
    spool_version: int = SPOOL_VERSION
    created_at: float  #: Unix time the spool file was written
    report: RunReport
    raw: dict[str, dict[str, str]] = Field(default_factory=dict)


class SaveOutcome(Contract):
    """Where a report went: ``saved`` in the database, or spooled to ``spool_path`` because of ``error``
    (both ``spool_path`` None and ``saved`` false only when the spool file could not be written either)."""

    saved: bool
    spool_path: Path | None = None
    error: str | None = None
    database: str | None = None  #: the database saved to, its password masked

    @property
    def stored(self) -> bool:
        """Whether the report is kept somewhere (the database or a spool file)."""
        return self.saved or self.spool_path is not None

    @property
    def message(self) -> str:
        """One line for the user: what happened and, for a spooled report, the command that loads it."""
        if self.saved:
            return f"report saved to {self.database or 'the database'}"
        if self.spool_path is not None and self.error is None:
            return f"report spooled to {self.spool_path}; load it with: fleetdx db import {self.spool_path}"
        if self.spool_path is not None:
            return (
                f"report not saved to the database ({self.error}); spooled to {self.spool_path}; "
                f"load it later with: fleetdx db import {self.spool_path}"
            )
        return f"report neither saved nor spooled: {self.error}"


def save_or_spool(
    url: str | None,
    report: RunReport,
    raw: Mapping[str, Mapping[str, str]] | None = None,
    spool_dir: Path | str | None = None,
) -> SaveOutcome:
    """Save ``report`` to the database at ``url`` (None: the default) or, if that fails for any database
    reason (unreachable, schema missing, locked past every retry), write it to a spool file in ``spool_dir``
    (None: ``$FLEETDX_SPOOL_DIR``, else ``<user data dir>/spool``). Never raises for a database or disk
    failure: the outcome says what happened.

    An SQLite file whose schema is current is written through ``sqlite3`` without SQLAlchemy
    (:mod:`fleetdx.orchestrator.store.direct`: the same rows, a prolog's CPU); anything else through the Store."""
    from fleetdx.orchestrator.store import direct

    resolved = resolve_db_url(url)
    try:
        window = resolve_flap_window_s(None)
    except ValueError:
        window = None  # the Store says what is wrong with it
    if window is not None and direct.save(resolved, report, raw, window) is not None:
        return SaveOutcome(saved=True, database=resolved)

    from sqlalchemy.exc import SQLAlchemyError  # the database path only: the spool writer stays light

    from fleetdx.orchestrator.store.store import Store

    try:
        with Store.open(url) as store:
            store.save_report(report, raw)
            database = store.url
        return SaveOutcome(saved=True, database=database)
    except (StoreError, SQLAlchemyError, OSError) as e:  # the edge: any failure to store means spool
        db_error = str(e)
    try:
        path = write_spool(report, raw, resolve_spool_dir(spool_dir))
    except OSError as e:
        return SaveOutcome(saved=False, error=f"{db_error}; writing the spool file failed too: {e}")
    return SaveOutcome(saved=False, spool_path=path, error=db_error)


def spool_report(
    report: RunReport, raw: Mapping[str, Mapping[str, str]] | None = None, spool_dir: Path | str | None = None
) -> SaveOutcome:
    """Write ``report`` to a spool file in ``spool_dir`` (None: ``$FLEETDX_SPOOL_DIR``, else ``<user data
    dir>/spool``) without touching a database: the delivery of ``fleetdx preflight --spool`` (a Slurm prolog's:
    no SQLAlchemy is imported). Never raises for a disk failure: the outcome says what happened."""
    try:
        path = write_spool(report, raw, resolve_spool_dir(spool_dir))
    except OSError as e:
        return SaveOutcome(saved=False, error=f"writing the spool file failed: {e}")
    return SaveOutcome(saved=False, spool_path=path)


def spool_name(run_id: str) -> str:
    """The spool file name of ``run_id`` (characters other than ``[A-Za-z0-9._-]`` become ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", run_id) + SPOOL_SUFFIX


def write_spool(
    report: RunReport, raw: Mapping[str, Mapping[str, str]] | None, spool_dir: Path, now: float | None = None
) -> Path:
    """Write ``report`` and ``raw`` atomically to ``spool_dir`` (created if missing); returns the path.
    Raises ``OSError`` when the directory or file cannot be written."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    content = SpoolFile(
        created_at=time.time() if now is None else now,
        report=report,
        raw={h: dict(files) for h, files in (raw or {}).items()},
    )
    data = gzip.compress(content.model_dump_json().encode("utf-8"), compresslevel=6, mtime=0)
    final = spool_dir / spool_name(report.run_id)
    fd, tmp = tempfile.mkstemp(dir=spool_dir, prefix=".tmp-", suffix=SPOOL_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(spool_dir)
    return final


def _fsync_dir(path: Path) -> None:
    """Make the rename durable (POSIX: the directory entry lives in the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_spool_path(path: Path) -> None:
    """Raise :class:`SpoolError` unless ``path`` is a regular file (symlinks followed): a device
    (``/dev/zero``), a FIFO, a socket, a directory or a symlink loop is never opened, claimed nor read.
    ``FileNotFoundError`` when it does not exist."""
    try:
        check_regular(path)
    except RawFileError as e:
        if not path.exists() and not path.is_symlink():
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
        raise SpoolError(f"{e}: not a spool file") from None


def read_spool(path: Path, max_bytes: int = MAX_SPOOL_BYTES) -> SpoolFile:
    """Read one spool file, in bounded memory: at most ``max_bytes`` of it, decompressed as a stream that stops
    past ``max_bytes`` (a gzip bomb costs no more than that).

    Raises:
        SpoolError: (naming the file) not a regular file, over ``max_bytes`` compressed or decompressed, or not
            a readable fleetdx spool file.
        FileNotFoundError: it does not exist.
    """
    check_spool_path(path)
    hint = "raise the limit with --max-bytes if the file is genuine"
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise SpoolError(f"{path}: {size} bytes, over the {max_bytes} byte limit of a spool file ({hint})")
            with gzip.GzipFile(fileobj=f, mode="rb") as unzipped:
                data = unzipped.read(max_bytes + 1)
    except (gzip.BadGzipFile, EOFError, OSError, zlib.error) as e:
        if isinstance(e, FileNotFoundError | IsADirectoryError):
            raise
        raise SpoolError(f"{path}: not a gzip-compressed spool file ({e})") from None
    if len(data) > max_bytes:
        raise SpoolError(f"{path}: decompresses to over {max_bytes} bytes, the limit of a spool file ({hint})")
    try:
        doc = json.loads(data)
    except ValueError as e:  # not UTF-8, not JSON
        raise SpoolError(f"{path}: not a fleetdx spool file (not JSON: {e})") from None
    try:
        return SpoolFile.model_validate(upgrade_v1(doc))
    except ValidationError as e:
        first = e.errors()[0]["msg"]
        raise SpoolError(f"{path}: not a fleetdx spool file ({e.error_count()} errors; {first})") from None


def upgrade_v1(doc: Any) -> Any:
    """A spool document whose report has ``schema_version`` 1, with each pair or group finding of the
    bandwidth screen (a code of :data:`V1_GROUP_CODES`, ``node`` null) given ``nodes`` split from its
    comma-joined subject; any other document unchanged. The contracts' own validators do the rest."""
    report = doc.get("report") if isinstance(doc, dict) else None
    if not isinstance(report, dict) or not isinstance(report.get("schema_version"), int):
        return doc
    if report["schema_version"] >= 2 or not isinstance(report.get("findings"), list):
        return doc
    findings = [_v1_finding(f) for f in report["findings"]]
    return {**doc, "report": {**report, "findings": findings}}


def _v1_finding(f: Any) -> Any:
    if not isinstance(f, dict) or "nodes" in f or f.get("node") is not None:
        return f
    if f.get("code") not in V1_GROUP_CODES or not isinstance(f.get("subject"), str):
        return f
    hosts = list(dict.fromkeys(h.strip() for h in f["subject"].split(",") if h.strip()))
    return {**{k: v for k, v in f.items() if k != "node"}, "nodes": hosts}


def spool_files(paths: list[Path]) -> list[Path]:
    """``paths`` with each directory replaced by the spool files in it (sorted)."""
    out: list[Path] = []
    for p in paths:
        out.extend(sorted(p.glob(f"*{SPOOL_SUFFIX}")) if p.is_dir() else [p])
    return out


#: infix of a spool file claimed by an importer: ``<name>.claimed-<pid>``
CLAIM_INFIX = ".claimed-"


def _claim(path: Path) -> Path | None:
    """Take ``path`` for this process by renaming it (atomic within a file system); ``None`` when another
    importer took it first."""
    claimed = path.with_name(f"{path.name}{CLAIM_INFIX}{os.getpid()}")
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return None
    return claimed


def import_spool_file(
    store: Store, path: Path, keep: bool = False, max_bytes: int = MAX_SPOOL_BYTES
) -> ImportResult | None:
    """Load one spool file into ``store`` and, unless ``keep``, delete it after the commit.

    The file is first claimed by an atomic rename, so importers running at once never load or fail on the
    same file: ``None`` means another importer had already taken it (not an error). Idempotent: a run already
    stored is not stored again (``inserted`` false) and its file is still removed. Raises :class:`SpoolError`
    for a bad file (not a regular file: before it is claimed, so ``/dev/zero`` is never renamed; over
    ``max_bytes`` compressed or decompressed) and :class:`StoreError` for a database failure; the file is then
    given back its name.
    """
    try:
        check_spool_path(path)
    except FileNotFoundError:
        return None  # another importer claimed it first (as _claim says)
    claimed = _claim(path)
    if claimed is None:
        return None
    try:
        content = read_spool(claimed, max_bytes)
        inserted = store.save_report(content.report, content.raw)
    except SpoolError as e:
        os.rename(claimed, path)
        raise SpoolError(str(e).replace(str(claimed), str(path))) from None  # name the file the user gave
    except BaseException:
        os.rename(claimed, path)
        raise
    if keep:
        os.rename(claimed, path)
    else:
        claimed.unlink()
    # the store's record models load only to import: a Slurm prolog writes its spool file without them
    from fleetdx.orchestrator.store.records import ImportResult

    return ImportResult(path=str(path), run_id=content.report.run_id, inserted=inserted, removed=not keep)
