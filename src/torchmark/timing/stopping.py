"""When to stop sampling: a noise target with a minimum time and a timeout (nvbench's
rule), named and reported with the measurement."""

from __future__ import annotations

import dataclasses
import statistics


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

    @staticmethod
    def relative_std(samples: list[float]) -> float:
        if len(samples) < 2:
            return float("inf")
        mean = statistics.fmean(samples)
        return statistics.stdev(samples) / mean if mean > 0 else float("inf")

    def decide(self, samples: list[float], elapsed: float) -> dict | None:
        """None to go on sampling, else {"rule", "reason", "samples", "rsd"}."""
        rsd = self.relative_std(samples)
        done = {"samples": len(samples), "rsd": rsd}
        if (len(samples) >= self.min_samples and sum(samples) >= self.min_time
                and rsd <= self.rsd):
            return {"rule": "noise", **done,
                    "reason": f"relative std {rsd:.2%} <= {self.rsd:.2%} after "
                              f"{len(samples)} samples"}
        if elapsed >= self.max_time:
            return {"rule": "timeout", **done,
                    "reason": f"timeout after {elapsed:.2f} s with relative std {rsd:.2%} "
                              f"(target {self.rsd:.2%})"}
        return None
