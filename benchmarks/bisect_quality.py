"""How often does `torchmark bisect` name the right commit, in how many measurements?

Seeded throw-away repositories of 64 commits (torchmark.demos.planted_repo), each with a
step planted at a random commit: a 0.5% instruction-count step (counted), a 5% and a
2% wall-time step (timed, each commit interleaved with both ends). Each bisection's
line: the planted commit, the answer (one commit, or a range), the measurements and
the wall time. Targets (issue 37): counts 20/20 right in at most log2(commits) + 2
measurements (the floor: a binary search needs ceil(log2(commits - 1)) judgements, plus
the two ends); 5% wall 19/20 right, the rest a range holding the bad commit, never a
wrong single commit; 2% wall never a wrong single commit.

    python benchmarks/bisect_quality.py [--repos 20] [--kinds counts,wall5,wall2]
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from pathlib import Path

from torchmark.demos.planted_repo import plant_repository
from torchmark.rootcause.bisect import BisectOptions, bisect
from torchmark.rootcause.probes import CaseCode
from torchmark.rootcause.search import most_probes

KINDS = {"counts": ("instructions", 0.005), "wall5": ("wall", 0.05), "wall2": ("wall", 0.02)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--kinds", default="counts,wall5,wall2")
    parser.add_argument("--min-run-time", type=float, default=2.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="torchmark-bisect-quality-"))
    bound = most_probes(args.commits) + 2
    try:
        for kind in args.kinds.split(","):
            metric, step = KINDS[kind]
            tally = {"right": 0, "range": 0, "wrong": 0}
            worst = 0
            for seed in range(args.repos):
                repo = plant_repository(root / f"{kind}-{seed}", commits=args.commits,
                                        step=step, seed=seed)
                started = time.perf_counter()
                result = bisect(repo.root, repo.commits[0], repo.commits[-1],
                                CaseCode(repo.statement, repo.setup),
                                BisectOptions(metric=metric, min_run_time=args.min_run_time))
                seconds = time.perf_counter() - started
                outcome = result.outcome
                if outcome.exact:
                    answer = "right" if outcome.first_bad == repo.first_bad_index else "wrong"
                    said = f"commit {outcome.first_bad}"
                else:
                    held = repo.first_bad_index in outcome.candidates
                    answer = "range" if held else "wrong"
                    said = f"range {outcome.candidates[0]}..{outcome.candidates[-1]}" + \
                        ("" if held else " (without it)")
                tally[answer] += 1
                worst = max(worst, result.measurements)
                print(f"{kind} seed {seed:2d}: planted at {repo.first_bad_index:2d}, answer "
                      f"{said} [{answer}], {result.measurements} measurements, "
                      f"{seconds:.0f} s", flush=True)
                shutil.rmtree(repo.root, ignore_errors=True)
            summary = (f"{kind}: {tally['right']}/{args.repos} right, {tally['range']} ranges "
                       f"holding the bad commit, {tally['wrong']} wrong; at most {worst} "
                       f"measurements (log2({args.commits}) + 2 = "
                       f"{math.log2(args.commits) + 2:g}; the search's floor {bound})")
            if kind == "counts":
                ok = tally["right"] == args.repos and worst <= math.log2(args.commits) + 2
            elif kind == "wall5":
                ok = tally["wrong"] == 0 and tally["right"] >= math.ceil(0.95 * args.repos)
            else:
                ok = tally["wrong"] == 0
            print(f"{'PASS' if ok else 'FAIL'}  {summary}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
