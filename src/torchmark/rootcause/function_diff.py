"""Which compiled functions an instruction-count change lives in: two CallgrindStats'
per-function counts (a run each), denoised (`FunctionCounts.denoise`), subtracted, the
largest changes first, exclusive (the function's own instructions) and inclusive (with
what it calls), each function put in a library group: python (the interpreter), torch
(libtorch, c10, torch's Python), the user's code (files under the repository), other."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

GROUPS = ("user", "torch", "python", "other")


@dataclasses.dataclass(frozen=True)
class FunctionDelta:
    function: str
    group: str
    change: float  # instructions a run, candidate minus baseline


def short_name(function: str) -> str:
    """A callgrind function name shortened for a table: the last two folders of its source
    file and the file name of its object ("Python/ceval.c:_PyEval_EvalFrameDefault
    [libpython3.11.so.1.0]")."""
    name, _, obj = function.partition(" [")
    found = re.match(r"([^:]*):(?!:)(.*)$", name)  # "file:function"; C++ names hold "::"
    where, sep, func = (found.group(1), ":", found.group(2)) if found else ("", "", name)
    if where:
        where = "/".join(part for part in where.split("/")[-2:] if part not in (".", ""))
    obj = obj.rstrip("]").rsplit("/", 1)[-1]
    return f"{where}{sep}{short_cpp(func)}" + (f" [{obj}]" if obj else "")


def short_cpp(name: str) -> str:
    """A demangled C++ name without what repeats and says little: anonymous namespaces,
    lambdas' signatures, `operator()() const` steps, vector types' namespaces, and the
    parameter list at the end ("add_kernel(...)" stays readable inside a template)."""
    name = name.replace("(anonymous namespace)::", "").replace("::operator()() const", "")
    name = re.sub(r"\{lambda\([^{}]*\)#(\d+)\}", r"λ\1", name)
    name = re.sub(r"at::vec::\w+::Vectorized", "Vectorized", name)
    if name.endswith(")"):  # the parameter list of the outermost function
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i] + ("(…)" if i < len(name) - 2 else "()")
    return name


def library_group(function: str, user_roots: Sequence[str] = ()) -> str:
    """The group of a callgrind function name ("file:function [object]")."""
    if any(root and root in function for root in user_roots):
        return "user"
    lowered = function.lower()
    if any(mark in lowered for mark in ("libtorch", "libc10", "/torch/", "c10::", "at::",
                                        "torch::", "aten/")):
        return "torch"
    if any(mark in lowered for mark in ("libpython", "/python3", "python/", "objects/",
                                        "modules/", "_py", "py_")):
        return "python"
    return "other"


def function_deltas(baseline: Any, candidate: Any, *, inclusive: bool = False,
                    user_roots: Sequence[str] = (),
                    top: int | None = 15) -> list[FunctionDelta]:
    """The `top` functions (all of them: None) whose counts a run changed most between
    two CallgrindStats (denoised), largest change first."""
    def per_run(stats: Any) -> Any:
        counts = stats.stats(inclusive=inclusive).denoise()
        return counts * (1.0 / stats.number_per_run)

    delta = per_run(candidate) - per_run(baseline)
    rows = sorted(((c.count, c.function) for c in delta if c.count),
                  key=lambda r: (-abs(r[0]), r[1]))
    return [FunctionDelta(function, library_group(function, user_roots), float(count))
            for count, function in rows[:top]]


def group_totals(exclusive: Sequence[FunctionDelta]) -> dict[str, float]:
    """The change of each library group's counts a run, from every function's exclusive
    delta (`function_deltas(..., top=None)`)."""
    totals = dict.fromkeys(GROUPS, 0.0)
    for row in exclusive:
        totals[row.group] += row.change
    return totals
