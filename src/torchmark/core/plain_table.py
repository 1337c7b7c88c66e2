"""Aligned plain-text and Markdown tables of string cells (for CLI reports). Cells may
hold names from files others wrote: a text table shows their control characters escaped
(no escape sequence reaches the terminal), a Markdown table escapes HTML and mentions
(core/neutralise.py)."""

from __future__ import annotations

from collections.abc import Sequence

from torchmark.core.neutralise import markdown_text, terminal_text


def align(header: Sequence[str], rows: Sequence[Sequence[str]],
          right: Sequence[bool] | None = None, rule: bool = False) -> list[str]:
    """Lines of a table whose columns are as wide as their widest cell; `right[i]`
    right-aligns column i (numbers); `rule` adds a line of dashes under the header."""
    right = list(right) if right is not None else [False] * len(header)
    header = [terminal_text(str(c)) for c in header]
    rows = [[terminal_text(str(c)) for c in row] for row in rows]
    widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=True)]

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
    return lines + ["| " + " | ".join(markdown_text(str(c)) for c in r) + " |" for r in rows]
