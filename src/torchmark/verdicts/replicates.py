"""Two sets of independent replicates compared: each run's per-process medians
(`measure_in_processes`), where the unit of comparison is the process, not the sample.

With a handful of replicates a side no approximation will do, so the test is the exact
Mann-Whitney U test (its null distribution counted, not approximated), and the estimate
of the shift is Hodges-Lehmann's (the median of every difference candidate - baseline),
with its distribution-free interval from the order statistics of those differences
(the k-th smallest and k-th largest, k from the U distribution). On logs, the shift is
a ratio."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

# the most replicates (processes) a side that are compared as such: the exact U
# distribution costs the square of the count a side, so a file claiming thousands of
# processes could stall a comparison for hours
MAX_REPLICATES = 64


@functools.lru_cache(maxsize=64)
def u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many of the C(n + m, n) orderings of two samples of sizes n and m give
    U = 0, 1, ..., n * m (U: the pairs whose second-sample value is the larger)."""
    # c[j][u] for the current i: orderings of i and j values with U = u, built up by
    # whether the largest value belongs to the first sample (U unchanged) or the second
    # (it beats all i first-sample values)
    rows = [[1] + [0] * (n * m) for _ in range(m + 1)]  # i = 0: U is 0
    for i in range(1, n + 1):
        new = [[0] * (n * m + 1) for _ in range(m + 1)]
        new[0][0] = 1
        for j in range(1, m + 1):
            for u in range(i * j + 1):
                new[j][u] = rows[j][u] + (new[j - 1][u - i] if u >= i else 0)
        rows = new
    return tuple(rows[m])


def exact_u_p(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided p-value of the exact Mann-Whitney U test (a tie counts half a pair; the
    p-value is then taken at the less extreme whole U, so never too small)."""
    n, m = len(baseline), len(candidate)
    if n == 0 or m == 0:
        return 1.0
    u = sum((b > a) + 0.5 * (b == a) for a in baseline for b in candidate)
    counts = u_counts(n, m)
    total = math.comb(n + m, n)
    # a half-integer U (ties) is taken at the whole U on its less extreme side, each tail
    below = sum(counts[:math.ceil(u) + 1]) / total
    above = sum(counts[math.floor(u):]) / total
    return min(1.0, 2 * min(below, above))


def shift_interval(baseline: Sequence[float], candidate: Sequence[float],
                   confidence: float) -> tuple[float, float, float]:
    """Hodges-Lehmann's shift candidate - baseline and its distribution-free interval at
    `confidence`: (estimate, low, high); low and high are nan when the samples are too
    few for an interval at that confidence (4 and 4 are enough for 95%)."""
    differences = np.sort(np.subtract.outer(np.asarray(candidate, dtype=np.float64),
                                            np.asarray(baseline, dtype=np.float64)).ravel())
    estimate = float(np.median(differences))
    counts = u_counts(len(baseline), len(candidate))
    total = math.comb(len(baseline) + len(candidate), len(baseline))
    tail, k, below = (1 - confidence) / 2, 0, 0
    while k < len(counts) and (below + counts[k]) / total <= tail:
        below += counts[k]
        k += 1  # P(U < k) <= tail
    if k == 0:
        return estimate, math.nan, math.nan
    return estimate, float(differences[k - 1]), float(differences[-k])


def ratio_interval(baseline: Sequence[float], candidate: Sequence[float],
                   confidence: float) -> tuple[float, float, float]:
    """Hodges-Lehmann's ratio candidate / baseline of two sets of positive replicates and
    its interval (`shift_interval` on their logs): (ratio, low, high), low and high nan
    when too few; a ratio past the floats (replicates read from a file may be far
    apart) is inf."""
    shifted = shift_interval([math.log(x) for x in baseline],
                             [math.log(x) for x in candidate], confidence)
    ratio, low, high = (math.inf if x >= 700 else math.exp(x) for x in shifted)  # nan: nan
    return ratio, low, high
