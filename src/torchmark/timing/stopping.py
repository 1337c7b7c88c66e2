"""When to stop sampling: a noise target with a minimum time and a timeout (nvbench's
rule), named and reported with the measurement."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class StopRule:
    """Stop once the relative standard deviation of the samples is at most `rsd`, after
    `min_samples` samples and `min_time` seconds of measured time; give up after
    `max_time` seconds of wall time."""

    rsd: float = 0.02
    min_time: float = 0.05
    max_time: float = 5.0
    min_samples: int = 10

    def __post_init__(self) -> None:
        for name in ("rsd", "min_time", "max_time"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"StopRule: {name} must be a number >= 0, got {value!r}")
        if self.max_time < self.min_time:
            raise ValueError(f"StopRule: max_time ({self.max_time}) is below min_time "
                             f"({self.min_time})")
        if isinstance(self.min_samples, bool) or not isinstance(self.min_samples, int) \
                or self.min_samples < 2:
            raise ValueError(f"StopRule: min_samples must be an int >= 2, got "
                             f"{self.min_samples!r}")

    def decide(self, samples: list[float] | RunningStats, elapsed: float) -> dict | None:
        """None to go on sampling, else {"rule", "reason", "samples", "rsd"} (rsd None
        when undefined). `samples`: the times, or their RunningStats (O(1) a check)."""
        stats = samples if isinstance(samples, RunningStats) else RunningStats(samples)
        rsd = stats.relative_std()
        shown = f"{rsd:.2%}" if math.isfinite(rsd) else "undefined"
        done = {"samples": stats.count, "rsd": rsd if math.isfinite(rsd) else None}
        if stats.count >= self.min_samples and stats.total >= self.min_time and rsd <= self.rsd:
            return {"rule": "noise", **done,
                    "reason": f"relative std {shown} <= {self.rsd:.2%} after "
                              f"{stats.count} samples"}
        if elapsed >= self.max_time:
            return {"rule": "timeout", **done,
                    "reason": f"timeout after {elapsed:.2f} s with relative std {shown} "
                              f"(target {self.rsd:.2%})"}
        return None


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
