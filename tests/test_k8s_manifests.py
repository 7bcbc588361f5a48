"""The k8s/ examples validate against the KubeRay CRD schemas (ray.io/v1) copied in shared/schemas/kuberay/.

kubernetes-validate passes custom resources silently (PLATFORM.md), so RayJob manifests are checked with
jsonschema against the CRD's ``openAPIV3Schema``.
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
    entry = _manifest()["spec"]["entrypoint"].split()
    assert entry[:2] == ["fleetdx", "preflight"] and "--json" in entry


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
