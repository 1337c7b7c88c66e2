"""A store with history, for the report's tests and benchmarks/report_speed.py: wall-time
cases measured over many runs, some of them 25% slower from a run on."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np

from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.store import Store


def build_store(url: str, cases: int = 3, runs: int = 30, step_case: int = 1,
                step_at: int = 15, samples: int = 40, step_every: int = 0,
                second_machine: int = 0) -> Store:
    """`runs` runs an hour apart of `cases` wall-time cases (1% noise); case `step_case`
    (and with `step_every` N, every N-th case) takes 25% longer from run `step_at` on.
    `second_machine` N: then N runs on another machine ("box-b", 10% slower, no step)
    of the last N runs' commits."""
    store = Store(url)
    rng = np.random.default_rng(7)
    base = Provenance.capture(env="ci")
    first = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)
    all_cases = [Case(id=f"timeit:case{i}", frontend="timeit", stmt=f"torch.mul(x, {i})",
                      label="mul", sub_label=f"n={i}") for i in range(cases)]
    stepped = {i for i in range(cases) if i == step_case or (step_every and i % step_every == 0)}
    box_b = dataclasses.replace(base, machine=dataclasses.replace(base.machine,
                                                                  hostname="box-b"))
    plan = [(base, k) for k in range(runs)] + \
        [(box_b, k) for k in range(runs - second_machine, runs)]
    for machine, k in plan:
        when = first + dt.timedelta(hours=k)
        provenance = dataclasses.replace(machine, git_commit=f"{k:04d}" + "ab" * 18,
                                         git_dirty=False, git_commit_date=when.isoformat(),
                                         git_commit_subject=f"Change number {k}",
                                         started=when.isoformat())
        run = store.start_run(provenance)
        results = []
        for i, case in enumerate(all_cases):
            level = 1e-5 * (1 + i % 10) * (1.1 if machine is box_b else 1.25
                                           if i in stepped and k >= step_at else 1.0)
            noisy = level * (1 + 0.01 * rng.standard_normal(samples))
            results.append(Result(case=case, metric="wall", unit="s", number_per_run=100,
                                  samples=tuple(noisy)))
        store.record(results, run)
        store.finish_run(run, "ok")
    return store
