"""The messages between the cross-environment A/B driver (env_ab.py) and a worker in
another Python environment (env_worker.py), as typed records sent as pickled frames
(core/framing.py). Both ends run the driver's torchmark, so the records are the same
classes on both sides."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class WorkerReady:
    """The worker's first frame: torch imported, ready for requests."""

    pid: int
    python: str  # "CPython 3.11.7"
    torch_version: str
    torch_folder: str


@dataclasses.dataclass(frozen=True)
class StartFailed:
    """The worker's first frame when torch cannot be imported in its environment."""

    error: str


@dataclasses.dataclass(frozen=True)
class Prepare:
    """Make the Timer of `stmt` (and start the callgrind host for "instructions"); the
    answer is a Prepared. `env` labels the Timer and the provenance; `command` is the
    driver's command line, as the provenance records it."""

    stmt: str
    setup: str
    num_threads: int
    label: str | None
    env: str
    metric: str
    command: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The Timer's task spec, this environment's provenance (its torch, its Python) and
    the CPUs the worker may run on."""

    task_spec: Any  # TaskSpec
    provenance: Any  # Provenance
    cpus: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class EstimateBlock:
    """blocked_autorange's block size for `min_run_time` (also a warm-up): a Value(int)."""

    min_run_time: float


@dataclasses.dataclass(frozen=True)
class TimeBlock:
    """Time one block of `number` runs: a Value(seconds)."""

    number: int


@dataclasses.dataclass(frozen=True)
class ClockOverhead:
    """The time of an empty block: a Value(seconds)."""


@dataclasses.dataclass(frozen=True)
class CountBlock:
    """Count the instructions of `number` runs (one repeat, no baseline): a
    Value(CallgrindStats)."""

    number: int


@dataclasses.dataclass(frozen=True)
class Value:
    """A request's answer."""

    value: Any


@dataclasses.dataclass(frozen=True)
class Failed:
    """The request raised (the statement, its setup, the collector): its error line and
    traceback. The worker goes on."""

    error: str
    traceback: str


@dataclasses.dataclass(frozen=True)
class Stop:
    """Exit now."""
