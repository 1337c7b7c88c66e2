"""Plain-text summaries of CallgrindStats for the command line."""

from __future__ import annotations

from torchmark.callgrind.function_counts import FunctionCounts
from torchmark.callgrind.stats import CallgrindStats


def _rows(counts: FunctionCounts, top: int) -> list[str]:
    items = list(counts)
    if len(items) > top:
        items = items[:top]
    width = max((len(f"{c:,}") for c, _ in items), default=1)
    return [f"  {c:>{width},}  {fn}" for c, fn in items]


def describe(stats: CallgrindStats, top: int = 15) -> str:
    """Totals (all, per run, baseline, repeat spread) and the top functions."""
    n = stats.number_per_run
    total = stats.counts()
    lines = [stats.task_spec.summarize().rstrip(), ""]
    lines.append(f"instructions: {total:,} for {n} runs = {total / n:,.0f} per run "
                 f"(denoised {stats.counts(denoise=True):,})")
    base = stats.baseline_exclusive_stats.sum()
    if base:
        lines.append(f"baseline (empty statement): {base:,} = {base / n:,.0f} per run")
    if len(stats.repeat_totals) > 1:
        lines.append(f"repeats: {len(stats.repeat_totals)}, spread {stats.spread:.3%} "
                     f"(min {min(stats.repeat_totals):,}, max {max(stats.repeat_totals):,})")
    lines += ["", f"top {top} functions (exclusive, standardized):"]
    lines += _rows(stats.as_standardized().stats(inclusive=False), top)
    return "\n".join(lines)


def describe_delta(before: CallgrindStats, after: CallgrindStats, top: int = 15,
                   inclusive: bool = False) -> str:
    """after - before: totals and the functions that changed most, both ways. Counts
    taken with different run counts are compared at the larger one (the other scaled)."""
    runs = max(before.number_per_run, after.number_per_run)
    scale_a, scale_b = runs / before.number_per_run, runs / after.number_per_run
    a, b = round(before.counts() * scale_a), round(after.counts() * scale_b)
    change = (b - a) / a if a else float("inf")
    lines = [f"before: {a:,} ({before.task_spec.title.splitlines()[0]})",
             f"after:  {b:,} ({after.task_spec.title.splitlines()[0]})",
             f"delta:  {b - a:+,} ({change:+.2%}) for {runs} runs", ""]
    for stats, scale, name in ((before, scale_a, "before"), (after, scale_b, "after")):
        if scale != 1:
            lines.insert(-1, f"({name} counted {stats.number_per_run} runs: scaled to {runs})")
    standardized = [stats.as_standardized().stats(inclusive=inclusive) * scale
                    for stats, scale in ((before, scale_a), (after, scale_b))]
    delta = (standardized[1] - standardized[0]).denoise()
    ordered = sorted(delta, key=lambda fc: -abs(fc.count))[:top]
    width = max((len(f"{c:+,}") for c, _ in ordered), default=1)
    kind = "inclusive" if inclusive else "exclusive"
    lines.append(f"largest changes ({kind}, standardized, denoised):")
    lines += [f"  {c:>+{width},}  {fn}" for c, fn in ordered]
    return "\n".join(lines)
