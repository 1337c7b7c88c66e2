"""A warm-up that is checked, not assumed.

A statement can run slower for its first hundreds of calls (a lazy initialisation, a
cache filling, an allocator growing its pools, a CPU clock ramping up): blocks timed
then are not the steady state. After the blocks are timed, every split of them into
the first k and the rest is scored by a one-sided rank test (Mann-Whitney: the first k
slower), all at once from the blocks' ranks; at the best split, when the test says so
at TREND_P and the first k's median is above the rest's by more than TREND_MARGIN (or,
when more, the rest's own IQR / median), the first k were still warm-up. They are
dropped, blocks are timed until the kept ones again reach the run time asked for, and
the test repeats, within a budget of time.
A rank test cannot tell a lead of one to three blocks at TREND_P (one block of 40 is the
slowest with p = 1/40 however slow it is), and a lazy initialisation often fills no
more: such a lead is warm-up when each of its blocks is slower than every later block
and than the later blocks' median by more than LEAD_MARGIN.
Dropping blocks of a stationary statement (a false alarm) costs time, never accuracy.
A statement that is stationary from its first block is tested once and measured no
longer than without the test.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from torchmark.verdicts.intervals import average_ranks

TREND_MARGIN = 0.02  # the first blocks this much slower (medians; at least the rest's
# IQR / median: noise alone moves a median that far) ...
TREND_P = 1e-3  # ... at this one-sided p-value: still warming up
MIN_BLOCKS_TESTED = 8  # fewer blocks: no test (too few to tell)
MIN_STEADY_BLOCKS = 4  # the steady part a split leaves, at least
LEAD_BLOCKS = 3  # a lead this short is judged by its size: each of its blocks slower
LEAD_MARGIN = 0.25  # than every later block, and than their median by this much
BUDGET_S = 2.0  # blocked_autorange's extension, at least: max(BUDGET_S, 10 x min_run_time)


def warm_up_end(times: Sequence[float]) -> int:
    """How many of the first blocks of `times` (in the order they ran) were still warm-up:
    0 when none were (see the module docstring)."""
    n = len(times)
    if n < MIN_BLOCKS_TESTED:
        return 0
    values = np.asarray(times, dtype=np.float64)
    ranks, tie_sizes = average_ranks(values)
    tie_term = float((tie_sizes ** 3 - tie_sizes).sum()) / (n * (n - 1))
    k = np.arange(1, n)  # the split: blocks [0, k) against [k, n)
    u = np.cumsum(ranks)[:-1] - k * (k + 1) / 2  # Mann-Whitney U of the first k
    sd = np.sqrt(k * (n - k) / 12 * ((n + 1) - tie_term))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(sd > 0, (u - k * (n - k) / 2 - 0.5) / sd, 0.0)
    keep = n - k >= MIN_STEADY_BLOCKS  # a steady part long enough to stand for it
    best = int(k[keep][np.argmax(z[keep])])
    p = 0.5 * math.erfc(float(z[best - 1]) / math.sqrt(2))  # one-sided: earlier is slower
    rest = values[best:]
    low, middle, high = np.percentile(rest, [25, 50, 75])
    margin = max(TREND_MARGIN, (high - low) / middle if middle > 0 else 0.0)
    slower = np.median(values[:best]) > middle * (1 + margin)
    return best if p < TREND_P and slower else _slow_lead(values)


def still_stationary(times: Sequence[float]) -> bool:
    """Whether the blocks kept after a cut, with no time left to time more, read
    stationary: enough of them to test, and none of them a further warm-up (too few to
    test: not shown stationary, so the measurement is warned of)."""
    return len(times) >= MIN_BLOCKS_TESTED and warm_up_end(times) == 0


def _slow_lead(values: np.ndarray) -> int:
    """The longest lead of at most LEAD_BLOCKS blocks each slower than every later block
    and than their median by more than LEAD_MARGIN; 0 when there is none."""
    for k in range(min(LEAD_BLOCKS, len(values) - MIN_STEADY_BLOCKS), 0, -1):
        slowest_later, fastest_lead = values[k:].max(), values[:k].min()
        if fastest_lead > slowest_later and \
                fastest_lead > np.median(values[k:]) * (1 + LEAD_MARGIN):
            return k
    return 0


@dataclasses.dataclass(frozen=True)
class WarmUp:
    """What came before the kept blocks: calls and seconds (the block-size search, and
    the blocks dropped as warm-up), how many blocks were dropped, whether the kept
    blocks tested stationary (`tested`: whether there were enough of them to test)."""

    calls: int
    seconds: float
    dropped_blocks: int = 0
    stationary: bool = True
    tested: bool = True

    def describe(self) -> str:
        state = "stationary" if self.stationary else "still getting faster"
        return f"{state} after {self.calls:,} calls, {self.seconds:.2g} s"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> WarmUp | None:
        """A WarmUp from its dict, or None when `data` is not a whole one."""
        if not isinstance(data, dict):
            return None
        calls, seconds, dropped = (data.get(k) for k in ("calls", "seconds", "dropped_blocks"))
        stationary, tested = data.get("stationary"), data.get("tested")
        whole = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for n in (calls, dropped))
        if not whole or not isinstance(stationary, bool) or not isinstance(tested, bool) or \
                isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or \
                not math.isfinite(seconds):
            return None
        return cls(int(calls), float(seconds), int(dropped),  # type: ignore[arg-type]
                   stationary, tested)


TRENDING_WARNING = ("  WARNING: the times were still getting faster when the measurement "
                    "ended ({}):\n           measure longer (a larger min_run_time or "
                    "max_run_time).")
