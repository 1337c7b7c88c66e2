"""The table model behind Compare: rows, columns, number formats and colour grades.

One `TableLayout` holds the measurements that share a label. Rows are keyed by
(num_threads, env, sub_label or stmt) and grouped by thread count; columns are keyed
by description. Renderers (text, Markdown, CSV, HTML) read this model; nothing here
formats a whole table.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence

from torchmark.core.stats import ordered_unique, select_unit, trim_sigfig, unit_to_english
from torchmark.timing.measurement import Measurement


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


class Grade(enum.Enum):
    """How a cell compares with the best value it is coloured against."""

    BEST = "best"  # within 1% (or 100 ns) of the best
    GOOD = "good"  # within 10%
    BAD = "bad"  # at least 2x
    VERY_BAD = "very_bad"  # at least 5x


@dataclasses.dataclass(frozen=True)
class Options:
    colorize: Colorize = Colorize.NONE
    trim_significant_figures: bool = False
    highlight_warnings: bool = False


def grade(value: float, best: float) -> Grade | None:
    if value <= best * 1.01 or value <= best + 100e-9:
        return Grade.BEST
    if value <= best * 1.1:
        return Grade.GOOD
    if value >= best * 5:
        return Grade.VERY_BAD
    if value >= best * 2:
        return Grade.BAD
    return None


MIN_SHOWN_FIGURES = 2  # a noisy 1.8 us beside 3.0 us reads "1.8 | 3.0", not "2 | 3"


def _shown_figures(significant_figures: int) -> int:
    """Figures a trimmed cell keeps: the measurement's own (from its noise), at least 2."""
    return max(significant_figures, MIN_SHOWN_FIGURES)


def _leading_digits(value: float) -> int:
    return math.ceil(math.log10(value)) if value > 0 else 0


class ColumnFormat:
    """Number format shared by every cell of one column (width, decimals, warnings)."""

    def __init__(
        self, results: Sequence[Measurement | None], scale: float, options: Options
    ) -> None:
        present = [r for r in results if r is not None]
        self.trim = options.trim_significant_figures
        self.highlight = options.highlight_warnings and any(r.has_warnings for r in present)
        digits = [_leading_digits(r.median / scale) for r in present]
        unit_digits = max(digits)
        if any(getattr(r, "exact", False) for r in present):
            decimals = 0  # bytes counted, not sampled
        elif self.trim:
            decimals = min(
                max(_shown_figures(r.significant_figures) - d, 0)
                for d, r in zip(digits, present, strict=True)
            )
        else:
            decimals = 1
        self.decimals = decimals
        length = unit_digits + decimals + (1 if decimals else 0)
        self._number_template = f"{{:>{length}.{decimals}f}}"
        self._warning_width = 7 if self.highlight else 0

    def value(self, value: float, significant_figures: int) -> float:
        """The value as displayed (trimmed to significant figures when asked)."""
        return trim_sigfig(value, _shown_figures(significant_figures)) if self.trim else value

    def number(self, value: float, significant_figures: int) -> str:
        return self._number_template.format(self.value(value, significant_figures))

    def short(self, m: Measurement, scale: float) -> str:
        """Cell text without padding, for Markdown and HTML."""
        text = self.number(m.median / scale, m.significant_figures).strip()
        if self.highlight and m.has_warnings:
            text += f" (! {m.iqr / m.median * 100 if m.median else 0:.0f}%)"
        return text

    def cell(self, value: float | None, significant_figures: int, spread: float | None) -> str:
        """Fixed-width cell text; blank of the same width when `value` is None."""
        if value is None:
            return " " * len(self.cell(1, significant_figures, None))
        warning = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return self.number(value, significant_figures) + warning.rjust(self._warning_width)


@dataclasses.dataclass
class Row:
    num_threads: int
    env: str | None
    name: str
    results: list[Measurement | None]
    group: int  # index of the thread-count group
    starts_group: bool  # first row of its thread-count group
    shows_env: bool  # first row of its env within the group, when envs differ
    grades: list[Grade | None] = dataclasses.field(default_factory=list)


def _env_key(env: str | None) -> str:
    return "" if env is None else env


class TableLayout:
    """Measurements sharing one label, arranged as rows x columns."""

    def __init__(self, results: Sequence[Measurement], options: Options) -> None:
        if len({r.task_spec.label for r in results}) != 1:
            raise ValueError("TableLayout: all results must share one label")
        self.results = list(results)
        self.options = options
        self.label = results[0].task_spec.label
        self.memory = all(r.quantity == "memory" for r in results)
        self.unit, self.scale = ("B", 1.0) if self.memory else \
            select_unit(min(r.median for r in results))

        row_keys = ordered_unique(self._row_key(r) for r in results)
        # Group by thread count, then by env in the order the envs were first given
        # (torch sorts envs by name: "(after)" above "(before)"); rows keep their order.
        env_order = {env: i for i, env in enumerate(ordered_unique(k[1] for k in row_keys))}
        row_keys.sort(key=lambda k: (k[0], env_order[k[1]]))
        self.column_keys: list[str | None] = ordered_unique(r.description for r in results)

        grid: list[list[Measurement | None]] = [[None] * len(self.column_keys) for _ in row_keys]
        row_index = {k: i for i, k in enumerate(row_keys)}
        col_index = {k: j for j, k in enumerate(self.column_keys)}
        for r in results:
            grid[row_index[self._row_key(r)]][col_index[r.description]] = r

        envs = {r.env for r in results}
        self.render_env = len(envs) > 1
        self.env_width = max(len(e) for e in envs) if self.render_env else 0

        self.rows: list[Row] = []
        prior_threads, prior_env, group = None, None, -1
        for (threads, env, name), cells in zip(row_keys, grid, strict=True):
            starts_group = threads != prior_threads
            if starts_group:
                group += 1
                prior_env = ""  # as torch: an env of "" is not shown at a group's top
            self.rows.append(
                Row(
                    num_threads=threads,
                    env=env,
                    name=name,
                    results=cells,
                    group=group,
                    starts_group=starts_group,
                    shows_env=self.render_env and env != prior_env,
                )
            )
            prior_threads, prior_env = threads, env

        self.columns = [
            ColumnFormat([row.results[j] for row in self.rows], self.scale, options)
            for j in range(len(self.column_keys))
        ]
        for row in self.rows:
            row.grades = self._grades(row)

    @property
    def unit_note(self) -> str:
        """The line under the table saying what its numbers are."""
        if self.memory:
            return "Memory: each call's peak bytes allocated above its start (B)."
        return f"Times are in {unit_to_english(self.unit)}s ({self.unit})."

    @staticmethod
    def _row_key(m: Measurement) -> tuple[int, str | None, str]:
        return m.task_spec.num_threads, m.task_spec.env, m.as_row_name

    def env_text(self, row: Row) -> str:
        return f"({row.env if row.env is not None else 'Unspecified env'})"

    def _grades(self, row: Row) -> list[Grade | None]:
        mode = self.options.colorize
        if mode is Colorize.NONE:
            return [None] * len(row.results)
        if mode is Colorize.ROWWISE:
            best_row = min(r.median for r in row.results if r is not None)
            bests: list[float | None] = [best_row] * len(row.results)
        else:
            bests = []
            for j in range(len(self.column_keys)):
                column = [
                    other.results[j]
                    for other in self.rows
                    if other.group == row.group and other.results[j] is not None
                ]
                bests.append(min((m.median for m in column if m is not None), default=None))
        return [
            grade(m.median, best) if m is not None and best is not None else None
            for m, best in zip(row.results, bests, strict=True)
        ]

    @property
    def has_warnings(self) -> bool:
        return self.options.highlight_warnings and any(r.has_warnings for r in self.results)
