"""Thresholds measured on A/A history: series of one build measured again and again,
where every detected change is a false alarm."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torchmark.core.errors import UsageError
from torchmark.regressions.detect import detect
from torchmark.regressions.thresholds import MIN_SEGMENT, Thresholds


def calibrate(aa_series: Sequence[Sequence[float]], *, metric: str = "wall",
              alarms_per_1000: float = 1.0, alpha: float = 0.01,
              samples: Sequence[Sequence[Sequence[float]] | None] | None = None
              ) -> Thresholds:
    """Thresholds for `detect` from series known to hold no change. The noise floor is
    the median run-to-run noise of the series (never below the metric's default); the
    minimum effect is the smallest step at which `detect`, with that floor and at level
    `alpha`, raises at most `alarms_per_1000` false alarms per 1,000 points on them
    (never below the metric's default either). `samples`: each series' raw samples per
    run, or None."""
    import numpy as np

    from torchmark.regressions.noise import difference_sd

    if alarms_per_1000 < 0:
        raise UsageError(f"alarms_per_1000: expected a rate >= 0, got {alarms_per_1000!r}")
    if samples is not None and len(samples) != len(aa_series):
        raise UsageError(f"samples: expected one entry per series ({len(aa_series)}), "
                         f"got {len(samples)}")
    usable = [i for i, s in enumerate(aa_series) if len(s) >= 2 * MIN_SEGMENT]
    if not usable:
        raise UsageError(f"aa_series: expected at least one series of {2 * MIN_SEGMENT} "
                         "points or more")
    default = Thresholds.for_metric(metric)
    noise = [difference_sd(np.log(np.asarray(aa_series[i], dtype=np.float64)))
             for i in usable]
    floor = max(default.noise_floor, math.expm1(float(np.median(noise))))
    loose = Thresholds(min_effect=0.0, noise_floor=floor, penalty=default.penalty)
    effects = sorted((abs(math.log(c.ratio)) for i in usable
                      for c in detect(aa_series[i], samples=samples[i] if samples else None,
                                      alpha=alpha, thresholds=loose)), reverse=True)
    allowed = int(alarms_per_1000 * sum(len(aa_series[i]) for i in usable) / 1000)
    needed = math.expm1(effects[allowed]) * (1 + 1e-9) if len(effects) > allowed else 0.0
    return Thresholds(min_effect=max(default.min_effect, needed), noise_floor=floor,
                      penalty=default.penalty)
