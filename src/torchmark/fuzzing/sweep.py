"""A fuzzed sweep: one statement timed over a fuzzer's cases, each case an executor item.

The cases are drawn here, one by one as the executor has room for them (a fuzzer's
stream is sequential: case i's values follow from every case before it), and travel with
their items; a worker times the statement with the case's tensors and parameters as
globals (`blocked_autorange`) and returns a record: the case, its parameters and tensor
layouts, the Measurement, or the error the statement raised (the case's own failure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from torchmark.core.errors import USER_CODE_FAILURES, error_line
from torchmark.fuzzing.catalog import describe_case
from torchmark.fuzzing.fuzzer import Fuzzer


@dataclasses.dataclass(frozen=True)
class FuzzJob:
    """How an executor times fuzzed cases (torchmark.executors.base.Job)."""

    name: str  # the fuzzer, for labels
    stmt: str
    setup: str = "pass"
    min_run_time: float = 0.1
    threads: int = 1

    @property
    def key(self) -> str:
        return "fuzz:" + repr(dataclasses.astuple(self))

    def make_state(self, slot: int | None) -> None:
        return None

    def close_state(self, state: None, kill: bool = False) -> None:
        pass

    def run(self, state: None, item: Any, attempt: int) -> dict[str, Any]:
        from torchmark.timing.timer_class import Timer

        index, tensors, properties, params = item.payload
        record = self._record(item.id, describe_case(index, tensors, properties, params),
                              attempt)
        try:
            timer = Timer(self.stmt, self.setup, globals={**params, **tensors},
                          num_threads=self.threads, label=self.name,
                          sub_label=f"case {index}")
            m = timer.blocked_autorange(min_run_time=self.min_run_time)
        except USER_CODE_FAILURES as e:  # the statement's own error on this case
            return {**record, "status": "failed", "error": error_line(e)}
        return {**record, "status": "ok", "measurement": m.to_dict()}

    def lost(self, item: Any, error: str, attempts: int) -> dict[str, Any]:
        index, tensors, properties, params = item.payload
        return {**self._record(item.id, describe_case(index, tensors, properties, params),
                               attempts), "status": "failed", "error": error}

    @staticmethod
    def _record(item_id: str, case: dict[str, Any], attempts: int) -> dict[str, Any]:
        return {"type": "record", "id": item_id, **case, "measurement": None, "error": None,
                "attempts": attempts}


def fuzzed_items(fuzzer: Fuzzer, count: int) -> Iterator[Any]:
    """The executor items of `count` cases (CPU tensors), drawn as they are asked for."""
    from torchmark.executors.base import Item

    for index, (tensors, properties, params) in enumerate(fuzzer.take(count)):
        yield Item(f"{fuzzer.seed}:{index}", (index, tensors, properties, params), cpus=1.0)
