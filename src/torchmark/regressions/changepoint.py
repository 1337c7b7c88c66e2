"""The record of one detected change in a series."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChangePoint:
    """A change of level: `index` is the first point of the new level; `before` and
    `after` are the medians of the segments either side, `ratio` is after / before, with
    its 95% interval `low`..`high`, and `p_value` the chance of a split this strong in a
    series without change (already corrected for the choice of its position)."""

    index: int
    before: float
    after: float
    ratio: float
    p_value: float
    low: float
    high: float

    def direction(self, higher_is_worse: bool = True) -> str:
        """"regression" when the value moved the worse way, else "improvement"."""
        return "regression" if (self.ratio > 1) == higher_is_worse else "improvement"
