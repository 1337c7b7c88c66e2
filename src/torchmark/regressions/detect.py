"""Change points of one series of per-run values: candidates from PELT (ruptures), each
kept only if a weighted test of the levels either side finds it significant and the
step is at least the metric's minimum effect. numpy, scipy and ruptures are imported on
the first call."""

from __future__ import annotations

from collections.abc import Sequence

from torchmark.core.errors import UsageError
from torchmark.regressions.changepoint import ChangePoint
from torchmark.regressions.fdr import select_fdr
from torchmark.regressions.thresholds import MIN_SEGMENT, Thresholds

__all__ = ["ChangePoint", "Thresholds", "detect", "select_fdr"]


def detect(values: Sequence[float], *, samples: Sequence[Sequence[float]] | None = None,
           metric: str = "wall", min_effect: float | None = None, alpha: float = 0.01,
           thresholds: Thresholds | None = None) -> list[ChangePoint]:
    """The change points of `values` (per-run medians, oldest first, positive), in
    order. `samples`: each run's raw samples (a run whose samples spread widely weighs
    less; an empty one takes the others' typical spread). `metric`: "wall", "device" or
    "instructions" picks the default thresholds (others are treated as "wall");
    `thresholds` (from `calibrate`) replaces them, `min_effect` (relative, 0.01 = 1%)
    overrides theirs. A change is kept when its p-value, corrected for the choice of its
    position, is at most `alpha`. Runs of fewer than 3 raw samples are left out (their
    median is a sample or two) while 8 runs or more remain; an index counts all runs.
    Fewer than 8 points: no change."""
    import dataclasses

    from torchmark.regressions.noise import few_samples, prepare
    from torchmark.regressions.segment import candidates
    from torchmark.regressions.significance import significant_changes

    if not 0 < alpha <= 1:
        raise UsageError(f"alpha: expected a probability in (0, 1], got {alpha!r}")
    limits = thresholds if thresholds is not None else Thresholds.for_metric(metric)
    effect = limits.min_effect if min_effect is None else min_effect
    if not effect >= 0:
        raise UsageError(f"min_effect: expected a relative step >= 0, got {min_effect!r}")
    kept = list(range(len(values)))
    few = set(few_samples(samples))
    if few and len(values) - len(few) >= 2 * MIN_SEGMENT:  # medians of a sample or two
        kept = [i for i in kept if i not in few]
        values = [values[i] for i in kept]
        samples = [samples[i] for i in kept] if samples is not None else None
    prep = prepare(values, samples, limits.noise_floor)
    if len(prep.y) < 2 * MIN_SEGMENT:
        return []
    cuts = candidates(prep.y, prep.scale, limits.penalty, MIN_SEGMENT)
    found = significant_changes(prep, cuts, alpha=alpha, min_effect=effect,
                               min_size=MIN_SEGMENT)
    return [dataclasses.replace(c, index=kept[c.index]) for c in found]
