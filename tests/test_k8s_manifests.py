"""Every manifest in k8s/ validates offline: built-in kinds with kubernetes-validate (strict: an unknown field
fails), KubeRay's RayJob with jsonschema against the CRD schemas copied in shared/schemas/kuberay/
(kubernetes-validate passes custom resources silently, PLATFORM.md). A new file in k8s/ is picked up by the glob;
a custom kind that no test here checks fails :func:`test_every_custom_resource_has_its_own_check`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT.parent / "shared" / "schemas" / "kuberay"
if not SCHEMAS.is_dir():
    SCHEMAS = Path("/work/shared/schemas/kuberay")
MANIFEST = ROOT / "k8s" / "rayjob-preflight.yaml"
#: Kubernetes version the built-in kinds are validated against (kubernetes-validate's newest bundled schema)
K8S_VERSION = "1.30.0"
#: custom resources and the test that checks each (kubernetes-validate would pass them unchecked)
CUSTOM_KINDS = {
    ("ray.io/v1", "RayJob"): "test_rayjob_manifest_is_valid",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "tests/test_alert_rules.py",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "tests/test_k8s_deploy.py",
}
#: k8s/ files that are not Kubernetes manifests (promtool's rules and tests, Grafana's dashboard JSON)
NOT_MANIFESTS = ("alerts/",)


def _manifest_files() -> list[Path]:
    files = sorted(p for ext in ("*.yaml", "*.yml") for p in (ROOT / "k8s").rglob(ext))
    return [p for p in files if not p.relative_to(ROOT / "k8s").as_posix().startswith(NOT_MANIFESTS)]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@pytest.mark.parametrize("path", _manifest_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_builtin_kind_validates_strictly(path: Path) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    docs = _docs(path)
    assert docs, f"{path}: no document"
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), f"{path}: not a Kubernetes object"
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_every_custom_resource_has_its_own_check() -> None:
    seen = {(d["apiVersion"], d["kind"]) for p in _manifest_files() for d in _docs(p)}
    builtin = {(v, k) for v, k in seen if "." not in v.split("/")[0] or v.split("/")[0].endswith(".k8s.io")}
    assert seen - builtin <= set(CUSTOM_KINDS), f"custom kinds without a schema check: {seen - builtin}"


def test_strict_validation_rejects_an_unknown_field() -> None:
    """The check above can fail: a misspelt field in the DaemonSet's container is refused."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    (ds,) = [d for d in _docs(ROOT / "k8s" / "healthcheck-daemonset.yaml") if d["kind"] == "DaemonSet"]
    broken = copy.deepcopy(ds)
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def _schema(crd_file: str) -> dict[str, Any]:
    crd = yaml.load((SCHEMAS / crd_file).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


@pytest.fixture(scope="module")
def rayjob_schema() -> jsonschema.protocols.Validator:
    if not SCHEMAS.is_dir():
        pytest.skip(f"KubeRay CRD schemas not found at {SCHEMAS}")
    # a validator built directly: jsonschema.validate() would re-check the 13k-line schema on every call
    return jsonschema.Draft7Validator(_schema("ray.io_rayjobs.yaml"))


def _manifest() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST.read_text())


def test_rayjob_manifest_is_valid(rayjob_schema: jsonschema.protocols.Validator) -> None:
    doc = _manifest()
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", "RayJob")
    rayjob_schema.validate(doc)


def test_rayjob_runs_fleetdx_preflight_with_json() -> None:
    import shlex

    (shell, flag, script) = shlex.split(_manifest()["spec"]["entrypoint"])
    entry = shlex.split(script)
    assert (shell, flag) == ("bash", "-c") and entry[:2] == ["fleetdx", "preflight"] and "--json" in entry


def test_schema_rejects_a_broken_manifest(rayjob_schema: jsonschema.protocols.Validator) -> None:
    doc = copy.deepcopy(_manifest())
    doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "four"  # must be an integer
    with pytest.raises(jsonschema.ValidationError):
        rayjob_schema.validate(doc)


@pytest.mark.parametrize("script", ["preflight.sbatch", "prolog.sh"])
def test_slurm_examples_are_valid_bash_calling_preflight(script: str) -> None:
    import subprocess

    path = ROOT / "slurm" / script
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=10)
    assert "fleetdx preflight" in path.read_text()


def test_rayjob_workers_name_their_node_from_the_downward_api() -> None:
    container = _manifest()["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env["FLEETDX_K8S_NODE_NAME"] == "spec.nodeName"


def test_node_writer_rbac_grants_exactly_what_the_writer_calls() -> None:
    """The calls of orchestrator/scheduler/k8s_nodes.py (read_node, patch_node, patch_node_status) against the
    ClusterRole: exactly those verbs on nodes and nodes/status."""
    docs = list(yaml.safe_load_all((ROOT / "k8s" / "node-writer-rbac.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    role = kinds["ClusterRole"]
    grants = {(res, v) for r in role["rules"] for res in r["resources"] for v in r["verbs"]}
    assert grants == {("nodes", "get"), ("nodes", "patch"), ("nodes/status", "patch")}
    binding = kinds["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == kinds["ServiceAccount"]["metadata"]["name"]


def _by_kind(path: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in _docs(ROOT / "k8s" / path)}


def test_healthcheck_daemonset_holds_least_privileges() -> None:
    """No privileged container, no host namespaces or host paths, read-only root, every capability dropped but
    SYSLOG (dmesg), no GPU taken from jobs; it tolerates fleetdx's own taint (it must run on a node it took out,
    to retest it) and names its node through the downward API."""
    from fleetdx.orchestrator.scheduler.k8s_nodes import TAINT_KEY

    pod = _by_kind("healthcheck-daemonset.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    assert not any(pod.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert all("hostPath" not in v for v in pod.get("volumes", []))
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"]
    assert sc["capabilities"]["drop"] == ["ALL"] and set(sc["capabilities"].get("add", [])) <= {"SYSLOG"}
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for section in ("requests", "limits"):
        assert not any(r.startswith("nvidia.com/") for r in c["resources"][section])
    assert {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    env = {e["name"]: e for e in c["env"]}
    assert env["FLEETDX_K8S_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]["value"].split(",")
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert env["HOME"]["value"] in mounts and env["FLEETDX_SPOOL_DIR"]["value"].startswith(env["HOME"]["value"])


def test_healthcheck_service_account_gets_exactly_the_node_writer_role() -> None:
    ds = _by_kind("healthcheck-daemonset.yaml")["DaemonSet"]
    rbac = _by_kind("healthcheck-rbac.yaml")
    writer = _by_kind("node-writer-rbac.yaml")
    sa = rbac["ServiceAccount"]["metadata"]
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == sa["name"]
    assert ds["metadata"]["namespace"] == sa["namespace"]
    binding = rbac["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": writer["ClusterRole"]["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    policy = rbac["ValidatingAdmissionPolicy"]
    user = f"system:serviceaccount:{sa['namespace']}:{sa['name']}"
    assert [user in m["expression"] for m in policy["spec"]["matchConditions"]] == [True]
    assert {r for rule in policy["spec"]["matchConstraints"]["resourceRules"] for r in rule["resources"]} == {
        "nodes", "nodes/status"}
    assert rbac["ValidatingAdmissionPolicyBinding"]["spec"]["policyName"] == policy["metadata"]["name"]


def test_healthcheck_daemonset_args_are_the_cli_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container's command line parses as `fleetdx k8s watch` options: run here (outside a pod) it gets as
    far as loading the in-cluster configuration, which is missing."""
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli.main import _register, app

    (c,) = _by_kind("healthcheck-daemonset.yaml")["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    assert c["command"][:3] == ["fleetdx", "k8s", "watch"] and "--taint-critical" in c["args"]
    monkeypatch.setenv("FLEETDX_K8S_NODE_NAME", "gpu-node-1")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    _register()
    res = CliRunner().invoke(app, [*c["command"][1:], *c["args"]])
    assert res.exit_code == 3 and "no Kubernetes API configuration" in res.output, res.output


#: the Debian package of each program the quick level runs (nvidia-smi comes from the NVIDIA Container Toolkit,
#: which mounts the node's own; coreutils is in every Debian base image)
QUICK_PROGRAM_PACKAGES = {
    "dmesg": "util-linux",
    "lscpu": "util-linux",
    "numactl": "numactl",
    "ibstat": "infiniband-diags",
    "uname": None,
    "nvidia-smi": None,
}


def test_containerfile_installs_every_program_the_quick_level_runs() -> None:
    from fleetdx.probes.catalog import commands
    from fleetdx.probes.contracts import Level

    programs = {spec.argv[0] for spec in commands(Level.QUICK)}
    assert programs <= set(QUICK_PROGRAM_PACKAGES), f"add the package of {programs - set(QUICK_PROGRAM_PACKAGES)}"
    text = (ROOT / "k8s" / "Containerfile").read_text()
    (install,) = [line for line in text.splitlines() if "apt-get install" in line]
    for program in programs:
        package = QUICK_PROGRAM_PACKAGES[program]
        assert package is None or package in install.split(), (program, package)
    import re

    (extras,) = re.findall(r"fleetdx\[([a-z0-9,]+)\]", text)
    # k8s: the DaemonSet; server and postgres: k8s/fleetdx-server.yaml's `fleetdx serve` over PostgreSQL
    assert {"k8s", "server", "postgres"} <= set(extras.split(",")) and "rayjob-preflight" not in text
    # the manifests name the same (placeholder) image
    images = {c["image"] for c in _by_kind("healthcheck-daemonset.yaml")["DaemonSet"]["spec"]["template"]["spec"][
        "containers"]}
    assert images == {_manifest()["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "image"]}


def test_admission_policy_lets_the_pod_mark_only_its_own_node() -> None:
    """The ValidatingAdmissionPolicy's CEL, evaluated with cel-python (core CEL only: has, in, map index): the
    healthcheck's token bound to node n1 may change n1, not n2; a token without a node name changes nothing;
    other users are not matched."""
    celpy = pytest.importorskip("celpy", reason="cel-python not installed (the test extra)")
    policy = _by_kind("healthcheck-rbac.yaml")["ValidatingAdmissionPolicy"]["spec"]
    env = celpy.Environment()

    def holds(expression: str, user: str, node: str, extra: dict[str, list[str]]) -> bool:
        activation = {
            "request": celpy.json_to_cel({"userInfo": {"username": user, "groups": [], "extra": extra}}),
            "object": celpy.json_to_cel({"metadata": {"name": node}}),
        }
        return bool(env.program(env.compile(expression)).evaluate(activation))

    (match,) = [m["expression"] for m in policy["matchConditions"]]
    (rule,) = [v["expression"] for v in policy["validations"]]
    pod_user = "system:serviceaccount:fleetdx:fleetdx-healthcheck"
    bound = {"authentication.kubernetes.io/node-name": ["n1"], "authentication.kubernetes.io/pod-name": ["p"]}
    assert holds(match, pod_user, "n1", bound) and not holds(match, "system:node:n1", "n1", {})
    assert holds(rule, pod_user, "n1", bound)
    assert not holds(rule, pod_user, "n2", bound)
    assert not holds(rule, pod_user, "n1", {})
