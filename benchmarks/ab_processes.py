"""Two saved runs compared: one process a run against `timeit --processes N`.

A process's speed is drawn at its start (docs/ab.md), so two saved runs of the same
statement, each one process, can read far apart, and `ab` on their files calls a change
that is not there. `timeit --processes N` times each run in N fresh processes, and `ab`
then compares the runs by their processes' medians (exact Mann-Whitney, Hodges-Lehmann).

Each repetition saves, for each design, in alternating order, a baseline run of STMT and
two candidate runs, each `torchmark timeit` invoked as a user would (a fresh command):

- "one process": `torchmark timeit STMT --min-run-time T --save FILE`;
- "N processes": the same with `--processes N` (T in all, shared by the processes);

and compares (`ab_test`, as `torchmark ab A.json B.json` does) the baseline against a
run of the same statement (A/A: correct is "same" or "unsure") and
against a run of SLOWER, which does the same work and a quarter more (correct:
"slower"). The statement is pure Python (`sum(range(1000))`), the kind whose speed
depends most on the process. Prints, per design, how often each verdict came out and
the A/A ratios' range; the machine's other load during the run (CPUs used by other
processes) at the end.

    python benchmarks/ab_processes.py [--reps 10] [--processes 5] [--min-run-time 1.0]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torchmark.compare.ab import ab_test
from torchmark.timing.files import load_measurements

STMT = "sum(range(1000))"
SLOWER = "sum(range(1250))"  # a quarter more of the same work
TORCHMARK = [sys.executable, "-m", "torchmark"]


def saved_run(stmt: str, path: Path, min_run_time: float, processes: int | None) -> object:
    """`torchmark timeit STMT --save PATH`, a fresh command; the Measurement it saved."""
    args = [*TORCHMARK, "timeit", stmt, "--min-run-time", str(min_run_time), "--no-store",
            "--save", str(path)]
    if processes:
        args += ["--processes", str(processes)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    [m] = load_measurements(path)
    return m


def other_cpu_seconds() -> float:
    """CPU seconds used so far by every process on the machine (/proc/stat), less this
    process tree's own (approximately: its children's and its own)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    own = os.times()
    return busy / os.sysconf("SC_CLK_TCK") - (own.user + own.system + own.children_user
                                              + own.children_system)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--min-run-time", type=float, default=1.0)
    args = parser.parse_args()
    designs = {"one process": None, f"{args.processes} processes": args.processes}
    verdicts: dict[tuple[str, str], collections.Counter] = collections.defaultdict(
        collections.Counter)
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    start, other = time.time(), other_cpu_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            order = list(designs.items())
            if rep % 2:
                order.reverse()
            for design, processes in order:
                folder = Path(tmp) / f"{rep}-{processes or 1}"
                folder.mkdir()
                base = saved_run(STMT, folder / "a.json", args.min_run_time, processes)
                same = saved_run(STMT, folder / "b.json", args.min_run_time, processes)
                slow = saved_run(SLOWER, folder / "c.json", args.min_run_time, processes)
                aa, ab = ab_test(base, same), ab_test(base, slow)
                verdicts[(design, "A/A")][aa.verdict] += 1
                verdicts[(design, "+25%")][ab.verdict] += 1
                ratios[design].append(aa.ratio)
                print(f"rep {rep + 1:2d} {design:<12} A/A {aa.ratio:.3f} {aa.verdict:<22} "
                      f"+25% {ab.ratio:.3f} {ab.verdict}", flush=True)
    elapsed = time.time() - start
    load = (other_cpu_seconds() - other) / elapsed
    print(f"\n{args.reps} repetitions, {STMT!r} against itself and against {SLOWER!r}, "
          f"--min-run-time {args.min_run_time:g} a run; other processes used "
          f"{load:.2f} CPUs on average over {elapsed / 60:.1f} min")
    print(f"{'design':<14} {'pair':<5} {'correct':>8}  verdicts")
    for (design, pair), counts in verdicts.items():
        right = sum(n for v, n in counts.items()
                    if (v in ("same", "unsure") if pair == "A/A"
                        else v == "slower"))
        listed = ", ".join(f"{n} {v}" for v, n in counts.most_common())
        print(f"{design:<14} {pair:<5} {right:>4}/{sum(counts.values()):<3}  {listed}")
    for design, values in ratios.items():
        print(f"{design}: A/A ratios {min(values):.3f} to {max(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
