"""fleetdx: diagnostics for distributed GPU training on Slurm and Kubernetes clusters.

The one import package of the distribution. Its subpackages live in the repository's top-level folders
(``fleetdx/probes`` and its siblings are symlinks to them; a built wheel holds real copies), so a training
environment gains no generic top-level module:

* :mod:`fleetdx.probes` (``probes/``): what runs on one node: the runner, the probe catalog, bundles, pure
  parsers of tool output, node-local measurements;
* :mod:`fleetdx.topology` (``topology/``): the GPU/NIC/CPU graph model and its pure analyses;
* :mod:`fleetdx.orchestrator` (``orchestrator/``): Ray fan-out, diagnosis, the three jobs, store, scheduler
  adapters, CLI and HTTP service.

Imports point down that list, never back up (import-linter contracts in ``pyproject.toml``).
"""

__version__ = "0.2.0"
