"""The parent's side of one runner slot: a wall-time worker process and a callgrind host,
both pinned to the slot's CPUs and restarted when a case kills or hangs them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from torchmark.callgrind.framing import TIMED_OUT, recv_frame_within, send_frame
from torchmark.core.errors import MeasurementError
from torchmark.core.procs import kill_group, pin

START_TIMEOUT_S = 300.0


class WorkerLost(MeasurementError):
    """The worker process died or stopped answering while it ran a case."""


class CaseFailed(MeasurementError):
    """The case itself raised (deterministic: not retried)."""


class WallWorker:
    """`python -m torchmark.suite.wall_worker`, started on first use."""

    def __init__(self, cpus: list[int] | None = None) -> None:
        self.cpus = cpus
        self._proc: subprocess.Popen | None = None
        self._req = self._resp = -1
        fd, name = tempfile.mkstemp(prefix="torchmark-wall-", suffix=".log")
        os.close(fd)
        self._log = Path(name)
        self.starts = 0

    def _start(self) -> None:
        req_r, self._req = os.pipe()
        self._resp, resp_w = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "torchmark.suite.wall_worker", "--requests", str(req_r),
                 "--responses", str(resp_w), "--log", str(self._log)], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, pass_fds=(req_r, resp_w), env=env,
                start_new_session=True)
        os.close(req_r)
        os.close(resp_w)
        pin(self._proc.pid, self.cpus)
        self.starts += 1
        self._receive(START_TIMEOUT_S, "start")

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""

    def _receive(self, timeout: float, what: str) -> dict:
        frame = recv_frame_within(self._resp, timeout, lambda: self._proc is not None
                                  and self._proc.poll() is None)
        if frame is TIMED_OUT:
            self.close(kill=True)
            raise WorkerLost(f"the wall-time worker timed out after {timeout:.0f} s ({what})")
        if frame is not None:
            return frame
        code = self._proc.wait() if self._proc is not None else None
        tail = self._log_tail()
        self.close(kill=True)
        reason = f"killed by signal {-code}" if code is not None and code < 0 else \
            f"exited with status {code}"
        raise WorkerLost(f"the wall-time worker {reason} during {what}"
                         + (f": {tail.splitlines()[-1]}" if tail else ""))

    def measure(self, request: dict, timeout: float) -> dict:
        if self._proc is None or self._proc.poll() is not None:
            self.close(kill=True)
            self._start()
        open(self._log, "wb").close()  # the log tail then belongs to this case
        send_frame(self._req, request)
        reply = self._receive(timeout, "a case")
        if not reply["ok"]:
            raise CaseFailed(reply["error"])
        return reply["wall"]

    def close(self, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            if kill:
                kill_group(proc)
            else:
                try:
                    send_frame(self._req, {"op": "shutdown"})
                    proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    kill_group(proc)
        for fd in (self._req, self._resp):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req = self._resp = -1

    def remove_log(self) -> None:
        self._log.unlink(missing_ok=True)
