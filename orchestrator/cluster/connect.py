"""Connecting to Ray with a deadline and a clear error.

``ray.init(address="auto")`` against a cluster that is gone (a stale ``/tmp/ray/ray_current_cluster``, a head
that died) retries "Failed to connect to GCS ... within 5 seconds" for many minutes. :func:`connect` checks that
the cluster's GCS answers a TCP connection first (a refused or silent address fails in seconds, naming the
address and where it came from), then runs ``ray.init`` under :data:`CONNECT_TIMEOUT_S`, quietly: Ray's own log
lines stay out of the command's stderr. A private local Ray (the default of ``preflight``) is started in the
calling thread: its processes die with the thread that started them.

``import ray`` happens inside the functions: the CLI must start fast.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path

from fleetdx.probes.errors import FleetdxError

#: default deadline for reaching a Ray cluster, seconds
CONNECT_TIMEOUT_S = 30.0
#: where Ray records the GCS address of the cluster this machine last started or joined (``ray start``)
RAY_CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")
#: the address that starts a private Ray on this machine
LOCAL = "local"


class RayUnavailable(FleetdxError):
    """No Ray cluster could be reached (or started) within the deadline; the message says where fleetdx
    looked and what to do."""


def resolve(address: str | None, default: str = LOCAL) -> tuple[str, str]:
    """The address to use and where it came from: ``address``, else ``$RAY_ADDRESS``, else ``default``."""
    if address:
        return address, "--ray-address"
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    return default, "default"


def gcs_of(address: str) -> str | None:
    """The ``host:port`` of the GCS that ``address`` names, ``None`` when it names none to check (``local``,
    a Ray Client ``ray://`` address). Raises :class:`RayUnavailable` for ``auto`` with no cluster recorded
    on this machine."""
    if address == LOCAL or address.startswith("ray://"):
        return None
    if address == "auto":
        try:
            return RAY_CURRENT_CLUSTER.read_text(encoding="utf-8").strip() or None
        except OSError:
            raise RayUnavailable(
                f"--ray-address auto: no Ray cluster on this machine ({RAY_CURRENT_CLUSTER} absent); "
                "start one with `ray start --head`, give --ray-address HOST:PORT, or omit it for a local Ray"
            ) from None
    return address


def check_gcs(gcs: str, timeout_s: float) -> None:
    """Raise :class:`RayUnavailable` unless a TCP connection to ``gcs`` (``host:port``) opens in
    ``timeout_s``."""
    host, _, port = gcs.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return
    except ValueError:
        raise RayUnavailable(f"Ray address {gcs!r} is not HOST:PORT") from None
    except OSError as e:
        raise RayUnavailable(
            f"the Ray cluster at {gcs} does not answer ({e.strerror or type(e).__name__}): "
            "is its head node up? (a stale /tmp/ray/ray_current_cluster: `ray stop`, or give --ray-address)"
        ) from None


def connect(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S, default: str = LOCAL) -> str:
    """Connect this process to Ray at ``address`` (else ``$RAY_ADDRESS``, else ``default``: ``local`` starts
    a private Ray on this machine, ``auto`` joins the one it belongs to) within ``timeout_s``; return a line
    saying which. Raises :class:`RayUnavailable` when that cannot be done in time (the reason and the
    address)."""
    import ray

    addr, source = resolve(address, default)
    logging.getLogger("ray").setLevel(logging.WARNING)  # keep Ray's INFO lines off the command's stderr
    gcs = gcs_of(addr)
    if gcs is not None:
        check_gcs(gcs, min(timeout_s, 5.0))
    failure: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(
                address=addr,  # "local" starts a private instance; None would join /tmp/ray's last cluster
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
            )
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            failure.append(e)

    if addr == LOCAL:
        # a local instance is started in this thread: Ray ties its GCS and raylet to the starting thread
        # (PR_SET_PDEATHSIG), so starting them on a watchdog thread killed them when it ended
        init()
        if failure:
            raise RayUnavailable(f"could not start a local Ray: {failure[0]}")
        return "Ray: started a local instance"
    worker = threading.Thread(target=init, name="fleetdx-ray-connect", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise RayUnavailable(f"could not connect to Ray at {addr} ({source}) within {timeout_s:g} s")
    if failure:
        raise RayUnavailable(f"could not connect to Ray at {addr} ({source}): {failure[0]}")
    return f"Ray: connected to {gcs or addr} ({source})"
