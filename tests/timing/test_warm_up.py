"""The checked warm-up: a split test that finds where blocks stop getting faster, a
planted lazy initialisation measured at its steady state, a statement still getting
faster at the end warned of (in the repr, Compare and the stored result), and a
stationary statement measured as before."""

from __future__ import annotations

import math
import random

import torchmark
from torchmark.timing.warm_up import WarmUp, warm_up_end


class VirtualClock:
    """A clock that only the statement moves: `spend(seconds)` is a call's cost. Timed
    with it, a measurement is exact whatever else the machine runs (with costs that are
    binary fractions, every difference of two readings is exact too)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


def _planted(clock: VirtualClock, steady: float, slow_calls: int = 300, factor: float = 3.0):
    """A call that costs `factor` x `steady` for its first `slow_calls` calls, then
    `steady`."""
    calls = [0]

    def work() -> None:
        calls[0] += 1
        clock.spend(factor * steady if calls[0] <= slow_calls else steady)

    return work


def test_the_split_finds_where_the_blocks_stop_getting_faster():
    rng = random.Random(0)
    noise = [1 + rng.gauss(0, 0.01) for _ in range(40)]
    assert warm_up_end([6.0] * 29 + [2.0] * 5) == 29  # the steady part: the last 5 only
    assert warm_up_end([3.0 * n for n in noise[:10]] + [1.0 * n for n in noise[10:]]) == 10
    assert warm_up_end([2.0] * 7) == 0  # too few blocks to tell
    assert warm_up_end([1.0 * n for n in noise]) == 0
    assert warm_up_end([1.0] * 10 + [3.0] * 10) == 0  # slower later: not a warm-up


def test_a_lead_of_one_to_three_slow_blocks_is_warm_up():
    """Too short for the rank test at its p-value, found by its size; a lead only a
    little slower, or not slower than every later block, is not."""
    rng = random.Random(2)
    for n in (40, 95, 200):
        steady = [20.0 * (1 + rng.gauss(0, 0.02)) for _ in range(n)]
        for k in (1, 2, 3):  # (the rank test may take a steady block more, harmless)
            assert k <= warm_up_end([60.0] * k + steady[k:]) <= k + 1, (n, k)
        assert warm_up_end([55.6, 21.0] + steady[2:]) == 1  # 89 slow calls of 100, 11 not
        assert warm_up_end([23.0] + steady[1:]) == 0  # 15% slower: within the margin
        assert warm_up_end([60.0] + steady[1:-1] + [61.0]) == 0  # a later block as slow


def test_stationary_noise_rarely_raises_a_false_alarm():
    rng = random.Random(1)
    alarms = sum(warm_up_end([rng.lognormvariate(0, 0.05) for _ in range(rng.randint(8, 400))])
                 > 0 for _ in range(500))
    assert alarms <= 4  # each costs a refill of blocks, never accuracy


def test_a_planted_lazy_initialisation_is_left_out_and_reported():
    clock, steady = VirtualClock(), 2.0 ** -13  # 122 us: 300 slow calls, 0.11 s
    m = torchmark.Timer("work()", globals={"work": _planted(clock, steady)},
                        timer=clock).blocked_autorange(min_run_time=0.2)
    assert m.median == steady, m  # torch's Timer, on a real clock: +200%
    assert m.warm_up.calls == 300 and m.warm_up.dropped_blocks == 299  # 1 call to size

    warm = m.warm_up
    assert warm.dropped_blocks > 0 and warm.stationary and warm.calls >= 250, warm
    assert f"Warm-up: stationary after {warm.calls:,} calls" in repr(m)


def test_a_lazy_initialisation_filling_a_few_blocks_is_left_out():
    """300 slow calls of 2 us, with a call's noise: 111 of them size the blocks, the rest
    fill the first two blocks of 100 calls (the second holds 11 fast calls). Neither is
    kept (the rank test alone kept both: too few to tell)."""
    clock, steady, rng = VirtualClock(), 2.0 ** -19, random.Random(3)
    planted = _planted(clock, steady)

    def work() -> None:
        planted()
        clock.spend(steady * rng.uniform(0, 0.1))

    m = torchmark.Timer("work()", globals={"work": work},
                        timer=clock).blocked_autorange(min_run_time=0.2)
    assert m.number_per_run == 100 and m.warm_up.dropped_blocks == 2, m
    assert max(m.times) < 1.1 * steady and m.warm_up.calls == 311, m
    assert m.warm_up.stationary


def test_a_statement_still_getting_faster_is_warned_of_everywhere(monkeypatch):
    from torchmark.compare import Compare
    from torchmark.records import results_of

    monkeypatch.setattr("torchmark.timing.timer_class.BUDGET_S", 0.3)  # the extension's
    clock = VirtualClock()

    def work() -> None:  # 300 us, 10% less every 0.03 s (the run time asked), for good
        clock.spend(300e-6 * math.exp(-3.5 * clock.now))

    m = torchmark.Timer("work()", globals={"work": work}, label="ramp",
                        timer=clock).blocked_autorange(min_run_time=0.03)
    assert not m.warm_up.stationary, m.warm_up
    assert m.warm_up.seconds < 0.5
    text = repr(m)
    assert "WARNING: the times were still getting faster when the measurement ended" in text
    compare = Compare([m, m])  # replicates merge: the warning stays
    compare.highlight_warnings()
    assert "(!" in str(compare)
    (result,) = results_of(m)
    assert any("still getting faster" in w for w in result.warnings)


def test_a_warm_up_found_when_the_time_is_up_leaves_a_stationary_rest():
    """adaptive_autorange at its max_run_time (a noisy statement never meets the
    confidence asked for): the planted slow lead is dropped, and the kept blocks, tested
    once more, are stationary: no warning."""
    clock = VirtualClock()
    calls = [0]

    def work() -> None:  # 2**-14 s +- 25%, alternating; 3x that for its first 300 calls
        calls[0] += 1
        clock.spend((3 if calls[0] <= 300 else 1) * 2.0 ** -14 * (1.25 if calls[0] % 2 else 0.75))

    m = torchmark.Timer("work()", globals={"work": work}, timer=clock).adaptive_autorange(
        threshold=1e-6, max_run_time=0.5)
    assert m.warm_up.dropped_blocks > 0 and m.warm_up.stationary, m.warm_up
    assert "WARNING: the times were still getting faster" not in repr(m)
    assert m.median < 1.3 * 2.0 ** -14


def test_a_stationary_statement_is_measured_as_before():
    clock = VirtualClock()
    m = torchmark.Timer("work()", globals={"work": lambda: clock.spend(2.0 ** -14)},
                        timer=clock).blocked_autorange(min_run_time=0.05)
    warm = m.warm_up
    assert warm.tested and warm.stationary and warm.dropped_blocks == 0
    assert math.fsum(m.raw_times) < 0.05 + m.raw_times[0]  # no block more than before
    assert "Warm-up:" not in repr(m)  # nothing to say: the repr is torch's
    assert WarmUp.from_dict(warm.to_dict()) == warm
    assert WarmUp.from_dict({"calls": "1"}) is None


def test_device_time_sampling_leaves_its_warm_up_out_too():
    import itertools

    from torchmark.timing.gpu_sampler import sample_until
    from torchmark.timing.measurement import Measurement
    from torchmark.timing.stopping import FixedCount, StopRule
    from torchmark.timing.task_spec import TaskSpec

    def batches(values):
        it = iter(values)
        return lambda: (batch := next(it), [v / 10 for v in batch], True)

    clock = iter(i * 0.01 for i in itertools.count())
    slow_first = itertools.chain([[3e-5] * 10] * 3, itertools.repeat([1e-5] * 10))
    rule = StopRule(rsd=0.5, min_time=1e-3, max_time=10, min_samples=10)
    sampled = sample_until(rule, batches(slow_first), lambda: next(clock))
    assert set(sampled.times) == {1e-5}  # the 30 slow calls left out
    warm = sampled.decision.warm_up
    assert warm["dropped_blocks"] == 30 and warm["stationary"]
    # a lead found when the time is up: left out, the rest tested once more and told
    # (stationary), the decision counting the samples kept
    clock = iter(i * 0.01 for i in itertools.count())
    slow_first = itertools.chain([[3e-5, 3.6e-5] * 5] * 3,  # noisy: no rsd stop
                                 itertools.repeat([1e-5, 1.2e-5] * 5))
    sampled = sample_until(StopRule(rsd=0.001, min_time=0, max_time=0.05, settle=0),
                           batches(slow_first), lambda: next(clock))
    assert max(sampled.times) < 2e-5 and sampled.decision.rule == "timeout"
    assert sampled.decision.samples == len(sampled.times) == 20
    assert sampled.decision.warm_up["stationary"] is True
    # a lead cut when the time is up leaving too few samples to test (5 of the 8 a test
    # needs), still falling: not told stationary
    clock = iter(i * 0.01 for i in itertools.count())
    short = iter([[3e-5, 3e-5, 3e-5, 1e-5], [0.9e-5, 0.8e-5, 0.7e-5, 0.6e-5]])
    sampled = sample_until(StopRule(rsd=0.001, min_time=0, max_time=0.02, settle=0,
                                    min_samples=2), lambda: (b := next(short), b, True),
                           lambda: next(clock))
    assert len(sampled.times) == 5 and sampled.decision.samples == 5
    assert sampled.decision.warm_up["stationary"] is False
    # still getting faster when the time is up: said, in the measurement's warnings
    falling = ([1e-5 * (2 - 0.01 * (10 * b + i)) for i in range(10)] for b in itertools.count())
    clock = iter(i * 0.01 for i in itertools.count())
    sampled = sample_until(StopRule(rsd=0.001, min_time=0, max_time=0.3, settle=0),
                           batches(falling), lambda: next(clock))
    assert sampled.decision.warm_up["stationary"] is False
    m = Measurement(1, sampled.times, TaskSpec("x", "pass"),
                    {"stop": sampled.decision.to_dict()})
    assert any("still getting faster" in w for w in m.warnings)
    # a fixed count (ops' passes) is taken as it is
    clock = iter(i * 0.01 for i in itertools.count())
    slow_first = itertools.chain([[3e-5] * 10] * 3, itertools.repeat([1e-5] * 10))
    sampled = sample_until(FixedCount(50), batches(slow_first), lambda: next(clock))
    assert len(sampled.times) == 50 and sampled.decision.warm_up is None
