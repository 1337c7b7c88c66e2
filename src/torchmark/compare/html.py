"""HTML rendering for notebooks (`Compare._repr_html_`)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from torchmark.compare.layout import Grade, TableLayout

_COLORS = {
    Grade.BEST: "color:#1a7f37;font-weight:bold",
    Grade.GOOD: "color:#0550ae;font-weight:bold",
    Grade.BAD: "color:#cf222e;opacity:0.7",
    Grade.VERY_BAD: "color:#cf222e;font-weight:bold",
}


def _table(layout: TableLayout) -> str:
    esc = html.escape
    n_cols = len(layout.column_keys) + 1
    out = ['<table class="torchmark-compare">']
    if layout.label:
        out.append(f"<caption>{esc(layout.label)}</caption>")
    out.append("<thead><tr><th></th>")
    out += [f"<th>{esc('' if k is None else str(k))}</th>" for k in layout.column_keys]
    out.append("</tr></thead><tbody>")
    for row in layout.rows:
        if row.starts_group:
            out.append(f'<tr><th colspan="{n_cols}" style="text-align:left">'
                       f"{row.num_threads} threads</th></tr>")
        name = (layout.env_text(row) + " " if row.shows_env else "") + row.name
        out.append(f'<tr><th style="text-align:left">{esc(name)}</th>')
        for m, column, g in zip(row.results, layout.columns, row.grades, strict=True):
            if m is None:
                out.append("<td></td>")
                continue
            text = column.short(m, layout.scale)
            style = "text-align:right" + (";" + _COLORS[g] if g is not None else "")
            out.append(f'<td style="{style}">{esc(text)}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    out.append(f"<p>{html.escape(layout.unit_note)}</p>")
    return "".join(out)


def render_html(layouts: Sequence[TableLayout]) -> str:
    return "<div>" + "".join(_table(layout) for layout in layouts) + "</div>"
