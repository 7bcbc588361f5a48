"""A stand-in Kubernetes API server (NOT a real cluster: none can run on these machines, PLATFORM.md) that
implements only the three endpoints fleetdx's node writer calls, with the semantics the API documents:

* ``GET /api/v1/nodes/{name}``;
* ``PATCH /api/v1/nodes/{name}`` with ``application/strategic-merge-patch+json``: labels and annotations merged
  by key (a ``null`` value deletes the key),
  ``spec.taints`` replaced whole (the list has no merge key), ``metadata.resourceVersion`` in the patch is a
  precondition (409 Conflict when stale);
* ``PATCH /api/v1/nodes/{name}/status`` (strategic merge): ``status.conditions`` merged by ``type``.

Any other request, or another patch content type, is answered 415/404 so that a writer relying on more is caught.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STRATEGIC = "application/strategic-merge-patch+json"


def node_doc(name: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "resourceVersion": "1"},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                                   "lastHeartbeatTime": "2026-11-24T00:00:00Z",
                                   "lastTransitionTime": "2026-11-24T00:00:00Z"}]},
    }


class StandInApiServer:
    """Nodes in memory, served on 127.0.0.1; ``requests`` records (method, path, content type)."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.requests: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _status(self, code: int, reason: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                                  "code": code})

            def _node(self) -> tuple[str | None, bool]:
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:3] != ["api", "v1", "nodes"] or len(parts) not in (4, 5):
                    return None, False
                if len(parts) == 5 and parts[4] != "status":
                    return None, False
                return parts[3], len(parts) == 5

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                name, sub = self._node()
                outer.requests.append(("GET", self.path, ""))
                with outer.lock:
                    if name is None or sub or name not in outer.nodes:
                        return self._status(404, "NotFound")
                    return self._send(200, outer.nodes[name])

            def do_PATCH(self) -> None:  # noqa: N802
                name, sub = self._node()
                ctype = self.headers.get("Content-Type", "")
                outer.requests.append(("PATCH", self.path, ctype))
                patch = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                with outer.lock:
                    if name is None or name not in outer.nodes:
                        return self._status(404, "NotFound")
                    if ctype != STRATEGIC:
                        return self._status(415, "UnsupportedMediaType")
                    node = copy.deepcopy(outer.nodes[name])
                    meta = patch.get("metadata", {})
                    rv = meta.get("resourceVersion")
                    if rv is not None and rv != node["metadata"]["resourceVersion"]:
                        return self._status(409, "Conflict")
                    if sub:
                        conds = {c["type"]: c for c in node["status"]["conditions"]}
                        for c in patch.get("status", {}).get("conditions", []):
                            conds[c["type"]] = c
                        node["status"]["conditions"] = list(conds.values())
                    else:
                        for field in ("labels", "annotations"):  # maps merge by key; null deletes a key
                            merged = {**node["metadata"].get(field, {}), **meta.get(field, {})}
                            node["metadata"][field] = {k: v for k, v in merged.items() if v is not None}
                        if "taints" in patch.get("spec", {}):
                            node["spec"]["taints"] = patch["spec"]["taints"]
                    node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
                    outer.nodes[name] = node
                    return self._send(200, node)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandInApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
