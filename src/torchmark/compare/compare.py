"""Compare: many Measurements laid out as tables, one per label."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchmark.compare.csv_format import render_csv
from torchmark.compare.html import render_html
from torchmark.compare.layout import Colorize, Options, TableLayout
from torchmark.compare.markdown import render_markdown
from torchmark.compare.text import render_text
from torchmark.timing.measurement import Measurement
from torchmark.timing.memory import MemoryMeasurement

QUANTITIES = ("wall", "host_launch", "device", "batch", "kernel", "memory")


def clock_tagged(m: Measurement) -> Measurement:
    """Device-, batch- and kernel-time (and host launch-time) measurements carry their
    quantity in their column name ("[device, L2 cold]", "[kernel, L2 cold]", "[batch, L2
    hot]", "[host launch]"), so a table never mixes quantities silently."""
    import dataclasses

    meta = m.metadata if isinstance(m.metadata, dict) else {}
    quantity = m.quantity
    if quantity == "wall":
        return m
    l2 = f", L2 {meta['l2']}" if meta.get("l2") else ""  # unknown in the store's rows
    tag = "[host launch]" if quantity == "host_launch" else f"[{quantity}{l2}]"
    description = f"{m.task_spec.description} {tag}" if m.task_spec.description else tag
    return Measurement(m.number_per_run, m.raw_times,
                       dataclasses.replace(m.task_spec, description=description), m.metadata)


class Compare:
    """Tables of measurements: one per label; rows are (threads, env, sub_label or stmt),
    columns are descriptions. Replicates of one task are merged first. Memory
    measurements (Timer.memory) get tables of their own, in bytes.

    `str(compare)` and `print()` give torch.utils.benchmark's text layout;
    `to_markdown()`, `to_csv()` and `_repr_html_()` give other formats of the same table.
    """

    def __init__(self, results: Iterable[Measurement]) -> None:
        self._results: list[Measurement] = []
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False
        self._quantities: tuple[str, ...] = QUANTITIES
        self.extend_results(results)

    def quantities(self, *names: str) -> None:
        """Show only the measurements of these quantities ("wall", "host_launch",
        "device", "batch", "kernel": Measurement.quantity), each its own column; by
        default every one given. E.g. `quantities("kernel", "device")` puts kernel time
        beside device time, without the host launch times."""
        unknown = [n for n in names if n not in QUANTITIES]
        if unknown or not names:
            raise ValueError(f"Compare.quantities: expected some of {', '.join(QUANTITIES)}, "
                             f"got {', '.join(map(repr, unknown or names)) or 'none'}")
        self._quantities = tuple(names)

    def extend_results(self, results: Iterable[Measurement]) -> None:
        """Add more measurements: torchmark's, or torch.utils.benchmark's (copied)."""
        converted: list[Any] = []
        for i, r in enumerate(results):
            if isinstance(r, MemoryMeasurement):  # bytes: a table of their own
                converted.append(r)
                continue
            try:
                converted.append(Measurement.coerce(r))
            except TypeError as e:
                raise ValueError(f"Compare: result {i}: {e}") from None
        self._results.extend(converted)

    def trim_significant_figures(self) -> None:
        """Show only the digits each measurement's spread supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colour cells against the best in their column (or their row when `rowwise`)."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Mark cells whose IQR is large relative to their median."""
        self._highlight_warnings = True

    @property
    def results(self) -> list[Measurement]:
        return list(self._results)

    def layouts(self) -> list[TableLayout]:
        """One TableLayout per label, in order of first appearance."""
        options = Options(self._colorize, self._trim_significant_figures, self._highlight_warnings)
        groups: dict[tuple[str | None, bool], list[Any]] = {}
        shown = [m for m in self._results if m.quantity in self._quantities]
        times = [m for m in shown if not isinstance(m, MemoryMeasurement)]
        for m in Measurement.merge(clock_tagged(m) for m in times):
            groups.setdefault((m.task_spec.label, False), []).append(m)
        for m in shown:
            if isinstance(m, MemoryMeasurement):
                groups.setdefault((m.task_spec.label, True), []).append(m)
        return [TableLayout(group, options) for group in groups.values()]

    def render(self, color: bool = True) -> str:
        return "\n".join(render_text(layout, color=color) for layout in self.layouts())

    def __str__(self) -> str:
        return self.render()

    def print(self) -> None:
        print(str(self))

    def to_markdown(self) -> str:
        return "\n".join(render_markdown(layout) for layout in self.layouts())

    def to_csv(self) -> str:
        return render_csv(self.layouts())

    def _repr_html_(self) -> str:
        return render_html(self.layouts())
