"""CallgrindStats as core Results and back: instruction counts in the one record.

A CallgrindStats becomes an instructions Result: its samples the counts per run of each
repeat (or of the one collection), its totals in `extra`; with `functions=True` (what a
`callgrind --save` file keeps) the whole stats, per-function counts included, ride in
`extra["callgrind_stats"]`, and `result_to_stats` gives them back equal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchmark.callgrind.stats import CallgrindStats
from torchmark.core.errors import UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result, timer_case


def stats_to_result(stats: CallgrindStats, *, params: Mapping[str, Any] | None = None,
                    provenance: Provenance | None = None, functions: bool = False) -> Result:
    """Instruction counts a run (exact), with the baseline and the per-repeat totals in
    `extra` (and the whole stats with `functions`)."""
    spec = stats.task_spec
    number = int(stats.number_per_run)
    extra: dict[str, Any] = {"total": int(stats.counts()),
                             "denoised_total": int(stats.counts(denoise=True))}
    repeats = stats.repeat_totals
    if repeats:
        extra["repeat_totals"] = [int(t) for t in repeats]
    baseline = stats.baseline_exclusive_stats
    if baseline is not None and len(baseline):
        extra["baseline_total"] = int(baseline.sum())
    if functions:
        extra["callgrind_stats"] = stats.to_dict()
    samples = tuple(int(t) / number for t in repeats) if repeats else \
        (stats.counts() / number,)
    return Result(case=timer_case(spec, "callgrind", "cpu", params), metric="instructions",
                  samples=samples, number_per_run=number, provenance=provenance,
                  extra=extra)


def result_to_stats(result: Result) -> CallgrindStats:
    """The CallgrindStats a Result made with `functions=True` holds; a UsageError for
    one without them."""
    data = result.extra.get("callgrind_stats")
    if not isinstance(data, dict):
        raise UsageError(f"result {result.case.title!r} holds no per-function counts "
                         f"(a {result.metric} result of {result.case.frontend})")
    return CallgrindStats.from_dict(data)
