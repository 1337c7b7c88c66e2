"""CSV rendering: one line per measured cell, in seconds (memory: bytes, in the
median_s / iqr_s / mean_s columns, its unit "B"), for spreadsheets and scripts."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from torchmark.compare.layout import TableLayout
from torchmark.core.neutralise import csv_cell

CSV_FIELDS = (
    "label", "num_threads", "env", "row", "column",
    "median_s", "iqr_s", "mean_s", "samples", "value", "unit",
)


def render_csv(layouts: Sequence[TableLayout]) -> str:
    """All tables as one CSV document with a header line."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for layout in layouts:
        for row in layout.rows:
            for key, m, column in zip(layout.column_keys, row.results, layout.columns, strict=True):
                if m is None:
                    continue
                shown = column.value(m.median / layout.scale, m.significant_figures)
                writer.writerow([csv_cell(cell) for cell in (
                    layout.label or "", row.num_threads, row.env or "", row.name,
                    "" if key is None else key,
                    repr(m.median), repr(m.iqr), repr(m.mean),
                    len(m.samples) if layout.memory else len(m.raw_times),
                    f"{shown:.{column.decimals}f}", layout.unit)])
    return buffer.getvalue()
