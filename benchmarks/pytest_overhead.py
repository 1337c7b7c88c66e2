"""The pytest plugin against pytest-benchmark: the same 20 small benchmarks (CPU tensor
ops), the same time budget each, in one run of this script.

What both measure. `torchmark(fn, *args)` and pytest-benchmark's `benchmark(fn, *args)`
both time calls `fn(*args, **kwargs)` back to back in a loop, with the garbage collector
off, on one thread (the Timer's default; the test module sets torch's count to one for
pytest-benchmark, which leaves it as it finds it), after a warm-up, and report the median
of their samples, a sample being the time of a block (torchmark) or round
(pytest-benchmark) over its calls. They differ in how many calls a sample holds:
the Timer sizes its blocks so that reading the clock is under 0.01% of one (1000 calls
of a 6 us op); pytest-benchmark by default makes a round at least 5 us, so one call of
any op over 5 us, and each such sample holds its two clock reads and its round loop's
work between calls (on this 2-core VM, rounds of one call of add, div and relu read 2.3
to 2.7% longer than rounds of 2 ms of the same calls, paired in one process: see
docs/pytest.md). So pytest-benchmark runs here with rounds of at
least 2 ms (--benchmark-min-time=0.002, the size of the Timer's blocks for these ops):
both then time the same calls the same way. Its default rounds are run beside them, to
show the difference.

Session time: each plugin alone in a fresh pytest session, the sessions alternating for
--rounds rounds; a session's time runs from starting pytest to its exit (Python, torch,
collection, measuring, the end-of-session summary; torchmark also records the run in a
store, created beforehand as a user's would be), and the median of the rounds is kept,
with the seconds each plugin spent in timed calls. The same budget: --torchmark-min-run-
time B and pytest-benchmark's --benchmark-max-time B, with its warm-up on (1000
iterations); pytest-benchmark with its defaults (one-call rounds, no warm-up, which
plans its rounds from one cold call) is timed too, for reference.

Median agreement: one session that loads both plugins and runs each benchmark five
times in a row, under pytest-benchmark (2 ms rounds), under torchmark, under
pytest-benchmark again (the A/A pair: how far one plugin moves against itself, the noise
floor), under pytest-benchmark with its default rounds, and under torchmark timing the
positional call `fn(a, b)` (`torchmark.timeit`), as the plugin did before it called
`fn(*args, **kwargs)` as pytest-benchmark does; --rounds such sessions, and a
benchmark's median is the median of its sessions' medians. Side by side in one process
the five see the same load; which of them runs first (after the op before) turns from
session to session. Every session runs with glibc malloc's thresholds fixed
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_): left to move with the process's
allocation history, they decide whether an op's 256 KB output is a fresh mmap each call
(relu's medians in two sessions differed by 8% with them free). On a machine that
others use, figures move with their load more than with the plugins (in one run, with
another process taking one of the two CPUs throughout, the A/A pair put only 12 of the
20 medians within 5% of each other): each session waits until other processes use at
most --max-other-cpu CPUs (by /proc/stat; niced ones, which yield the CPU to ours, are
counted apart), and one they used more during is run again (--tries); what they used is
printed.

Targets (issue 26): every median within 5% of pytest-benchmark's; session time ratio
(torchmark / pytest-benchmark, the same budget) <= 1.0.

    python benchmarks/pytest_overhead.py [--rounds 3] [--budget 0.2]
    python benchmarks/pytest_overhead.py --paired 24   # the in-process comparison
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

BENCHMARKS = '''
import os

import pytest
import torch

torch.set_num_threads(1)  # as torchmark's Timer (num_threads=1)
torch.manual_seed(0)
X = torch.randn(64, 1024)
Y = torch.randn(64, 1024)
M = torch.randn(128, 128)
W = torch.randn(256, 1024)
V = torch.randn(16384)

OPS = {
    "add": (torch.add, (X, Y)),
    "mul": (torch.mul, (X, Y)),
    "div": (torch.div, (X, Y)),
    "exp": (torch.exp, (X,)),
    "tanh": (torch.tanh, (X,)),
    "sigmoid": (torch.sigmoid, (X,)),
    "relu": (torch.relu, (X,)),
    "sum": (torch.sum, (X,)),
    "mean_dim": (torch.mean, (X, 1)),
    "var": (torch.var, (X,)),
    "argmax": (torch.argmax, (X,)),
    "cumsum": (torch.cumsum, (X, 1)),
    "softmax": (torch.softmax, (X, -1)),
    "log_softmax": (torch.log_softmax, (X, -1)),
    "matmul": (torch.matmul, (M, M)),
    "linear": (torch.nn.functional.linear, (X, W)),
    "layer_norm": (torch.nn.functional.layer_norm, (X, (1024,))),
    "sort": (torch.sort, (V,)),
    "topk": (torch.topk, (V, 16)),
    "cat": (torch.cat, ((X, Y),)),
}
# pb: pytest-benchmark as the session's options say; pb-again: the same once more (A/A);
# pb-default: its default rounds (at least 5 us: one call of these ops); torchmark; and
# tm-positional: torchmark timing fn(a, b) rather than fn(*args, **kwargs)
VARIANTS = os.environ["BENCH_VARIANTS"].split(",")
DEFAULT_ROUNDS = pytest.mark.benchmark(min_time=0.000005)
CASES = [pytest.param(name, variant, id=f"{name}-{variant}" if len(VARIANTS) > 1 else name,
                      marks=[DEFAULT_ROUNDS] if variant == "pb-default" else [])
         for name in OPS for variant in VARIANTS]


@pytest.mark.parametrize("name, variant", CASES)
def test_op(request, name, variant):
    fn, args = OPS[name]
    if variant == "tm-positional":
        names = [f"a{i}" for i in range(len(args))]
        request.getfixturevalue("torchmark").timeit(
            f"fn({', '.join(names)})", globals={"fn": fn, **dict(zip(names, args))})
    else:
        fixture = "torchmark" if variant == "torchmark" else "benchmark"
        request.getfixturevalue(fixture)(fn, *args)
'''

ROUND_MIN_TIME = 0.002  # seconds: pytest-benchmark's rounds, as long as the Timer's blocks
PYTEST_BENCHMARK = ["--benchmark-max-time={B}", f"--benchmark-min-time={ROUND_MIN_TIME}",
                    "--benchmark-warmup=on", "--benchmark-warmup-iterations=1000",
                    "--benchmark-disable-gc", "--benchmark-json={out}.json"]
TORCHMARK = ["--torchmark-min-run-time={B}", "--torchmark-store={store}",
             "--torchmark-json={out}.jsonl"]
SESSIONS = {  # name: (variants, options)
    "pytest-benchmark": (["pb"], ["-p", "no:torchmark", *PYTEST_BENCHMARK]),
    "torchmark": (["torchmark"], ["-p", "no:benchmark", *TORCHMARK]),
    "pytest-benchmark, its defaults": (["pb"], [
        "-p", "no:torchmark", "--benchmark-max-time={B}", "--benchmark-disable-gc",
        "--benchmark-json={out}.json"]),
}
SIDE_BY_SIDE = (["pb", "torchmark", "pb-again", "pb-default", "tm-positional"],
                [*PYTEST_BENCHMARK, *TORCHMARK])

FIXED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(4 << 20), "MALLOC_TRIM_THRESHOLD_": str(16 << 20)}


def _cpu_seconds() -> tuple[float, float, float]:
    """CPU seconds (from /proc/stat) that every process has used, niced ones left out;
    that niced ones have; that this process and its waited-for children have."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, *rest = (int(v) for v in f.readline().split()[1:9])
    hz = os.sysconf("SC_CLK_TCK")
    t = os.times()
    return ((user + system + sum(rest)) / hz, nice / hz,
            t.user + t.system + t.children_user + t.children_system)


def _others(before: tuple[float, float, float], seconds: float) -> tuple[float, float]:
    """CPUs' worth that other processes used since `before`: not niced, and niced (a
    niced process yields its CPU to ours: it moves our times far less)."""
    after = _cpu_seconds()
    return (max(0.0, (after[0] - before[0]) - (after[2] - before[2])) / seconds,
            (after[1] - before[1]) / seconds)


def wait_for_quiet(limit: float, patience: float) -> None:
    """Wait (at most `patience` seconds) until other processes use at most `limit` CPUs
    over 2 s."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        before = _cpu_seconds()
        time.sleep(2)
        if _others(before, 2)[0] <= limit:
            return


def session(folder: Path, variants: list[str], options: list[str], values: dict[str, str],
            quiet: tuple[float, float, int] | None) -> tuple[float, tuple[float, float]]:
    """Seconds one pytest session took, from start to exit; and the CPUs' worth that
    other processes used meanwhile (not niced, niced). With `quiet` (limit, patience,
    tries), each try waits for other processes (not niced) to use at most `limit` CPUs,
    and a session they used more during is run again, `tries` times at most (the last
    one counts, however loaded)."""
    env = {**os.environ, "BENCH_VARIANTS": ",".join(variants), **FIXED_MALLOC}
    for _ in range(quiet[2] if quiet else 1):
        if quiet:
            wait_for_quiet(quiet[0], quiet[1])
        before = _cpu_seconds() if quiet else None
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               *(o.format(**values) for o in options)],
                              cwd=folder, env=env, capture_output=True, text=True)
        taken = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"pytest ({variants}) failed:\n{done.stdout[-3000:]}"
                             f"{done.stderr}")
        others = _others(before, taken) if before is not None else \
            (float("nan"), float("nan"))
        if not quiet or others[0] <= quiet[0]:
            break
    return taken, others


def _op_variant(test_name: str) -> tuple[str, str]:
    """test_op[add-pb-again] -> (add, pb-again); test_op[add] -> (add, "")."""
    name, _, variant = test_name.partition("[")[2].rstrip("]").partition("-")
    return name, variant


def pytest_benchmark_figures(out: str) -> tuple[dict[tuple[str, str], float], float]:
    """Each benchmark's median (by op and variant), and the seconds spent in timed rounds
    (pytest-benchmark's stats are per iteration: a round's time / its iterations)."""
    data = json.loads(Path(f"{out}.json").read_text())
    return ({_op_variant(b["name"]): b["stats"]["median"] for b in data["benchmarks"]},
            sum(b["stats"]["total"] * b["stats"]["iterations"] for b in data["benchmarks"]))


def torchmark_figures(out: str) -> tuple[dict[tuple[str, str], float], float]:
    """Each benchmark's median (by op and variant), and the seconds spent in timed
    blocks."""
    from torchmark.records import load_results

    results = [r for r in load_results(f"{out}.jsonl") if r.summary]
    return ({_op_variant(r.case.sub_label or ""): r.summary.median for r in results},
            sum(sum(r.samples) * r.number_per_run for r in results))


PAIRED_OPS = ("add", "mul", "div", "relu", "sum", "mean_dim", "cat")


def paired(cycles: int, max_other_cpu: float) -> None:
    """Why the smallest ops differed, measured in this process: each way of timing an op
    in chunks of ~20 ms, interleaved and paired, the order reversed every other cycle,
    cycles during which other processes (not niced) used more than `max_other_cpu` CPUs
    dropped; a way's figure is the median of its ratios to pytest-benchmark's own runner
    (BenchmarkFixture._make_runner, GC off) in rounds of 2 ms, cycle by cycle."""
    import gc
    import types

    import torch
    from pytest_benchmark.fixture import BenchmarkFixture

    from torchmark.timing.timer_class import Timer

    namespace: dict = {}
    exec(textwrap.dedent(BENCHMARKS).split("# pb: pytest-benchmark")[0], namespace)
    ops = {"empty function": (lambda *a, **k: None, (namespace["X"],)),
           **{name: namespace["OPS"][name] for name in PAIRED_OPS}}
    clock = time.perf_counter

    def ways(fn, args, per_call):
        calls = max(1, round(0.002 / per_call))  # a 2 ms block or round
        chunks = max(1, round(0.02 / 0.002))
        names = [f"_arg{i}" for i in range(len(args))]
        positional = Timer(f"_fn({', '.join(names)})",
                           globals={"_fn": fn, **dict(zip(names, args, strict=True))})
        star = Timer("_fn(*_args, **_kwargs)",
                     globals={"_fn": fn, "_args": args, "_kwargs": {}})
        runner = BenchmarkFixture._make_runner(
            types.SimpleNamespace(_timer=clock, _disable_gc=True), fn, args, {})
        again = BenchmarkFixture._make_runner(
            types.SimpleNamespace(_timer=clock, _disable_gc=True), fn, args, {})

        def blocks(timer):
            return statistics.median(timer._timer.timeit(calls) / calls
                                     for _ in range(chunks))

        def rounds(run, loops):
            return statistics.median(run(range(loops)) / loops
                                     for _ in range(max(1, chunks * calls // loops)))

        return {"fn(a, b) in blocks": lambda: blocks(positional),
                "fn(*args, **kwargs) in blocks": lambda: blocks(star),
                "pb 1-call rounds": lambda: rounds(runner, 1),
                "pb 2 ms rounds": lambda: rounds(runner, calls),
                "pb 2 ms rounds (A/A)": lambda: rounds(again, calls)}

    torch.set_num_threads(1)
    gc.collect()
    print(f"paired in one process (chunks of 20 ms; cycles with other processes over "
          f"{max_other_cpu:g} CPUs dropped); ratios to pytest-benchmark's runner in 2 ms "
          f"rounds:")
    header = None
    for op, (fn, args) in ops.items():
        started = clock()
        for _ in range(1000):
            fn(*args)
        per_call = (clock() - started) / 1000
        chosen = ways(fn, args, per_call)
        if header is None:
            header = list(chosen)
            print(f"{'':<15} {'per call':>9}  " + "  ".join(header))
        for way in chosen.values():
            way()  # warm
        ratios: dict[str, list[float]] = {w: [] for w in chosen}
        per: list[float] = []
        dropped = 0
        for cycle in range(cycles):
            before = _cpu_seconds()
            order = list(chosen.items())[::-1 if cycle % 2 else 1]
            started = clock()
            got = {w: run() for w, run in order}
            if _others(before, clock() - started)[0] > max_other_cpu:
                dropped += 1
                continue
            per.append(got["pb 2 ms rounds"])
            for w in chosen:
                ratios[w].append(got[w] / got["pb 2 ms rounds"])
        if not per:
            print(f"{op:<15} every cycle dropped (other processes were using the machine)")
            continue
        print(f"{op:<15} {statistics.median(per) * 1e9:>6.0f} ns  " + "  ".join(
            f"{statistics.median(ratios[w]):>{len(w)}.3f}" for w in header)
            + f"   ({len(per)} cycles, {dropped} dropped)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.2,
                        help="Seconds of timing a benchmark, for both plugins.")
    parser.add_argument("--max-other-cpu", type=float, default=0.1,
                        help="Wait until other processes use at most this many CPUs before "
                             "each session, and run one they used more during again (up to "
                             "--tries times); needs /proc/stat (Linux). 0: no waiting.")
    parser.add_argument("--patience", type=float, default=300,
                        help="Seconds to wait for the machine to be quiet, a session.")
    parser.add_argument("--tries", type=int, default=4)
    parser.add_argument("--paired", type=int, metavar="CYCLES", default=0,
                        help="Instead: the smallest ops timed each way in this process, "
                             "paired, for CYCLES cycles (why their medians differed).")
    args = parser.parse_args()
    if args.paired:
        paired(args.paired, args.max_other_cpu)
        return
    quiet = (args.max_other_cpu, args.patience, args.tries) \
        if args.max_other_cpu > 0 and os.path.exists("/proc/stat") else None
    times: dict[str, list[float]] = {name: [] for name in SESSIONS}
    timed: dict[str, list[float]] = {name: [] for name in SESSIONS}
    others: list[tuple[float, float]] = []
    medians: dict[str, list[dict[str, float]]] = {v: [] for v in SIDE_BY_SIDE[0]}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "test_ops.py").write_text(textwrap.dedent(BENCHMARKS))
        store = f"sqlite:///{folder / 'store.db'}"
        import torchmark.store

        torchmark.store.open(store).close()  # a user's store exists before their run
        for i in range(args.rounds):
            for k, (name, (variants, options)) in enumerate(SESSIONS.items()):
                values = {"B": f"{args.budget:g}", "out": str(folder / f"r{i}s{k}"),
                          "store": store}
                taken, load = session(folder, variants, options, values, quiet)
                times[name].append(taken)
                others.append(load)
                figures = torchmark_figures if name == "torchmark" else \
                    pytest_benchmark_figures
                timed[name].append(figures(values["out"])[1])
            values = {"B": f"{args.budget:g}", "out": str(folder / f"r{i}both"),
                      "store": store}
            variants, options = SIDE_BY_SIDE  # each in turn first (the op's first run)
            turn = i % len(variants)
            _, load = session(folder, variants[turn:] + variants[:turn], options, values,
                              quiet)
            others.append(load)
            found = {**pytest_benchmark_figures(values["out"])[0],
                     **torchmark_figures(values["out"])[0]}
            for variant in medians:
                medians[variant].append({op: m for (op, v), m in found.items()
                                         if v == variant})
            print(f"round {i}: " + ", ".join(f"{name} {times[name][-1]:.2f} s"
                                             for name in SESSIONS)
                  + f"; others' CPU {load[0]:.2f} (niced {load[1]:.2f})", flush=True)
    report(args, medians, times, timed, others)


def report(args: argparse.Namespace, medians: dict[str, list[dict[str, float]]],
           times: dict[str, list[float]], timed: dict[str, list[float]],
           others: list[tuple[float, float]]) -> None:
    table = {v: {op: statistics.median(m[op] for m in medians[v]) for op in medians[v][0]}
             for v in medians}
    ops = list(table["pb"])
    print(f"\nmedians, side by side in one session (median of {args.rounds} sessions); "
          f"pytest-benchmark's rounds >= {ROUND_MIN_TIME * 1e3:g} ms:")
    print(f"{'':<12} {'pytest-':>16} {'':>10} {'':>6}   {'':>6}   {'pytest-benchmark':>16} "
          f"{'torchmark':>10}")
    print(f"{'benchmark':<12} {'benchmark':>16} {'torchmark':>10} {'ratio':>6}   "
          f"{'A/A':>6}   {'1-call rounds':>16} {'fn(a, b)':>10}")
    ratio = {op: table["torchmark"][op] / table["pb"][op] for op in ops}
    aa = {op: table["pb-again"][op] / table["pb"][op] for op in ops}
    one_call = {op: table["pb-default"][op] / table["pb"][op] for op in ops}
    positional = {op: table["tm-positional"][op] / table["pb"][op] for op in ops}
    for op in ops:
        print(f"{op:<12} {table['pb'][op] * 1e6:>13.2f} us {table['torchmark'][op] * 1e6:>7.2f}"
              f" us {ratio[op]:>6.3f}   {aa[op]:>6.3f}   {one_call[op]:>16.3f} "
              f"{positional[op]:>10.3f}")
    print("(ratios to pytest-benchmark's median; A/A: pytest-benchmark run again; 1-call "
          "rounds: its default rounds; fn(a, b): torchmark timing a positional call)")

    def spread(ratios: dict[str, float]) -> str:
        within = sum(abs(r - 1) <= 0.05 for r in ratios.values())
        worst = max(ratios, key=lambda op: abs(ratios[op] - 1))
        return (f"{within}/{len(ratios)} within 5%, median |change| "
                f"{statistics.median(abs(r - 1) for r in ratios.values()):.1%}, farthest "
                f"{worst} {ratios[worst] - 1:+.1%}")

    print(f"torchmark / pytest-benchmark:       {spread(ratio)} (target: all within 5%)")
    print(f"pytest-benchmark A/A (noise floor): {spread(aa)}")
    print(f"pytest-benchmark, 1-call rounds:    {spread(one_call)}")
    print(f"torchmark timing fn(a, b):          {spread(positional)}")
    print(f"\nsessions, each plugin alone (median of {args.rounds}), budget "
          f"{args.budget:g} s a benchmark:")
    for name in SESSIONS:
        print(f"  {name:<31} {statistics.median(times[name]):6.2f} s, timed calls "
              f"{statistics.median(timed[name]):5.2f} s")
    session_ratio = statistics.median(times["torchmark"]) / statistics.median(
        times["pytest-benchmark"])
    print(f"session time ratio, torchmark / pytest-benchmark: {session_ratio:.3f} "
          f"(target <= 1.0)")
    if not all(o != o for o, _ in others):  # measured (not NaN)
        loaded = sum(o > args.max_other_cpu for o, _ in others)
        print(f"other processes' CPU during the sessions (of {os.cpu_count()}): median "
              f"{statistics.median(o for o, _ in others):.2f}, max "
              f"{max(o for o, _ in others):.2f}; niced: median "
              f"{statistics.median(n for _, n in others):.2f}, max "
              f"{max(n for _, n in others):.2f}; {loaded} of {len(others)} sessions over "
              f"{args.max_other_cpu:g} (not niced) after {args.tries} tries")


if __name__ == "__main__":
    main()
