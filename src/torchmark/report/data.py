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
from collections.abc import Callable, Sequence
from typing import Any

from torchmark.regressions.history import Change, Series, load_series, scan
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


def _drawn(series: Sequence[Series], by_series: dict[int, list[Change]]) -> list[int]:
    """The indexes of the series drawn: those with a change, then the others in order,
    MAX_SERIES_DRAWN in all."""
    changed = [i for i in range(len(series)) if i in by_series]
    others = [i for i in range(len(series)) if i not in by_series]
    return sorted((changed + others)[:MAX_SERIES_DRAWN])


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
    series = load_series(store, cases=cases, since=since, glob=glob)
    changes = scan(store, series=series, q=q, improvements=True)
    by_series: dict[int, list[Change]] = {}
    index_of = {id(s): i for i, s in enumerate(series)}
    for c in changes:
        by_series.setdefault(index_of[id(c.series)], []).append(c)
    position = {id(c): i for i, c in enumerate(changes)}
    run_ids = [r["id"] for r in runs]
    if ab is None:
        ab = _newest_pair(store, run_ids)
    shown = run if run is not None else (run_ids[0] if run_ids else None)
    drawn = _drawn(series, by_series)
    commits = store.run_commits(p.run_id for i in drawn for p in series[i].points)
    return {
        "store": store.where,
        "drawn": {"series": len(series), "series_drawn": len(drawn),
                  "max_points": MAX_POINTS_DRAWN,
                  "points_cut": sum(len(series[i].points) > MAX_POINTS_DRAWN for i in drawn)},
        "runs": [run_row(r, hosts) for r in runs],
        "explanations": [{"change": position[id(c)], "lines": lines}
                         for c, lines in (explainer(changes) if explainer else ())],
        "changes": [{**change_row(c, hosts), "series": _series_id(index_of[id(c.series)])}
                    for c in changes],
        "series": [_series(series[i], i, by_series.get(i, []), hosts, commits)
                   for i in drawn],
        "ab": _ab(store, *ab, cases, glob) if ab else None,
        "distributions": _distributions(store, shown, cases, glob) if shown is not None
        else None,
    }


def _newest_pair(store: Any, run_ids: Sequence[int]) -> tuple[int, int] | None:
    """The newest run and the newest earlier one sharing a case with it."""
    if len(run_ids) < 2:
        return None
    newest = {(r["case_id"], r["metric"]) for r in store.results(run=run_ids[0])}
    for other in run_ids[1:21]:  # a pair among the 20 newest, or none
        if newest & {(r["case_id"], r["metric"]) for r in store.results(run=other)}:
            return other, run_ids[0]
    return None
