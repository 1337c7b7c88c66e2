"""The CI gate: did any case of the candidate get slower than the baseline by more than a
threshold?

Cases pair up by their stable id and metric, and all pairs are judged together by the
verdict engine (torchmark.verdicts.family) with the threshold as its smallest change:
instruction counts exactly, times by the interval of their ratio widened by the drift
between two runs of the same code (the case's A/A history in the store where the caller
looked it up, else the runs' processes or spreads) and by the runs' common shift, each
case at the family-wise confidence of the comparison. The gate fails on a case that is
`slower` or `failed`, and on one that is `unmeasured` (no interval could be formed: too
few samples, a baseline that failed) or missing from the candidate, unless unmeasured
cases are allowed: a gate never passes what it did not measure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from torchmark.core.result import Result, Stated, distinct_titles
from torchmark.core.stats import natural_key
from torchmark.verdicts import VERDICTS, CaseVerdict, Drift, Side, judge
from torchmark.verdicts.engine import shown_values
from torchmark.verdicts.replicates import MAX_REPLICATES

GateRow = CaseVerdict  # a case of the gate: its medians and verdict


@dataclasses.dataclass(frozen=True)
class GateReport:
    """Every compared case, and those found on one side only."""

    rows: tuple[GateRow, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    max_slowdown: float
    allow_unmeasured: bool = False

    @property
    def failing(self) -> tuple[GateRow, ...]:
        """The rows that fail the gate: slower, failed, and unmeasured unless allowed."""
        kinds = ("slower", "failed") + (() if self.allow_unmeasured else ("unmeasured",))
        return tuple(r for r in self.rows if r.kind in kinds)

    @property
    def missing(self) -> tuple[str, ...]:
        """The baseline's cases the candidate lacks, which fail the gate as unmeasured
        ones do (not measured there), unless unmeasured cases are allowed."""
        return () if self.allow_unmeasured else self.only_baseline

    @property
    def passed(self) -> bool:
        return not self.failing and not self.missing

    def counts(self) -> dict[str, int]:
        return {v: n for v in VERDICTS if (n := sum(r.kind == v for r in self.rows))}


def side_of(result: Result) -> Side:
    """The engine's view of a stored or saved result: samples, processes, failure."""
    build = result.provenance.build if result.provenance is not None else None
    if result.failure is not None:
        return Side(failure=result.failure.error, build=build)
    processes = (result.extra.get("metadata") or {}).get("processes") \
        if isinstance(result.extra.get("metadata"), Mapping) else None
    medians: tuple[float, ...] = ()
    spreads: tuple[float, ...] = ()
    if isinstance(processes, Mapping):  # per-run medians, each process's own spread
        medians, spreads = _numbers(processes.get("medians")), \
            _numbers(processes.get("spreads"))
        if not 2 <= len(medians) <= MAX_REPLICATES or any(m <= 0 for m in medians):
            medians, spreads = (), ()
    return Side(result.samples, medians, spreads, stated=Stated.of(result), build=build)


def _numbers(value: object) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    out = tuple(float(x) for x in value if isinstance(x, (int, float))
                and not isinstance(x, bool) and math.isfinite(x))
    return out if len(out) == len(value) else ()


def compare_case(base: Result, cand: Result, max_slowdown: float, *,
                 confidence: float = 0.95, seed: int = 0,
                 drift: Drift | None = None) -> GateRow:
    """One case's gate row (see the module docstring)."""
    sides = side_of(base), side_of(cand)
    verdict = judge(*sides, metric=base.metric, threshold=max_slowdown,
                    confidence=confidence, drift=drift, seed=seed)
    baseline, candidate, means = shown_values(*sides)
    return GateRow(base.case.id, base.case.title, base.metric, base.unit or cand.unit,
                   baseline, candidate, verdict, means=means)


def gate(baseline: Sequence[Result], candidate: Sequence[Result], *,
         max_slowdown: float = 0.05, metric: str | None = None,
         cases: Sequence[str] = (), glob: bool = False, confidence: float = 0.95,
         seed: int = 0, histories: Mapping[tuple[str, str], Sequence[float]] | None = None,
         allow_unmeasured: bool = False) -> GateReport:
    """Compare every (case, metric) both sides hold, all at once (verdicts/family.py:
    family-wise confidence, the runs' common shift). `metric`: only that one (default:
    all). `cases`: case ids or titles (with `glob`, shell patterns of them; default:
    all). `max_slowdown`: 0.05 lets a case be up to 5% slower. `histories`: (case id,
    metric) -> the case's A/A log ratios, where the store holds them."""
    from torchmark.verdicts.family import Pair, judge_all

    if not 0 <= max_slowdown < 10:
        raise ValueError(f"max_slowdown must be in [0, 10), got {max_slowdown!r}")
    a, b = _index(baseline, metric, cases, glob), _index(candidate, metric, cases, glob)
    keys = [key for key in a if key in b]
    sides = {key: (side_of(a[key]), side_of(b[key])) for key in keys}
    verdicts = judge_all([Pair(key, *sides[key], key[1]) for key in keys],
                         threshold=max_slowdown, confidence=confidence,
                         histories=histories, seed=seed)
    name = distinct_titles([*(r.case for r in a.values()), *(r.case for r in b.values())])
    shown = {key: shown_values(*sides[key]) for key in keys}
    rows = [GateRow(key[0], name[key[0]], key[1], a[key].unit or b[key].unit,
                    shown[key][0], shown[key][1], verdicts[key], means=shown[key][2])
            for key in keys]
    order = {v: i for i, v in enumerate(VERDICTS)}
    rows.sort(key=lambda r: (order[r.kind], -(r.verdict.ratio if math.isfinite(
        r.verdict.ratio) else 0), natural_key(r.title)))
    return GateReport(tuple(rows), tuple(f"{name[k[0]]} [{k[1]}]" for k in a if k not in b),
                      tuple(f"{name[k[0]]} [{k[1]}]" for k in b if k not in a), max_slowdown,
                      allow_unmeasured)


def _index(results: Sequence[Result], metric: str | None, patterns: Sequence[str],
           glob: bool) -> dict[tuple[str, str], Result]:
    return {(r.case.id, r.metric): r for r in results
            if (metric is None or r.metric == metric) and r.case.named(patterns, glob)}
