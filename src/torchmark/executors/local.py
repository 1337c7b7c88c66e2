"""The local pool (the default executor): `workers` workers in this process, each with
its own Job state, taking items in order. One worker runs in the calling thread, taking
items as they come; more run in threads (the suite's slots: each drives its own worker
processes)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from torchmark.core.errors import error_line
from torchmark.executors.base import Here, Item, Job, OnOutcome, Outcome

STOP_WAIT_S = 10.0  # after Ctrl-C, how long the workers get to notice their states died


class LocalExecutor:
    name = "local"
    remote = False

    def __init__(self, workers: int = 1) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"local executor: workers must be an int >= 1, got {workers!r}")
        self.workers = workers

    def describe(self) -> str:
        return f"{self.workers} local worker{'s' if self.workers > 1 else ''}"

    def share(self, value: Any) -> Here:
        return Here(value)

    def run(self, job: Job, items: Iterable[Item], on_outcome: OnOutcome) -> None:
        if self.workers == 1:  # items taken as they come (a fuzzer's, made one by one)
            self._inline(job, items, on_outcome)
            return
        items = list(items)
        if items:
            self._threads(job, items, on_outcome, min(self.workers, len(items)))

    @staticmethod
    def _one(job: Job, state: Any, item: Item) -> dict[str, Any]:
        try:
            return job.run(state, item, 1)
        except Exception as e:  # a fault outside the case's own code: its failure alone
            return job.lost(item, error_line(e), 1)

    def _inline(self, job: Job, items: Iterable[Item], on_outcome: OnOutcome) -> None:
        state = None
        for item in items:
            if state is None:
                state = job.make_state(0)
            try:
                on_outcome(Outcome(item.id, self._one(job, state, item)))
            except BaseException:  # Ctrl-C mid-item: what it started is killed
                job.close_state(state, kill=True)
                raise
        if state is not None:
            job.close_state(state)

    def _threads(self, job: Job, items: list[Item], on_outcome: OnOutcome,
                 workers: int) -> None:
        pending: queue.Queue[Item] = queue.Queue()
        for item in items:
            pending.put(item)
        stop = threading.Event()
        states = [job.make_state(slot) for slot in range(workers)]

        def work(state: Any, finished: threading.Event) -> None:
            try:
                while not stop.is_set():
                    try:
                        item = pending.get_nowait()
                    except queue.Empty:
                        return
                    record = self._one(job, state, item)
                    # once stopped, an item's failure is the kill's, not its own: dropped
                    if not stop.is_set() or record.get("status") == "ok":
                        on_outcome(Outcome(item.id, record))
            finally:
                finished.set()

        # Waited on with Events: a Thread.join interrupted by Ctrl-C (Python < 3.13) marks
        # its thread as ended, and a later join returns at once.
        finished = [threading.Event() for _ in states]
        try:
            for state, event in zip(states, finished, strict=True):
                threading.Thread(target=work, args=(state, event), daemon=True).start()
            try:
                for event in finished:
                    while not event.wait(timeout=0.5):
                        pass
            except BaseException:
                stop.set()
                for state in states:  # the items in flight end now, unrecorded
                    job.close_state(state, kill=True)
                deadline = time.monotonic() + STOP_WAIT_S
                for event in finished:
                    event.wait(timeout=max(0.0, deadline - time.monotonic()))
                raise
        finally:
            for state in states:
                job.close_state(state)
