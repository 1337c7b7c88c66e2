"""Process helpers shared by the workers: CPU pinning and killing a process group."""

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
