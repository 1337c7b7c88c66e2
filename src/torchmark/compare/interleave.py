"""Interleaved A/B timing: blocks of two Timers alternate, so drift hits both alike.

Measuring A for a second and then B for a second lets anything that changes in
between (another job on a shared machine, a CPU that warms up, a turbo budget that runs
out) look like a difference between A and B. Here each side's block size is chosen as
`blocked_autorange` does, then shortened (down to blocks whose clock overhead is
0.1% of them, or a hundredth of `min_run_time`) and scaled so that an A block and a B
block take about as long; the blocks alternate A B B A A B B A ... (which cancels a
linear drift within every four blocks) until each side has at least `min_run_time`
seconds and `min_blocks` blocks. Block i of A and block i of B ran side by side, so `measure_ab` compares them as
pairs: a slow spell of the machine slows both blocks of a pair, and their ratio keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchmark.timing.measurement import Measurement

if TYPE_CHECKING:
    from torchmark.compare.ab import ABResult
    from torchmark.timing.timer_class import Timer


_PAIR_OVERHEAD = 1e-3  # the clock's overhead may be this share of a block
_ESTIMATE_BLOCKS = 5  # blocks a side for the per-run estimate (their minimum)
_SAME_COUNT_WITHIN = 2.0  # per-run times within this factor: both sides run one count


def interleaved_blocks(baseline: Timer, candidate: Timer, *, min_run_time: float = 1.0,
                       min_blocks: int = 10) -> tuple[Measurement, Measurement]:
    """Alternating blocks of both Timers; returns (baseline, candidate) Measurements."""
    from torchmark.timing.timer_class import (
        _MAX_BLOCK_SIZE,
        Timer,
        _non_negative,
        _positive_int,
    )

    for role, t in (("baseline", baseline), ("candidate", candidate)):
        if not isinstance(t, Timer):
            raise TypeError(f"measure_ab: {role} must be a Timer, got {type(t).__name__}")
    if baseline is candidate:
        raise ValueError("measure_ab: baseline and candidate are the same Timer; for an "
                         "A/A check, make two Timers of the same statement")
    min_run_time = _non_negative("min_run_time", min_run_time)
    min_blocks = _positive_int("min_blocks", min_blocks)
    timers = (baseline, candidate)
    numbers = [t._estimate_block_size(min_run_time) for t in timers]  # also a warm-up
    # Per-run times from the fastest of several blocks, the two sides taken in turns: a
    # pause of the machine only ever adds time, so the minimum is what the statement
    # costs (a median of three, under load, misjudged one side by 2x, and unequal blocks
    # then read as a 2% difference between two Timers of one statement).
    samples: tuple[list[float], list[float]] = ([], [])
    overhead = 0.0
    for _ in range(_ESTIMATE_BLOCKS):
        for side, (t, n) in enumerate(zip(timers, numbers, strict=True)):
            with t._threads():
                samples[side].append(t._timeit(n) / n)
    for t in timers:
        with t._threads():
            overhead = max(overhead, t._clock_overhead())
    per_run = [min(side) for side in samples]
    # Both sides' blocks last block_s. The clock's overhead is the same on both sides, so
    # it may be 0.1% of a block (blocked_autorange allows 0.01%): it then moves the ratio
    # by under 0.1%, and blocks ten times shorter give ten times the pairs. Aim for 100
    # pairs in min_run_time, never for longer blocks than blocked_autorange's.
    block_s = min(max(n * p for n, p in zip(numbers, per_run, strict=True)),
                  max(overhead / _PAIR_OVERHEAD, min_run_time / 100))
    if max(per_run) <= _SAME_COUNT_WITHIN * min(per_run):
        # statements of about the same cost run the same count: a misjudged estimate can
        # then not make one side's blocks longer than the other's
        numbers = [max(1, min(_MAX_BLOCK_SIZE, round(block_s / max(per_run))))] * 2
    else:
        numbers = [max(1, min(_MAX_BLOCK_SIZE, round(block_s / p))) for p in per_run]
    times: tuple[list[float], list[float]] = ([], [])
    rounds = 0
    while min(sum(side) for side in times) < min_run_time or \
            min(len(side) for side in times) < min_blocks:
        order = (0, 1) if rounds % 2 == 0 else (1, 0)  # A B, B A, A B, ...
        for side in order:
            with timers[side]._threads():
                times[side].append(timers[side]._timeit(numbers[side]))
        rounds += 1
    a, b = (t._measurement(n, side) for t, n, side in zip(timers, numbers, times, strict=True))
    return a, b


def measure_ab(baseline: Timer, candidate: Timer, *, min_run_time: float = 1.0,
               min_blocks: int = 10, confidence: float = 0.95,
               min_effect: float = 0.01) -> ABResult:
    """Time two Timers in interleaved blocks, then `ab_test` them as pairs (see its
    docstring): the median ratio of paired blocks, an interval, a p-value and a verdict."""
    from torchmark.compare.ab import ab_test

    a, b = interleaved_blocks(baseline, candidate, min_run_time=min_run_time,
                              min_blocks=min_blocks)
    return ab_test(a, b, confidence=confidence, min_effect=min_effect, paired=True)
