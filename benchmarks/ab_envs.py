"""A/B across Python environments: does `torchmark ab --python A --python B` (blocks of
the two environments' workers interleaved A B B A) call an identical pair "same" and a
3% slower one "slower", where torch's pickled workflow (measure in env A, pickle, then
in env B, compare) lets drift between the halves read as a difference?

Three venvs share this one's packages (a .pth to its site-packages: the same torch) and
differ only in their own `abwork.py`, whose `work()` loops n times doing nothing (no
allocation, so its cost does not hang on where a process's heap puts things): `same-a`
and `same-b` with n = N, `slower` with n chosen so that work() takes 3% longer,
calibrated at the start (the two modules timed in this process by `measure_ab`, the
median of 3, n corrected once, then measured again).
Each repetition runs, on one pair (`same-a` vs `same-b`: identical; `same-a` vs
`slower`: 3% slower), in alternating order:

- "interleaved": `ab_environments` (what `torchmark ab --python` runs: 5 fresh worker
  pairs in turn, each a worker a side timing a fifth of the budget in blocks
  alternating A B B A; the verdict over all pairs' quads, a change called only when the
  median pair shows it too), each side `--min-run-time` seconds in all;
- "torch sequential": a process in env A runs torch.utils.benchmark's
  `Timer.blocked_autorange(min_run_time)` and pickles the Measurement, then the same in
  env B; the two are compared by the same verdict rule (`ab_test`, unpaired: it says
  "unsure" for a change within what drift between the halves explains) and, as people
  read torch's tables, by eye (a median change over 1% called a change).

Regimes: "quiet"; "loaded": a busy-loop process (`python -c "while True: pass"`) loads a
core during the second half of each A/B: started when env B's process is started
(torch's workflow), or when the interleaved A/B has done half of its blocks.
A verdict is correct when an identical pair reads "same" or "unsure",
and the 3% pair "slower". This machine is shared: before each repetition the script
waits (up to `--patience` s) until other processes use at most 0.3 CPUs, and it prints
how much they used during each repetition. `--counts` adds one A/B of each pair by instruction counts
(each environment's callgrind collector; about a minute each).

    python benchmarks/ab_envs.py [--reps 20] [--min-run-time 1.0] \
        [--regimes quiet,loaded] [--counts] [--patience 120]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import pickle
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torchmark
from torchmark.compare.ab import ab_test
from torchmark.compare.env_ab import ab_environments

STMT, SETUP = "abwork.work()", "import abwork"
TARGET = 1.03
TORCH_SIDE = """import pickle, sys
from torch.utils import benchmark
m = benchmark.Timer(sys.argv[1], sys.argv[2]).blocked_autorange(min_run_time=float(sys.argv[3]))
with open(sys.argv[4], "wb") as f:
    pickle.dump(m, f)
"""
INTERLEAVED = "interleaved (torchmark ab --python)"
SEQ_AB = "torch sequential, ab_test rule"
SEQ_EYE = "torch sequential, eyeball 1%"
VERDICTS = ("slower", "faster", "same", "unsure")


def make_env(folder: Path, n: int) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next((folder / "lib").glob("python*/site-packages"))
    (site / "parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    write_work(folder, n)
    return str(folder / "bin" / "python")


def write_work(folder: Path, n: int) -> Path:
    path = next((folder / "lib").glob("python*/site-packages")) / "abwork.py"
    path.write_text(f"from itertools import repeat\n\n\ndef work():\n"
                    f"    for _ in repeat(None, {n}):\n        pass\n")
    return path


def ratio_in_process(path_a: Path, path_b: Path, min_run_time: float) -> float:
    """work() of path_b / work() of path_a, timed here by measure_ab."""
    works = []
    for i, path in enumerate((path_a, path_b)):
        spec = importlib.util.spec_from_file_location(f"abwork_{i}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        works.append(module.work)
    r = torchmark.measure_ab(torchmark.Timer("work()", globals={"work": works[0]}),
                             torchmark.Timer("work()", globals={"work": works[1]}),
                             min_run_time=min_run_time)
    return r.ratio


def ratios_in_process(path_a: Path, path_b: Path, times: int = 3) -> list[float]:
    return sorted(ratio_in_process(path_a, path_b, 2.0) for _ in range(times))


def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds all processes have used (/proc/stat, niced ones left out), and this
    process and its waited-for children."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, *rest = (int(v) for v in f.readline().split()[1:9])
    t = os.times()
    return ((user + system + sum(rest)) / os.sysconf("SC_CLK_TCK"),
            t.user + t.system + t.children_user + t.children_system)


def others_since(before: tuple[float, float], seconds: float) -> float:
    """CPUs' worth other processes used since `before`."""
    after = _cpu_seconds()
    return max(0.0, (after[0] - before[0]) - (after[1] - before[1])) / seconds


def wait_for_quiet(limit: float, patience: float) -> None:
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        before = _cpu_seconds()
        time.sleep(2)
        if others_since(before, 2) <= limit:
            return


def busy_loop() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def stop(process: subprocess.Popen | None) -> None:
    if process is not None:
        process.kill()
        process.wait()


def interleaved(a: str, b: str, min_run_time: float, loaded: bool,
                ) -> tuple[str, float, list[float]]:
    load: subprocess.Popen | None = None
    done = [0.0]

    def on_block(side: int, number: int, seconds: float) -> None:
        nonlocal load
        done[0] += seconds if side == 0 else 0.0
        if loaded and load is None and done[0] >= min_run_time / 2:
            load = busy_loop()

    try:
        r = ab_environments(a, b, STMT, SETUP, min_run_time=min_run_time,
                            labels=("A", "B"), callback=on_block)
        return r.verdict, r.ratio, [p.ratio for p in r.pairs]
    finally:
        stop(load)


def sequential(a: str, b: str, min_run_time: float, loaded: bool,
               folder: Path) -> tuple[str, str]:
    """torch's workflow: env A measured and pickled, then env B; (ab_test's verdict,
    the eyeball's)."""
    measurements = []
    load = None
    try:
        for side, python in enumerate((a, b)):
            if side == 1 and loaded:
                load = busy_loop()
            out = folder / f"side{side}.pkl"
            subprocess.run([python, "-c", TORCH_SIDE, STMT, SETUP, str(min_run_time),
                            str(out)], check=True)
            with open(out, "rb") as f:
                measurements.append(pickle.load(f))
    finally:
        stop(load)
    ma, mb = measurements
    change = mb.median / ma.median - 1
    eyeball = ("slower" if change > 0 else "faster") if abs(change) > 0.01 else \
        "same"
    return ab_test(ma, mb).verdict, eyeball


def correct(pair: str, verdict: str) -> bool:
    return verdict == "slower" if pair == "3% slower" else \
        verdict in ("same", "unsure")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--min-run-time", type=float, default=1.0,
                        help="seconds a side of each A/B")
    parser.add_argument("--regimes", default="quiet,loaded")
    parser.add_argument("--n", type=int, default=100000, help="work()'s loops in env A")
    parser.add_argument("--patience", type=float, default=120,
                        help="seconds to wait for a quiet machine before a repetition")
    parser.add_argument("--counts", action="store_true",
                        help="also one A/B of each pair by instruction counts")
    args = parser.parse_args()
    regimes = args.regimes.split(",")
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ab-envs-") as tmp:
        root = Path(tmp)
        envs = {name: make_env(root / name, args.n) for name in ("same-a", "same-b")}
        n_b = round(args.n * TARGET)
        envs["slower"] = make_env(root / "slower", n_b)
        path_a = write_work(root / "same-a", args.n)
        wait_for_quiet(0.3, args.patience)
        first = ratios_in_process(path_a, write_work(root / "slower", n_b))
        n_b = args.n + round((n_b - args.n) * (TARGET - 1) / (statistics.median(first) - 1))
        measured = ratios_in_process(path_a, write_work(root / "slower", n_b))
        print(f"calibration: work() at n = {args.n} and {round(args.n * TARGET)}: ratios "
              f"{', '.join(f'{x:.4f}' for x in first)}; at n = {n_b}: "
              f"{', '.join(f'{x:.4f}' for x in measured)} (in this process, measure_ab, "
              "2 s a side, each time the modules loaded anew)", flush=True)
        busy: dict[str, list[float]] = collections.defaultdict(list)
        pairs = {"identical": ("same-a", "same-b"), "3% slower": ("same-a", "slower")}
        tally: dict[tuple[str, str, str], collections.Counter] = collections.defaultdict(
            collections.Counter)
        for regime in regimes:
            for rep in range(args.reps):
                for pair, (ea, eb) in pairs.items():
                    a, b = envs[ea], envs[eb]
                    loaded = regime == "loaded"
                    wait_for_quiet(0.3, args.patience)
                    before, t0 = _cpu_seconds(), time.monotonic()
                    now: dict[str, str] = {}
                    for turn in ((0, 1) if rep % 2 == 0 else (1, 0)):
                        if turn == 0:
                            now[INTERLEAVED], ratio, pair_ratios = interleaved(
                                a, b, args.min_run_time, loaded)
                        else:
                            now[SEQ_AB], now[SEQ_EYE] = sequential(
                                a, b, args.min_run_time, loaded, root)
                    others = others_since(before, time.monotonic() - t0)
                    busy[regime].append(others)
                    for method, verdict in now.items():
                        tally[regime, pair, method][verdict] += 1
                    print(f"{regime} rep {rep + 1}/{args.reps} {pair}: interleaved "
                          f"{now[INTERLEAVED]} ({ratio:.4f}; pairs "
                          f"{' '.join(f'{x:.4f}' for x in pair_ratios)}); torch sequential {now[SEQ_AB]} (eyeball "
                          f"{now[SEQ_EYE]}); others used {others:.2f} CPUs "
                          f"[{time.time() - started:.0f} s]", flush=True)
        print()
        print("| regime | pair | method | slower | faster | same | unsure | correct |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for (regime, pair, method), counter in sorted(tally.items(), key=lambda kv: (
                regimes.index(kv[0][0]), kv[0][1] != "identical", kv[0][2])):
            total = sum(counter.values())
            right = sum(n for v, n in counter.items() if correct(pair, v))
            print(f"| {regime} | {pair} | {method} | " + " | ".join(
                str(counter[v]) for v in VERDICTS) + f" | {right}/{total} |")
        if args.counts:
            print()
            for pair, (ea, eb) in pairs.items():
                r = ab_environments(envs[ea], envs[eb], STMT, SETUP, metric="instructions",
                                    number=10, labels=(ea, eb))
                print(f"instructions, {pair}: {r.ab.estimate()}", flush=True)
        print(f"\n{args.reps} repetitions a regime and pair, {args.min_run_time:g} s a side; "
              f"{time.time() - started:.0f} s in all; other processes used " + ", ".join(
                  f"{statistics.mean(v):.2f} CPUs on average (max {max(v):.2f}) in {k}"
                  for k, v in busy.items()))


if __name__ == "__main__":
    main()
