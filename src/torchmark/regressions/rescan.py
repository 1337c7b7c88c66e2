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
from torchmark.regressions.thresholds import MIN_SEGMENT

CHUNK = 500  # cases read and detected together (bounds the memory of one pass)
DETECT_WORKERS = 8  # processes of one detection, at most (one a core)


@dataclasses.dataclass(frozen=True)
class SeriesDetection:
    """One series' change points (detect's); the series (points, no samples) and its
    runs of few samples only when it has any."""

    found: tuple[ChangePoint, ...]
    series: Series | None = None
    few: tuple[int, ...] = ()
    runs: int = 0  # the series' runs, and those left out for their few samples (each
    left_out: int = 0  # series': what the feed says was too short to tell)


def detect_cases(store: Any, cases: Sequence[str]) -> dict[str, list[SeriesDetection]]:
    """Each case's series (of the store at `store`) and their change points."""
    series = load_series(store, cases=cases)
    found: dict[str, list[SeriesDetection]] = {case: [] for case in cases}
    for s, points in zip(series, detect_each(series), strict=True):
        few = tuple(few_runs(s))
        found[s.case_id].append(SeriesDetection(
            tuple(points), dataclasses.replace(s, samples=None) if points else None,
            few if points else (), len(s.points), len(few)))
    return found


_stores: dict[str, Any] = {}  # a worker process' store, opened once


def _detect_at(url: str, cases: Sequence[str]) -> dict[str, list[SeriesDetection]]:
    """detect_cases in a worker process, on the store at `url`."""
    from torchmark.store import open as open_store

    if url not in _stores:
        _stores[url] = open_store(url)
    return detect_cases(_stores[url], cases)


def _another(now: tuple[str, str | None] | None, was: tuple[str, str | None]) -> bool:
    """Whether a run id (its start and end, now and at the last update) names another
    run now: gone, started at another time, or ended otherwise than it had (a run
    ending, from running, is the same run)."""
    return now is None or now[0] != was[0] or (was[1] is not None and now[1] != was[1])


@dataclasses.dataclass
class StoreDetection:
    by_case: dict[str, list[SeriesDetection]] = dataclasses.field(default_factory=dict)
    versions: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    runs: dict[int, tuple[str, str | None]] = dataclasses.field(default_factory=dict)
    # each run's id -> its start and end (Store.run_starts)

    def update(self, store: Any, workers: int = 1) -> int:
        """Detect again the cases whose results changed since the last update (all of
        them the first time, and all of them after a run was deleted: SQLite gives a
        deleted run's ids to the next ones, which a case's version cannot tell), CHUNK
        cases at a time, in `workers` processes (each reading and detecting its own
        chunks); how many cases that was."""
        runs = store.run_starts()
        if any(_another(runs.get(run), was) for run, was in self.runs.items()):
            self.versions = {}  # a run deleted (or its id given to another)
        versions = store.case_versions()
        for gone in set(self.by_case) - set(versions):
            del self.by_case[gone]
        stale = sorted(case for case, version in versions.items()
                       if self.versions.get(case) != version)
        chunks = [stale[start:start + CHUNK] for start in range(0, len(stale), CHUNK)]
        if workers > 1 and len(chunks) > 1 and not store.in_memory:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(min(workers, len(chunks)),
                                     mp_context=multiprocessing.get_context("spawn")) as pool:
                for found in pool.map(_detect_at, [store.url] * len(chunks), chunks):
                    self.by_case.update(found)
        else:
            for chunk in chunks:
                self.by_case.update(detect_cases(store, chunk))
        self.versions, self.runs = versions, runs
        return len(stale)

    def checked(self) -> dict[str, int]:
        """What was checked, as `regressions` says it: the series, those with too few
        runs to tell a change (under 2 x MIN_SEGMENT), and the runs left out of them for
        their few samples."""
        entries = [entry for case in self.by_case.values() for entry in case]
        return {"series": len(entries),
                "short": sum(entry.runs < 2 * MIN_SEGMENT for entry in entries),
                "min_runs": 2 * MIN_SEGMENT,
                "left_out_runs": sum(entry.left_out for entry in entries)}

    def changes(self, *, q: float = 0.05, improvements: bool = False) -> list[Change]:
        """The changes across the store (history.changes_of), without marks."""
        entries = [entry for case in sorted(self.by_case) for entry in self.by_case[case]]
        found: list[Sequence[ChangePoint]] = [entry.found for entry in entries]
        series = [entry.series for entry in entries]
        return changes_of(series, found, q=q, improvements=improvements,
                          few=[entry.few for entry in entries])
