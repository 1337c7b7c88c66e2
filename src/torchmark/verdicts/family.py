"""Many cases of two runs judged at once, as `gate`, `compare RUN_A RUN_B`, `ab` and the
pytest plugin judge them: one rule, so the same runs get the same verdicts from each.

- **Family-wise confidence.** A comparison of n cases asks n questions; at 95% each, ten
  unchanged cases read `slower` somewhere in one pair of runs in five. Each case is
  judged at 1 - (1 - confidence) / n (Bonferroni), so that a comparison of unchanged
  code says `slower` of any of its cases at most 1 - confidence of the time.
- **The runs' common shift.** A run measured while the machine was slower (another job,
  a throttled CPU) moves every case alike. Where a metric has MIN_SHIFT_CASES cases or
  more (times only: exact counts have no drift), the median of their log ratios is that
  shift, and it widens every case's interval as drift does (docs/verdicts.md).
- **The A/A history**, where the caller read one: each case's drift from its own ratios
  at the family-wise confidence (verdicts/drift.py).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from torchmark.verdicts.drift import from_history
from torchmark.verdicts.engine import EXACT_METRICS, Side, judge
from torchmark.verdicts.verdict import Verdict

MIN_SHIFT_CASES = 5  # cases of one metric a common shift is read from, at least


@dataclasses.dataclass(frozen=True)
class Pair:
    """One case of the two runs: its key (any label the caller matches by), both sides,
    its metric."""

    key: Hashable
    baseline: Side
    candidate: Side
    metric: str = "wall"


def each_confidence(confidence: float, cases: int) -> float:
    """The confidence each of `cases` cases is judged at (Bonferroni)."""
    return 1 - (1 - confidence) / max(cases, 1)


def common_shifts(pairs: Sequence[Pair]) -> dict[str, float]:
    """metric -> the median log ratio of its cases' medians, for the time metrics with
    MIN_SHIFT_CASES measured cases or more."""
    return shifts_of((p.metric, _median_ratio(p)) for p in pairs)


def shifts_of(ratios: Iterable[tuple[str, float | None]]) -> dict[str, float]:
    """common_shifts from each case's (metric, ratio of the medians, None where a side
    has none): what a caller holding only the runs' stored medians computes."""
    metrics, values = [], []
    for metric, ratio in ratios:
        metrics.append(metric)
        values.append(math.nan if ratio is None else ratio)
    return shifts_of_arrays(metrics, np.array(values, dtype=np.float64))


def shifts_of_arrays(metrics: Sequence[str] | np.ndarray,
                     ratios: np.ndarray) -> dict[str, float]:
    """shifts_of from `metrics[i]`'s ratio `ratios[i]` (NaN where a side has none)."""
    names = np.asarray(metrics, dtype=object)
    measured = ~np.isnan(ratios)
    shifts = {}
    for metric in sorted(set(names.tolist()) - set(EXACT_METRICS)):
        values = ratios[(names == metric) & measured]
        if len(values) >= MIN_SHIFT_CASES:
            with np.errstate(divide="ignore"):  # a ratio that underflowed to 0: -inf
                shifts[metric] = float(np.median(np.log(values)))
    return shifts


def _median_ratio(p: Pair) -> float | None:
    sides = (p.baseline, p.candidate)
    if any(s.failure is not None or len(s.samples) == 0 for s in sides):
        return None
    return ratio_of(*(statistics.median(s.samples) for s in sides))


def ratio_of(base: float | None, cand: float | None) -> float | None:
    """cand / base, the ratio of two medians; None unless both are positive and
    finite."""
    if base is None or cand is None or not (0 < base < math.inf and 0 < cand < math.inf):
        return None
    return cand / base


def ratios_of(base: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """ratio_of of each pair of medians: NaN where it is None."""
    valid = (base > 0) & (cand > 0) & (base < math.inf) & (cand < math.inf)
    out = np.full(base.shape, math.nan)
    with np.errstate(over="ignore", under="ignore"):  # inf and 0, as Python's division
        np.divide(cand, base, out=out, where=valid)
    return out


def judge_all(pairs: Sequence[Pair], *, threshold: float, confidence: float = 0.95,
              histories: Mapping[Any, Sequence[float]] | None = None,
              seed: int = 0, resamples: int = 2000,
              only: Collection[Hashable] | None = None,
              family: tuple[int, Mapping[str, float]] | None = None
              ) -> dict[Any, Verdict]:
    """Each pair's verdict (see the module docstring). `histories`: key -> the case's
    A/A log ratios (regressions/aa_history.py). `only`: the keys whose verdicts are
    wanted (a page of a long comparison). `family`: (its size, its common shifts:
    `shifts_of`) of the whole comparison, when `pairs` holds only part of it, so each
    verdict is the one judging them all gives."""
    size, shifts = (len(pairs), common_shifts(pairs)) if family is None else family
    each = each_confidence(confidence, size)
    histories = histories or {}
    out = {}
    for p in pairs:
        if only is not None and p.key not in only:
            continue
        ratios = histories.get(p.key)
        drift = from_history(ratios, each) if ratios else None
        out[p.key] = judge(p.baseline, p.candidate, metric=p.metric, threshold=threshold,
                           confidence=each, drift=drift, shift=shifts.get(p.metric, 0.0),
                           seed=seed, resamples=resamples)
    return out
