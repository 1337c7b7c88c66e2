"""Markdown rendering: one pipe table per label, for pull requests and notes."""

from __future__ import annotations

from torchmark.compare.layout import Grade, Row, TableLayout


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cells(layout: TableLayout, row: Row) -> list[str]:
    out = []
    for m, column, g in zip(row.results, layout.columns, row.grades, strict=True):
        if m is None:
            out.append("")
            continue
        text = column.short(m, layout.scale)
        out.append(f"**{text}**" if g is Grade.BEST else text)
    return out


def render_markdown(layout: TableLayout) -> str:
    n_left = 3 if layout.render_env else 2
    head = ["threads"] + (["env"] if layout.render_env else []) + [""]
    head += [_escape("" if k is None else str(k)) for k in layout.column_keys]
    align = ["---"] * n_left + ["---:"] * len(layout.column_keys)
    lines = [f"**{_escape(layout.label)}**", ""] if layout.label else []
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for row in layout.rows:
        left = [str(row.num_threads)]
        if layout.render_env:
            left.append(_escape(layout.env_text(row)))
        left.append(_escape(row.name))
        lines.append("| " + " | ".join(left + _cells(layout, row)) + " |")
    lines += ["", layout.unit_note]
    if layout.has_warnings:
        lines.append("(! XX%): high variance, where XX is the IQR / median * 100.")
    return "\n".join(lines) + "\n"
