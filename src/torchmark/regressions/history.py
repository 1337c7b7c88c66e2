"""The store's history as series, and the changes detected across them.

A series is one case's values for one metric on one (machine, env), in time order: a
result moved to another machine or env starts another series, so a machine change is
never read as a regression; so does a run whose fingerprint differs from the run before
it in a field that changes performance (the torch build, thread settings, hardware:
core/fingerprint.py), the series then saying what changed (`environment_change`). `scan` runs `detect` over every series, keeps the changes
that survive the false-discovery-rate control across all of them, and describes each
with its last good and first bad run and whether later runs recovered.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from torchmark.core.collector import collector_paused
from torchmark.core.result import METRICS, quartiles
from torchmark.regressions.detect import ChangePoint, Thresholds, detect, select_fdr
from torchmark.regressions.thresholds import MIN_SEGMENT

HIGHER_IS_WORSE = {metric: True for metric in METRICS}


class Point(NamedTuple):
    """One run's value of a series: its median, the spread of its raw samples, and where
    it was measured. (A named tuple: a store's history is a million of them.)"""

    run_id: int
    started: str
    value: float
    low: float  # the 25th and 75th percentiles of the run's raw samples (the band)
    high: float
    n: int
    commit: str | None
    torch: str | None
    dirty: bool | None = None  # the tree had uncommitted changes

    @property
    def commit_label(self) -> str:
        """The commit as tables show it ("9828482c+": dirty)."""
        from torchmark.core.provenance import commit_label

        return commit_label(self.commit, self.dirty, 8)


@dataclasses.dataclass(frozen=True)
class Series:
    case_id: str
    title: str
    metric: str
    unit: str
    machine: str | None
    env: str | None
    points: tuple[Point, ...]
    samples: tuple[tuple[float, ...], ...] | None = dataclasses.field(default=None, repr=False)
    # each run's raw samples, when loaded
    environment_change: str = ""  # why this series begins: "run 12: torch.version ..."

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]


@dataclasses.dataclass(frozen=True)
class Change:
    """A detected change of a series, with the runs either side of it."""

    series: Series
    point: ChangePoint
    kind: str  # "regression" or "improvement"
    last_good: Point
    first_bad: Point
    recovered_at: Point | None  # the first run back at the old level, if any
    mark: str | None = None  # dismissed, acknowledged, confirmed, not-confirmed
    note: str = ""
    # the series' runs of fewer than 3 samples, left out of detection
    few_samples: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        """The change's name for `torchmark regressions --dismiss/--acknowledge`."""
        return f"{self.series.case_id}@{self.first_bad.run_id}/{self.series.metric}"

    def to_dict(self) -> dict[str, Any]:
        s, p = self.series, self.point
        return {"key": self.key, "case_id": s.case_id, "case": s.title, "metric": s.metric,
                "unit": s.unit, "machine": s.machine, "env": s.env, "kind": self.kind,
                "before": p.before, "after": p.after, "ratio": p.ratio,
                "ratio_low": p.low, "ratio_high": p.high, "p_value": p.p_value,
                "last_good": self.last_good._asdict(),
                "first_bad": self.first_bad._asdict(),
                "recovered_at": self.recovered_at._asdict()
                if self.recovered_at else None, "mark": self.mark, "note": self.note,
                "few_samples": list(self.few_samples)}


def load_series(store: Any, *, cases: Sequence[str] = (), metric: str | None = None,
                since: str | None = None, machine: str | None = None,
                env: str | None = None, samples: bool = True,
                glob: bool = False) -> list[Series]:
    """Every (case, metric, machine, env) series of the store, oldest point first;
    `cases`: case ids or titles (with `glob`, shell patterns of them). Failed results
    are left out (a failure is no point of a level). `samples`: keep each run's raw
    samples."""
    with collector_paused():  # a million rows: the cycle collector's passes cost more
        return _load_series(store, cases, metric, since, machine, env, samples, glob)


def _load_series(store: Any, cases: Sequence[str], metric: str | None, since: str | None,
                 machine: str | None, env: str | None, samples: bool,
                 glob: bool) -> list[Series]:
    from torchmark.core.result import cases_named
    from torchmark.store.store import unpack_tuple

    titles = store.case_titles(cases) if cases and not glob and len(cases) <= 1000 \
        else {}
    if not cases or glob or len(titles) < len(set(cases)):  # names, not ids: every title
        titles = store.case_titles()
    wanted = set(cases_named(titles, cases, glob)) if cases else None
    rows, runs = store.series_rows(metric=metric, since=since, machine=machine, env=env,
                                   cases=sorted(wanted) if wanted is not None else None,
                                   samples=samples)
    lows = [math.nan if row.q1 is None else row.q1 for row in rows]
    highs = [math.nan if row.q3 is None else row.q3 for row in rows]
    # a result written without them (by a torchmark before schema 0008 that was still
    # running as its store was upgraded): from its samples, where they were read
    for i, row in enumerate(rows):
        if row.q1 is None and row.packed:
            lows[i], highs[i] = quartiles(unpack_tuple(row.packed)) or (math.nan, math.nan)
    grouped: dict[tuple[Any, ...], list[int]] = {}
    places = [runs[row.run_id] for row in rows]
    for i, (row, run) in enumerate(zip(rows, places, strict=True)):  # a failure: no point
        grouped.setdefault((row.case_id, row.metric, row.unit, run.machine, run.env),
                           []).append(i)
    out = []
    run_ids = [row.run_id for row in rows]
    for (case_id, name, unit, on, label), whole in grouped.items():
        for group, change in environment_parts(whole, places, run_ids):
            points = [Point(rows[i].run_id, places[i].started, float(rows[i].median),
                            lows[i], highs[i], int(rows[i].n), places[i].git_commit,
                            places[i].torch_version, places[i].git_dirty) for i in group]
            out.append(Series(case_id, titles[case_id], name, unit, on, label,
                              tuple(points),
                              tuple(unpack_tuple(rows[i].packed) for i in group)
                              if samples else None,
                              change))
    return out


def environment_parts(group: list[int], places: Sequence[Any], run_ids: Sequence[int]
                      ) -> list[tuple[list[int], str]]:
    """A series' rows (`group`, indexes into `places`, the rows' RunPlaces, and
    `run_ids`) cut where a run's performance fields differ from the last run's that
    recorded them, each part with what changed ("" for the first). A run without a
    fingerprint continues the part it follows."""
    from torchmark.core.fingerprint import differences

    parts: list[tuple[list[int], str]] = [([], "")]
    last = None
    for i in group:
        fields = places[i].comparable
        if fields is not None and last is not None and fields != last:
            found = [d for d in differences(dict(last), dict(fields)) if d.blocking]
            if found:
                parts.append(([], f"run {run_ids[i]}: the environment changed ("
                                  + "; ".join(d.describe() for d in found[:3])
                                  + (" ..." if len(found) > 3 else "") + ")"))
        if fields is not None:
            last = fields
        parts[-1][0].append(i)
    return parts


def _recovered(series: Series, change: ChangePoint,
               later: Iterable[ChangePoint]) -> Point | None:
    """The first run of a later level back within half the step of the old one."""
    step = abs(change.after - change.before)
    for other in later:
        if other.index > change.index and abs(other.after - change.before) <= step / 2:
            return series.points[other.index]
    return None


def series_changes(series: Series, found: Sequence[ChangePoint],
                   few: Iterable[int] | None = None) -> list[Change]:
    """The change points of one series as Changes (improvements included); the last
    good run is the last before the change that detection used (runs of fewer than 3
    samples are left out, and named). `few`: those runs' indexes, when the series no
    longer holds its samples (few_runs' answer)."""
    left_out = set(few_runs(series) if few is None else few)
    worse_up = HIGHER_IS_WORSE.get(series.metric, True)
    out = []
    for cp in found:
        kind = "regression" if (cp.ratio > 1) == worse_up else "improvement"
        before = max((i for i in range(cp.index) if i not in left_out),
                     default=cp.index - 1)
        out.append(Change(series, cp, kind, series.points[before], series.points[cp.index],
                          _recovered(series, cp, found),
                          few_samples=tuple(series.points[i].run_id
                                            for i in sorted(left_out))))
    return out


def few_runs(series: Series) -> list[int]:
    """The indexes of the series' runs that detection left out for having fewer than 3
    samples (none when too few runs would remain)."""
    from torchmark.regressions.noise import few_samples

    few = few_samples(series.samples)
    return [] if len(series.points) - len(few) < 2 * MIN_SEGMENT else list(few)


def detect_each(series: Sequence[Series],
                thresholds: dict[str, Thresholds] | None = None) -> list[list[ChangePoint]]:
    """`detect`'s change points of each series (before the store-wide selection)."""
    limits = thresholds or {}
    return [detect(s.values, samples=s.samples, metric=s.metric,
                   thresholds=limits.get(s.metric)) for s in series]


def changes_of(series: Sequence[Series | None], found: Sequence[Sequence[ChangePoint]], *,
               q: float = 0.05, improvements: bool = False,
               few: Sequence[Iterable[int] | None] | None = None) -> list[Change]:
    """The changes that survive false-discovery-rate control at level `q` across every
    series (`found`: detect_each's, one list a series; a series without any may be
    None), newest first (then by key), without marks. `few`: each series' few_runs, when
    the series hold no samples."""
    kept = select_fdr(found, q=q)
    out = [change for i, (s, changes) in enumerate(zip(series, kept, strict=True))
           if changes and s is not None
           for change in series_changes(s, changes, few[i] if few is not None else None)
           if improvements or change.kind != "improvement"]
    out.sort(key=lambda c: c.key)
    out.sort(key=lambda c: (c.first_bad.started, c.first_bad.run_id), reverse=True)
    return out


def calibrated(store: Any, aa: str, *, cases: Sequence[str] = (), glob: bool = False,
               alarms_per_1000: float = 1.0) -> dict[str, Thresholds]:
    """Thresholds per metric measured on A/A history: the series of the runs labelled
    `env:LABEL`, or made at `commit:SHA` (one build measured again and again, so every
    change found in them is a false alarm; see calibrate)."""
    from torchmark.core.errors import UsageError
    from torchmark.regressions.calibrate import calibrate

    kind, _, value = aa.partition(":")
    if kind not in ("env", "commit") or not value:
        raise UsageError(f"A/A history must be env:LABEL or commit:SHA, got {aa!r}")
    found = load_series(store, cases=cases, env=value if kind == "env" else None, glob=glob)
    if kind == "commit":
        found = [_only_commit(s, value) for s in found]
    builds = {(p.commit, p.torch) for s in found for p in s.points}
    if len(builds) > 1:
        raise UsageError(f"{aa} is not A/A history: its runs span {len(builds)} builds "
                         "(commits or torch versions), and a real change among them would "
                         "be taken for noise; name the runs of one build")
    by_metric: dict[str, list[Series]] = {}
    for s in found:
        if len(s.points) >= 6:
            by_metric.setdefault(s.metric, []).append(s)
    if not by_metric:
        raise UsageError(f"{aa}: the store holds no series of 6 runs or more there to "
                         "calibrate on")
    return {name: calibrate([s.values for s in group], metric=name,
                            samples=[s.samples for s in group],
                            alarms_per_1000=alarms_per_1000)
            for name, group in by_metric.items()}


def _only_commit(series: Series, prefix: str) -> Series:
    keep = [i for i, p in enumerate(series.points) if (p.commit or "").startswith(prefix)]
    return dataclasses.replace(
        series, points=tuple(series.points[i] for i in keep),
        samples=tuple(series.samples[i] for i in keep) if series.samples else None)


def scan(store: Any, *, cases: Sequence[str] = (), metric: str | None = None,
         since: str | None = None, machine: str | None = None, env: str | None = None,
         q: float = 0.05, improvements: bool = False, glob: bool = False,
         series: Sequence[Series] | None = None,
         thresholds: dict[str, Thresholds] | None = None) -> list[Change]:
    """Every change across the store's series, newest first: detected per series, then
    kept under false-discovery-rate control at level `q` across all of them, with the
    marks users (or `--confirm`) stored. Improvements only with `improvements=True`.
    `thresholds`: per metric, from `calibrated` (the metric's defaults otherwise)."""
    if series is None:
        series = load_series(store, cases=cases, metric=metric, since=since,
                             machine=machine, env=env, glob=glob)
    found = detect_each(series, thresholds)
    return with_marks(changes_of(series, found, q=q, improvements=improvements), store)


def with_marks(changes: Sequence[Change], store: Any) -> list[Change]:
    """`changes` with the marks the store holds for them (the newest of each)."""
    marks = store.change_marks() if store is not None else {}
    out = []
    for change in changes:
        mark = marks.get((change.series.case_id, change.series.metric,
                          change.first_bad.run_id))
        out.append(dataclasses.replace(change, mark=mark["mark"], note=mark["note"])
                   if mark and mark["mark"] != "reopened" else change)  # taken back
    return out
