"""The jobs over HTTP (``POST /postmortems``, ``POST /analyze``): real job logs and real node bundles uploaded,
stored and answered with where to read them; hostile archives and wrong media types are 4xx, nothing written
outside the upload's temporary folder. On SQLite and PostgreSQL (tests/pgfixtures.py)."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.postmortem.contracts import PostmortemReport
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenScope, create_token

pytest_plugins = ["tests.pgfixtures"]

FIXTURES = Path(__file__).parent / "fixtures"
#: a real log: every rank times out in ALLREDUCE SeqNum 1580 (LlamaFactory's thread; tests/fixtures/joblogs/SOURCES)
WATCHDOG_LOG = (
    FIXTURES / "joblogs" / "01_watchdog-allreduce-seq1580_rank-prefix_last-enqueued-completed_llamafactory.log"
)
#: a real dmesg: a PCIe Surprise Down, then XID 79 (gpu-burn's thread)
DMESG_LOG = FIXTURES / "joblogs" / "05_dmesg-aer-surprise-down-then-xid79_gpu-burn.log"


@pytest.fixture
def client(store: Store) -> Iterator[tuple[TestClient, dict[str, str], dict[str, str]]]:
    write = create_token(store, "uploader", TokenScope.WRITE).token
    read = create_token(store, "dashboard", TokenScope.READ).token
    yield TestClient(create_app(store)), {"Authorization": f"Bearer {write}"}, {"Authorization": f"Bearer {read}"}


def _tar(files: dict[str, bytes], gz: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_log_uploaded_gets_a_stored_postmortem_and_its_page(client, store: Store) -> None:  # type: ignore[no-untyped-def]
    c, write, _ = client
    res = c.post(
        "/postmortems?job_id=4242",
        content=WATCHDOG_LOG.read_bytes(),
        headers={**write, "Content-Type": "text/plain"},
    )
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["job_id"] == "4242" and body["verdict"] == "CRITICAL" and body["first_cause"] == "NCCL_TIMEOUT"
    assert c.get(body["page"] if body["page"].startswith("/") else "/" + body["page"]).status_code == 200
    stored = store.get_postmortem(body["postmortem_id"], PostmortemReport)
    text = str(stored)
    assert "upload.log" in text and "fleetdx-upload-" not in text  # named as uploaded, not where it was unpacked


def test_a_gzip_tar_of_logs_names_its_files(client, store: Store) -> None:  # type: ignore[no-untyped-def]
    c, write, _ = client
    archive = _tar({"job/rank0.log": WATCHDOG_LOG.read_bytes(), "node/dmesg.txt": DMESG_LOG.read_bytes()}, gz=True)
    res = c.post("/postmortems", content=archive, headers={**write, "Content-Type": "application/gzip"})
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["first_cause"] == "GPU_HW_FAULT" and body["causes"] >= 2
    text = str(store.get_postmortem(body["postmortem_id"], PostmortemReport))
    assert "node/dmesg.txt" in text and "job/rank0.log" in text


def test_node_bundles_uploaded_are_an_analyze_run(client, store: Store) -> None:  # type: ignore[no-untyped-def]
    c, write, read = client
    files = {}
    for host in ("h100-busy", "h100-idle"):
        for p in sorted((FIXTURES / "bundles" / host).iterdir()):
            if p.is_file():
                files[f"{host}/{p.name}"] = p.read_bytes()
    res = c.post(
        "/analyze?job_id=77",
        content=gzip.compress(_tar(files)),
        headers={**write, "Content-Type": "application/x-tar", "Content-Encoding": "gzip"},
    )
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["nodes"] == 2 and body["verdict"] in ("WARNING", "CRITICAL")
    run = c.get("/" + body["report"], headers=read).json()
    assert run["kind"] == "analyze" and run["job"]["job_id"] == "77"
    assert any(f["code"] == "GPU_FOREIGN_PROCESS" for f in run["findings"])  # the busy H100's foreign process


@pytest.mark.parametrize(
    ("content", "ctype", "status", "says"),
    [
        (b"x", "application/json", 415, "Content-Type"),
        (b"not a tar at all", "application/x-tar", 400, "tar archive"),
        (_tar({}), "application/x-tar", 400, "no regular file"),
        (_tar({"../escape.log": b"boom"}), "application/x-tar", 400, "tar archive"),
    ],
)
def test_bad_uploads_are_4xx_and_write_nothing_outside(  # type: ignore[no-untyped-def]
    client, content: bytes, ctype: str, status: int, says: str
) -> None:
    c, write, _ = client
    res = c.post("/postmortems", content=content, headers={**write, "Content-Type": ctype})
    assert res.status_code == status and says in res.json()["detail"], res.text
    assert not (Path.cwd().parent / "escape.log").exists()


def test_an_absolute_member_lands_inside_the_upload(client, store: Store) -> None:  # type: ignore[no-untyped-def]
    """tarfile's data filter strips the leading slash (PEP 706): the member is read as etc/evil.log, nothing is
    written to /etc."""
    c, write, _ = client
    archive = _tar({"/etc/fleetdx-evil.log": WATCHDOG_LOG.read_bytes()})
    res = c.post("/postmortems", content=archive, headers={**write, "Content-Type": "application/x-tar"})
    assert res.status_code == 201 and not Path("/etc/fleetdx-evil.log").exists()
    assert "etc/fleetdx-evil.log" in str(store.get_postmortem(res.json()["postmortem_id"], PostmortemReport))


def test_uploads_need_a_write_token_and_a_sane_job_id(client) -> None:  # type: ignore[no-untyped-def]
    c, write, read = client
    log = {"content": b"hello\n"}
    assert c.post("/postmortems", headers={"Content-Type": "text/plain"}, **log).status_code == 401
    assert c.post("/postmortems", headers={**read, "Content-Type": "text/plain"}, **log).status_code == 403
    bad = c.post("/postmortems?job_id=a%0Ab", headers={**write, "Content-Type": "text/plain"}, **log)
    assert bad.status_code == 422
    assert c.post("/analyze", headers={**write, "Content-Type": "text/plain"}, **log).status_code == 415
    not_bundle = c.post(
        "/analyze", content=_tar({"x/notes.txt": b"hi"}), headers={**write, "Content-Type": "application/x-tar"}
    )
    assert not_bundle.status_code == 400 and "not a node bundle" in not_bundle.json()["detail"]


def test_traces_uploaded_get_a_stored_step_analysis_and_its_page(client, store: Store) -> None:  # type: ignore[no-untyped-def]
    """The real 4-rank gloo capture whose rank 2 waits 60 ms per batch for data (tests/fixtures/traces)."""
    c, write, _ = client
    run = FIXTURES / "traces" / "cpu-gloo-slow-data-rank2"
    files = {f"cpu-gloo-slow-data-rank2/{p.name}": p.read_bytes() for p in sorted(run.iterdir()) if p.is_file()}
    res = c.post("/steps?job_id=9", content=_tar(files), headers={**write, "Content-Type": "application/x-tar"})
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["ranks"] == 4 and body["first_finding"] == "STEP_STRAGGLER_RANK" and body["job_id"] == "9"
    page = c.get("/" + body["page"])
    assert page.status_code == 200 and "STEP_STRAGGLER_RANK" in page.text
    assert [r.analysis_id for r in store.list_step_analyses(job_id="9")] == [body["analysis_id"]]
    assert c.get("/steps/0123abcd").status_code == 404


def test_a_training_log_uploaded_alone_is_read(client) -> None:  # type: ignore[no-untyped-def]
    c, write, _ = client
    log = FIXTURES / "steplogs" / "torchtitan-gc-profiler_pytorch-torchtitan-1287.log"
    res = c.post("/steps", content=log.read_bytes(), headers={**write, "Content-Type": "text/plain"})
    assert res.status_code == 201 and res.json()["ranks"] == 1, res.text
    bad = c.post("/steps", content=b"no step here\n", headers={**write, "Content-Type": "text/plain"})
    assert bad.status_code == 400 and "no step analysis" in bad.json()["detail"] and "fleetdx-upload" not in bad.text
