"""Explanations of a change between two sides, case by case. An instruction count: the
count before and after, the compiled functions whose counts changed most (exclusive and
inclusive, grouped by library: rootcause/function_diff.py), and, where the code can be
run at both commits, the user's Python functions whose executed lines changed
(rootcause/python_profile.py). Kernel time, ops sweeps and replays: from what their
results hold (rootcause/time_explain.py). The per-function counts come from the store
(kept with every counted result that bisect, `callgrind` or the suite recorded with
them), or are counted now at two commits (`collect_at_commits`)."""

from __future__ import annotations

import dataclasses
import fnmatch
import shlex
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
from torchmark.rootcause.time_explain import (
    KernelExplanation,
    OpsExplanation,
    explain_times,
    kernel_lines,
    ops_lines,
)


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
    commits: tuple[str | None, str | None] = (None, None)  # where each side was counted
    case_id: str | None = None  # the stored case it explains (None: counted now)
    # the folder of the repository the code was imported from (bisect's, --collect's;
    # None: the repository's top or not known) and, when counted now, the repository
    import_path: str | None = None
    repo: str | None = None

    @property
    def change(self) -> float:
        return self.after / self.before - 1 if self.before else float("nan")


def _stats(result: Result) -> Any | None:
    from torchmark.callgrind.results import result_to_stats

    if result.metric != "instructions" or "callgrind_stats" not in result.extra:
        return None
    return result_to_stats(result)


def matching(results: Sequence[Result], pattern: str | None) -> list[Result]:
    """The results whose case title or id matches the glob `pattern` (all without one)."""
    return [r for r in results if not pattern or fnmatch.fnmatchcase(r.case.title, pattern)
            or fnmatch.fnmatchcase(r.case.id, pattern)]


def explain_stored(before: Sequence[Result], after: Sequence[Result], *, top: int = 15,
                   user_roots: Sequence[str] = ()) -> list[CaseExplanation]:
    """An explanation of each counted case both sides hold per-function counts of."""
    a = {r.case.id: r for r in before if r.metric == "instructions"}
    explained = []
    for result in after:
        if result.metric != "instructions" or result.case.id not in a:
            continue
        old, new = _stats(a[result.case.id]), _stats(result)
        if old is not None and new is not None:
            explanation = explain_pair(result.case.title, result.case.stmt, result.case.setup,
                                       old, new, top=top, user_roots=user_roots)
            explained.append(dataclasses.replace(
                explanation, commits=(_commit(a[result.case.id]), _commit(result)),
                case_id=result.case.id, import_path=_import_path(result)))
    return explained


def _commit(result: Result) -> str | None:
    p = result.provenance
    return p.git_commit if p is not None else None


def _import_path(result: Result) -> str | None:
    """The repository's folder the result's code was imported from, where bisect noted
    one other than the top (`src`)."""
    path = result.extra.get("import_path")
    return path if isinstance(path, str) and path not in ("", ".") else None


@dataclasses.dataclass(frozen=True)
class Explained:
    """Everything two sides' stored results explain: counted cases (per-function
    counts), kernel-time cases (their kernels), ops sweeps and replays (their ops), and
    the cases on both sides with nothing stored to explain them from."""

    counts: list[CaseExplanation]
    kernels: list[KernelExplanation]
    ops: list[OpsExplanation]
    unexplained: list[Result]

    def sections(self, top: int = 15) -> list[list[str]]:
        """Each explanation as lines of text, one list a case (an ops sweep: one)."""
        return [*(lines(e, top) for e in self.counts),
                *(kernel_lines(e, top) for e in self.kernels),
                *(ops_lines(e, top) for e in self.ops)]


def explain_results(before: Sequence[Result], after: Sequence[Result], *,
                    pattern: str | None = None, top: int = 15, threshold: float = 0.05,
                    ops: bool = True, user_roots: Sequence[str] = ()) -> Explained:
    """Explain every case on both sides (matching `pattern`) from what the results hold;
    `ops=False` leaves ops sweeps and replays out (the gate's table shows them)."""
    old, new = matching(before, pattern), matching(after, pattern)
    on_both = {r.case.id for r in old} & {r.case.id for r in new}
    old = [r for r in old if r.case.id in on_both]
    new = [r for r in new if r.case.id in on_both]
    counts = explain_stored(old, new, top=top, user_roots=user_roots)
    kernels, op_sweeps = explain_times(old, new, threshold=threshold)
    if not ops:
        op_sweeps = []
    done = {e.case_id for e in counts} | {e.row.case_id for e in kernels} | \
        {r.case_id for e in op_sweeps for r in e.rows}
    counted = {(e.stmt, e.setup) for e in counts}  # a statement's wall time beside its
    unexplained, seen = [], set()  # counts (bisect of both metrics) is explained by them
    for result in new:
        if result.case.id not in done and result.case.id not in seen and result.ok and \
                (result.case.stmt, result.case.setup) not in counted:
            seen.add(result.case.id)
            unexplained.append(result)
    return Explained(counts, kernels, op_sweeps, unexplained)


def explain_changes(changes: Sequence[Any], store: Any, top: int = 5
                    ) -> list[tuple[Any, list[str]]]:
    """For each regression (regressions/detect.py's Change) whose last good and first
    bad runs hold what explains it (per-function counts, a kernel list), the change and
    the lines saying where it lives, `top` rows a table."""
    out = []
    for change in changes:
        if change.kind != "regression" or change.series.metric not in ("instructions",
                                                                        "kernel"):
            continue
        sides = [[r for r in store.result_records(run=point.run_id, case=change.series.case_id)
                  if r.metric == change.series.metric]
                 for point in (change.last_good, change.first_bad)]
        found = explain_results(sides[0], sides[1], top=top, ops=False)
        out += [(change, section) for section in found.sections(top)]
    return out


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
    from torchmark.core.errors import MeasurementError
    from torchmark.rootcause.git_history import Worktrees, resolve
    from torchmark.rootcause.probes import CaseCode, count_instructions, import_root

    shas = [resolve(repo, ref, side)
            for ref, side in zip(refs, ("BEFORE", "AFTER"), strict=True)]
    case = CaseCode(stmt, setup)
    with Worktrees(repo) as trees:
        roots = [import_root(trees.get(sha), import_subdir) for sha in shas]
        stats, profiles = [], []
        for root, sha, side in zip(roots, shas, ("BEFORE", "AFTER"), strict=True):
            try:  # which commit failed is said, as bisect says it
                stats.append(count_instructions(case, root, trees.get(sha), number))
                profiles.append(profile_python(stmt, setup, root))
            except MeasurementError as e:
                raise MeasurementError(f"at commit {sha[:10]} ({side}): {e}") from None
        user = [str(trees.folder)]
        explanation = explain_pair(stmt, stmt, setup, stats[0], stats[1], top=top,
                                   user_roots=user)
        folder = roots[1].resolve().relative_to(trees.get(shas[1]).resolve()).as_posix()
    return dataclasses.replace(explanation, commits=(shas[0], shas[1]),
                               python=tuple(changed_functions(profiles[0], profiles[1])),
                               import_path=None if folder == "." else folder,
                               repo=str(repo))


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
    return [*out, *reproduce_lines(e)]


def reproduce_lines(e: CaseExplanation) -> list[str]:
    """The commands that measure the explanation's two sides again, each line as it can
    be pasted: counted now, the `explain --collect` that did it (counts and Python
    profile); from stored counts, the `callgrind` command, run at each side's commit
    where they name one (with the import folder bisect used)."""
    setup = ["-s", e.setup] if e.setup and e.setup != "pass" else []
    if e.repo is not None and all(e.commits):
        argv = ["torchmark", "explain", *(f"commit:{c[:10]}" for c in e.commits if c),
                "--collect", "--stmt", e.stmt, *setup, "--repo", e.repo,
                *(["--import-path", e.import_path] if e.import_path else [])]
        return [f"reproduce: {shlex.join(argv)}"]
    command = shlex.join(["torchmark", "callgrind", e.stmt, *setup])
    if e.import_path:
        command = f"PYTHONPATH={shlex.quote(e.import_path)} {command}"
    if not all(e.commits):
        return [f"reproduce: {command}"]
    before, after = (c[:10] for c in e.commits if c)
    return [f"reproduce, in the repository's top folder at commit {before}, then at "
            f"commit {after}:", f"  {command}"]
