"""The store-wide detection kept current by detecting again only the cases whose results
changed: a dashboard's feed after a new run, without reading the whole store again.

`StoreDetection` holds, for every case, `detect`'s change points of each of its series
(before the store-wide selection) and the case's version (its number of results and
largest result id, store.case_versions); `update` detects again the cases whose version
differs, and `changes` applies the false-discovery-rate selection across all of them:
the same changes as history.scan over the whole store. Only the series with a change
point keep their points (no samples), so the state of 10M results is small enough to
pickle."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from torchmark.regressions.changepoint import ChangePoint
from torchmark.regressions.history import (
    Change,
    Series,
    changes_of,
    detect_each,
    few_runs,
    load_series,
)

CHUNK = 500  # cases read and detected together (bounds the memory of one pass)


@dataclasses.dataclass(frozen=True)
class SeriesDetection:
    """One series' change points (detect's); the series (points, no samples) and its
    runs of few samples only when it has any."""

    found: tuple[ChangePoint, ...]
    series: Series | None = None
    few: tuple[int, ...] = ()


@dataclasses.dataclass
class StoreDetection:
    by_case: dict[str, list[SeriesDetection]] = dataclasses.field(default_factory=dict)
    versions: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)

    def update(self, store: Any) -> int:
        """Detect again the cases whose results changed since the last update (all of
        them the first time); how many cases that was."""
        versions = store.case_versions()
        for gone in set(self.by_case) - set(versions):
            del self.by_case[gone]
        stale = sorted(case for case, version in versions.items()
                       if self.versions.get(case) != version)
        for start in range(0, len(stale), CHUNK):
            chunk = stale[start:start + CHUNK]
            series = load_series(store, cases=chunk)
            found = detect_each(series)
            for case in chunk:
                self.by_case[case] = []
            for s, points in zip(series, found, strict=True):
                self.by_case[s.case_id].append(
                    SeriesDetection(tuple(points), dataclasses.replace(s, samples=None),
                                    tuple(few_runs(s)))
                    if points else SeriesDetection(()))
        self.versions = versions
        return len(stale)

    def changes(self, *, q: float = 0.05, improvements: bool = False) -> list[Change]:
        """The changes across the store (history.changes_of), without marks."""
        entries = [entry for case in sorted(self.by_case) for entry in self.by_case[case]]
        found: list[Sequence[ChangePoint]] = [entry.found for entry in entries]
        series = [entry.series for entry in entries]
        return changes_of(series, found, q=q, improvements=improvements,
                          few=[entry.few for entry in entries])
