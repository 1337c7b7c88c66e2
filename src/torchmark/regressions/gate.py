"""The CI gate: did any case of the candidate get slower than the baseline by more than a
threshold, with confidence?

Cases pair up by their stable id and metric. Instruction counts are nearly exact, so
they are gated on their medians: any increase beyond the threshold regresses. Wall and
device times are noisy, so they are gated on the bootstrap interval of the ratio of the
medians (from the raw samples): "regressed" only when the whole interval lies beyond
the threshold, "unsure" when the ratio does but the interval reaches back under it, and
"unchecked" when a side has too few samples for an interval. Runs timed over several
processes (`timeit --processes`) are gated on their processes' medians instead: the
Hodges-Lehmann ratio and its exact interval (compare/replicates.py), as `ab` compares
them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import statistics
from collections.abc import Sequence

from torchmark.core.result import Result

VERDICTS = ("regressed", "unsure", "improved", "within", "unchecked", "failed")


@dataclasses.dataclass(frozen=True)
class GateRow:
    """One case's comparison: medians, the ratio (candidate / baseline) and its interval
    (the ratio itself for exact metrics), and the verdict."""

    case_id: str
    title: str
    metric: str
    unit: str
    baseline: float
    candidate: float
    ratio: float
    low: float
    high: float
    verdict: str
    note: str = ""


@dataclasses.dataclass(frozen=True)
class GateReport:
    """Every compared case, and those found on one side only."""

    rows: tuple[GateRow, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    max_slowdown: float

    @property
    def regressed(self) -> tuple[GateRow, ...]:
        return tuple(r for r in self.rows if r.verdict in ("regressed", "failed"))

    @property
    def passed(self) -> bool:
        return not self.regressed

    def counts(self) -> dict[str, int]:
        return {v: n for v in VERDICTS if (n := sum(r.verdict == v for r in self.rows))}


def _matches(result: Result, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns
                               for name in (result.case.id, result.case.title))


def _index(results: Sequence[Result], metric: str | None,
           patterns: Sequence[str]) -> dict[tuple[str, str], Result]:
    return {(r.case.id, r.metric): r for r in results
            if (metric is None or r.metric == metric) and _matches(r, patterns)}


def compare_case(base: Result, cand: Result, max_slowdown: float, *,
                 confidence: float = 0.95, seed: int = 0) -> GateRow:
    """One case's gate row (see the module docstring)."""
    from torchmark.compare.ab import median_ratio_interval

    def row(b: float, c: float, ratio: float, low: float, high: float, verdict: str,
            note: str = "") -> GateRow:
        return GateRow(base.case.id, base.case.title, base.metric, base.unit or cand.unit,
                       b, c, ratio, low, high, verdict, note)

    if cand.failure is not None or not cand.samples:
        why = cand.failure.error if cand.failure else "no samples"
        return row(_median(base.samples), math.nan, math.nan, math.nan, math.nan, "failed",
                   f"the candidate failed: {why}")
    if base.failure is not None or not base.samples:
        return row(math.nan, _median(cand.samples), math.nan, math.nan, math.nan,
                   "unchecked", "the baseline failed or holds no samples")
    b, c = _median(base.samples), _median(cand.samples)
    if b <= 0:
        return row(b, c, math.nan, math.nan, math.nan, "unchecked", "a baseline of zero")
    ratio = c / b
    processes = [_process_medians(r) for r in (base, cand)]
    if base.metric == "instructions":  # exact: the medians decide
        low = high = ratio
    elif all(len(p) >= 2 for p in processes):  # runs over several processes: by those
        from torchmark.compare.replicates import ratio_interval

        ratio, low, high = ratio_interval(processes[0], processes[1], confidence)
        if math.isnan(low):
            return row(b, c, ratio, low, high, "unchecked",
                       "too few processes for an interval (4 and 4 give one at 95%)")
    else:
        low, high = median_ratio_interval(base.samples, cand.samples, confidence, seed=seed)
        if math.isnan(low):
            return row(b, c, ratio, low, high, "unchecked",
                       "too few samples for an interval (5 a side)")
    limit = 1.0 + max_slowdown
    if low > limit:
        verdict = "regressed"
    elif high < 1.0 / limit:
        verdict = "improved"
    elif ratio > limit:
        verdict = "unsure"
    else:
        verdict = "within"
    return row(b, c, ratio, low, high, verdict)


def _process_medians(result: Result) -> list[float]:
    """A run over several processes (`timeit --processes`): each one's median a run;
    [] for another."""
    from torchmark.core.errors import UsageError
    from torchmark.timing.results import result_to_measurement

    try:
        return result_to_measurement(result).process_medians
    except UsageError:
        return []


def _median(samples: Sequence[float]) -> float:
    return statistics.median(samples) if samples else math.nan


def gate(baseline: Sequence[Result], candidate: Sequence[Result], *,
         max_slowdown: float = 0.05, metric: str | None = None,
         cases: Sequence[str] = (), confidence: float = 0.95, seed: int = 0) -> GateReport:
    """Compare every (case, metric) both sides hold. `metric`: only that one (default:
    all). `cases`: shell patterns matched against case ids and titles (default: all).
    `max_slowdown`: 0.05 lets a case be up to 5% slower."""
    if not 0 <= max_slowdown < 10:
        raise ValueError(f"max_slowdown must be in [0, 10), got {max_slowdown!r}")
    a, b = _index(baseline, metric, cases), _index(candidate, metric, cases)
    rows = [compare_case(a[key], b[key], max_slowdown, confidence=confidence, seed=seed)
            for key in a if key in b]
    order = {v: i for i, v in enumerate(VERDICTS)}
    rows.sort(key=lambda r: (order[r.verdict], -(r.ratio if math.isfinite(r.ratio) else 0)))
    name = {**{k: r.case.title for k, r in a.items()}, **{k: r.case.title for k, r in b.items()}}
    return GateReport(tuple(rows), tuple(f"{name[k]} [{k[1]}]" for k in a if k not in b),
                      tuple(f"{name[k]} [{k[1]}]" for k in b if k not in a), max_slowdown)


def format_value(x: float, unit: str) -> str:
    """A value in its unit: times scaled (12.5 us), counts with separators."""
    if not math.isfinite(x):
        return "-"
    if unit == "s":
        from torchmark.core.stats import select_unit

        name, scale = select_unit(x)
        return f"{x / scale:.4g} {name}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def table_rows(rows: Sequence[GateRow]) -> list[list[str]]:
    """The rows as text cells: case, metric, baseline, candidate, ratio, interval,
    verdict."""
    out = []
    for r in rows:
        interval = ("exact" if r.metric == "instructions" and math.isfinite(r.ratio) else
                    f"[{r.low:.3f}, {r.high:.3f}]" if math.isfinite(r.low) else "-")
        change = f"{r.ratio - 1:+.1%}" if math.isfinite(r.ratio) else "-"
        out.append([r.title, r.metric, format_value(r.baseline, r.unit),
                    format_value(r.candidate, r.unit), change, interval,
                    r.verdict + (f" ({r.note})" if r.note else "")])
    return out


HEADER = ["case", "metric", "baseline", "candidate", "change", "95% CI of ratio", "verdict"]
RIGHT = [False, False, True, True, True, False, False]


def markdown(report: GateReport, baseline: str, candidate: str) -> str:
    """The offending cases as a Markdown table for a pull-request comment (a line saying
    so when there are none)."""
    from torchmark.compare.plain_table import markdown as md_table

    head = (f"**torchmark gate**: candidate `{candidate}` against baseline `{baseline}`, "
            f"threshold {report.max_slowdown:.1%} slower")
    unchecked = [r for r in report.rows if r.verdict == "unchecked"]
    tail = ([f"Not checked ({len(unchecked)}): " + ", ".join(r.title for r in unchecked)]
            if unchecked else [])
    if report.passed:
        counts = ", ".join(f"{n} {v}" for v, n in report.counts().items()) or "no case"
        return "\n".join([f"{head}: passed ({counts}).", *tail]) + "\n"
    lines = [head + f": **{len(report.regressed)} case(s) regressed or failed**", "",
             *md_table(HEADER, table_rows(report.regressed), RIGHT), *([""] + tail if tail else [])]
    return "\n".join(lines) + "\n"
