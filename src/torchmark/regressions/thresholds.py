"""What counts as a change, per metric: the smallest effect worth reporting, the noise
a series is assumed to have at least, and the segmentation's penalty."""

from __future__ import annotations

from dataclasses import dataclass

MIN_SEGMENT = 4  # runs a level needs at least: a series of fewer than twice that has no change


@dataclass(frozen=True)
class Thresholds:
    """`min_effect`: the smallest relative step reported (0.01 is 1%, either way);
    `noise_floor`: the run-to-run noise (relative standard deviation) a series is assumed
    to have at least, however steady it looks; `penalty`: the segmentation's cost of one
    more change, in multiples of log(n) for a series of n points scaled to unit noise.
    `calibrate` measures the first two on A/A history."""

    min_effect: float
    noise_floor: float
    penalty: float = 3.0

    @classmethod
    def for_metric(cls, metric: str) -> Thresholds:
        """The defaults: instruction counts are nearly exact (a 0.5% step is a change);
        wall and device times (and any other metric) need a 1% step at least."""
        return DEFAULTS.get(metric, DEFAULTS["wall"])


DEFAULTS = {
    "wall": Thresholds(min_effect=0.01, noise_floor=1e-3),
    "device": Thresholds(min_effect=0.01, noise_floor=1e-3),
    "kernel": Thresholds(min_effect=0.01, noise_floor=1e-3),
    "batch": Thresholds(min_effect=0.01, noise_floor=1e-3),
    "instructions": Thresholds(min_effect=0.002, noise_floor=1e-4),
}
