"""The parent's side of one runner slot: a wall-time worker process and a callgrind host,
both pinned to the slot's CPUs and restarted when a case kills or hangs them."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from torchmark.core.errors import MeasurementError
from torchmark.core.worker import ChildLost, PipedChild, driver_folder_env
from torchmark.suite.wall_messages import Stop, WallFailed, WallRequest, WallTimes

START_TIMEOUT_S = 300.0


class WorkerLost(MeasurementError):
    """The worker process died or stopped answering while it ran a case."""


class CaseFailed(MeasurementError):
    """The case itself raised (deterministic: not retried)."""


class WallWorker:
    """`python -m torchmark.suite.wall_worker`, started on first use (a PipedChild)."""

    def __init__(self, cpus: list[int] | None = None) -> None:
        self.cpus = cpus
        self._child: PipedChild | None = None
        fd, name = tempfile.mkstemp(prefix="torchmark-wall-", suffix=".log")
        os.close(fd)
        self._log = Path(name)
        self.starts = 0

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
                   **driver_folder_env())
        self._child = PipedChild(
            lambda requests, responses: [
                sys.executable, "-m", "torchmark.suite.wall_worker", "--requests",
                str(requests), "--responses", str(responses), "--log", str(self._log)],
            log=self._log, shutdown=Stop(), env=env, cpus=self.cpus,
            name="wall-time worker")
        self.starts += 1
        self._receive(START_TIMEOUT_S, "start")

    def _receive(self, timeout: float, what: str) -> Any:
        assert self._child is not None
        try:
            return self._child.receive(timeout, what)
        except ChildLost as e:
            self._child = None
            last = e.log_tail.strip().splitlines()[-1:] if not e.timed_out else []
            raise WorkerLost(str(e) + (f": {last[0]}" if last else "")) from None

    def measure(self, request: WallRequest, timeout: float) -> WallTimes:
        if self._child is None or not self._child.running:
            self.close(kill=True)
            self._start()
        open(self._log, "wb").close()  # the log tail then belongs to this case
        assert self._child is not None
        self._child.send(request)
        reply = self._receive(timeout, "a case")
        if isinstance(reply, WallFailed):
            raise CaseFailed(reply.error)
        if not isinstance(reply, WallTimes):
            self.close(kill=True)
            raise WorkerLost(f"the wall-time worker answered {type(reply).__name__}")
        return reply

    def close(self, kill: bool = False) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.close(kill=kill)

    def remove_log(self) -> None:
        self._log.unlink(missing_ok=True)
