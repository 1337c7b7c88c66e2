"""Does `explain` name what a planted change changed?

Python plants: 10 seeded repositories (torchmark.demos.planted_repo, `parts=5`): work()
calls five functions part_0 .. part_4, and one commit makes one of them (drawn by the
seed) loop 1% longer. The exact Python-level profile of the last good and the first bad
commit (each in a worktree) must name that function first among the user's code: target
>= 9 of 10. Beside it, the anchor: callgrind's per-function counts of the same two
commits, which name the interpreter's C functions (so never the user's function).

C-level plant (needs valgrind): work() is tensor arithmetic and one commit makes the
tensor 5% larger; the per-function count deltas must put the change in torch's functions
(the torch group grows most), while the Python profile shows no Python function
changed.

    python benchmarks/explain_quality.py [--plants 10] [--no-counts]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from torchmark.demos.planted_repo import plant_repository
from torchmark.rootcause.explain import collect_at_commits
from torchmark.rootcause.function_diff import short_name
from torchmark.rootcause.git_history import Worktrees
from torchmark.rootcause.python_profile import changed_functions, profile_python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plants", type=int, default=10)
    parser.add_argument("--no-counts", action="store_true",
                        help="Skip the C-level plant (it needs valgrind).")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="torchmark-explain-quality-"))
    try:
        named = 0
        for seed in range(args.plants):
            repo = plant_repository(root / f"parts-{seed}", commits=8, step=0.01, parts=5,
                                    seed=seed)
            started = time.perf_counter()
            good, bad = repo.commits[repo.first_bad_index - 1], repo.first_bad
            with Worktrees(repo.root) as trees:
                before, after = (profile_python(repo.statement, repo.setup, trees.get(sha))
                                 for sha in (good, bad))
            changes = changed_functions(before, after)
            user = [(new or old) for old, new, _ in changes
                    if (new or old) is not None and (new or old).file.startswith("planted/")]
            first = user[0].name if user else "(none)"
            named += first == repo.planted_function
            print(f"python plant {seed}: planted in {repo.planted_function}, named first "
                  f"{first} [{'right' if first == repo.planted_function else 'WRONG'}], "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
            shutil.rmtree(repo.root, ignore_errors=True)
        ok = named >= -(-9 * args.plants // 10)
        print(f"{'PASS' if ok else 'FAIL'}  python plants: the planted function named first "
              f"in {named} of {args.plants} (target >= 9 of 10)", flush=True)
        if args.no_counts or shutil.which("valgrind") is None:
            print("C-level plant: skipped (--no-counts, or valgrind missing)")
            return
        repo = plant_repository(root / "tensor", commits=4, step=0.05, first_bad=2,
                                tensor=True)
        started = time.perf_counter()
        explanation = collect_at_commits(repo.root, (repo.commits[1], repo.commits[2]),
                                         repo.statement, repo.setup, number=20)
        groups = explanation.groups
        grew = max(groups, key=lambda g: groups[g])
        print(f"C-level plant (a 5% larger tensor): instructions {explanation.change:+.2%}; "
              f"by library {', '.join(f'{g} {c:+,.0f}' for g, c in groups.items())}; "
              f"{time.perf_counter() - started:.0f} s")
        for row in explanation.exclusive[:5]:
            print(f"  {row.change:+10,.0f}  {row.group:<6}  {short_name(row.function)}")
        python_changed = [c for c in explanation.python or ()
                          if (c[1] or c[0]) is not None and
                          (c[1] or c[0]).file.startswith("planted/")]  # type: ignore[union-attr]
        ok = grew == "torch" and not python_changed
        print(f"{'PASS' if ok else 'FAIL'}  C-level plant: the {grew} group grew most; "
              f"{len(python_changed)} of the user's Python functions changed")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
