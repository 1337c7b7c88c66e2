"""When to stop sampling: the interface the GPU sampler asks after each pass
(StopCriterion), nvbench's rule (a noise target with a minimum time and a timeout) and a
fixed count, each deciding with a typed StopDecision that is reported with the
measurement."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from torchmark.core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class StopDecision:
    """Why sampling stopped: the rule that fired ("noise", "steady", "timeout" or
    "count"), in words, after how many samples, at what relative std (None when
    undefined); `all_below_clock` when every sample ran below the SM-clock threshold and
    they were kept (see gpu_sampler.sample_until)."""

    rule: str
    reason: str
    samples: int
    rsd: float | None
    all_below_clock: bool = False
    # how the warm-up went (timing/warm_up.py's WarmUp as a dict), where it was checked
    warm_up: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object device-time reports have always held: `all_below_clock` and
        `warm_up` only when set."""
        data: dict[str, Any] = {"rule": self.rule, "reason": self.reason,
                                "samples": self.samples, "rsd": self.rsd}
        if self.all_below_clock:
            data["all_below_clock"] = True
        if self.warm_up is not None:
            data["warm_up"] = self.warm_up
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StopDecision:
        """Read back what to_dict wrote; a missing or mistyped field reads as empty."""
        rsd, samples = data.get("rsd"), data.get("samples")
        return cls(rule=str(data.get("rule")), reason=str(data.get("reason")),
                   samples=samples if type(samples) is int else 0,
                   rsd=float(rsd) if isinstance(rsd, (int, float)) and
                   not isinstance(rsd, bool) else None,
                   all_below_clock=data.get("all_below_clock") is True,
                   warm_up=data.get("warm_up") if isinstance(data.get("warm_up"), dict)
                   else None)


class StopCriterion(Protocol):
    """What the sampling phase asks after each pass: None to go on, else the decision.
    `samples`: the running statistics of the samples kept; `elapsed`: wall seconds since
    sampling began; `history`: kept by the caller across checks (for a steady rule)."""

    def decide(self, samples: RunningStats, elapsed: float,
               history: NoiseHistory | None = None) -> StopDecision | None: ...


@dataclasses.dataclass(frozen=True)
class FixedCount:
    """Stop once `count` samples are in (the ops executor's iterations)."""

    count: int

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise UsageError(f"FixedCount: count must be an int >= 1, got {self.count!r}")

    def decide(self, samples: RunningStats, elapsed: float,
               history: NoiseHistory | None = None) -> StopDecision | None:
        if samples.count < self.count:
            return None
        rsd = samples.relative_std()
        return StopDecision("count", f"{samples.count} samples ({self.count} asked for)",
                            samples.count, rsd if math.isfinite(rsd) else None)


@dataclasses.dataclass(frozen=True)
class StopRule:
    """The StopCriterion of device time: stop once the relative standard deviation of
    the samples is at most `rsd`, after `min_samples` samples and `min_time` seconds of
    measured time; or, past those minimums, once it has stayed within `steady` (a share
    of itself) for `settle` seconds of wall time: the statement's own noise, which more
    samples would not lower (a kernel shorter than its launch in events mode, a GPU at
    its power cap), as nvbench's convergence check; give up after `max_time` seconds of
    wall time. `settle=0` turns the steady rule off."""

    rsd: float = 0.02
    min_time: float = 0.05
    max_time: float = 5.0
    min_samples: int = 10
    settle: float = 0.5
    steady: float = 0.05

    def __post_init__(self) -> None:
        for name in ("rsd", "min_time", "max_time", "settle", "steady"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise UsageError(f"StopRule: {name} must be a number >= 0, got {value!r}")
        if self.max_time < self.min_time:
            raise UsageError(f"StopRule: max_time ({self.max_time}) is below min_time "
                             f"({self.min_time})")
        if isinstance(self.min_samples, bool) or not isinstance(self.min_samples, int) \
                or self.min_samples < 2:
            raise UsageError(f"StopRule: min_samples must be an int >= 2, got "
                             f"{self.min_samples!r}")

    def decide(self, samples: list[float] | RunningStats, elapsed: float,
               history: NoiseHistory | None = None) -> StopDecision | None:
        """None to go on sampling, else the StopDecision. `samples`: the times, or their
        RunningStats (O(1) a check). `history`: kept by the caller across checks, for the
        steady rule."""
        stats = samples if isinstance(samples, RunningStats) else RunningStats(samples)
        rsd = stats.relative_std()
        shown = f"{rsd:.2%}" if math.isfinite(rsd) else "undefined"

        def stop(rule: str, reason: str) -> StopDecision:
            return StopDecision(rule, reason, stats.count, rsd if math.isfinite(rsd) else None)

        ready = stats.count >= self.min_samples and stats.total >= self.min_time
        if ready and rsd <= self.rsd:
            return stop("noise", f"relative std {shown} <= {self.rsd:.2%} after "
                                 f"{stats.count} samples")
        if ready and history is not None and self.settle > 0 and math.isfinite(rsd) \
                and history.steady_for(elapsed, stats, self.settle, self.steady):
            return stop("steady", f"relative std {shown}, above {self.rsd:.2%}, stayed "
                                  f"within {self.steady:.0%} of itself for "
                                  f"{self.settle:.2f} s ({stats.count} samples): the "
                                  "statement's own noise")
        if elapsed >= self.max_time:
            return stop("timeout", f"timeout after {elapsed:.2f} s with relative std "
                                   f"{shown} (target {self.rsd:.2%})")
        return None


class NoiseHistory:
    """The relative std at past checks, thinned to about 50 points a settle window (so a
    check costs the same whatever its rate), with the count and sum of the samples then
    (so the mean of the window's own samples is known)."""

    def __init__(self) -> None:
        self.points: list[tuple[float, float, int, float]] = []  # elapsed, rsd, count, total

    def steady_for(self, elapsed: float, stats: RunningStats, settle: float,
                   steady: float) -> bool:
        """Record `stats` at `elapsed`; True when, over the last `settle` seconds (the
        history reaching at least that far back), the relative std stayed within
        `steady` of its value now and the window's own samples averaged within `steady`
        of all samples' mean (a drifting statement is not steady)."""
        rsd = stats.relative_std()
        if not self.points or elapsed - self.points[-1][0] >= settle / 50:
            self.points.append((elapsed, rsd, stats.count, stats.total))
        while len(self.points) > 1 and self.points[1][0] <= elapsed - settle:
            self.points.pop(0)
        since, _, count, total = self.points[0]
        if since > elapsed - settle or stats.count <= count:
            return False  # not yet a whole window of history, or no sample in it
        mean = stats.total / stats.count
        recent = (stats.total - total) / (stats.count - count)
        if abs(recent - mean) > steady * abs(mean):
            return False
        return all(abs(r - rsd) <= steady * rsd for _, r, _, _ in self.points)


class RunningStats:
    """Count, sum, mean and variance of samples added one by one (Welford's update), so
    a stopping check costs the same after a million samples as after ten."""

    def __init__(self, samples: Iterable[float] = ()) -> None:
        self.count = 0
        self.total = 0.0
        self._mean = 0.0
        self._m2 = 0.0  # sum of squared deviations from the mean
        self.extend(samples)

    def extend(self, samples: Iterable[float]) -> None:
        for x in samples:
            self.count += 1
            self.total += x
            delta = x - self._mean
            self._mean += delta / self.count
            self._m2 += delta * (x - self._mean)

    def relative_std(self) -> float:
        """Sample standard deviation / mean: 0 for identical samples (a statement that
        launches no kernel times 0 every call), inf with under two samples or a mean <= 0."""
        if self.count < 2:
            return math.inf
        std = math.sqrt(max(self._m2, 0.0) / (self.count - 1))
        if std == 0:
            return 0.0
        return std / self._mean if self._mean > 0 else math.inf
