"""The statistics under every verdict: the Mann-Whitney U test, the sign test and the
distribution-free interval of a median, against reference values."""

from __future__ import annotations

import numpy as np
import pytest

from torchmark.verdicts.intervals import mann_whitney_p, median_interval, sign_test_p


# -- Mann-Whitney -------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, expected", [
    # scipy.stats.mannwhitneyu(a, b, method="asymptotic", use_continuity=True).pvalue
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.012185780355344813),
    ([1, 2, 2, 3, 3, 3], [2, 3, 3, 4, 4, 5, 5], 0.04535219143280889),  # ties
    ([5, 1, 4], [3, 2, 6, 0], 0.8596837951986662),
    ([1, 1, 1], [1, 1, 1], 1.0),  # nothing to tell apart
])
def test_mann_whitney_matches_the_reference(a, b, expected):
    assert mann_whitney_p(a, b) == pytest.approx(expected, rel=1e-9)
    assert mann_whitney_p(b, a) == pytest.approx(expected, rel=1e-9)  # two-sided


@pytest.mark.parametrize("above, below, expected", [
    # scipy.stats.binomtest(above, above + below).pvalue
    (6, 0, 0.03125), (8, 2, 0.109375), (10, 10, 1.0), (3, 12, 0.03515625),
    (60, 40, 0.05688793364098089), (0, 0, 1.0),
])
def test_sign_test_matches_the_reference(above, below, expected):
    assert sign_test_p(above, below) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n, bounds", [
    # the k-th smallest and largest of n: the textbook 95% table for the median
    (5, None), (6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (100, (40, 61)),
])
def test_median_interval_uses_the_binomial_order_statistics(n, bounds):
    low, high = median_interval(list(range(1, n + 1)), 0.95)
    if bounds is None:
        assert np.isnan(low) and np.isnan(high)
    else:
        assert (low, high) == bounds


def test_large_sides_draw_their_middle_ranks_as_sorting_resamples_would():
    """Above CACHED_PICKS_MAX samples a side the two middle ranks of each resample are
    drawn directly: the same joint distribution as drawing and sorting the resample
    (quantiles of each rank, the gap between them), in milliseconds at any size."""
    import time

    from torchmark.verdicts.intervals import (
        CACHED_PICKS_MAX,
        _draw_picks,
        _middle_ranks,
        median_ratio_interval,
    )

    for n in (CACHED_PICKS_MAX + 44, CACHED_PICKS_MAX + 45):
        direct = _middle_ranks(n, 40_000, np.random.default_rng(1))
        (sorted_, _) = _draw_picks(n, 2, 40_000, 7)
        for k in range(2):
            assert np.all(np.abs(np.quantile(direct[k], [0.01, 0.1, 0.5, 0.9, 0.99])
                                 - np.quantile(sorted_[k], [0.01, 0.1, 0.5, 0.9, 0.99])) <= 2)
        for gap in range(3):
            assert abs(np.mean(direct[1] - direct[0] == gap)
                       - np.mean(sorted_[1] - sorted_[0] == gap)) < 0.02
        assert np.all(direct[0] <= direct[1]) and (n % 2 == 0 or
                                                   np.array_equal(direct[0], direct[1]))
    base = np.random.default_rng(0).lognormal(size=200_000)
    started = time.perf_counter()
    low, high = median_ratio_interval(base, base * 1.01)
    assert low < 1.01 < high and high - low < 0.05
    assert time.perf_counter() - started < 5  # was a minute: 2,000 sorts of 200,000
