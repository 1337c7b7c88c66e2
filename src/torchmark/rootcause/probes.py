"""Measuring one case at commits of a repository, each in a worktree that comes first
on the import path of the process that measures.

- Instruction counts: one request of the shared callgrind host a commit (its counted
  process imports from the worktree); exact, so one measurement a commit decides.
- Wall time: the commit interleaved with another one (`ab_environments`: fresh worker
  pairs, A B B A blocks), the verdict from the engine.

A commit whose build command fails, or whose case fails to import or run, raises
`CommitUnusable` with the reason in one line (bisect skips it)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from torchmark.core.errors import MeasurementError, UsageError

BUILD_TIMEOUT_S = 1800.0


class CommitUnusable(MeasurementError):
    """The commit does not build, import or run the case: bisect skips it."""


def import_root(worktree: Path, subdir: str | None) -> Path:
    """Where the code under test is imported from in `worktree`: `subdir` when given,
    else `src` for a src layout, else the worktree itself."""
    if subdir is not None:
        root = (worktree / subdir).resolve()
        if not root.is_relative_to(worktree.resolve()) or not root.is_dir():
            raise UsageError(f"--import-path {subdir}: no such folder in the repository")
        return root
    src = worktree / "src"
    return src if src.is_dir() else worktree


def build(worktree: Path, command: str, timeout: float = BUILD_TIMEOUT_S) -> None:
    """Run the build `command` (a shell command) in `worktree`, with this interpreter's
    folder first on PATH (so `python` is the one measuring); CommitUnusable when it
    fails, with the last line it printed."""
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable),
                                                  os.environ.get("PATH", "")])}
    try:
        done = subprocess.run(command, shell=True, cwd=worktree, env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")
    except subprocess.TimeoutExpired:
        raise CommitUnusable(f"the build did not end in {timeout:.0f} s") from None
    if done.returncode != 0:
        last = [line.strip() for line in done.stdout.splitlines() if line.strip()][-1:]
        raise CommitUnusable(f"the build exited with status {done.returncode}"
                             + (f": {last[0][:300]}" if last else ""))


@dataclasses.dataclass(frozen=True)
class CaseCode:
    """What is measured: a statement after its setup, on `num_threads` threads; or a
    pytest benchmark (`pytest_node`: its node id, relative to the repository's top)."""

    stmt: str
    setup: str = "pass"
    num_threads: int = 1
    label: str | None = None
    pytest_node: str | None = None


def count_pytest(node: str, worktree: Path, root: Path, number: int) -> Any:
    """The instruction-count Result of the pytest benchmark `node` at a commit: pytest
    run in `worktree` (importing from `root` first) with the torchmark plugin counting
    (`--torchmark-metric instructions`); CommitUnusable when the test fails or records
    nothing."""
    import tempfile

    from torchmark.records.files import load_results

    with tempfile.TemporaryDirectory(prefix="torchmark-bisect-pytest-") as folder:
        out = Path(folder) / "results.jsonl"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "TORCHMARK_NO_STORE": "1",
            # the sessions share one valgrind host (each would start its own, ~30 s),
            # which exits a minute after the last; unless the caller chose otherwise
            "TORCHMARK_CALLGRIND_KEEPALIVE": os.environ.get("TORCHMARK_CALLGRIND_KEEPALIVE",
                                                            "60")}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node,
             "--torchmark-metric=instructions", "--torchmark-no-store",
             f"--torchmark-json={out}"],
            cwd=worktree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", timeout=BUILD_TIMEOUT_S)
        found = [r for r in load_results(out) if r.metric == "instructions" and r.ok] \
            if out.exists() else []
        if done.returncode != 0 or len(found) != 1:
            lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
            why = next((line for line in reversed(lines) if line.startswith(("E ", "ERROR",
                                                                             "FAILED"))),
                       lines[-1] if lines else "no output")
            what = "recorded no count" if done.returncode == 0 and not found else \
                f"recorded {len(found)} counts" if done.returncode == 0 else \
                f"exited with status {done.returncode}"
            raise CommitUnusable(f"pytest {node} {what}: {why[:300]}")
        return found[0]


def count_instructions(case: CaseCode, root: Path, cwd: Path, number: int) -> Any:
    """CallgrindStats (the median of 3 repeats) of `number` runs of the case, counted by
    the shared host in a process importing from `root` first, working in `cwd`."""
    from torchmark.callgrind.batch import result_for
    from torchmark.callgrind.collector import CallgrindError, collect, default_host
    from torchmark.timing.timer_class import Timer

    timer = Timer(case.stmt, case.setup, num_threads=case.num_threads, label=case.label)
    request = dataclasses.replace(timer._callgrind_request(number, None, True),
                                  sys_path=(str(root), *sys.path), cwd=str(cwd))
    try:
        return result_for(collect(request, False, default_host()), None)
    except CallgrindError as e:
        if e.crashed:
            raise
        raise CommitUnusable(_last_error_line(str(e))) from None


def time_against(case: CaseCode, roots: tuple[Path, Path], labels: tuple[str, str], *,
                 min_run_time: float, worker_pairs: int, threshold: float) -> Any:
    """EnvABResult of the case at two commits (`roots`: their import folders; baseline
    first), interleaved; CommitUnusable when one side cannot run it (its label says
    which)."""
    from torchmark.compare.env_ab import ab_environments

    try:
        return ab_environments(sys.executable, sys.executable, case.stmt, case.setup,
                               labels=labels, metric="wall", min_run_time=min_run_time,
                               num_threads=case.num_threads, label=case.label,
                               min_effect=threshold, worker_pairs=worker_pairs,
                               import_paths=(str(roots[0]), str(roots[1])))
    except (MeasurementError, UsageError) as e:
        raise CommitUnusable(_last_error_line(str(e))) from None


def _last_error_line(text: str) -> str:
    """The line of a failure that says what went wrong (a traceback's last line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else "failed"
    if "Traceback (most recent call last)" in text:
        errors = [line for line in lines if not line.startswith(("File ", "^", "~"))
                  and ":" in line and not line.startswith("Traceback")]
        if errors:
            return f"{first.split(':', 1)[0]}: {errors[-1]}"[:400]
    return first[:400]
