"""A throw-away Ray cluster for the tests: `ray start --head --block` in a session of its
own (its folder, its ports), stopped with everything it started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    # what its drivers need too: no token (loopback only; Ray's token, ~/.ray/auth_token,
    # is shared by every cluster of this user, which tests must not depend on)
    env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}

    def __init__(self, cpus: int = 2) -> None:
        # short: Ray's socket paths live under it (108 characters at most)
        self.folder = Path(tempfile.mkdtemp(prefix="tmray-", dir="/tmp"))
        ray = Path(sys.executable).parent / "ray"
        ports = {name: _free_port() for name in (
            "dashboard-port", "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")}
        self.log = open(self.folder / "start.log", "wb")
        self.proc = subprocess.Popen(
            [str(ray), "start", "--head", "--port=0", f"--num-cpus={cpus}",
             "--include-dashboard=false", "--disable-usage-stats",
             f"--temp-dir={self.folder}", "--block",
             *(f"--{name}={port}" for name, port in ports.items())],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, **self.env))
        try:
            self.address = self._await_address()
        except BaseException:
            self.stop()
            raise

    def _await_address(self) -> str:
        marker = self.folder / "ray_current_cluster"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ray start failed: "
                                   + (self.folder / "start.log").read_text()[-2000:])
            text = marker.read_text().strip() if marker.exists() else ""
            if text and "Ray runtime started" in (self.folder / "start.log").read_text():
                return text
            time.sleep(0.2)
        raise TimeoutError(f"ray start did not start in {START_TIMEOUT_S} s")

    def processes(self, title: str) -> list[int]:
        """The pids of this cluster's live processes (its session, and their children in
        sessions of their own, as Ray workers are) whose command line starts with `title`
        (a Ray worker running a task is titled ray::FUNCTION)."""
        table: dict[int, tuple[int, int, str]] = {}  # pid -> (parent, group, command)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] == "Z":
                    continue
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            table[int(entry.name)] = (int(stat[1]), int(stat[2]), cmdline)
        members = {pid for pid, (_, group, _) in table.items() if group == self.proc.pid}
        while True:
            more = {pid for pid, (parent, _, _) in table.items()
                    if parent in members and pid not in members}
            if not more:
                break
            members |= more
        return sorted(pid for pid in members if table[pid][2].startswith(title))

    def stop(self) -> None:
        """SIGTERM to the cluster, SIGKILL to whatever of it is left after 5 s."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            self.proc.poll()  # reaped once it exits (else it would count as left)
            if not self.processes(""):
                break
            time.sleep(0.2)
        for pid in self.processes(""):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
