"""What the report shows, gathered from the store as plain JSON-ready data (its runs,
changes and case histories as the dashboard's pages give them: report/views.py): the runs,
the detected changes (over every series) and, where the caller explains them, where
each regression lives, the series drawn with their change points (at most
MAX_SERIES_DRAWN, those with a change first, each as the dashboard draws a case:
report/views.py history_series, commits in commit order, reduced to MAX_POINTS_DRAWN
buckets when longer: the page says what it left out), an A/B comparison of two runs and
one run's raw samples."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from torchmark.regressions.history import Change, Series, load_series, scan
from torchmark.regressions.rescan import CHUNK
from torchmark.report.views import (
    change_row,
    compare_view,
    history_plots,
    history_series,
    run_row,
    samples_shown,
)

MAX_AB_CASES = 2000  # the A/B section's cases (the largest changes first)
MAX_DISTRIBUTION_CASES = 60  # a run's raw samples shown for at most this many cases
MAX_SERIES_DRAWN = 500  # series drawn: those with a change first (every one detected)
MAX_POINTS_DRAWN = 500  # each drawn series' newest runs


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _series_id(index: int) -> str:
    return f"s{index}"


def _series(s: Series, index: int, changes: Sequence[Change], hosts: dict[str, str],
            commits: dict[int, tuple[str | None, str | None]]) -> dict[str, Any]:
    """A drawn series, as the dashboard's case page draws it (report/views.py), with
    its commit axis' tick labels."""
    drawn = history_series(s, changes, commits, hosts, MAX_POINTS_DRAWN)
    [plot] = history_plots([drawn])
    return {"id": _series_id(index), "case_id": s.case_id, "title": s.title, **drawn,
            "labels": plot["labels"]}


def _drawn(series: Sequence[Series], changed: Sequence[Series]) -> list[Series]:
    """The series drawn: those with a change, then the others in order,
    MAX_SERIES_DRAWN in all, in series order."""
    kept = {id(s) for s in changed}
    return sorted([s for s in series if id(s) in kept][:MAX_SERIES_DRAWN]
                  + [s for s in series if id(s) not in kept][:max(0, MAX_SERIES_DRAWN
                                                                   - len(kept))],
                  key=_series_order)


def _series_order(s: Series) -> tuple[str, ...]:
    return (s.case_id, s.metric, s.machine or "", s.env or "",
            str(s.points[0].run_id) if s.points else "")


def _filtered(store: Any, cases: Sequence[str], since: str | None, glob: bool,
              q: float) -> tuple[list[Change], int, list[Series]]:
    """The changes, the number of series and the series drawn of the cases and runs
    asked for: their series read whole and scanned."""
    series = load_series(store, cases=cases, since=since, glob=glob)
    changes = scan(store, series=series, q=q, improvements=True)
    return changes, len(series), _drawn(series, [c.series for c in changes])


def _whole_store(store: Any, q: float) -> tuple[list[Change], int, list[Series]]:
    """_filtered for every case and run, as the dashboard's feed detects them
    (regressions/rescan.py: CHUNK cases read and detected at a time, in a process a
    core), so that memory stays bounded however large the store; the unchanged series
    drawn are read apart, without their samples."""
    from torchmark.regressions.history import with_marks
    from torchmark.regressions.rescan import DETECT_WORKERS, StoreDetection

    detection = StoreDetection()
    detection.update(store, workers=min(os.cpu_count() or 1, DETECT_WORKERS))
    changes = with_marks(detection.changes(q=q, improvements=True), store)
    changed = list({id(c.series): c.series for c in changes}.values())
    drawn = sorted(changed, key=_series_order)[:MAX_SERIES_DRAWN]
    shown = {_series_order(s) for s in drawn}
    room = MAX_SERIES_DRAWN - len(drawn)
    pending = sorted(detection.by_case)
    while room > 0 and pending:
        batch, pending = pending[:CHUNK], pending[CHUNK:]
        for s in load_series(store, cases=batch, samples=False):
            if room > 0 and _series_order(s) not in shown:
                drawn.append(s)
                room -= 1
    total = sum(len(entries) for entries in detection.by_case.values())
    return changes, total, sorted(drawn, key=_series_order)


def _ab(store: Any, run_a: int, run_b: int, cases: Sequence[str],
        glob: bool) -> dict[str, Any]:
    """The two runs compared as the dashboard's comparison page compares them (every
    case of `cases`, or all, on one page)."""
    from torchmark.core.result import cases_named

    wanted = cases_named(store.case_titles(), cases, glob) if cases else None
    data = compare_view(store, run_a, run_b, cases=wanted, per_page=MAX_AB_CASES)
    return {"baseline": run_a, "candidate": run_b, "total": data["total"],
            "rows": [{key: row[key] for key in ("case", "metric", "ratio", "low", "high",
                                                "verdict")} for row in data["rows"]]}


def _distributions(store: Any, run: int, patterns: Sequence[str],
                   glob: bool) -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    for r in store.result_records(run=run):
        if not r.samples or not r.case.named(patterns, glob):
            continue
        if len(cases) == MAX_DISTRIBUTION_CASES:
            break
        cases.append(samples_shown(r.case.id, r.case.title, r.metric, r.unit, r.samples))
    return {"run": run, "cases": cases}


def gather(store: Any, *, since: str | None = None, cases: Sequence[str] = (),
           glob: bool = False, run: int | None = None, ab: tuple[int, int] | None = None,
           q: float = 0.05,
           explainer: Callable[[Sequence[Change]], Sequence[tuple[Change, list[str]]]]
           | None = None) -> dict[str, Any]:
    """Everything the page shows. `cases`: ids or titles (shell patterns with `glob`);
    `run`: the run whose raw samples are shown (default: the newest); `ab`: the two runs
    of the A/B view (default: the two newest runs holding a case in common);
    `explainer`: where each regression's change lives, as lines a change (the caller's:
    rootcause.explain.explain_changes sits above the report)."""
    runs = store.runs(since=since)
    hosts = store.hostnames()
    changes, total, drawn = _filtered(store, cases, since, glob, q) \
        if cases or since is not None else _whole_store(store, q)
    by_series: dict[int, list[Change]] = {}
    index_of = {id(s): i for i, s in enumerate(drawn)}
    for c in changes:
        if id(c.series) in index_of:
            by_series.setdefault(index_of[id(c.series)], []).append(c)
    position = {id(c): i for i, c in enumerate(changes)}
    run_ids = [r["id"] for r in runs]
    if ab is None:
        ab = _newest_pair(store, run_ids)
    shown = run if run is not None else (run_ids[0] if run_ids else None)
    commits = store.run_commits(p.run_id for s in drawn for p in s.points)
    return {
        "store": store.where,
        "drawn": {"series": total, "series_drawn": len(drawn),
                  "max_points": MAX_POINTS_DRAWN,
                  "points_cut": sum(len(s.points) > MAX_POINTS_DRAWN for s in drawn)},
        "runs": [run_row(r, hosts) for r in runs],
        "explanations": [{"change": position[id(c)], "lines": lines}
                         for c, lines in (explainer(changes) if explainer else ())],
        "changes": [{**change_row(c, hosts),
                     "series": _series_id(index_of[id(c.series)])
                     if id(c.series) in index_of else None} for c in changes],
        "series": [_series(s, i, by_series.get(i, []), hosts, commits)
                   for i, s in enumerate(drawn)],
        "ab": _ab(store, *ab, cases, glob) if ab else None,
        "distributions": _distributions(store, shown, cases, glob) if shown is not None
        else None,
    }


def _newest_pair(store: Any, run_ids: Sequence[int]) -> tuple[int, int] | None:
    """The newest run that shares a case with an earlier one among the 20 before it
    (newest first), and the newest such earlier run; None when none of the 20 newest
    does (a `timeit --vs` run shares none with the runs before it)."""
    keys: dict[int, set[tuple[str, str]]] = {}

    def of(run: int) -> set[tuple[str, str]]:
        if run not in keys:
            keys[run] = run_keys(store, run)
        return keys[run]

    for i, newest in enumerate(run_ids[:20]):
        for other in run_ids[i + 1:i + 21]:
            if of(newest) & of(other):
                return other, newest
    return None


def run_keys(store: Any, run: int) -> set[tuple[str, str]]:
    """The (case, metric) pairs a run holds."""
    return {(r["case_id"], r["metric"]) for r in store.results(run=run)}
