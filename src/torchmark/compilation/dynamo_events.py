"""What Dynamo says about the compilations it made: graphs, graph breaks with their
reasons, recompilations with the guard that failed, and its own compile time. Read from
torch._dynamo's process-wide counters (`counters`), its guard failures a code object
(`guard_failures`) and its timings (`compile_times`), which are private to torch: each
reader degrades to "nothing seen" rather than failing when a torch version moves them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

MAX_REASON_CHARS = 300  # a graph break's or guard's reason, first line, cut


@dataclasses.dataclass(frozen=True)
class Recompile:
    """One recompilation: the function recompiled (file:line name) and the guard that
    failed ("tensor 'x' size mismatch at index 0. expected 4, actual 8")."""

    function: str
    reason: str


@dataclasses.dataclass(frozen=True)
class DynamoState:
    """A snapshot of Dynamo's counters: graphs compiled, graph breaks by reason, and the
    guard failures recorded a function so far."""

    graphs: int
    breaks: dict[str, int]
    failures: dict[str, tuple[str, ...]]

    def since(self, earlier: DynamoState) -> tuple[int, dict[str, int], list[Recompile]]:
        """Graphs, graph breaks and recompilations between `earlier` and this one."""
        breaks = {reason: n - earlier.breaks.get(reason, 0) for reason, n in self.breaks.items()
                  if n > earlier.breaks.get(reason, 0)}
        recompiles = [Recompile(function, reason) for function, reasons in self.failures.items()
                      for reason in reasons[len(earlier.failures.get(function, ())):]]
        return self.graphs - earlier.graphs, breaks, recompiles


def _first_line(text: Any) -> str:
    """A reason in one line: its first, and its "Explanation:" line where it has one
    (Dynamo's graph breaks say what failed first, and why after)."""
    lines = [line.strip() for line in str(text).strip().splitlines()]
    line = lines[0] if lines else ""
    why = next((x.removeprefix("Explanation:").strip() for x in lines[1:]
                if x.startswith("Explanation:")), None)
    if why:
        line = f"{line}: {why}"
    line = " ".join(line.split())  # guards pad their text with runs of spaces
    return line if len(line) <= MAX_REASON_CHARS else line[:MAX_REASON_CHARS - 3] + "..."


def state() -> DynamoState:
    """Dynamo's counters now."""
    from torch._dynamo import utils

    counters = getattr(utils, "counters", {})
    graphs = int((counters.get("stats") or {}).get("unique_graphs", 0))
    breaks: dict[str, int] = {}
    for reason, n in (counters.get("graph_break") or {}).items():
        key = _first_line(reason)
        breaks[key] = breaks.get(key, 0) + int(n)
    failures = {}
    for code, reasons in dict(getattr(utils, "guard_failures", {}) or {}).items():
        name = f"{getattr(code, 'co_filename', '?')}:{getattr(code, 'co_firstlineno', 0)} " \
               f"{getattr(code, 'co_name', '?')}"
        failures[name] = tuple(_first_line(r) for r in reasons)
    return DynamoState(graphs, breaks, failures)


def reset() -> None:
    """Forget every compilation (torch._dynamo.reset) and zero the counters."""
    import torch._dynamo
    from torch._dynamo import utils

    torch._dynamo.reset()
    utils.counters.clear()
    getattr(utils, "guard_failures", {}).clear()


def dynamo_compile_seconds() -> float:
    """Dynamo's own total for the compilations since the last reset: the time in its
    outermost compile step (`_compile.compile_inner`, summed), nan when it has none."""
    from torch._dynamo.utils import compile_times

    try:
        names, values = compile_times(repr="csv", aggregate=True)
    except (TypeError, ValueError):
        return math.nan
    for name, value in zip(names, values, strict=False):
        if name == "_compile.compile_inner":
            try:
                return float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return math.nan
    return math.nan
