"""What an executor runs and what it hands back.

A front-end splits its work into `Item`s (an id, a payload, the CPUs and GPUs one needs)
and describes how to run one with a `Job`: `make_state` builds what a worker keeps
between items (the suite's wall-time worker and valgrind host, the ops runner's built
operator), `run` measures one item into a record (a case's own failure is a failed
record, never an exception), `lost` makes the failed record of an item that could not be
run (its worker or node lost too often). An `Executor` runs a Job's items and hands each
`Outcome` back as it finishes, in the calling process."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from torchmark.core.provenance import Provenance


@dataclasses.dataclass(frozen=True)
class Item:
    """One unit of work: `payload` goes to Job.run; `cpus` / `gpus` it occupies."""

    id: str
    payload: Any
    cpus: float = 1.0
    gpus: float = 0.0


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A finished item: its record, and the provenance of the node that measured it where
    that is not this process (a Ray node); None means here."""

    item_id: str
    record: dict[str, Any]
    provenance: Provenance | None = None


class Job(Protocol):
    """How to run items (see the module docstring). Picklable: Ray ships it to nodes."""

    @property
    def key(self) -> str:
        """A worker keeps one state a key (the options it was made for)."""

    def make_state(self, slot: int | None) -> Any:
        """A worker's state; `slot` numbers the local pool's workers (None on Ray)."""

    def close_state(self, state: Any, kill: bool = False) -> None:
        """Release a state: asked to exit, or (`kill`: interrupted) at once."""

    def run(self, state: Any, item: Item, attempt: int) -> dict[str, Any]:
        """Measure `item` (its `attempt`th try, from 1) into a record."""

    def lost(self, item: Item, error: str, attempts: int) -> dict[str, Any]:
        """The failed record of an item that could not be run."""


OnOutcome = Callable[[Outcome], Any]


class Shared(Protocol):
    def get(self) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Here:
    """A value shared within this process: itself."""

    value: Any

    def get(self) -> Any:
        return self.value


class Executor(Protocol):
    """Runs a Job's items (taken from the iterable as there is room for them: a fuzzer's
    cases are made one by one); `on_outcome` gets each as it finishes, in the calling
    process (from several threads in the local pool). Ctrl-C stops what is in flight (its items
    are not handed back) and is re-raised; what was handed back stays."""

    name: str
    remote: bool  # whether items may run on other machines (files a case needs travel)

    def run(self, job: Job, items: Iterable[Item], on_outcome: OnOutcome) -> None: ...

    def share(self, value: Any) -> Shared:
        """`value` for the items' workers to read (`.get()`), sent once however many
        items use it."""

    def describe(self) -> str:
        """Where the items run, for a progress line ("2 local workers", "Ray: ...")."""


def local_sys_path() -> tuple[str, ...]:
    """This process's sys.path without the folders importing Ray put on it (its vendored
    packages): what a process of a local run sees, for the processes a Ray worker starts
    to see the same (instruction counts move with it)."""
    ray = sys.modules.get("ray")
    folder = os.path.dirname(getattr(ray, "__file__", None) or "") if ray else ""
    if not folder:
        return tuple(sys.path)
    return tuple(p for p in sys.path if not os.path.abspath(p).startswith(folder + os.sep))
