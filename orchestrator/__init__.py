"""Fan-out over Ray, cross-node collective probes, diagnosis, storage, the CLI and the HTTP API.

Imports point down: ``orchestrator`` may import ``topology`` and ``probes``, never the other way.
"""
