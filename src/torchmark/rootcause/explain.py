"""Explanations of an instruction-count change, case by case: the count before and after,
the compiled functions whose counts changed most (exclusive and inclusive, grouped by
library: rootcause/function_diff.py), and, where the code can be run at both commits,
the user's Python functions whose executed lines changed (rootcause/python_profile.py).
The per-function counts come from the store (kept with every counted result that
bisect, `callgrind` or the suite recorded with them), or are counted now at two commits
(`collect_at_commits`)."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchmark.core.result import Result
from torchmark.rootcause.function_diff import (
    FunctionDelta,
    function_deltas,
    group_totals,
    short_name,
)
from torchmark.rootcause.python_profile import Change, changed_functions, profile_python


@dataclasses.dataclass(frozen=True)
class CaseExplanation:
    title: str
    stmt: str
    setup: str
    before: float  # instructions a run
    after: float
    exclusive: tuple[FunctionDelta, ...]
    inclusive: tuple[FunctionDelta, ...]
    groups: dict[str, float]
    python: tuple[Change, ...] | None = None  # None: not profiled

    @property
    def change(self) -> float:
        return self.after / self.before - 1 if self.before else float("nan")


def _stats(result: Result) -> Any | None:
    from torchmark.callgrind.results import result_to_stats

    if result.metric != "instructions" or "callgrind_stats" not in result.extra:
        return None
    return result_to_stats(result)


def explain_stored(before: Sequence[Result], after: Sequence[Result], *,
                   pattern: str | None = None, top: int = 15,
                   user_roots: Sequence[str] = ()) -> tuple[list[CaseExplanation], list[str]]:
    """An explanation of each counted case both sides hold per-function counts of
    (matching `pattern`, a glob over titles and ids, when given), and the titles of the
    cases on both sides left out for lack of them (wall-time cases among them)."""
    a = {r.case.id: r for r in before if r.metric == "instructions"}
    on_both = {r.case.id for r in before} & {r.case.id for r in after}
    explained, lacking = [], []
    for result in after:
        if result.case.id not in on_both:
            continue
        if pattern and not (fnmatch.fnmatchcase(result.case.title, pattern)
                            or fnmatch.fnmatchcase(result.case.id, pattern)):
            continue
        if result.metric != "instructions" or result.case.id not in a:
            if result.case.id not in a and result.case.title not in lacking:
                lacking.append(result.case.title)  # timed only: nothing to explain from
            continue
        old, new = _stats(a[result.case.id]), _stats(result)
        if old is None or new is None:
            lacking.append(result.case.title)
            continue
        explained.append(explain_pair(result.case.title, result.case.stmt, result.case.setup,
                                      old, new, top=top, user_roots=user_roots))
    return explained, lacking


def explain_pair(title: str, stmt: str, setup: str, old: Any, new: Any, *, top: int = 15,
                 user_roots: Sequence[str] = ()) -> CaseExplanation:
    """The explanation of two CallgrindStats of one case."""
    exclusive = function_deltas(old, new, top=None, user_roots=user_roots)
    return CaseExplanation(
        title, stmt, setup, old.counts() / old.number_per_run,
        new.counts() / new.number_per_run, tuple(exclusive[:top]),
        tuple(function_deltas(old, new, inclusive=True, top=top, user_roots=user_roots)),
        group_totals(exclusive))


def collect_at_commits(repo: Path, refs: tuple[str, str], stmt: str, setup: str, *,
                       number: int = 100, top: int = 15,
                       import_subdir: str | None = None) -> CaseExplanation:
    """Count `stmt` and profile its Python functions at two commits of `repo` (each in a
    worktree first on the import path), and explain the change."""
    from torchmark.rootcause.git_history import Worktrees, resolve
    from torchmark.rootcause.probes import CaseCode, count_instructions, import_root

    shas = [resolve(repo, ref, role) for ref, role in zip(refs, ("good", "bad"), strict=True)]
    case = CaseCode(stmt, setup)
    with Worktrees(repo) as trees:
        roots = [import_root(trees.get(sha), import_subdir) for sha in shas]
        stats = [count_instructions(case, root, trees.get(sha), number)
                 for root, sha in zip(roots, shas, strict=True)]
        profiles = [profile_python(stmt, setup, root) for root in roots]
        user = [str(trees.folder)]
        explanation = explain_pair(stmt, stmt, setup, stats[0], stats[1], top=top,
                                   user_roots=user)
    return dataclasses.replace(explanation,
                               python=tuple(changed_functions(profiles[0], profiles[1])))


def lines(explanation: CaseExplanation, top: int = 15) -> list[str]:
    """The explanation as text."""
    e = explanation
    out = [f"case: {e.title}",
           f"instructions a run: {e.before:,.0f} -> {e.after:,.0f} ({e.change:+.3%})",
           "by library (own instructions a run): " + ", ".join(
               f"{group} {change:+,.0f}" for group, change in e.groups.items())]
    for name, rows in (("exclusive (own instructions)", e.exclusive),
                       ("inclusive (with their callees)", e.inclusive)):
        out.append(f"functions whose counts changed most, {name}, a run:")
        out += [f"  {row.change:+12,.0f}  {row.group:<6}  {short_name(row.function)}"
                for row in rows[:top]]
        if not rows:
            out.append("  (none)")
    if e.python is not None:
        out.append("Python functions whose work changed (lines executed a run; calls a run):")
        for old, new, delta in e.python[:top]:
            named = new or old
            assert named is not None
            before = f"{old.lines:,.0f}" if old else "-"
            after = f"{new.lines:,.0f}" if new else "-"
            calls = (f"{old.calls:,.0f}" if old else "-", f"{new.calls:,.0f}" if new else "-")
            out.append(f"  {named.file}:{named.line} {named.name}: lines {before} -> {after} "
                       f"({delta:+,.0f}), calls {calls[0]} -> {calls[1]}")
        if not e.python:
            out.append("  (none: the Python code ran the same lines)")
    return out
