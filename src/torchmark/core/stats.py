"""Small statistics and formatting helpers shared by Measurement and Compare.

Everything here works in seconds and plain floats; nothing imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

_UNITS = (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1))
_ENGLISH = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of already sorted values, linear interpolation (numpy's default),
    rounded as torch.quantile rounds (its lerp counts from the nearer end); NaN when a
    value is NaN (sorting leaves NaN anywhere, so no position could be trusted)."""
    if not sorted_values:
        raise ValueError("quantile of an empty sequence")
    if any(math.isnan(v) for v in sorted_values):
        return math.nan
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    start, end = sorted_values[lo], sorted_values[hi]
    if frac < 0.5:
        return start + (end - start) * frac
    return end - (end - start) * (1 - frac)


def select_unit(t: float) -> tuple[str, float]:
    """The unit that shows `t` seconds with one to three leading digits.

    Times below a nanosecond stay in nanoseconds and times of a thousand seconds or
    more stay in seconds.
    """
    if math.isinf(t):
        return _UNITS[3]
    if not t > 0:  # zero, negative or NaN
        return _UNITS[0]
    index = int(math.log10(t) // 3) + 3  # ns -> 0, us -> 1, ms -> 2, s -> 3
    return _UNITS[min(max(index, 0), 3)]


def unit_to_english(u: str) -> str:
    """'us' -> 'microsecond'."""
    return _ENGLISH[u]


def trim_sigfig(x: float, n: int) -> float:
    """Round `x` to `n` significant figures (3.14159, 2 -> 3.1)."""
    if n != int(n):
        raise ValueError(f"the number of significant figures must be an integer, got {n!r}")
    if x == 0 or not math.isfinite(x):
        return x
    magnitude = math.ceil(math.log10(abs(x)))
    scale = 10.0 ** (magnitude - int(n))
    return float(round(x / scale) * scale)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers in `text` by value: "0_9" before "0_10"."""
    import re

    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", text) if part)


def ordered_unique(elements: Iterable[Any]) -> list[Any]:
    """Unique elements in order of first appearance."""
    return list(dict.fromkeys(elements))


def population_std(values: Sequence[float]) -> float:
    """Standard deviation with divisor n (0.0 for fewer than two values)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over mean (0.0 for fewer than two values)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(var) / mean
