"""A run's stored medians as arrays: what ranks a comparison of two runs' cases before any
is judged, read from the results table's `median` column (no samples)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Collection

import numpy as np

Key = tuple[str, str]  # (case id, metric)


@dataclasses.dataclass(frozen=True, eq=False)
class RunMedians:
    """`keys[i]`'s median is `medians[i]` (NaN for a failed result or one without
    samples), in the order the run's results were stored."""

    keys: list[Key]
    medians: np.ndarray

    @functools.cached_property
    def index(self) -> dict[Key, int]:
        """key -> its position."""
        return {key: i for i, key in enumerate(self.keys)}

    def as_dict(self) -> dict[Key, float | None]:
        """key -> median (None where there is none)."""
        return {key: None if math.isnan(value) else value
                for key, value in zip(self.keys, self.medians.tolist(), strict=True)}

    def only(self, cases: Collection[str]) -> RunMedians:
        """The medians of these case ids alone."""
        kept = [i for i, (case_id, _) in enumerate(self.keys) if case_id in cases]
        return RunMedians([self.keys[i] for i in kept], self.medians[kept])

    def aligned(self, other: RunMedians) -> tuple[list[Key], np.ndarray, np.ndarray]:
        """The keys both runs hold (in this run's order) with this run's and `other`'s
        medians of them. Two runs of one suite store their cases in one order: then the
        keys are compared once, not looked up one by one."""
        if self.keys == other.keys:
            return self.keys, self.medians, other.medians
        where = other.index
        mine = [i for i, key in enumerate(self.keys) if key in where]
        keys = [self.keys[i] for i in mine]
        return keys, self.medians[mine], other.medians[[where[key] for key in keys]]

