"""The messages between a runner slot (workers.WallWorker) and its wall-time worker
process (wall_worker.py), as typed records sent as pickled frames (core/framing.py)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class WorkerReady:
    """The worker's first frame: torch imported, ready for cases."""

    pid: int


@dataclasses.dataclass(frozen=True)
class WallRequest:
    """Measure one case: its TimerArgs (as a dict), for `min_run_time` seconds, pinned to
    `cpus`; a C++ case's bundle library and entry point suffix."""

    timer_args: dict[str, Any]
    min_run_time: float
    cpus: tuple[int, ...] | None = None
    library: str | None = None
    entry_suffix: str = ""


@dataclasses.dataclass(frozen=True)
class WallTimes:
    """A case's blocked_autorange: per-run times and their summary."""

    median: float
    mean: float
    iqr: float
    number_per_run: int
    times: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """As the suite's results file records it."""
        return {**dataclasses.asdict(self), "times": list(self.times)}


@dataclasses.dataclass(frozen=True)
class WallFailed:
    """The case raised: its error line and traceback (the worker goes on)."""

    error: str
    traceback: str


@dataclasses.dataclass(frozen=True)
class Stop:
    """Exit now."""
