"""Process helpers shared by the workers: CPU pinning (and the idlest CPUs to pin to),
killing a process group, whether a process still runs, and what tells a process apart
from another given its pid later (the boot, its start)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def pin(pid: int, cpus: list[int] | None) -> None:
    """Restrict `pid` and every thread it has started to `cpus` (best effort: containers
    may forbid it; a thread started later inherits the affinity of the one starting it)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return
    try:
        threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        threads = [pid]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


def idlest_cpus(count: int, over: float = 0.2) -> list[int]:
    """The `count` CPUs this process may use that were idlest over the next `over`
    seconds (/proc/stat), the highest-numbered first among equals; the last `count`
    allowed ones where /proc/stat cannot tell; [] where affinity is not supported."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    allowed = sorted(os.sched_getaffinity(0))

    def idle() -> dict[int, int]:
        ticks: dict[int, int] = {}
        with open("/proc/stat") as f:
            for line in f:
                name, *values = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and len(values) > 4:
                    ticks[int(name[3:])] = int(values[3]) + int(values[4])  # idle, iowait
        return ticks

    try:
        before = idle()
        time.sleep(over)
        after = idle()
    except (OSError, ValueError):
        return allowed[-count:]
    ranked = sorted(allowed, key=lambda cpu: (after.get(cpu, 0) - before.get(cpu, 0), cpu),
                    reverse=True)
    return sorted(ranked[:count])


def boot_id() -> str | None:
    """This boot's id (Linux), else None."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def process_start(pid: int) -> tuple[int, str] | None:
    """A process's start (clock ticks after boot) and state ("Z": a zombie), from Linux
    /proc; None where it cannot be read (no such process, not Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[19]), fields[0]
    except (OSError, ValueError, IndexError):
        return None


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
