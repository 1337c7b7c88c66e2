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
    """after - before: totals and the functions that changed most, both ways."""
    a, b = before.counts(), after.counts()
    change = (b - a) / a if a else float("inf")
    lines = [f"before: {a:,} ({before.task_spec.title.splitlines()[0]})",
             f"after:  {b:,} ({after.task_spec.title.splitlines()[0]})",
             f"delta:  {b - a:+,} ({change:+.2%})", ""]
    delta = after.as_standardized().delta(before.as_standardized(), inclusive=inclusive)
    delta = delta.denoise()
    ordered = sorted(delta, key=lambda fc: -abs(fc.count))[:top]
    width = max((len(f"{c:+,}") for c, _ in ordered), default=1)
    kind = "inclusive" if inclusive else "exclusive"
    lines.append(f"largest changes ({kind}, standardized, denoised):")
    lines += [f"  {c:>+{width},}  {fn}" for c, fn in ordered]
    return "\n".join(lines)
