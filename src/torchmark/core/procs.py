"""Process helpers shared by the workers: CPU pinning, killing a process group, and
whether a process still runs."""

from __future__ import annotations

import os
import signal
import subprocess


def pin(pid: int, cpus: list[int] | None) -> None:
    """Restrict `pid` to `cpus` (best effort: containers may forbid it)."""
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError:
            pass


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists; signalling it is not ours to do
        pass
    return True


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a process started with start_new_session=True and everything it forked."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
