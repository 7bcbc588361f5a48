"""The service's deployment on Kubernetes (k8s/namespace.yaml, db-secret.yaml, postgres.yaml, fleetdx-server.yaml,
servicemonitor.yaml, and the RayJob's service account), checked offline: no cluster can run here (PLATFORM.md).

tests/test_k8s_manifests.py validates every built-in kind with kubernetes-validate (strict); here the
ServiceMonitor is validated against prometheus-operator's own CRD schema (tests/fixtures/crds/, made strict: the
API server prunes an unknown field of a custom resource silently, so a misspelt one would be lost without an
error), the objects are checked to fit together (selectors, port names, Secret keys, service accounts, one
namespace), the pods to hold least privileges, and the containers' command lines to be fleetdx's own: the
initContainer's `fleetdx db upgrade` and the server's `fleetdx serve` arguments run through the CLI against a
real database, and the RayJob's entrypoint through the two shells KubeRay and Ray put it in.
"""

from __future__ import annotations

import copy
import os
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
CRDS = Path(__file__).parent / "fixtures" / "crds"
NAMESPACE = "fleetdx"
#: the image placeholder every fleetdx manifest names (build yours from k8s/Containerfile)
IMAGE = "ghcr.io/example/fleetdx:0.1.0"

pytest_plugins = ["tests.pgfixtures"]


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d is not None]


def _kind(name: str, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _docs(name) if d["kind"] == kind]
    return doc


def _all_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [(path.name, d) for d in _docs(path.name)]
    return out


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


# --- ServiceMonitor: prometheus-operator's CRD schema -------------------------------------------------------


def _strict(schema: Any) -> Any:
    """The CRD's structural schema with ``additionalProperties: false`` wherever it lists properties and keeps
    no unknown field (``x-kubernetes-preserve-unknown-fields``): what pruning would silently drop is an error."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get(
        "x-kubernetes-preserve-unknown-fields"
    ):
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def servicemonitor_schema() -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((CRDS / "monitoring.coreos.com_servicemonitors.yaml").read_text())
    assert crd["spec"]["names"]["kind"] == "ServiceMonitor"
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = _strict(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by the API server, not the CRD
    return jsonschema.Draft7Validator(schema)


def test_servicemonitor_validates_against_the_crd(servicemonitor_schema: jsonschema.protocols.Validator) -> None:
    doc = _kind("servicemonitor.yaml", "ServiceMonitor")
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    servicemonitor_schema.validate(doc)


@pytest.mark.parametrize(
    ("where", "field", "value"),
    [
        ("endpoints", "scrapeInterval", "60s"),  # the field is "interval"
        ("endpoints", "interval", "1 minute"),  # not a Prometheus duration
        ("spec", "namespaceSelectors", {"matchNames": ["fleetdx"]}),
    ],
)
def test_the_servicemonitor_check_can_fail(
    servicemonitor_schema: jsonschema.protocols.Validator, where: str, field: str, value: object
) -> None:
    doc = copy.deepcopy(_kind("servicemonitor.yaml", "ServiceMonitor"))
    (doc["spec"]["endpoints"][0] if where == "endpoints" else doc["spec"])[field] = value
    with pytest.raises(jsonschema.ValidationError):
        servicemonitor_schema.validate(doc)


def test_servicemonitor_scrapes_the_service_s_metrics_port() -> None:
    monitor = _kind("servicemonitor.yaml", "ServiceMonitor")["spec"]
    service = _kind("fleetdx-server.yaml", "Service")
    labels = service["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


# --- the objects fit together --------------------------------------------------------------------------------


def test_one_namespace_defined_once_and_used_by_every_namespaced_object() -> None:
    docs = _all_docs()
    namespaces = [d for _, d in docs if d["kind"] == "Namespace"]
    assert [(n["metadata"]["name"]) for n in namespaces] == [NAMESPACE]
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding"}
    for name, d in docs:
        if d["kind"] not in cluster_scoped:
            assert d["metadata"].get("namespace") == NAMESPACE, (name, d["kind"], d["metadata"]["name"])
        assert d["metadata"].get("labels", {}).get("app.kubernetes.io/name", "fleetdx") == "fleetdx", name


def test_the_service_selects_the_server_pods_on_their_named_port() -> None:
    deployment = _kind("fleetdx-server.yaml", "Deployment")
    service = _kind("fleetdx-server.yaml", "Service")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == pod_labels
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (server,) = _pod(deployment)["containers"]
    ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ports and f"--port={ports[port['targetPort']]}" in server["args"]


def _db_url_ref(container: dict[str, Any]) -> dict[str, Any]:
    ref: dict[str, Any] = _env(container)["FLEETDX_DB_URL"]["valueFrom"]["secretKeyRef"]
    return ref


def test_every_fleetdx_container_reads_the_database_url_from_the_one_secret() -> None:
    """The initContainer, the server and the retention CronJob read FLEETDX_DB_URL from the Secret the template
    defines; no manifest carries a URL or password in plain sight."""
    secret = _kind("db-secret.yaml", "Secret")
    pod = _pod(_kind("fleetdx-server.yaml", "Deployment"))
    cron = _kind("prune-cronjob.yaml", "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    containers = [*pod["initContainers"], *pod["containers"], *cron["containers"]]
    for c in containers:
        ref = _db_url_ref(c)
        assert (ref["name"], ref["key"]) == (secret["metadata"]["name"], "url") and not ref.get("optional"), c["name"]
    for name, d in _all_docs():
        if d["kind"] != "Secret":
            assert "postgresql://" not in yaml.safe_dump(d), name


def test_the_secret_is_a_template_never_a_real_secret() -> None:
    secret = _kind("db-secret.yaml", "Secret")
    assert "data" not in secret and set(secret["stringData"]) == {"password", "url"}
    assert secret["stringData"]["password"] == "REPLACE-ME"
    assert "fleetdx:REPLACE-ME@" in secret["stringData"]["url"]


def test_postgres_statefulset_its_headless_service_and_the_url_agree() -> None:
    from sqlalchemy.engine import make_url

    sts = _kind("postgres.yaml", "StatefulSet")
    svc = _kind("postgres.yaml", "Service")
    secret = _kind("db-secret.yaml", "Secret")
    assert svc["spec"]["clusterIP"] == "None" and sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"] and claim["spec"]["resources"]["requests"]["storage"]
    (pg,) = _pod(sts)["containers"]
    env = _env(pg)
    password = env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert (password["name"], password["key"]) == (secret["metadata"]["name"], "password")
    assert any(m["name"] == claim["metadata"]["name"] and env["PGDATA"]["value"].startswith(m["mountPath"] + "/")
               for m in pg["volumeMounts"])
    url = make_url(secret["stringData"]["url"])
    assert url.host == f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc"
    assert url.port == svc["spec"]["ports"][0]["port"] == pg["ports"][0]["containerPort"]
    assert (url.username, url.database) == (env["POSTGRES_USER"]["value"], env["POSTGRES_DB"]["value"])
    assert url.password == secret["stringData"]["password"]


# --- least privileges ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kind"), [("fleetdx-server.yaml", "Deployment"), ("postgres.yaml", "StatefulSet")])
def test_pods_hold_least_privileges(name: str, kind: str) -> None:
    """Non-root, seccomp RuntimeDefault, no service account token, no host namespaces or paths; every container
    with a read-only root filesystem, every capability dropped, no privilege escalation, requests and limits; and
    each folder the process writes (HOME, TMPDIR, the socket folder) an emptyDir or the data volume."""
    pod = _pod(_kind(name, kind))
    sc = pod["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0 and sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    assert not any(pod.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert all("hostPath" not in v for v in pod.get("volumes", []))
    empty_dirs = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        csc = c["securityContext"]
        assert csc["readOnlyRootFilesystem"] is True and csc["allowPrivilegeEscalation"] is False, c["name"]
        assert csc["capabilities"] == {"drop": ["ALL"]} and not csc.get("privileged"), c["name"]
        if name == "fleetdx-server.yaml":
            assert c["image"] == IMAGE, c["name"]
        for section in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][section]), (c["name"], section)
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        for var in ("HOME", "TMPDIR"):
            if var in _env(c):
                assert mounts.get(_env(c)[var]["value"]) in empty_dirs, (c["name"], var)
    if kind == "StatefulSet":
        assert {"/tmp", "/var/run/postgresql"} <= set(mounts) and mounts["/tmp"] in empty_dirs


def test_server_probes_ask_healthz_on_the_http_port() -> None:
    (server,) = _pod(_kind("fleetdx-server.yaml", "Deployment"))["containers"]
    port_names = {p["name"] for p in server["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = server[probe]["httpGet"]
        assert get["path"] == "/healthz" and get["port"] in port_names, probe
    # a database outage takes the pod out of the Service well before the kubelet restarts it
    ready, live = server["readinessProbe"], server["livenessProbe"]
    assert ready["periodSeconds"] * ready["failureThreshold"] < live["periodSeconds"] * live["failureThreshold"]


def test_healthz_is_open_and_answers_while_the_database_does(tmp_path: Path) -> None:
    """What the probes get from the real app: 200 without a token, even with --auth-reads; 503 once the
    database is gone (an SQLite file whose folder was removed)."""
    from fastapi.testclient import TestClient

    from fleetdx.orchestrator.service.api import create_app
    from fleetdx.orchestrator.store import Store
    from tests.store_samples import migrated

    folder = tmp_path / "db"
    folder.mkdir()
    url = migrated(f"sqlite:///{folder / 'f.db'}")
    with Store.open(url) as store:
        client = TestClient(create_app(store, auth_reads=True))
        assert client.get("/healthz").status_code == 200
        assert client.get("/runs").status_code == 401
        store.engine.dispose()
        (folder / "f.db").unlink()
        folder.rmdir()
        assert client.get("/healthz").status_code == 503


# --- the command lines are fleetdx's ---------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest) -> str:
    """An empty database (no schema): a SQLite file, or a fresh database on the test PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


#: what `fleetdx serve` puts in its environment for its workers (restored after each test)
_SERVE_ENV = ("FLEETDX_DB_URL", "FLEETDX_WEBHOOKS", "FLEETDX_WEBHOOK_FORMAT", "FLEETDX_API_TOPOLOGY_CONF",
              "FLEETDX_API_SLURM", "FLEETDX_API_PLACEMENT_CACHE_S", "FLEETDX_API_MAX_BODY_BYTES",
              "FLEETDX_API_AUTH_READS", "PROMETHEUS_MULTIPROC_DIR")


@pytest.mark.timeout(120)
def test_init_container_migrates_and_the_server_args_start_serve(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The initContainer's command, run through the CLI with the Secret's variable pointing at an empty
    database, creates the schema; then the server container's command and args get through `fleetdx serve`'s
    checks (options, the database's schema) up to uvicorn, which is stood in for here (no server is started:
    the listening socket and uvicorn.run are recorded). On PostgreSQL the server refuses to start without the
    upgrade, which is why the initContainer is there."""
    import uvicorn

    from fleetdx.orchestrator.cli import serve_cmd
    from fleetdx.orchestrator.cli.main import _register, app

    pod = _pod(_kind("fleetdx-server.yaml", "Deployment"))
    (init,) = pod["initContainers"]
    (server,) = pod["containers"]
    assert init["command"] == ["fleetdx", "db", "upgrade"] and server["command"] == ["fleetdx", "serve"]
    for var in _SERVE_ENV:  # recorded (set, then deleted) so that teardown removes what serve sets in-process
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setenv("FLEETDX_DB_URL", empty_url)
    calls: dict[str, Any] = {}

    def listening(host: str, port: int) -> socket.socket:
        calls["listen"] = (host, port)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        return s

    monkeypatch.setattr(serve_cmd, "_listening_socket", listening)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.setdefault("uvicorn", kw))
    _register()
    runner = CliRunner()
    serve_argv = [*server["command"][1:], *server["args"]]
    if "postgres" in empty_url:
        before = runner.invoke(app, serve_argv)
        assert before.exit_code == 3 and "fleetdx db upgrade" in before.output, before.output
        assert "uvicorn" not in calls
    up = runner.invoke(app, init["command"][1:])
    assert up.exit_code == 0, up.output
    res = runner.invoke(app, serve_argv)
    assert res.exit_code == 0, res.output
    assert calls["listen"] == ("0.0.0.0", 8000)
    assert calls["uvicorn"]["workers"] == 2 and calls["uvicorn"]["factory"] is True
    assert os.environ["FLEETDX_DB_URL"] == empty_url  # what each worker's app_from_env opens


def test_rayjob_head_runs_as_the_node_writer() -> None:
    rayjob = _kind("rayjob-preflight.yaml", "RayJob")
    writer = _kind("node-writer-rbac.yaml", "ServiceAccount")["metadata"]
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["serviceAccountName"] == writer["name"] and rayjob["metadata"]["namespace"] == writer["namespace"]


def test_rayjob_entrypoint_survives_kuberay_s_and_ray_s_shells(tmp_path: Path) -> None:
    """KubeRay puts the entrypoint as it is into its submitter's bash command (`ray job submit ... -- ENTRYPOINT
    ;`, ray-operator/controllers/ray/common/job.go), `ray job submit` joins its arguments with shlex.join and
    the Ray job supervisor runs that string with a shell. Both shells are run here, with `ray` and `fleetdx`
    stood in for by functions and a script that record their arguments: the pre-flight's report reaches `k8s
    mark`, and the job ends with the pre-flight's exit code (2, CRITICAL), not mark's. Each recorded fleetdx
    command line's options are the CLI's (its --help accepts them)."""
    from fleetdx.orchestrator.cli.main import _register, app

    entrypoint = _kind("rayjob-preflight.yaml", "RayJob")["spec"]["entrypoint"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "fleetdx.log"
    stub = bin_dir / "fleetdx"
    stub.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\0" "$@" >> {shlex.quote(str(log))}; printf "\\n" >> {shlex.quote(str(log))}\n'
        'if [[ $1 == preflight ]]; then echo \'{"kind": "preflight", "verdict": "CRITICAL"}\'; exit 2; fi\n'
        "echo marked; exit 0\n"
    )
    stub.chmod(0o755)
    joined = tmp_path / "entrypoint"
    # the submitter: ray is a function that does what `ray job submit -- ...` does with the words after --
    submitter = (
        f'ray() {{ while [[ $1 != -- ]]; do shift; done; shift; python3 -c "import shlex, sys; '
        f'open(sys.argv[1], \'w\').write(shlex.join(sys.argv[2:]))" {shlex.quote(str(joined))} "$@"; }}; '
        f"ray job submit --address http://head:8265 --no-wait -- {entrypoint} ;"
    )
    subprocess.run(["bash", "-c", submitter], check=True, timeout=30)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    ray_run = subprocess.run(["/bin/sh", "-c", joined.read_text()], capture_output=True, text=True, timeout=30,
                             env=env, cwd=tmp_path)
    assert ray_run.returncode == 2, ray_run.stderr
    assert '"verdict": "CRITICAL"' in ray_run.stdout and "marked" in ray_run.stdout
    calls = [line.split("\0")[:-1] for line in log.read_text().splitlines()]
    assert [c[:2] for c in calls] == [["preflight", "--level"], ["k8s", "mark"]]
    report = calls[1][calls[1].index("--report") + 1]
    assert f"> {report};" in entrypoint and "--in-cluster" in calls[1]
    _register()
    for argv in calls:
        res = CliRunner().invoke(app, [*argv, "--help"])
        assert res.exit_code == 0, (argv, res.output)


def test_serve_leaves_no_multiprocess_dir_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleetdx serve --workers 2` run in-process (uvicorn stood in for) removes the PROMETHEUS_MULTIPROC_DIR it
    made and its variable: a Ray head started later from the same process (the CI's Slurm tests ran after this)
    died on prometheus-client opening files in the removed folder."""
    from fleetdx.orchestrator.cli import serve_cmd
    from fleetdx.orchestrator.store import Store
    from tests.cliapp import cli_app

    for var in _SERVE_ENV:
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(serve_cmd, "_listening_socket", lambda host, port: socket.socket())
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: seen.update(dir=os.environ.get("PROMETHEUS_MULTIPROC_DIR")))
    db = f"sqlite:///{tmp_path / 'x.db'}"
    with Store.open(db) as store:  # serve refuses an empty database: migrate it as db upgrade does
        store.upgrade()
    res = CliRunner().invoke(cli_app(serve_cmd), ["serve", "--db", db, "--workers", "2"])
    assert res.exit_code == 0, res.output
    assert seen["dir"] and not Path(seen["dir"]).exists()
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
