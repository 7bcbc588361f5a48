"""The jobs over HTTP: a postmortem of uploaded logs, a step analysis of uploaded traces or step logs, an
analysis of uploaded node bundles, each stored and answered with where to read it.

- ``POST /postmortems?job_id=ID`` (write token): the body is one job log (``text/plain``) or a tar archive of
  logs (``application/x-tar``; ``.tar.gz`` as ``application/gzip``, or any of them with ``Content-Encoding:
  gzip``). fleetdx's postmortem reads them (:func:`fleetdx.orchestrator.postmortem.run.run_postmortem`), adds
  the blamed hosts' stored history and keeps the postmortem: 201 with its id, verdict, first cause and the page
  ``postmortems/{id}``. The evidence names the files as the archive does.
- ``POST /steps?job_id=ID`` (write token): the body is a tar archive of one run's profiler traces
  (``rank-N.json[.gz]``), StepTimer logs (``steps-rank-N.jsonl``) or training logs, or one training log
  (``text/plain``); ``fleetdx steps``' analysis runs over them (:func:`fleetdx.orchestrator.steps.run.run`, the
  files of the archive's top folder, or of its one folder) and is kept: 201 with its id, verdict and the page
  ``steps/{id}``; 400 when nothing could be decomposed into steps.
- ``POST /analyze?job_id=ID`` (write token): the body is a tar archive of node bundles (each a folder of
  ``fleetdx collect`` output, as the epilog keeps them); the pre-flight diagnosis runs offline over them
  (:func:`fleetdx.orchestrator.preflight.run.analyze_bundles`) and the run is stored like a pushed report: 201
  with its run id, verdict and its report ``runs/{run_id}``.

Both bodies are read within the service's body limit (``serve --max-body-mib``, 413 above it) and unpacked into
a temporary folder that is removed after: archives hold at most :data:`MAX_FILES` regular files, whose sizes add
up to at most the body limit; links, devices, absolute paths and ``..`` are refused (tarfile's ``data`` filter,
PEP 706). A client's mistake is a 4xx with a one-line reason: 415 for another media type, 400 for an archive
that does not open or holds nothing to read, 413 for too much, 422 for a ``job_id`` that is not one. The work
runs in the thread pool; the event loop never parses.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from fleetdx.orchestrator.service.auth import require_write
from fleetdx.orchestrator.service.ingest import UploadRejected, inflate
from fleetdx.orchestrator.store import Store
from fleetdx.probes.contracts import Contract, Job, SchedulerKind, VerdictName

#: most regular files one archive may hold
MAX_FILES = 4096
_TEXT = ("text/plain",)
_TAR = ("application/x-tar", "application/tar", "application/gzip", "application/x-gzip", "application/x-gtar")
_JOB_ID = r"^[A-Za-z0-9_.:+\-]{1,128}$"


class PostmortemUploaded(Contract):
    """The answer to ``POST /postmortems``: the stored postmortem's id, job, verdict, first cause's code, how many
    causes, and its page (relative to the service's root)."""

    postmortem_id: str
    job_id: str | None = None
    verdict: VerdictName
    first_cause: str | None = None
    causes: int
    page: str


class AnalyzeUploaded(Contract):
    """The answer to ``POST /analyze``: the stored run's id, verdict, node count and its report (relative)."""

    run_id: str
    verdict: VerdictName
    nodes: int
    report: str


def service_of(request: Request) -> Any:
    svc = getattr(request.app.state, "service", None)
    if getattr(svc, "store", None) is None:
        raise RuntimeError("the app has no Service in app.state.service (build it with create_app)")
    return svc


async def body_of(request: Request, limit: int) -> bytes:
    """The request body, decoded from its Content-Encoding, within ``limit`` bytes (HTTPException 400/413/415)."""
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise HTTPException(status_code=413, detail=f"the upload is over {limit} bytes")
    except ClientDisconnect:
        raise HTTPException(status_code=400, detail="the client disconnected before the body ended") from None
    try:
        return inflate(bytes(body), request.headers.get("content-encoding"), limit, "the upload")
    except UploadRejected as e:
        raise HTTPException(status_code=e.status, detail=e.reason) from None


def unpack(data: bytes, media: str, dest: Path, limit: int, one_name: str = "upload.log") -> list[tuple[Path, str]]:
    """The upload in ``data`` written under ``dest``: ``(path, name as uploaded)`` per regular file, in archive
    order (module doc for what is refused).

    Raises:
        UploadRejected: 415 (media type), 400 (not a tar archive, nothing in it), 413 (too many files or bytes).
    """
    if media in _TEXT:
        (dest / one_name).write_bytes(data)
        return [(dest / one_name, one_name)]
    if media not in _TAR:
        raise UploadRejected(415, f"Content-Type must be text/plain or application/x-tar, not {media or 'missing'!r}")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            if len(members) > MAX_FILES:
                raise UploadRejected(413, f"the archive holds over {MAX_FILES} files")
            if sum(m.size for m in members) > limit:
                raise UploadRejected(413, f"the archive's files add up to over {limit} bytes")
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise UploadRejected(400, f"the body is not a tar archive that can be unpacked: {e}") from None
    out = [(dest / m.name, str(PurePosixPath(m.name))) for m in members]
    if not out:
        raise UploadRejected(400, "the archive holds no regular file")
    return out


def _job(job_id: str | None) -> Job | None:
    return Job(scheduler=SchedulerKind.SLURM, job_id=job_id) if job_id else None


def postmortem_of(_root: Path, files: Sequence[tuple[Path, str]], job_id: str | None, store: Store) -> dict[str, Any]:
    """The stored postmortem of the uploaded logs ``files`` (module doc); its answer body."""
    from fleetdx.orchestrator.postmortem import history
    from fleetdx.orchestrator.postmortem.run import run_postmortem
    from fleetdx.orchestrator.postmortem.sources import LogFiles

    report = run_postmortem([LogFiles([p for p, _ in files], names=[n for _, n in files])], _job(job_id))
    report = history.with_history(report, store)
    record = history.save(report, store)
    return PostmortemUploaded(
        postmortem_id=record.postmortem_id,
        job_id=record.job_id,
        verdict=record.verdict,
        first_cause=record.first_cause,
        causes=len(report.causes),
        page=f"postmortems/{record.postmortem_id}",
    ).model_dump(mode="json")


def _bundle_dirs(root: Path, files: Sequence[tuple[Path, str]]) -> list[Path]:
    """The bundle folders of an unpacked archive: each folder that directly holds a file (a bundle's own files
    sit side by side), sorted."""
    return sorted({p.parent for p, _ in files if p.parent != root} or {root})


def analysis_of(root: Path, files: Sequence[tuple[Path, str]], job_id: str | None, _store: Store) -> tuple[Any, Any]:
    """The offline pre-flight diagnosis of the uploaded bundles: the report (with the job) and its raw outputs.

    Raises:
        UploadRejected: 400 when a folder is not a node bundle.
    """
    from fleetdx.orchestrator.preflight.run import analyze_bundles
    from fleetdx.probes.catalog import rows_reading
    from fleetdx.probes.errors import BundleError

    dirs = _bundle_dirs(root, files)
    for d in dirs:
        if not any(rows_reading(p.name) for p in d.iterdir() if p.is_file()):
            where = d.relative_to(root).as_posix() if d != root else "the archive's top folder"
            raise UploadRejected(400, f"not a node bundle: {where} holds no file fleetdx reads (fleetdx collect's)")
    try:
        result = analyze_bundles(dirs)
        raw = result.raw()
        kept = {host: dict(raw[host]) for host in raw}  # read now: the folder goes when the request ends
    except BundleError as e:
        raise UploadRejected(400, f"not a node bundle: {str(e).replace(str(root) + '/', '')}") from None
    report = result.report.model_copy(update={"job": _job(job_id)}) if job_id else result.report
    return report, kept


class StepsUploaded(Contract):
    """The answer to ``POST /steps``: the stored step analysis's id, job, verdict, first finding's code, how many
    ranks it read, and its page (relative to the service's root)."""

    analysis_id: str
    job_id: str | None = None
    verdict: VerdictName
    first_finding: str | None = None
    ranks: int
    page: str


def steps_of(root: Path, _files: Sequence[tuple[Path, str]], job_id: str | None, store: Store) -> dict[str, Any]:
    """The stored step analysis of the uploaded traces, StepTimer logs or training logs under ``root``.

    Raises:
        UploadRejected: 400 when nothing could be decomposed into steps (the reason, paths as uploaded).
    """
    from fleetdx.orchestrator.steps.run import StepsRequest, run, save
    from fleetdx.probes.errors import FleetdxError

    entries = list(root.iterdir())
    folder = entries[0] if len(entries) == 1 and entries[0].is_dir() else root  # an archive of one folder
    try:
        done = run(StepsRequest(paths=[folder], job_id=job_id))
    except FleetdxError as e:
        raise UploadRejected(400, f"no step analysis: {str(e).replace(str(root) + '/', '')}") from None
    record = save(done.report, store)
    return StepsUploaded(
        analysis_id=record.analysis_id,
        job_id=record.job_id,
        verdict=record.verdict,
        first_finding=record.first_finding,
        ranks=record.ranks,
        page=f"steps/{record.analysis_id}",
    ).model_dump(mode="json")


#: what an upload is turned into, in the thread pool: (unpacked folder, its files, job id, store) -> the answer
Work = Callable[[Path, list[tuple[Path, str]], str | None, Store], Any]


async def _uploaded(request: Request, job_id: str | None, work: Work, one_name: str, text: bool = True) -> Any:
    """Read the upload, unpack it into a temporary folder and run ``work`` over it there (module doc); a client's
    mistake is an HTTPException with its status and one line."""
    svc = service_of(request)
    data = await body_of(request, svc.max_body_bytes)
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if not text and media in _TEXT:
        raise HTTPException(status_code=415, detail="this upload comes as a tar archive (application/x-tar)")
    with tempfile.TemporaryDirectory(prefix="fleetdx-upload-") as tmp:
        try:
            files = await run_in_threadpool(unpack, data, media, Path(tmp), svc.max_body_bytes, one_name)
            return await run_in_threadpool(work, Path(tmp), files, job_id, svc.store)
        except UploadRejected as e:
            raise HTTPException(status_code=e.status, detail=e.reason) from None


async def post_postmortem(
    request: Request, job_id: str | None = Query(None, pattern=_JOB_ID, description="The job the logs are of.")
) -> JSONResponse:
    """A postmortem of the uploaded job logs, kept in the store (module doc)."""
    return JSONResponse(status_code=201, content=await _uploaded(request, job_id, postmortem_of, "upload.log"))


async def post_steps(
    request: Request, job_id: str | None = Query(None, pattern=_JOB_ID, description="The job the steps are of.")
) -> JSONResponse:
    """A step analysis of uploaded traces or step logs, kept in the store (module doc)."""
    return JSONResponse(status_code=201, content=await _uploaded(request, job_id, steps_of, "train.log"))


async def post_analyze(
    request: Request, job_id: str | None = Query(None, pattern=_JOB_ID, description="The job the bundles are of.")
) -> JSONResponse:
    """The offline diagnosis of uploaded node bundles, stored as an analyze run (module doc)."""
    report, raw = await _uploaded(request, job_id, analysis_of, "bundle", text=False)
    await service_of(request).writer.save(report, raw)
    answer = AnalyzeUploaded(
        run_id=report.run_id, verdict=report.verdict, nodes=len(report.nodes), report=f"runs/{report.run_id}"
    )
    return JSONResponse(status_code=201, content=answer.model_dump(mode="json"))


def router() -> APIRouter:
    r = APIRouter()
    write = [Depends(require_write)]
    r.add_api_route(
        "/postmortems",
        post_postmortem,
        methods=["POST"],
        status_code=201,
        response_model=PostmortemUploaded,
        dependencies=write,
    )
    r.add_api_route(
        "/steps", post_steps, methods=["POST"], status_code=201, response_model=StepsUploaded, dependencies=write
    )
    r.add_api_route(
        "/analyze", post_analyze, methods=["POST"], status_code=201, response_model=AnalyzeUploaded, dependencies=write
    )
    return r
