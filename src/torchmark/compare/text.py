"""Plain-text (optionally ANSI-coloured) rendering, in torch.utils.benchmark's layout."""

from __future__ import annotations

from torchmark.compare.layout import Grade, Row, TableLayout
from torchmark.core.neutralise import terminal_text

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"

_STYLE = {
    Grade.BEST: BEST + BOLD,
    Grade.GOOD: GOOD + BOLD,
    Grade.VERY_BAD: VERY_BAD + BOLD,
    Grade.BAD: BAD,
}

WARNING_NOTE = "(! XX%) Measurement has high variance, where XX is the IQR / median * 100."


def _row_cells(layout: TableLayout, row: Row) -> list[str]:
    env = layout.env_text(row) if row.shows_env else ""
    cells = ["  " + terminal_text(env).ljust(layout.env_width + 4) + terminal_text(row.name)]
    for m, column in zip(row.results, layout.columns, strict=True):
        if m is None:
            cells.append(column.cell(None, 1, None))
        else:
            spread = m.iqr / m.median if m.has_warnings and m.median else \
                (0.0 if m.has_warnings else None)
            cells.append(column.cell(m.median / layout.scale, m.significant_figures, spread))
    return cells


def render_text(layout: TableLayout, color: bool = True) -> str:
    """The table as text. `color=False` drops the ANSI codes even when colorized."""
    header = ["", *("" if k is None else terminal_text(str(k)) for k in layout.column_keys)]
    body = [_row_cells(layout, row) for row in layout.rows]
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header))]

    lines = ["  |  ".join(h.center(w) for h, w in zip(header, widths, strict=True))]
    overall_width = len(lines[0])
    for row, cells in zip(layout.rows, body, strict=True):
        if row.starts_group:
            lines.append(f"{row.num_threads} threads: ".ljust(overall_width, "-"))
        parts = [cells[0].ljust(widths[0])]
        for text, width, g in zip(cells[1:], widths[1:], row.grades, strict=True):
            text = text.center(width)
            if color and g is not None:
                text = _STYLE[g] + text + TERMINATE * 2
            parts.append(text)
        lines.append("  |  ".join(parts))

    title = f" {terminal_text(layout.label or '')} ".center(overall_width - 2, "-")
    out = [f"[{title}]", *lines, "", layout.unit_note]
    text = "\n".join(out) + "\n"
    if layout.has_warnings:
        text += WARNING_NOTE + "\n"
    return text
