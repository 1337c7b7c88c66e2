"""Wall time over several fresh processes (pyperf's way).

A process's speed depends on where its code and data landed in memory, drawn anew at
every start: on the development machine one process ran a pure-Python loop 430, 520,
600, 680 or 760 us a call, for its whole life (docs/ab.md). One process's measurement,
however long, reads one draw, and two saved runs are two draws: their difference is
not the statement's. `measure_in_processes` times the statement in `processes` fresh
workers (the `ab --python` workers, in this interpreter), one after the other, each
pinned to the idlest CPU for its share of `min_run_time`, with one block size (the first
worker's choice); the Measurement pools their blocks and keeps each process's median in
its metadata ("processes"), which `ab_test` then compares as replicates
(compare/ab.py)."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from torchmark.compare.env_ab import (
    PREPARE_TIMEOUT_S,
    EnvWorker,
    RemoteSource,
    worker_path,
)
from torchmark.compare.env_messages import Prepare, Prepared
from torchmark.core.errors import MeasurementError, UsageError
from torchmark.core.procs import idlest_cpus
from torchmark.timing.measurement import MAX_PROCESSES, Measurement

DEFAULT_PROCESSES = 5  # the fewest that can give a two-sided p under 0.01 (ab_test)
MIN_BLOCKS = 5  # blocks a process, at least

# called after each timed block: (process index, runs in the block, seconds it took)
ProcessCallback = Callable[[int, int, float], None]


def measure_in_processes(stmt: str = "pass", setup: str = "pass", *,
                         processes: int = DEFAULT_PROCESSES, min_run_time: float = 1.0,
                         num_threads: int = 1, label: str | None = None,
                         sub_label: str | None = None, description: str | None = None,
                         env: str | None = None, callback: ProcessCallback | None = None,
                         command: Sequence[str] = ()) -> Measurement:
    """Wall time of `stmt` (after `setup`) in `processes` fresh processes of this
    interpreter, `min_run_time` seconds in all (see the module docstring). The
    Measurement's times are every process's blocks; its metadata's "processes" holds
    their count, each one's median a run, its own spread (IQR / median) and the CPUs
    each ran on."""
    for name, code in (("stmt", stmt), ("setup", setup)):
        if not isinstance(code, str):
            raise UsageError(f"measure_in_processes: {name} must be a str, got "
                             f"{type(code).__name__}")
    if isinstance(processes, bool) or not isinstance(processes, int) or \
            not 1 <= processes <= MAX_PROCESSES:
        raise UsageError(f"measure_in_processes: processes must be an int from 1 to "
                         f"{MAX_PROCESSES}, got {processes!r}")
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, (int, float)) \
            or not min_run_time > 0:
        raise UsageError(f"measure_in_processes: min_run_time must be a number above 0, "
                         f"got {min_run_time!r}")
    request = Prepare(stmt, setup, num_threads, label, env or "", "wall", tuple(command))
    with tempfile.TemporaryDirectory(prefix="torchmark-processes-") as tmp:
        folder = worker_path(Path(tmp))
        workers: list[EnvWorker] = []
        ok = False
        try:
            # all start at once, unpinned: torch imports in parallel
            for k in range(processes):
                workers.append(EnvWorker(sys.executable, "", folder, f"p{k}.log",
                                         f"process {k + 1} of {processes}",
                                         kind="worker"))
            for w in workers:
                w.ready()
                w.send(request, "making the Timer")
            prepared = [w.receive(PREPARE_TIMEOUT_S, "making the Timer") for w in workers]
            for w, reply in zip(workers, prepared, strict=True):
                if not isinstance(reply, Prepared):
                    raise MeasurementError(f"{w.name}: answered {type(reply).__name__} "
                                           "to Prepare")
            blocks, number, cpus = _time_each(workers, float(min_run_time), num_threads,
                                              callback)
            ok = True
        finally:
            for w in workers:
                w.close(kill=not ok)
    spec = dataclasses.replace(prepared[0].task_spec, sub_label=sub_label,
                               description=description)
    each = [Measurement(number, times, spec) for times in blocks]
    return Measurement(number, [t for times in blocks for t in times], spec, metadata={
        "processes": {"count": processes, "medians": [m.median for m in each],
                      "spreads": [m.iqr / m.median for m in each], "cpus": cpus}})


def _time_each(workers: list[EnvWorker], min_run_time: float, num_threads: int,
               callback: ProcessCallback | None
               ) -> tuple[list[list[float]], int, list[list[int]]]:
    """Each worker in turn, pinned to the idlest CPUs, times blocks of one size (the
    first worker's estimate; the others warm up with their own, not kept) until it has
    its share of `min_run_time` and MIN_BLOCKS blocks; a worker is closed once done.
    Each worker's block times, the block size and the CPUs each could run on."""
    share = min_run_time / len(workers)
    number: int | None = None
    blocks: list[list[float]] = []
    cpus: list[list[int]] = []
    for k, worker in enumerate(workers):
        cpus.append(sorted(worker.pin(idlest_cpus(num_threads) or None)))
        source = RemoteSource(worker)
        estimate = source.estimate_block_size(min_run_time)  # also the warm-up
        number = number or estimate
        times: list[float] = []
        while sum(times) < share or len(times) < MIN_BLOCKS:
            times.append(source.time_block(number))
            if callback is not None:
                callback(k, number, times[-1])
        blocks.append(times)
        worker.close()
    assert number is not None
    return blocks, number, cpus
