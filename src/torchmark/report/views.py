"""What each page of the dashboard (`torchmark serve`) shows, as plain data: the HTML
pages and the JSON API under /api/v1/ serve the same values, and the static report draws
a case's history from `case_view` too.

- `runs_view`: a page of runs, filtered by machine, env, commit, command and date;
- `run_view`: one run's provenance, fingerprint and results;
- `case_view`: a case's history per metric and machine, commits on the x axis in commit
  order (the committer date; the run's start where a run recorded none), each point's
  commit subject, torch build, machine and sample spread, the change points with their
  ratio and interval; a history longer than MAX_POINTS reduced to MAX_POINTS buckets at most
  (saying so), change points kept;
- `regressions_view`: the changes detected across the store, newest first, filtered by
  metric, machine, size and state (new, confirmed, not-confirmed, dismissed,
  acknowledged, recovered);
- `compare_view`: the verdict engine's table of two runs (as `torchmark compare`);
- `search_view`: cases whose names or parameters hold a text.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import statistics
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from torchmark.core.provenance import commit_label
from torchmark.regressions.history import Change, Point, Series

MAX_POINTS = 400  # points a history plot draws; longer ones are reduced server-side
PAGE_SIZE = 50
MAX_FAILURES_SHOWN = 20  # a case without a measurement: its newest failures
MAX_SAMPLES_SHOWN = 400  # a result's raw samples drawn, evenly thinned beyond this
STATES = ("new", "confirmed", "not-confirmed", "dismissed", "acknowledged", "recovered")


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def runs_view(store: Any, *, machine: str | None = None, env: str | None = None,
              commit: str | None = None, command: str | None = None,
              since: str | None = None, until: str | None = None, page: int = 1,
              per_page: int = PAGE_SIZE) -> dict[str, Any]:
    """One page of runs, newest first, and how many the filters select."""
    page = max(1, page)
    runs, total = store.runs_page(machine=machine, env=env, commit=commit, command=command,
                                  since=since, until=until, offset=(page - 1) * per_page,
                                  limit=per_page)
    hosts = store.hostnames()
    return {"page": page, "per_page": per_page, "total": total,
            "filters": {"machine": machine, "env": env, "commit": commit,
                        "command": command, "since": since, "until": until},
            "runs": [run_row(run, hosts) for run in runs]}


def run_row(run: dict[str, Any], hosts: dict[str, str]) -> dict[str, Any]:
    """A run as the runs page and the report list it."""
    return {"id": run["id"], "started": run["started"], "status": run["status"],
            "command": shlex.join(str(word) for word in run["command"] or []),
            "commit": run["git_commit"],
            "dirty": run["git_dirty"], "subject": run.get("commit_subject"),
            "torch": run["torch_version"], "machine": hosts.get(run["machine"] or "",
                                                                run["machine"]),
            "env": run["env"], "results": run.get("results", 0),
            "resumed": _resumes(run.get("tags"))}


def _resumes(tags: Any) -> list[dict[str, str]]:
    """When a run was resumed and by which command line (Store.reopen_run's note in its
    tags), oldest first; what is not as torchmark writes it is left out."""
    noted = tags.get("resumed") if isinstance(tags, dict) else None
    return [{"at": str(x.get("at", ""))[:40],
             "command": shlex.join(str(word) for word in x["command"])}
            for x in (noted if isinstance(noted, list) else [])
            if isinstance(x, dict) and isinstance(x.get("command"), list)]


def run_view(store: Any, run_id: int, page: int = 1,
             per_page: int = PAGE_SIZE) -> dict[str, Any] | None:
    """A run: its provenance (its fingerprint apart) and a page of its results (case,
    metric, unit, n, median, IQR, warnings, failure), by case name, the page's times
    also as Compare's tables (`compare_tables`), and their raw samples
    (`samples_shown`); None for no such run."""
    provenance = store.run_provenance(run_id)
    if provenance is None:
        return None
    runs, _ = store.runs_page(run=run_id, limit=1)
    fingerprint = provenance.pop("environment", None) or {}
    page = max(1, page)
    found, total = store.run_results_page(run_id, (page - 1) * per_page, per_page)
    rows = [{"case_id": r["case_id"], "case": _title(r), "metric": r["metric"],
             "unit": r["unit"], "n": r["n"], "median": _finite(r["median"]),
             "iqr": _finite(r["iqr"]), "failure": r["failure"],
             "warnings": len(r["warnings"] or []),
             "warning_text": [str(w)[:300] for w in (r["warnings"] or [])][:5]}
            for r in found]
    measured = store.results(run=run_id, samples=True, cases=sorted({
        r["case_id"] for r in found})) if found else []
    return {"run": run_row(runs[0], store.hostnames()) if runs else {"id": run_id},
            "provenance": provenance, "fingerprint": fingerprint, "results": rows,
            "tables": compare_tables(store.measurements_of(measured)),
            "samples": [samples_shown(r["case_id"], _title(r), r["metric"], r["unit"],
                                      r["samples"]) for r in measured if r["samples"]],
            "previous": store.previous_run(run_id), "page": page, "per_page": per_page,
            "total": total}


def samples_shown(case_id: str, title: str, metric: str, unit: str,
                  samples: Sequence[float]) -> dict[str, Any]:
    """A result's raw samples as the run page and the report draw them (samples_plot.js):
    MAX_SAMPLES_SHOWN at most, evenly thinned beyond."""
    step = max(1, -(-len(samples) // MAX_SAMPLES_SHOWN))  # rounded up
    return {"case_id": case_id, "case": title, "metric": metric, "unit": unit,
            "samples": list(samples[::step])}


def compare_tables(measurements: Sequence[Any]) -> list[dict[str, Any]]:
    """Measurements (each with its stored case's id in its metadata) laid out as
    Compare lays them out (compare/layout.py: a table a label, rows by thread count,
    env and sub-label, a column a description and quantity, colour grades against each
    column's best, digits trimmed to what the spread supports), each cell with its text,
    grade and case id."""
    from torchmark.compare.compare import clock_tagged
    from torchmark.compare.layout import Colorize, Options, TableLayout

    case_of: dict[int, str | None] = {}
    by_label: dict[str | None, list[Any]] = {}
    for m in measurements:
        tagged = clock_tagged(m)
        case_of[id(tagged)] = (m.metadata or {}).get("case_id")
        by_label.setdefault(tagged.task_spec.label, []).append(tagged)
    options = Options(Colorize.COLUMNWISE, trim_significant_figures=True,
                      highlight_warnings=True)
    out = []
    for group in by_label.values():
        layout = TableLayout(group, options)
        out.append({
            "label": layout.label or "", "note": layout.unit_note,
            "columns": ["" if key is None else str(key) for key in layout.column_keys],
            "rows": [{"name": row.name,
                      "threads": row.num_threads if row.starts_group else None,
                      "env": layout.env_text(row) if row.shows_env else None,
                      "cells": [None if m is None else {
                          "text": column.short(m, layout.scale),
                          "grade": grade.value if grade is not None else None,
                          "case_id": case_of.get(id(m))}
                          for m, column, grade in zip(row.results, layout.columns,
                                                      row.grades, strict=True)]}
                     for row in layout.rows]})
    return out


def _title(row: dict[str, Any]) -> str:
    from torchmark.core.result import Case

    return Case(id=row["case_id"], frontend=row["frontend"], stmt=row["stmt"] or "",
                label=row["label"], sub_label=row["sub_label"],
                description=row["description"], threads=row["threads"] or 1).title


def case_view(store: Any, case_id: str, *, metric: str | None = None,
              max_points: int = MAX_POINTS,
              detected: Sequence[Change] | None = None) -> dict[str, Any] | None:
    """A case's history (module docstring); None for a case the store does not hold.
    `detected`: the changes found across the whole store (the regressions feed's), so
    the page shows the same ones; without them, the case's series are scanned alone."""
    from torchmark.regressions.history import load_series, scan

    case = store.case_row(case_id)
    if case is None:
        return None
    # the raw samples only for a scan of its own (the page draws their quartiles)
    series = load_series(store, cases=[case_id], metric=metric, samples=detected is None)
    if detected is None:
        changes = scan(store, series=series, improvements=True)
    else:  # the store-wide scan's, matched to these series by their first bad run
        changes = [dataclasses.replace(c, series=s) for s in series for c in detected
                   if c.series.case_id == case_id and c.series.metric == s.metric
                   and (c.series.machine, c.series.env) == (s.machine, s.env)
                   and any(p.run_id == c.first_bad.run_id for p in s.points)]
    commits = store.run_commits(p.run_id for s in series for p in s.points)
    hosts = store.hostnames()
    drawn = [history_series(s, [c for c in changes if c.series is s], commits, hosts,
                            max_points) for s in series]
    # a case that never measured (every result failed) says why, not an empty page
    failures = [{"run": r["run_id"], "started": r["started"], "metric": r["metric"],
                 "failure": r["failure"]}
                for r in store.results(case=case_id)[-MAX_FAILURES_SHOWN:]
                if r["failure"]][::-1] if not series else []
    return {"case_id": case_id, "title": case.title, "params": dict(case.params),
            "frontend": case.frontend, "stmt": case.stmt, "setup": case.setup,
            "threads": case.threads, "device": case.device,
            "series": drawn, "plots": history_plots(drawn), "failures": failures}


def history_series(series: Series, changes: Sequence[Change],
             commits: dict[int, tuple[str | None, str | None]], hosts: dict[str, str],
             max_points: int) -> dict[str, Any]:
    """One series as drawn: its points in commit order, reduced to `max_points` buckets
    when longer (each bucket: its runs' median of medians, the lowest 25th and highest
    75th percentile, its first and last commit)."""
    place = {p.run_id: _place(p, commits) for p in series.points}
    points = sorted(series.points, key=lambda p: (*place[p.run_id], p.started, p.run_id))
    at = {p.run_id: i for i, p in enumerate(points)}
    buckets = _buckets(len(points), max_points,
                       keep={at[p.run_id] for c in changes
                             for p in (c.last_good, c.first_bad) if p.run_id in at})
    drawn: list[dict[str, Any]] = []
    for first, last in buckets:
        group = points[first:last]
        head, tail = group[0], group[-1]
        date, subject = commits.get(head.run_id, (None, None))
        lows = [p.low for p in group if math.isfinite(p.low)]
        highs = [p.high for p in group if math.isfinite(p.high)]
        label = commit_label(head.commit, head.dirty, 8)
        drawn.append({
            "runs": [p.run_id for p in group],
            "commit": label if len(group) == 1 else
            f"{label} .. {commit_label(tail.commit, tail.dirty, 8)}",
            "subject": subject or "", "commit_date": date,
            "started": head.started, "torch": head.torch or "",
            "place": place[head.run_id],
            "value": head.value if len(group) == 1 else
            statistics.median([p.value for p in group]),
            "low": min(lows) if lows else None, "high": max(highs) if highs else None,
            "n": sum(p.n for p in group)})
    where = {run: i for i, point in enumerate(drawn) for run in point["runs"]}
    return {
        "metric": series.metric, "unit": series.unit, "env": series.env,
        "machine": hosts.get(series.machine or "", series.machine),
        "environment_change": series.environment_change, "runs": len(points),
        "reduced": len(drawn) < len(points), "points": drawn,
        "changes": [{"key": c.key, "at": where[c.first_bad.run_id], "kind": c.kind,
                     "ratio": c.point.ratio, "low": _finite(c.point.low),
                     "high": _finite(c.point.high), "last_good": c.last_good.run_id,
                     "first_bad": c.first_bad.run_id, "mark": c.mark, "note": c.note}
                    for c in changes],
    }


def _place(p: Point, commits: dict[int, tuple[str | None, str | None]]) -> tuple[str, str]:
    """Where a run sits on the commit axis: its commit's date and its commit (the run's
    start for either it did not record)."""
    return (commits.get(p.run_id, (None, None))[0] or p.started, p.commit or p.started)


def history_plots(drawn: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """history_series' series as plots, one a metric and unit, each series (a machine,
    an env, a part after an environment change) a trace over one commit axis: each
    point gains its place `x` on that axis (one commit measured on two machines: one
    place; measured twice on one: two), each plot its series' indexes and the axis'
    tick `labels`."""
    plots: dict[tuple[str, str], dict[str, Any]] = {}
    for i, series in enumerate(drawn):
        plots.setdefault((series["metric"], series["unit"]), {
            "metric": series["metric"], "unit": series["unit"], "series": [],
            "labels": []})["series"].append(i)
    for plot in plots.values():
        keys = []
        for i in plot["series"]:
            seen: dict[tuple[str, str], int] = {}
            for point in drawn[i]["points"]:
                place = tuple(point["place"])
                seen[place] = seen.get(place, 0) + 1
                keys.append((*place, seen[place]))
        order = {key: x for x, key in enumerate(sorted(set(keys)))}
        plot["labels"] = [""] * len(order)
        points = (point for i in plot["series"] for point in drawn[i]["points"])
        for key, point in zip(keys, points, strict=True):
            point["x"] = order[key]
            plot["labels"][point["x"]] = plot["labels"][point["x"]] or point["commit"] or \
                point["started"][:16].replace("T", " ")
    return list(plots.values())


def _buckets(n: int, most: int, keep: set[int]) -> list[tuple[int, int]]:
    """[first, last) index ranges covering n points in order, at most `most` of them
    (when `most` leaves room for `keep`), each index of `keep` a bucket of its own; the
    other points spread evenly over the buckets left (a point kept splits the bucket it
    falls in, so two are set aside for each)."""
    if n <= most:
        return [(i, i + 1) for i in range(n)]
    free = [i for i in range(n) if i not in keep]
    share = max(1, most - 2 * len(keep))  # buckets for the points not kept
    # the free point j (of len(free)) goes to bucket j * share // len(free)
    group = {i: j * share // len(free) for j, i in enumerate(free)}
    out, start = [], 0
    for i in range(1, n + 1):
        if i == n or i in keep or i - 1 in keep or group[i] != group[i - 1]:
            out.append((start, i))
            start = i
    return out


def change_state(change: Change) -> str:
    """new, a mark (confirmed, not-confirmed, dismissed, acknowledged), or recovered."""
    if change.mark:
        return change.mark
    return "recovered" if change.recovered_at is not None else "new"


def regressions_view(changes: Sequence[Change], hosts: dict[str, str], *,
                     metric: str | None = None, machine: str | None = None,
                     env: str | None = None, case: str | None = None,
                     titles: dict[str, str] | None = None,
                     state: str | None = None, min_size: float = 0.0,
                     page: int = 1, per_page: int = PAGE_SIZE) -> dict[str, Any]:
    """The regressions of `changes` (a store's scan), newest first, filtered (`case`: an
    id or title, or a shell pattern of either, among `titles` (id -> title; default:
    the changes' cases): cases_matching); sizes as relative steps (0.1: 10%)."""
    if case is not None and titles is None:
        titles = {c.series.case_id: c.series.title for c in changes}
    wanted = set(cases_matching(titles or {}, case)) if case is not None else None
    picked = [c for c in changes if c.kind == "regression"
              and (metric is None or c.series.metric == metric)
              and (machine is None or on_machine(c.series.machine, machine, hosts))
              and (env is None or c.series.env == env)
              and (wanted is None or c.series.case_id in wanted)
              and (state is None or change_state(c) == state)
              and abs(c.point.ratio - 1) >= min_size]
    picked.sort(key=lambda c: (c.first_bad.started, c.first_bad.run_id), reverse=True)
    page = max(1, page)
    return {"page": page, "per_page": per_page, "total": len(picked),
            "filters": {"metric": metric, "machine": machine, "env": env, "case": case,
                        "state": state, "min_size": min_size},
            "regressions": [change_row(c, hosts) for c in
                            picked[(page - 1) * per_page:page * per_page]]}


def cases_matching(titles: dict[str, str], asked: str) -> list[str]:
    """The case ids of `titles` (id -> title) that `asked` names: an id or a title
    exactly, or, holding * ? or [, a shell pattern of either."""
    from torchmark.core.result import cases_named

    exact = cases_named(titles, [asked])
    return exact if exact or not any(ch in asked for ch in "*?[") else \
        cases_named(titles, [asked], glob=True)


def on_machine(fingerprint: str | None, asked: str, hosts: dict[str, str]) -> bool:
    """Whether a machine is the one asked for: its hostname, fingerprint, or the
    fingerprint's first characters (4 at least, as `torchmark runs` lists them)."""
    found = fingerprint or ""
    return asked in (found, hosts.get(found)) or \
        (len(asked) >= 4 and found.startswith(asked))


def change_row(c: Change, hosts: dict[str, str]) -> dict[str, Any]:
    """A detected change as the feed and the report list it."""
    return {"key": c.key, "case_id": c.series.case_id, "case": c.series.title,
            "metric": c.series.metric, "unit": c.series.unit, "kind": c.kind,
            "machine": hosts.get(c.series.machine or "", c.series.machine),
            "fingerprint": c.series.machine,  # what `regressions --json` names the machine by
            "env": c.series.env, "ratio": c.point.ratio, "low": _finite(c.point.low),
            "high": _finite(c.point.high), "p_value": c.point.p_value,
            "before": c.point.before, "after": c.point.after,
            "last_good": c.last_good.run_id, "first_bad": c.first_bad.run_id,
            "commit": c.first_bad.commit_label, "torch": c.first_bad.torch or "",
            "started": c.first_bad.started, "state": change_state(c), "mark": c.mark,
            "note": c.note, "recovered": c.recovered_at.run_id if c.recovered_at else None}


@dataclasses.dataclass(frozen=True)
class _Compared:
    """One side of a comparison as compare_view reads it: its name (a run id, or the
    reference of a side of several runs), its runs, each (case, metric)'s median, and
    how to read the results of some cases."""

    name: int | str
    runs: tuple[int, ...]
    medians: Any  # store/run_medians.py RunMedians
    fetch: Callable[[list[str]], dict[tuple[str, str], Any]]
    note: str = ""
    where: tuple[str | None, str | None] | None = None  # several runs': machine, env label


def _compared(store: Any, side: Any) -> _Compared:
    """A run id, or a regressions/refs.py Side: one of a single run is read as the run
    (its packed medians, then the page's results); one of several runs (a commit's,
    pooled; an env label's, each case from its newest run) from its results, as `gate`
    and `torchmark compare` judge it."""
    if isinstance(side, int) or len(side.runs) == 1:
        run = side if isinstance(side, int) else side.runs[0]

        def fetch(ids: list[str]) -> dict[tuple[str, str], Any]:
            return {(r.case.id, r.metric): r
                    for r in store.result_records(run=run, cases=ids)}

        return _Compared(run, (run,), store.run_medians(run), fetch)
    from torchmark.store.run_medians import RunMedians

    results = {(r.case.id, r.metric): r for r in side.results}
    medians = np.array([float(np.median(r.samples)) if r.ok and r.samples else math.nan
                        for r in results.values()], dtype=np.float64)

    def chosen(ids: list[str]) -> dict[tuple[str, str], Any]:
        wanted = set(ids)
        return {key: r for key, r in results.items() if key[0] in wanted}

    return _Compared(side.ref, side.runs, RunMedians(list(results), medians), chosen,
                     side.note, (side.machine, side.env))


def compare_view(store: Any, baseline: Any, candidate: Any, *, threshold: float = 0.05,
                 sort: str = "change", page: int = 1, per_page: int = PAGE_SIZE,
                 explainer: Callable[[list[Any], list[Any]], list[list[str]]] | None = None,
                 cases: Collection[str] | None = None) -> dict[str, Any]:
    """The cases two sides share, a page at a time (`sort`: "change", the largest change
    of the medians first, slower or faster, or "case"), each judged as `torchmark
    compare` judges it: the family and the sides' common shift of all the cases (from
    their medians), the drift from each case's A/A history (verdicts/family.py `only`,
    `family`). A side is a run id or a resolved side of the store (regressions/refs.py
    Side: a commit's runs pooled, an env label's newest of each case). A run's medians
    are read packed and only the page's cases are read whole, so a page costs its own
    cases' reads and verdicts. `explainer(before, after)`: where the slower cases'
    changes live, as lines a case, from what their results hold (the caller's:
    rootcause sits above the views). `cases`: only these case ids (the comparison, its
    family included, is of them)."""
    from torchmark.core.result import distinct_titles
    from torchmark.core.stats import natural_key
    from torchmark.regressions.aa_history import history_ratios
    from torchmark.regressions.comparability import blocking_differences, side_fingerprint
    from torchmark.regressions.gate import side_of
    from torchmark.verdicts.engine import shown_values
    from torchmark.verdicts.family import Pair, judge_all, ratios_of, shifts_of_arrays

    first, second = _compared(store, baseline), _compared(store, candidate)
    medians_a, medians_b = first.medians, second.medians
    if cases is not None:
        wanted = set(cases)
        medians_a, medians_b = medians_a.only(wanted), medians_b.only(wanted)
    common, base, cand = medians_a.aligned(medians_b)
    ratios = ratios_of(base, cand)
    family = (len(common), shifts_of_arrays([metric for _, metric in common], ratios))

    page = max(1, page)
    if sort == "case":
        titles = store.case_titles(sorted({case for case, _ in common})) \
            if len(common) <= 1000 else store.case_titles()
        keys = sorted(common, key=lambda key: (natural_key(titles.get(key[0], key[0])),
                                             key[1]))
        shown = keys[(page - 1) * per_page:page * per_page]
    else:  # the largest changes first, slower or faster alike; no ratio last
        with np.errstate(invalid="ignore", divide="ignore"):
            largest = np.where(np.isnan(ratios), np.inf, -np.abs(np.log(ratios)))
        order = np.argsort(largest, kind="stable")[(page - 1) * per_page:page * per_page]
        shown = [common[i] for i in order.tolist()]  # the page's keys alone
    ids = sorted({case for case, _ in shown})
    a, b = first.fetch(ids), second.fetch(ids)
    machine, env = second.where or (_machine(b.values()), _env(b.values()))
    histories = history_ratios(store, set(shown), machine=machine, env=env,
                               exclude={*first.runs, *second.runs})
    sides = {key: (side_of(a[key]), side_of(b[key])) for key in shown}
    verdicts = judge_all([Pair(key, *sides[key], key[1]) for key in shown],
                         threshold=threshold, histories=histories, only=set(shown),
                         family=family)
    differences = blocking_differences(side_fingerprint(a.values()),
                                       side_fingerprint(b.values()))
    slower = [key for key in shown if verdicts[key].kind == "slower"]
    explanations = explainer([a[key] for key in slower], [b[key] for key in slower]) \
        if explainer and slower else []

    # the medians, or the means a verdict of stated statistics is of (shown_values)
    values = {key: shown_values(*sides[key]) for key in shown}

    names = distinct_titles(r.case for r in a.values())  # the page's told apart, as gate's

    return {"baseline": first.name, "candidate": second.name,
            "baseline_runs": list(first.runs), "candidate_runs": list(second.runs),
            "baseline_note": first.note, "candidate_note": second.note,
            "threshold": threshold,
            "sort": sort, "page": page, "per_page": per_page, "total": len(common),
            "environment_differences": [d.describe() for d in differences],
            "only_baseline": len(medians_a.keys) - len(common),
            "only_candidate": len(medians_b.keys) - len(common),
            "explanations": explanations,
            "rows": [{"case_id": key[0], "case": names[key[0]], "metric": key[1],
                      "unit": a[key].unit, "baseline": _finite(values[key][0]),
                      "candidate": _finite(values[key][1]), "means": values[key][2],
                      "ratio": _finite(verdicts[key].ratio),
                      "low": _finite(verdicts[key].lower),
                      "high": _finite(verdicts[key].upper), "verdict": verdicts[key].kind,
                      "reason": verdicts[key].reason} for key in shown]}


def _machine(results: Any) -> str | None:
    """The machine fingerprint of a run's results (as refs.Side.machine)."""
    return next((r.provenance.machine.fingerprint for r in results
                 if r.provenance is not None), None)


def _env(results: Any) -> str | None:
    return next((r.provenance.env for r in results if r.provenance is not None), None)


def search_view(store: Any, text: str, *, page: int = 1,
                per_page: int = PAGE_SIZE) -> dict[str, Any]:
    """Cases whose id, names or parameters hold `text` (case-insensitive), a page at a
    time by id; `more`: whether a next page holds more (the matches are not counted: that
    would read every case)."""
    from torchmark.core.result import Case

    page = max(1, page)
    found = store.search_cases(text, limit=per_page + 1, offset=(page - 1) * per_page) \
        if text.strip() else []
    return {"query": text, "page": page, "per_page": per_page,
            "more": len(found) > per_page, "cases": [
        {"case_id": row["id"], "frontend": row["frontend"], "params": row["params"] or {},
         "title": Case(id=row["id"], frontend=row["frontend"], stmt=row["stmt"] or "",
                       label=row["label"], sub_label=row["sub_label"],
                       description=row["description"], threads=row["threads"] or 1).title}
        for row in found[:per_page]]}
