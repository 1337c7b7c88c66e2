"""Aligned plain-text and Markdown tables of string cells (for CLI reports)."""

from __future__ import annotations

from collections.abc import Sequence


def align(header: Sequence[str], rows: Sequence[Sequence[str]],
          right: Sequence[bool] | None = None, rule: bool = False) -> list[str]:
    """Lines of a table whose columns are as wide as their widest cell; `right[i]`
    right-aligns column i (numbers); `rule` adds a line of dashes under the header."""
    right = list(right) if right is not None else [False] * len(header)
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, right, strict=True)).rstrip()

    lines = [line(header)]
    if rule:
        lines.append("  ".join("-" * w for w in widths))
    return lines + [line(r) for r in rows]


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]],
             right: Sequence[bool] | None = None) -> list[str]:
    """The same table in Markdown; `right[i]` right-aligns column i."""
    right = list(right) if right is not None else [False] * len(header)
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
