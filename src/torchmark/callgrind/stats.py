"""CallgrindStats: the instruction counts of one statement, with a baseline."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import statistics
import textwrap
from typing import Any

from torchmark.callgrind.function_counts import FunctionCounts
from torchmark.core.bounded_input import brief_repr, load_json
from torchmark.core.task_spec import TaskSpec

SCHEMA_NAME = "torchmark.callgrind_stats"
SCHEMA_VERSION = 1

_STANDARDIZE = (
    (r"^.+build/\.\./", "build/../"),  # PyTorch built in different folders
    (r"^.+/" + re.escape("build/aten/"), "build/aten/"),
    (r"^.+/" + re.escape("Python/"), "Python/"),  # CPython sources
    (r"^.+/" + re.escape("Objects/"), "Objects/"),
    (r"\s\[.+\]$", ""),  # the shared object, e.g. [libtorch_cpu.so]
)


def standardize(counts: FunctionCounts) -> FunctionCounts:
    """Strip build-folder prefixes and library names so profiles of different builds diff."""
    for before, after in _STANDARDIZE:
        counts = counts.transform(functools.partial(re.compile(before).sub, after))
    return counts


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class CallgrindStats:
    """Instruction counts of `number_per_run` runs of a statement, and of an empty
    statement (the baseline: the cost of the loop itself).

    `repeat_totals` holds the total of every repeat collected in the same run (the stats
    are those of the repeat with the median total); `spread` is (max - min) / median.
    """

    task_spec: TaskSpec
    number_per_run: int
    built_with_debug_symbols: bool
    baseline_inclusive_stats: FunctionCounts
    baseline_exclusive_stats: FunctionCounts
    stmt_inclusive_stats: FunctionCounts
    stmt_exclusive_stats: FunctionCounts
    stmt_callgrind_out: str | None
    repeat_totals: tuple[int, ...] = ()

    def __repr__(self) -> str:
        base = self.baseline_exclusive_stats
        threads = self.task_spec.num_threads
        lines = [
            object.__repr__(self),
            self.task_spec.summarize(),
            f"  {'':>25}All{'':>10}Noisy symbols removed",
            f"    Instructions: {self.counts(denoise=False):>12}{'':>15}"
            f"{self.counts(denoise=True):>12}",
            f"    Baseline:     {base.sum():>12}{'':>15}{base.denoise().sum():>12}",
            f"{self.number_per_run} runs per measurement, {threads} thread{'s' if threads > 1 else ''}",
        ]
        if len(self.repeat_totals) > 1:
            n, ordered = len(self.repeat_totals), sorted(self.repeat_totals)
            which = "median" if self.counts() == ordered[(n - 1) // 2] else "one"
            lines.append(f"{which} of {n} repeats, spread {self.spread:.2%} (max - min) / "
                         "median")
        output = "\n".join(lines).strip()
        if not self.built_with_debug_symbols:
            output += textwrap.dedent("""
            Warning: PyTorch was not built with debug symbols.
                     Source information may be limited. Rebuild with
                     REL_WITH_DEB_INFO=1 for more detailed results.""")
        return output

    def stats(self, inclusive: bool = False) -> FunctionCounts:
        """Per-function counts; `inclusive` adds what each function's callees executed."""
        return self.stmt_inclusive_stats if inclusive else self.stmt_exclusive_stats

    def counts(self, *, denoise: bool = False) -> int:
        """Total instructions for `number_per_run` runs."""
        stats = self.stmt_exclusive_stats
        return (stats.denoise() if denoise else stats).sum()

    def delta(self, other: CallgrindStats, inclusive: bool = False) -> FunctionCounts:
        """self - other, function by function."""
        return self.stats(inclusive=inclusive) - other.stats(inclusive=inclusive)

    def as_standardized(self) -> CallgrindStats:
        """The same stats with path prefixes and library names stripped (see `standardize`)."""
        return dataclasses.replace(
            self,
            baseline_inclusive_stats=standardize(self.baseline_inclusive_stats),
            baseline_exclusive_stats=standardize(self.baseline_exclusive_stats),
            stmt_inclusive_stats=standardize(self.stmt_inclusive_stats),
            stmt_exclusive_stats=standardize(self.stmt_exclusive_stats),
            stmt_callgrind_out=None,  # names no longer match the raw file
        )

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeat totals (0.0 with one repeat)."""
        if len(self.repeat_totals) < 2:
            return 0.0
        median = statistics.median(self.repeat_totals)
        return (max(self.repeat_totals) - min(self.repeat_totals)) / median if median else 0.0

    # -- serialization ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_NAME,
            "version": SCHEMA_VERSION,
            "task_spec": self.task_spec.to_dict(),
            "number_per_run": self.number_per_run,
            "built_with_debug_symbols": self.built_with_debug_symbols,
            "baseline_inclusive_stats": self.baseline_inclusive_stats.to_dict(),
            "baseline_exclusive_stats": self.baseline_exclusive_stats.to_dict(),
            "stmt_inclusive_stats": self.stmt_inclusive_stats.to_dict(),
            "stmt_exclusive_stats": self.stmt_exclusive_stats.to_dict(),
            "stmt_callgrind_out": self.stmt_callgrind_out,
            "repeat_totals": list(self.repeat_totals),
        }

    def to_json(self, **dumps_kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **dumps_kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallgrindStats:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
            raise ValueError(f"not a {SCHEMA_NAME} object (missing or wrong 'schema' field)")
        if data.get("version") != SCHEMA_VERSION:
            raise ValueError(f"{SCHEMA_NAME} version {brief_repr(data.get('version'))} is not supported")
        number = data.get("number_per_run")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 2**53:
            raise ValueError(f"{SCHEMA_NAME}: number_per_run must be an int in 1..2**53, got "
                             f"{str(number)[:40]}")
        try:
            return cls(
                task_spec=TaskSpec.from_dict(data["task_spec"]),
                number_per_run=int(data["number_per_run"]),
                built_with_debug_symbols=bool(data["built_with_debug_symbols"]),
                baseline_inclusive_stats=FunctionCounts.from_dict(data["baseline_inclusive_stats"]),
                baseline_exclusive_stats=FunctionCounts.from_dict(data["baseline_exclusive_stats"]),
                stmt_inclusive_stats=FunctionCounts.from_dict(data["stmt_inclusive_stats"]),
                stmt_exclusive_stats=FunctionCounts.from_dict(data["stmt_exclusive_stats"]),
                stmt_callgrind_out=data.get("stmt_callgrind_out"),
                repeat_totals=tuple(int(t) for t in data.get("repeat_totals", ())),
            )
        except KeyError as e:
            raise ValueError(f"{SCHEMA_NAME}: missing field {brief_repr(e.args[0])}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> CallgrindStats:
        try:
            return cls.from_dict(load_json(text, SCHEMA_NAME))
        except json.JSONDecodeError as e:
            raise ValueError(f"not valid JSON: {e}") from None
