"""Tables of verdicts, a row a case: its name, metric, the two medians (means, and said,
where a side holds only another tool's stated statistics), the change, the
interval that decided (the ratio's, widened by the drift between runs), the drift and
the verdict; as aligned text or Markdown, with a line of why for each case that is
slower, failed or unmeasured. The gate, the pytest plugin and `compare` print them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from torchmark.verdicts import CaseVerdict

HEADER = ["case", "metric", "baseline", "candidate", "change", "interval", "drift",
          "verdict"]
RIGHT = [False, False, True, True, True, False, False, False]
EXPLAINED = ("slower", "failed", "unmeasured")  # the kinds whose reason is printed


def format_value(x: float, unit: str) -> str:
    """A value in its unit: times scaled (12.5 us), counts with separators."""
    if not math.isfinite(x):
        return "-"
    if unit == "s":
        from torchmark.core.stats import select_unit

        name, scale = select_unit(x)
        return f"{x / scale:.4g} {name}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def cells(row: CaseVerdict) -> list[str]:
    """The row as text cells, in HEADER's order."""
    v = row.verdict
    change = f"{v.change:+.1%}" if math.isfinite(v.ratio) else "-"
    drift = f"{v.drift.describe().split(' (')[0]} {v.drift.source}" if v.measured else "-"
    return [row.title, f"{row.metric} (means)" if row.means else row.metric,
            format_value(row.baseline, row.unit),
            format_value(row.candidate, row.unit), change, v.interval(), drift, v.kind]


def text_table(rows: Sequence[CaseVerdict]) -> list[str]:
    """The rows as an aligned table, then why each explained row got its verdict."""
    from torchmark.core.neutralise import terminal_text
    from torchmark.core.plain_table import align

    return align(HEADER, [cells(r) for r in rows], RIGHT, rule=True) + \
        [terminal_text(line) for line in reasons(rows)]


def markdown_table(rows: Sequence[CaseVerdict]) -> list[str]:
    """The rows as a Markdown table, then the reasons as a list."""
    from torchmark.core.neutralise import markdown_text
    from torchmark.core.plain_table import markdown

    return markdown(HEADER, [cells(r) for r in rows], RIGHT) + \
        ([""] + [f"- {markdown_text(line)}" for line in reasons(rows)] if reasons(rows)
         else [])


def reasons(rows: Iterable[CaseVerdict]) -> list[str]:
    """"TITLE [metric]: slower: REASON" for each row that is slower, failed or
    unmeasured; or unsure though it changed beyond the drift, its sides being runs of
    one build (verdicts/engine.py), or though its interval excludes no change (read
    alone it looks like a change)."""
    from torchmark.verdicts.engine import ONE_BUILD

    return [f"{r.title} [{r.metric}]: {r.verdict.kind}: {r.verdict.reason}" for r in rows
            if r.verdict.kind in EXPLAINED or r.verdict.reason.endswith(ONE_BUILD)
            or (r.verdict.kind == "unsure" and _off_no_change(r.verdict))]


def _off_no_change(verdict: Any) -> bool:
    """Whether a verdict's interval lies wholly on one side of no change."""
    low, high = verdict.lower, verdict.upper
    return low is not None and high is not None and (low > 1 or high < 1)
