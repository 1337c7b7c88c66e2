"""Interleaved A/B timing: blocks of two sides alternate, so drift hits both alike.

Measuring A for a second and then B for a second lets anything that changes in
between (another job on a shared machine, a CPU that warms up, a turbo budget that runs
out) look like a difference between A and B. Here each side's block size is chosen as
`blocked_autorange` does, then shortened (down to blocks whose clock overhead is
0.1% of them, or a hundredth of `min_run_time`) and scaled so that an A block and a B
block take about as long; the blocks alternate A B B A A B B A ... (which cancels a
linear drift within every four blocks) until each side has at least `min_run_time`
seconds and `min_blocks` blocks. Block i of A and block i of B ran side by side, so
`measure_ab` compares them as pairs: a slow spell of the machine slows both blocks of a
pair, and their ratio keeps.

`block_numbers` and `interleave` do this for any two `BlockSource`s (two Timers in this
process here; two worker processes in other Python environments in `env_ab`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from torchmark.timing.measurement import Measurement
from torchmark.timing.timer_class import _MAX_BLOCK_SIZE

if TYPE_CHECKING:
    from torchmark.compare.ab import ABResult
    from torchmark.timing.timer_class import Timer


_PAIR_OVERHEAD = 1e-3  # the clock's overhead may be this share of a block
_ESTIMATE_BLOCKS = 5  # blocks a side for the per-run estimate (their minimum)
_SAME_COUNT_WITHIN = 2.0  # per-run times within this factor: both sides run one count

# called after each timed block: (side 0 or 1, runs in the block, seconds it took)
BlockCallback = Callable[[int, int, float], None]


class BlockSource(Protocol):
    """One side of an interleaved A/B: something that times blocks of a statement."""

    def estimate_block_size(self, min_run_time: float) -> int:
        """blocked_autorange's block size (also the side's warm-up)."""
        ...

    def time_block(self, number: int) -> float:
        """Seconds `number` runs took."""
        ...

    def clock_overhead(self) -> float:
        """Seconds an empty block takes."""
        ...


def abba(rounds: int | None = None) -> Iterator[int]:
    """The sides in A B B A A B B A ... order: 0, 1, 1, 0, 0, 1, ...; `rounds` pairs, or
    for good."""
    pair = 0
    while rounds is None or pair < rounds:
        yield from ((0, 1) if pair % 2 == 0 else (1, 0))
        pair += 1


def block_numbers(sides: tuple[BlockSource, BlockSource], min_run_time: float, *,
                  same_statement: bool = False) -> list[int]:
    """Each side's runs a block for an interleaved A/B of `min_run_time` seconds a side
    (see the module docstring); the estimate also warms both sides up. With
    `same_statement` (one statement in two environments or commits) both sides run one
    count whatever the estimates say: on a loaded machine their minimums came out 2.3x
    apart for identical code, and the longer blocks, preempted more often, read 38%
    slower."""
    numbers = [s.estimate_block_size(min_run_time) for s in sides]  # also a warm-up
    # Per-run times from the fastest of several blocks, the two sides taken in turns: a
    # pause of the machine only ever adds time, so the minimum is what the statement
    # costs (a median of three, under load, misjudged one side by 2x, and unequal blocks
    # then read as a 2% difference between two Timers of one statement).
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(_ESTIMATE_BLOCKS):
        for side, (s, n) in enumerate(zip(sides, numbers, strict=True)):
            samples[side].append(s.time_block(n) / n)
    overhead = max(s.clock_overhead() for s in sides)
    per_run = [min(side) for side in samples]
    # Both sides' blocks last block_s. The clock's overhead is the same on both sides, so
    # it may be 0.1% of a block (blocked_autorange allows 0.01%): it then moves the ratio
    # by under 0.1%, and blocks ten times shorter give ten times the pairs. Aim for 100
    # pairs in min_run_time, never for longer blocks than blocked_autorange's.
    block_s = min(max(n * p for n, p in zip(numbers, per_run, strict=True)),
                  max(overhead / _PAIR_OVERHEAD, min_run_time / 100))
    if same_statement or max(per_run) <= _SAME_COUNT_WITHIN * min(per_run):
        # statements of about the same cost run the same count: a misjudged estimate can
        # then not make one side's blocks longer than the other's
        return [max(1, min(_MAX_BLOCK_SIZE, round(block_s / max(per_run))))] * 2
    return [max(1, min(_MAX_BLOCK_SIZE, round(block_s / p))) for p in per_run]


def interleave(sides: tuple[BlockSource, BlockSource], numbers: Sequence[int], *,
               min_run_time: float, min_blocks: int, callback: BlockCallback | None = None,
               whole_quads: bool = False) -> tuple[list[float], list[float]]:
    """Blocks of `numbers` runs (one a side), in ABBA order until each side has
    `min_run_time` seconds and `min_blocks` blocks (and, with `whole_quads`, an even
    count: A B B A quads, none cut short): each side's block times."""
    times: tuple[list[float], list[float]] = ([], [])
    order = abba()
    while min(sum(side) for side in times) < min_run_time or \
            min(len(side) for side in times) < min_blocks or \
            (whole_quads and len(times[0]) % 2):
        for side in (next(order), next(order)):  # one pair: A B, then B A, ...
            seconds = sides[side].time_block(numbers[side])
            times[side].append(seconds)
            if callback is not None:
                callback(side, numbers[side], seconds)
    return times


class _TimerSource:
    """A Timer of this process as a BlockSource (its thread count set around each call)."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer

    def estimate_block_size(self, min_run_time: float) -> int:
        return self.timer._estimate_block_size(min_run_time)

    def time_block(self, number: int) -> float:
        with self.timer._threads():
            return self.timer._timeit(number)

    def clock_overhead(self) -> float:
        with self.timer._threads():
            return self.timer._clock_overhead()


def interleaved_blocks(baseline: Timer, candidate: Timer, *, min_run_time: float = 1.0,
                       min_blocks: int = 10) -> tuple[Measurement, Measurement]:
    """Alternating blocks of both Timers; returns (baseline, candidate) Measurements."""
    from torchmark.timing.timer_class import Timer, _non_negative, _positive_int

    for role, t in (("baseline", baseline), ("candidate", candidate)):
        if not isinstance(t, Timer):
            raise TypeError(f"measure_ab: {role} must be a Timer, got {type(t).__name__}")
    if baseline is candidate:
        raise ValueError("measure_ab: baseline and candidate are the same Timer; for an "
                         "A/A check, make two Timers of the same statement")
    min_run_time = _non_negative("min_run_time", min_run_time)
    min_blocks = _positive_int("min_blocks", min_blocks)
    timers = (baseline, candidate)
    sources = (_TimerSource(baseline), _TimerSource(candidate))
    numbers = block_numbers(sources, min_run_time)
    times = interleave(sources, numbers, min_run_time=min_run_time, min_blocks=min_blocks)
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
