"""Which candidate changes are real: each is tested against the levels either side of
it, and the weakest is merged away until every one left is significant and large
enough."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from torchmark.regressions.changepoint import ChangePoint
from torchmark.regressions.noise import MEDIAN_SE, Prepared
from torchmark.regressions.thresholds import MIN_SEGMENT

Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


@dataclass(frozen=True)
class SplitTest:
    """The step between two adjacent levels on the log scale: `shift` (after - before,
    weighted means), its standard error `se`, and the two-sided `p_value` multiplied by
    the number of places the split could have been (Bonferroni)."""

    shift: float
    se: float
    p_value: float


def split_test(prep: Prepared, start: int, cut: int, stop: int, min_size: int) -> SplitTest:
    """A t-test of the weighted means of y[start:cut] and y[cut:stop]. Each run weighs
    1 / (tau^2 + its own error^2), tau^2 being the run-to-run variance left once a
    typical run's own error is taken out (at least the noise floor), so a
    run whose raw samples spread widely counts less; the variance is inflated when the
    residuals are wider than the weights expect (never deflated). The p-value is
    multiplied by the number of places a split of the whole series could have taken."""
    from scipy.special import stdtr

    y, e2 = prep.y[start:stop], prep.errors[start:stop] ** 2
    k, n = cut - start, stop - start
    fitted = np.concatenate([np.full(k, y[:k].mean()), np.full(n - k, y[k:].mean())])
    residual2 = (y - fitted) ** 2
    tau2 = max(residual2.sum() / (n - 2) - float(np.median(e2)), prep.floor ** 2)
    w = 1.0 / (tau2 + e2)
    w_before, w_after = w[:k].sum(), w[k:].sum()
    shift = float(w[k:] @ y[k:] / w_after - w[:k] @ y[:k] / w_before)
    weighted = np.concatenate([np.full(k, w[:k] @ y[:k] / w_before),
                               np.full(n - k, w[k:] @ y[k:] / w_after)])
    dispersion = max(1.0, float(w @ (y - weighted) ** 2) / (n - 2))
    se = math.sqrt(dispersion * (1 / w_before + 1 / w_after))
    p = 2 * float(stdtr(n - 2, -abs(shift) / se))
    places = len(prep.y) - 2 * min_size + 1  # where PELT could have put the split
    return SplitTest(shift, se, min(1.0, p * max(1, places)))


def significant_changes(prep: Prepared, cuts: list[int], *, alpha: float,
                        min_effect: float, min_size: int = MIN_SEGMENT) -> list[ChangePoint]:
    """The candidates `cuts` that survive: while any fails (p-value above `alpha`, or
    a ratio of medians within `min_effect` of 1), the weakest (largest p-value, else
    smallest effect) is dropped and its neighbours are tested again on the merged
    levels."""
    cuts = sorted(cuts)
    n, least = len(prep.y), math.log1p(min_effect)
    while cuts:
        bounds = [0, *cuts, n]
        tests = [split_test(prep, bounds[i], bounds[i + 1], bounds[i + 2], min_size)
                 for i in range(len(cuts))]
        medians = [float(np.median(prep.values[a:b])) for a, b in pairwise(bounds)]
        effects = [abs(math.log(after / before)) for before, after in pairwise(medians)]
        unsure = [i for i, t in enumerate(tests) if t.p_value > alpha]
        small = [i for i, e in enumerate(effects) if e < least]
        if unsure:
            del cuts[max(unsure, key=lambda i: tests[i].p_value)]
        elif small:
            del cuts[min(small, key=lambda i: effects[i])]
        else:
            return [_record(cut, before, after, test) for cut, (before, after), test
                    in zip(cuts, pairwise(medians), tests, strict=True)]
    return []


def _record(cut: int, before: float, after: float, test: SplitTest) -> ChangePoint:
    ratio = after / before
    margin = math.exp(Z_95 * MEDIAN_SE * test.se)  # the ratio is of medians, not means
    return ChangePoint(index=cut, before=before, after=after, ratio=ratio,
                       p_value=test.p_value, low=ratio / margin, high=ratio * margin)
