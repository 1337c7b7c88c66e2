"""Shared fixtures: a deterministic fake clock for Timer and measurement builders."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from torchmark import Measurement, TaskSpec

# Tests use private callgrind hosts (closed at exit); the shared one is tested on its own.
os.environ["TORCHMARK_CALLGRIND_KEEPALIVE"] = "0"


class FakeTimeitTimer:
    """Stands in for `timeit.Timer`: `timeit(number)` returns a modelled time, no sleeping.

    cost(number) = overhead + number * per_run * (1 + noise), noise drawn from a seeded
    generator so every run of a test sees the same sequence.
    """

    per_run = 2e-6
    overhead = 1e-7
    noise = 0.02
    seed = 0

    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self.stmt, self.setup, self.timer, self.globals = stmt, setup, timer, globals
        self.calls: list[int] = []
        self._rng = random.Random(self.seed)

    def timeit(self, number: int) -> float:
        self.calls.append(number)
        jitter = 1 + self.noise * (2 * self._rng.random() - 1)
        return self.overhead + number * self.per_run * jitter


def make_measurement(median: float, spread: float = 0.02, n: int = 20, number: int = 100,
                     seed: int = 0, metadata: dict | None = None,
                     **task: object) -> Measurement:
    """A Measurement whose per-run times lie around `median` with relative `spread`."""
    rng = random.Random(seed)
    times = [median * (1 + spread * (2 * rng.random() - 1)) * number for _ in range(n)]
    task.setdefault("stmt", "f(x)")
    task.setdefault("setup", "pass")
    return Measurement(number_per_run=number, raw_times=times, task_spec=TaskSpec(**task),
                       metadata=metadata)


@pytest.fixture
def fake_timer_cls():
    return FakeTimeitTimer


requires_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                       reason="valgrind is not installed")
