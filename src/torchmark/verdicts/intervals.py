"""Intervals and tests on the samples of one run a side: the percentile bootstrap of a
ratio of medians (unpaired samples), the distribution-free interval of a median (paired
ratios), the sign test and the Mann-Whitney U test. numpy only; deterministic (a fixed
seed for the bootstrap)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

MIN_SAMPLES = 5  # fewer samples on a side (unpaired): no interval
_BOOTSTRAP_CELLS = 4_000_000  # resampled values held in memory at once
SORTED_MEDIAN_MAX = 64  # rows up to this long: medians by sorting
CACHED_PICKS_MAX = 256  # resampling indexes kept for samples up to this many a side


def median_ratio_interval(baseline: Sequence[float] | np.ndarray,
                          candidate: Sequence[float] | np.ndarray, confidence: float = 0.95,
                          *, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The percentile-bootstrap interval of median(candidate) / median(baseline), each
    side resampled independently with a fixed seed; (nan, nan) with under MIN_SAMPLES
    samples on a side."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if min(len(a), len(b)) < MIN_SAMPLES:
        return math.nan, math.nan
    picks_b, picks_a = _picks(len(b), len(a), resamples, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _resampled_medians(b, picks_b) / _resampled_medians(a, picks_a)
    ratios = ratios[~np.isnan(ratios)]
    tail = (1 - confidence) / 2
    low, high = linear_quantiles(ratios, (tail, 1 - tail))
    return low, high


def linear_quantiles(values: np.ndarray, qs: Sequence[float]) -> list[float]:
    """np.quantile(values, qs) (its default, linear method), the same values, without
    its machinery (a third of a comparison's verdicts went to it): two partitions of
    `values` at each quantile's neighbouring ranks and numpy's interpolation."""
    n = len(values)
    if n == 0:
        return [math.nan] * len(qs)
    spots = []
    for q in qs:
        virtual = q * (n - 1)
        below = min(max(math.floor(virtual), 0), n - 1)
        spots.append((below, min(below + 1, n - 1), virtual - below))
    ranks = sorted({rank for below, above, _ in spots for rank in (below, above)})
    part = np.partition(values, ranks)
    out = []
    for below, above, gamma in spots:
        a, b = float(part[below]), float(part[above])
        diff = b - a  # numpy's _lerp: from the nearer end, so the ends are exact
        out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


def _picks(n_b: int, n_a: int, resamples: int,
           seed: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Each side's resamples as the ranks of their middle values: a resample draws
    indexes (with replacement, from one generator seeded `seed`, the candidate's first);
    into the side's sorted samples, its median is the mean of the values at its two
    middle indexes (one, for an odd count). They depend on the sizes only: cases of the
    same sample counts share them (cached when small). Larger sides have their middle
    ranks drawn directly (_middle_ranks: the same distribution, without drawing and
    sorting every index: 200,000 samples a side took a minute a case)."""
    if max(n_b, n_a) <= CACHED_PICKS_MAX:
        return _cached_picks(n_b, n_a, resamples, seed)
    rng = np.random.default_rng(seed)
    picks_b = _middle_ranks(n_b, resamples, rng)
    return picks_b, _middle_ranks(n_a, resamples, rng)


def _middle_ranks(n: int, resamples: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """For each of `resamples` resamples of n indexes drawn with replacement from
    range(n), the indexes at its two middle ranks ((n - 1) // 2 and n // 2) once
    sorted, drawn exactly without drawing the resample: the number of its draws in the
    lower half of an index range is binomial, so halving the range that holds each
    rank (log2 n steps) finds it; while the two ranks lie in one range they share each
    draw, after they part the two ranges' draws are independent (given their counts)."""
    ranks = ((n - 1) // 2, n // 2)
    lo = [np.zeros(resamples, dtype=np.int64) for _ in ranks]
    hi = [np.full(resamples, n, dtype=np.int64) for _ in ranks]
    count = [np.full(resamples, n, dtype=np.int64) for _ in ranks]
    rank = [np.full(resamples, r, dtype=np.int64) for r in ranks]
    while any(bool(np.any(h - low > 1)) for low, h in zip(lo, hi, strict=True)):
        together = (lo[0] == lo[1]) & (hi[0] == hi[1])
        first = np.zeros(resamples, dtype=np.int64)  # rank 0's draw, rank 1's where shared
        for k in range(2):
            width = hi[k] - lo[k]
            mid = lo[k] + width // 2
            drawn = rng.binomial(count[k], (mid - lo[k]) / width)
            lower = drawn if k == 0 else np.where(together, first, drawn)
            if k == 0:
                first = lower
            left = rank[k] < lower
            lo[k], hi[k] = np.where(left, lo[k], mid), np.where(left, mid, hi[k])
            rank[k] = np.where(left, rank[k], rank[k] - lower)
            count[k] = np.where(left, lower, count[k] - lower)
    return lo[0], lo[1]


def _draw_picks(n_b: int, n_a: int, resamples: int,
                seed: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)

    def side(n: int) -> tuple[np.ndarray, np.ndarray]:
        chunk = max(1, _BOOTSTRAP_CELLS // n)
        low, high = [], []
        for start in range(0, resamples, chunk):
            block = np.sort(rng.integers(0, n, size=(min(chunk, resamples - start), n)),
                            axis=1)
            low.append(block[:, (n - 1) // 2])
            high.append(block[:, n // 2])
        return np.concatenate(low), np.concatenate(high)

    picks_b = side(n_b)
    return picks_b, side(n_a)


_cached_picks = functools.lru_cache(maxsize=64)(_draw_picks)


def _resampled_medians(times: np.ndarray, middle: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The median of each resample of `times` (`middle`: each resample's middle indexes
    into the sorted samples, from _picks): the values np.median gives the resamples."""
    ordered = np.sort(times)
    low, high = middle
    return (ordered[low] + ordered[high]) / 2


def sorted_median(ordered: np.ndarray) -> np.float64:
    """np.median of sorted values (the same value, without its machinery)."""
    n, half = len(ordered), len(ordered) // 2
    return ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2


def row_medians(rows: np.ndarray) -> np.ndarray:
    """np.median(rows, axis=1), the same values: a few samples a row are sorted whole,
    four times faster than numpy's median there (whose partition wins on long rows)."""
    n = rows.shape[1]
    if n > SORTED_MEDIAN_MAX:
        return np.median(rows, axis=1)
    ordered = np.sort(rows, axis=1)
    half = n // 2
    return ordered[:, half] if n % 2 else (ordered[:, half - 1] + ordered[:, half]) / 2


def _binomial_half_cdf(n: int) -> Iterator[float]:
    """P(X <= 0), P(X <= 1), ... for X ~ Binomial(n, 1/2), computed in log space."""
    total, log_scale = 0.0, math.lgamma(n + 1) + n * math.log(0.5)
    for k in range(n + 1):
        total += math.exp(log_scale - math.lgamma(k + 1) - math.lgamma(n - k + 1))
        yield min(total, 1.0)


def median_interval(sorted_values: Sequence[float] | np.ndarray,
                    confidence: float) -> tuple[float, float]:
    """The distribution-free interval for a median: the k-th smallest and k-th largest
    values, k the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. Its
    coverage is at least `confidence` whatever the distribution; (nan, nan) when n is
    too small for any (at 95%: under 6 values)."""
    n, tail = len(sorted_values), (1 - confidence) / 2
    k = 0
    for below, cdf in enumerate(_binomial_half_cdf(n)):
        if cdf > tail or below >= n // 2:
            break
        k = below + 1  # P(X <= below) <= tail: the (below+1)-th value is a bound
    if k == 0:
        return math.nan, math.nan
    return float(sorted_values[k - 1]), float(sorted_values[n - k])


def sign_test_p(above: int, below: int) -> float:
    """Two-sided p-value of the exact sign test: `above` of `above + below` values (ties
    left out) lie above the hypothesised median."""
    n = above + below
    if n == 0:
        return 1.0
    tail = next(itertools.islice(_binomial_half_cdf(n), min(above, below), None))
    return min(1.0, 2 * tail)


def mann_whitney_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie and
    continuity corrections); 1.0 when there is nothing to tell apart."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    n = n1 + n2
    both = np.sort(np.concatenate([a, b]))
    if n > 1 and not bool((both[1:] == both[:-1]).any()):  # no ties: U counts the pairs
        u = float(np.searchsorted(np.sort(b), a).sum())  # b below each a (a's ranks - ...)
        tie_term = 0.0
    else:
        ranks, tie_sizes = average_ranks(np.concatenate([a, b]))
        u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
        tie_term = float((tie_sizes ** 3 - tie_sizes).sum()) / (n * (n - 1)) if n > 1 \
            else 0.0
    variance = n1 * n2 / 12 * ((n + 1) - tie_term)
    if variance <= 0:
        return 1.0
    z = max(abs(u - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks, tied values sharing their average rank; and the size of each tie
    group."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    average = starts + (sizes + 1) / 2  # the mean of ranks start+1 .. start+size
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average, sizes)
    return ranks, sizes.astype(np.float64)
