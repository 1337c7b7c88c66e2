"""A child process spoken to over two pipes with length-prefixed frames (core.framing):
started with its descriptors passed (the command may spell their numbers its own way),
its output going to a log file, pinned to CPUs, in a session of its own (so a kill takes
every process it forked); answers awaited with a timeout while it is alive; crashes and
timeouts told apart and reported with the log's tail; closed by its shutdown message or a
kill. The messages are each protocol's own typed records (suite/wall_messages.py,
callgrind/messages.py, compare/env_messages.py). The suite's wall-time worker, the
callgrind host and the workers of an A/B across environments are each one.

A child starts in NEUTRAL_CWD, never in the driver's working folder: `python -m` puts the
folder it starts in first on the import path, where a planted `torch.py` would run in
every worker (and the folder's name, part of the host's memory, moved instruction
counts). A worker that runs user code goes back to the driver's folder once started
(`enter_driver_folder`), for relative file names, without it on the import path."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchmark.core.errors import MeasurementError
from torchmark.core.framing import TIMED_OUT, recv_frame_within, send_frame
from torchmark.core.procs import kill_group, pin

NEUTRAL_CWD = "/"  # where every child starts: the same folder whoever starts it
DRIVER_CWD_ENV = "TORCHMARK_WORKER_CWD"  # the driver's working folder, for the worker


def driver_folder_env() -> dict[str, str]:
    """The variable that tells a worker the driver's working folder."""
    return {DRIVER_CWD_ENV: os.getcwd()}


def enter_driver_folder() -> None:
    """In a started worker: change to the driver's working folder (relative file names
    in user code then mean what they meant to the driver); the import path keeps the
    folder the worker started in."""
    folder = os.environ.pop(DRIVER_CWD_ENV, None)
    if folder and os.path.isdir(folder):
        os.chdir(folder)


class ChildLost(MeasurementError):
    """The child died or did not answer in time while doing `what`."""

    def __init__(self, message: str, log_tail: str = "", timed_out: bool = False,
                 exit_code: int | None = None) -> None:
        super().__init__(message)
        self.log_tail, self.timed_out, self.exit_code = log_tail, timed_out, exit_code


class PipedChild:
    """One started child; see the module docstring."""

    def __init__(self, command: Callable[[int, int], Sequence[str]], *, log: Path,
                 shutdown: Any,
                 env: dict[str, str] | Callable[[list[str]], dict[str, str]] | None = None,
                 cpus: Sequence[int] | None = None, name: str = "worker",
                 log_tail_chars: int = 2000, pass_fds: Sequence[int] = ()) -> None:
        """Start `command(requests_fd, responses_fd)`: the child reads frames from the
        first descriptor and writes its answers to the second; `shutdown` is the message
        that asks it to exit. `env` may be a function of the command line (the callgrind
        host's environment is sized with it). `pass_fds`: more descriptors the child
        inherits (under the same numbers)."""
        self.name, self.log, self._tail = name, Path(log), log_tail_chars
        self.shutdown = shutdown
        requests_r, self.requests_fd = os.pipe()
        self.responses_fd, responses_w = os.pipe()
        try:
            argv = list(command(requests_r, responses_w))
            with open(self.log, "wb") as out:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    pass_fds=(requests_r, responses_w, *pass_fds), cwd=NEUTRAL_CWD,
                    env=env(argv) if callable(env) else env, start_new_session=True)
        except BaseException:
            for fd in (self.requests_fd, self.responses_fd):
                os.close(fd)
            raise
        finally:
            os.close(requests_r)
            os.close(responses_w)
        pin(self.proc.pid, list(cpus) if cpus else None)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-self._tail:]
        except OSError:
            return ""

    def send(self, frame: Any) -> None:
        send_frame(self.requests_fd, frame)

    def receive(self, timeout: float, what: str) -> Any:
        """The child's next frame; ChildLost when it exits or takes over `timeout` s (it
        is then killed, with whatever it forked)."""
        frame = recv_frame_within(self.responses_fd, timeout, lambda: self.running)
        if frame is TIMED_OUT:
            tail = self.log_tail()
            self.close(kill=True)
            raise ChildLost(f"the {self.name} timed out after {timeout:.0f} s ({what})",
                            tail, timed_out=True)
        if frame is not None:
            return frame
        code = self.proc.wait()
        tail = self.log_tail()
        self.close(kill=True)
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        raise ChildLost(f"the {self.name} {how} during {what}", tail, exit_code=code)

    def close(self, kill: bool = False, grace: float = 10.0) -> None:
        """Ask the child to exit (its shutdown message) and wait up to `grace` seconds,
        or kill it and every process it forked; then close the pipes. Calling it again
        does nothing."""
        if self.proc.poll() is None:
            if not kill:
                try:
                    send_frame(self.requests_fd, self.shutdown)
                    self.proc.wait(timeout=grace)
                except (OSError, subprocess.TimeoutExpired):
                    kill = True
            if kill:
                kill_group(self.proc)
        for fd in (self.requests_fd, self.responses_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.requests_fd = self.responses_fd = -1
