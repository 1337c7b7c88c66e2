"""What runs inside a Ray worker process: one item of a Job, on CPUs claimed for it.

The worker keeps the state of the last Job it ran (the suite's wall-time worker and
valgrind host, an ops run's built operator) for the next item of the same Job, and
captures its node's provenance once. Before a Job's first item it takes the driver's
measurement settings (`settings`: the variables that steer torch, its thread pools and
valgrind) in place of its own, as a local run would have them: without that, a variable
Ray sets (OMP_NUM_THREADS) or one the driver's shell had and the node's lacked changes
what is measured (instruction counts move with the environment's very size). Ray counts CPUs but does not pin: each item claims
as many of the node's CPUs as it occupies (a lock file per CPU, so two items on one node
never share one) and the worker is pinned to them while it runs (the processes it
starts are pinned per case to the same). Without enough free CPUs it runs unpinned."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from torchmark.core.errors import error_line
from torchmark.executors.base import Item, Job

_current: tuple[str, Any, Job] | None = None  # (job key, state, job)
_provenance: dict[str, Any] | None = None


# the variables that travel from the driver (CUDA_* and NVIDIA_* stay the node's: Ray
# assigns its GPUs with them)
SETTINGS_PREFIXES = ("TORCH", "PYTORCH_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "GOMP_",
                     "VALGRIND_", "DNNL_", "ONEDNN_", "ATEN_")


# never sent: the store's URL (and its password); nodes record nothing themselves
NOT_SETTINGS = ("TORCHMARK_DB",)
EXECUTABLE = "sys.executable"  # the driver's interpreter, a key of the settings


def measurement_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that travel with a Job (SETTINGS_PREFIXES), and this
    interpreter's path (the processes a worker starts run it by that name where it is
    the same file: `python` and `python3.11` start Python with argv of other sizes)."""
    return {EXECUTABLE: sys.executable,
            **{k: v for k, v in environ.items()
               if k.startswith(SETTINGS_PREFIXES) and k not in NOT_SETTINGS}}


def _take_settings(settings: dict[str, str]) -> None:
    settings = dict(settings)
    executable = settings.pop(EXECUTABLE, None)
    for name in measurement_settings(os.environ):
        if name != EXECUTABLE and name not in settings:
            del os.environ[name]
    os.environ.update(settings)
    if executable and executable != sys.executable:
        with contextlib.suppress(OSError):
            if os.path.samefile(executable, sys.executable):
                sys.executable = executable


def run_item(job: Job, settings: dict[str, str], item: Item,
             attempt: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ray's task: (the item's record, this node's provenance as a dict)."""
    with claimed_cpus(math.ceil(item.cpus)):
        try:
            record = job.run(_state(job, settings), item, attempt)
        except Exception as e:  # a fault outside the case's own code: its failure alone
            record = job.lost(item, error_line(e), attempt)
    return record, provenance()


def provenance() -> dict[str, Any]:
    global _provenance
    if _provenance is None:
        from torchmark.core.provenance import Provenance

        _provenance = Provenance.capture(command=[]).to_dict()
    return _provenance


def _state(job: Job, settings: dict[str, str]) -> Any:
    global _current
    key = repr((job.key, sorted(settings.items())))
    if _current is not None and _current[0] == key:
        return _current[1]
    close()
    _take_settings(settings)
    state = job.make_state(None)
    _current = (key, state, job)
    return state


def close() -> None:
    """Release the kept state (at the worker's exit, or when another Job comes)."""
    global _current
    current, _current = _current, None
    if current is not None:
        with contextlib.suppress(Exception):
            current[2].close_state(current[1])


atexit.register(close)


def _lock_folder() -> Path:
    folder = Path(tempfile.gettempdir()) / f"torchmark-cpus-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


@contextlib.contextmanager
def claimed_cpus(count: int) -> Iterator[list[int] | None]:
    """Pin this process to `count` CPUs no other item on this node holds, for the block;
    None (unpinned) when that many are not free or pinning is not possible."""
    if count < 1 or not hasattr(os, "sched_getaffinity"):
        yield None
        return
    every = sorted(os.sched_getaffinity(0))
    held: list[tuple[int, int]] = []
    try:
        folder = _lock_folder()
        for cpu in every:
            if len(held) == count:
                break
            fd = os.open(folder / f"cpu{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            held.append((cpu, fd))
        cpus = [cpu for cpu, _ in held] if len(held) == count else None
        if cpus is not None:
            try:
                os.sched_setaffinity(0, cpus)
            except OSError:
                cpus = None
        try:
            yield cpus
        finally:
            if cpus is not None:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, every)
    finally:
        for _, fd in held:
            os.close(fd)  # the lock goes with it (and with the process, if it is killed)
