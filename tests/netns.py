"""Helpers for tests that build several "hosts" out of Linux network namespaces on one machine.

Layout: one bridge namespace holding bridge ``br0``; each host namespace has a veth ``eth0`` (address
``10.<net>.0.<i+1>/24``) whose peer sits in the bridge namespace. The /24 exists only inside these namespaces
(no default route: nothing leaves them). A host's link is throttled with ``tc ... tbf`` on both ends of its
veth (PLATFORM.md: this kernel has no netem; tbf works). Everything created is removed by
:meth:`NetnsLab.close`, and every process started inside the namespaces is stopped by PID (``ip netns pids``).

Needs root and iproute2; :func:`netns_unavailable` says why not when it cannot work here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def netns_unavailable() -> str | None:
    """Why namespaces cannot be used here (a reason to skip), or ``None`` when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) not installed"
    name = f"fdxprobe{uuid.uuid4().hex[:6]}"
    try:
        r = _ip("netns", "add", name, check=False)
        if r.returncode != 0:
            return f"ip netns add not permitted: {r.stderr.strip()}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


@dataclass
class NetnsLab:
    """A set of namespaced hosts on one bridge. Use as a context manager."""

    n_hosts: int
    net: int = 201  #: second octet of the private 10.x.0.0/24
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def bridge_ns(self) -> str:
        return f"fdx{self.tag}br"

    def ns(self, i: int) -> str:
        return f"fdx{self.tag}h{i}"

    def addr(self, i: int) -> str:
        return f"10.{self.net}.0.{i + 1}"

    def __enter__(self) -> NetnsLab:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        br = self.bridge_ns
        _ip("netns", "add", br)
        _ip("-n", br, "link", "set", "lo", "up")
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "up")
        for i in range(self.n_hosts):
            ns = self.ns(i)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", f"fdx{self.tag}v{i}", "type", "veth", "peer", "name", f"fdx{self.tag}p{i}")
            _ip("link", "set", f"fdx{self.tag}v{i}", "netns", ns)
            _ip("link", "set", f"fdx{self.tag}p{i}", "netns", br)
            _ip("-n", ns, "link", "set", f"fdx{self.tag}v{i}", "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", br, "link", "set", f"fdx{self.tag}p{i}", "master", "br0")
            _ip("-n", br, "link", "set", f"fdx{self.tag}p{i}", "up")

    def throttle(self, i: int, rate: str = "100mbit") -> None:
        """Rate-limit host ``i``'s link in both directions with a token bucket filter."""
        tbf = ["root", "tbf", "rate", rate, "burst", "32kbit", "latency", "50ms"]
        subprocess.run(
            ["ip", "netns", "exec", self.ns(i), "tc", "qdisc", "add", "dev", "eth0", *tbf],
            check=True,
            capture_output=True,
            timeout=30,
        )
        subprocess.run(
            ["ip", "netns", "exec", self.bridge_ns, "tc", "qdisc", "add", "dev", f"fdx{self.tag}p{i}", *tbf],
            check=True,
            capture_output=True,
            timeout=30,
        )

    def popen(
        self, i: int, argv: Sequence[str], env: Mapping[str, str] | None = None, log: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside host ``i``'s namespace, in a new session; remembered for :meth:`close`."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        p = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(i), *argv],
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(p)
        return p

    def run(
        self, i: int, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to completion inside host ``i``'s namespace."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        return subprocess.run(
            ["ip", "netns", "exec", self.ns(i), *argv],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _ns_pids(self) -> list[int]:
        pids: list[int] = []
        for ns in [self.ns(i) for i in range(self.n_hosts)] + [self.bridge_ns]:
            r = _ip("netns", "pids", ns, check=False)
            pids.extend(int(p) for p in r.stdout.split() if p.strip().isdigit())
        return pids

    def stop_processes(self) -> None:
        """SIGTERM then SIGKILL every process started here and every process left inside our namespaces."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in self.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            for pid in self._ns_pids():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and (
                self._ns_pids() or any(p.poll() is None for p in self.procs)
            ):
                time.sleep(0.1)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        """Stop every process, then delete every namespace (their veths go with them)."""
        self.stop_processes()
        for ns in [self.ns(i) for i in range(self.n_hosts)] + [self.bridge_ns]:
            _ip("netns", "del", ns, check=False)
