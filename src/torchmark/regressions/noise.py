"""The noise model: a series on a log scale (steps become relative), isolated outliers
replaced by their neighbours' median, the run-to-run noise measured robustly, and each
run's own uncertainty from the spread of its raw samples."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from torchmark.core.errors import UsageError

MAD_TO_SD = 1.4826  # a normal distribution's standard deviation over its median absolute deviation
IQR_TO_SD = 0.7413  # ... over its interquartile range
MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over a mean's (normal samples)
HALF_WINDOW = 3  # outliers: up to this many in a row are replaced
OUTLIER_SDS = 3.5  # ... when this many noise standard deviations from their neighbours


@dataclass(frozen=True)
class Prepared:
    """A series ready for segmentation and tests: `values` as given, `y` their logs with
    isolated outliers replaced, `errors` each run's standard error on that scale (0
    without raw samples), `scale` the run-to-run noise (at least `floor`)."""

    values: np.ndarray
    y: np.ndarray
    errors: np.ndarray
    scale: float
    floor: float


def prepare(values: Sequence[float], samples: Sequence[Sequence[float]] | None,
            floor: float) -> Prepared:
    """Check and prepare a series (positive finite values in time order, raw samples
    per run or None); `floor` is the least relative noise assumed."""
    array = _positive(values, "values")
    if array.ndim != 1:
        raise UsageError(f"values: expected a sequence of numbers, got shape {array.shape}")
    y = np.log(array)
    floor = math.log1p(floor)
    scale = max(difference_sd(y), floor)
    return Prepared(array, replace_outliers(y, scale), run_errors(samples, len(array)),
                    scale, floor)


def _positive(values: object, name: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{name}: expected numbers, got {values!r:.80}") from e
    if array.size and not (np.isfinite(array).all() and (array > 0).all()):
        raise UsageError(f"{name}: expected positive finite numbers (times or counts), "
                         f"got {array[~(np.isfinite(array) & (array > 0))][:3].tolist()}")
    return array


def robust_sd(x: np.ndarray) -> float:
    """The standard deviation that the median absolute deviation implies."""
    return float(MAD_TO_SD * np.median(np.abs(x - np.median(x)))) if x.size else 0.0


def difference_sd(y: np.ndarray) -> float:
    """The noise of a series from its consecutive differences: a step moves one
    difference only, so levels do not count as noise."""
    return robust_sd(np.diff(y)) / math.sqrt(2) if y.size > 2 else 0.0


def replace_outliers(y: np.ndarray, scale: float) -> np.ndarray:
    """A Hampel filter: a point further than OUTLIER_SDS * scale from the median of the
    HALF_WINDOW points either side of it (fewer at the ends: a first point too) takes
    that median. Levels of HALF_WINDOW + 1 points or more are kept."""
    if y.size < 3:
        return y
    padded = np.pad(y, HALF_WINDOW, constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * HALF_WINDOW + 1)
    [local] = row_quantiles(windows, (0.5,))
    return np.where(np.abs(y - local) > OUTLIER_SDS * scale, local, y)


def row_quantiles(rows: np.ndarray, qs: Sequence[float]) -> list[np.ndarray]:
    """Each q-quantile of each row, NaNs left out (linear interpolation, numpy's
    default); NaN for a row of NaNs only. np.nanquantile, without its loop over rows."""
    ordered = np.sort(rows, axis=1)  # NaNs last
    last = np.maximum(np.count_nonzero(~np.isnan(rows), axis=1) - 1, 0)
    out = []
    for q in qs:
        position = q * last
        low = np.floor(position).astype(np.intp)
        below = np.take_along_axis(ordered, low[:, None], axis=1)[:, 0]
        above = np.take_along_axis(ordered, np.minimum(low + 1, last)[:, None], axis=1)[:, 0]
        out.append(below + (above - below) * (position - low))
    return out


def run_errors(samples: Sequence[Sequence[float]] | None, n: int) -> np.ndarray:
    """Each run's standard error on the log scale: the spread of a sample (from the
    interquartile range of the run's raw samples, those not positive and finite left
    out) over the square root of its sample count. A run with fewer than 3 samples takes
    the median spread of the others over the root of its own count, so a run of one
    sample weighs little against runs of many; zeros without samples."""
    if samples is None:
        return np.zeros(n)
    if len(samples) != n:
        raise UsageError(f"samples: expected one sequence of raw samples per value ({n}), "
                         f"got {len(samples)}")
    counts = np.array([len(run) if run is not None else 0 for run in samples])
    width = int(counts.max(initial=0))
    if width < 3:
        return np.zeros(n)
    flat = _flat(samples, int(counts.sum()))
    padded = np.full((n, width), np.nan)
    rows = np.repeat(np.arange(n), counts)
    padded[rows, np.arange(flat.size) - np.repeat(np.cumsum(counts) - counts, counts)] = flat
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(padded)
    logs[~np.isfinite(logs)] = np.nan  # a sample of 0, below 0, inf or NaN: left out
    usable = np.count_nonzero(~np.isnan(logs), axis=1)
    q1, q3 = row_quantiles(logs, (0.25, 0.75))
    spread = IQR_TO_SD * (q3 - q1)  # of one sample
    known = usable >= 3
    typical = float(np.median(spread[known])) if known.any() else 0.0
    spread = np.where(known, spread, typical)
    return MEDIAN_SE * spread / np.sqrt(np.maximum(usable, 1))


def _flat(samples: Sequence[Sequence[float]], total: int) -> np.ndarray:
    """Every run's samples one after the other (a run of None: none)."""
    present = [run for run in samples if run is not None]
    try:  # runs of numbers (the store's tuples): read at C speed
        return np.fromiter(itertools.chain.from_iterable(present), np.float64, count=total)
    except (TypeError, ValueError):  # arrays, nested sequences: each flattened
        return np.concatenate([np.asarray(run, dtype=np.float64).reshape(-1)
                               for run in present])


def few_samples(samples: Sequence[Sequence[float]] | None) -> list[int]:
    """The indices of the runs with fewer than 3 raw samples (their medians are a sample
    or two: weighed by their count, and flagged where a change is reported)."""
    if samples is None:
        return []
    return [i for i, run in enumerate(samples) if run is not None and len(run) < 3]
