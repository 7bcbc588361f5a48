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
