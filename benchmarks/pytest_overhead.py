"""The pytest plugin against pytest-benchmark: the same 20 small benchmarks (CPU tensor
ops), the same time budget each, run under each plugin in fresh pytest sessions.

Reports each session's wall time (from starting pytest to its exit: Python, torch,
collection, measuring, the end-of-session summary; torchmark also records the run in a
store, created beforehand as a user's would be), the seconds each plugin spent in timed
runs, and each benchmark's median per call under both. Sessions alternate for --rounds
rounds; a benchmark's median is the median of its rounds' medians, a session time the
median of its rounds.

The same budget: --torchmark-min-run-time B, and pytest-benchmark's --benchmark-max-time B
with its warm-up on (1000 iterations): pytest-benchmark plans its rounds from one call's
time, and without a warm-up that call is the first, cold one, so its rounds add up to far
less than B (a third to a tenth of it here); it is run that way too, its figures shown for
reference. Both measure the same thing: one thread (torchmark's Timer runs on one unless
told otherwise; the test module sets torch's count to one for pytest-benchmark), the
garbage collector off while timing (timeit's default, which the Timer keeps;
--benchmark-disable-gc). Each session loads only its own plugin.

Targets (issue 26): every median within 5% of pytest-benchmark's; session time ratio
(torchmark / pytest-benchmark, same budget) <= 1.0.

    python benchmarks/pytest_overhead.py [--rounds 3] [--budget 0.2]
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


@pytest.fixture
def bench(request):
    return request.getfixturevalue(os.environ["BENCH_FIXTURE"])


@pytest.mark.parametrize("name", list(OPS))
def test_op(bench, name):
    fn, args = OPS[name]
    bench(fn, *args)
'''


def session(folder: Path, fixture: str, args: list[str]) -> float:
    """Seconds one pytest session took, from start to exit."""
    env = {**os.environ, "BENCH_FIXTURE": fixture}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=folder, env=env, capture_output=True, text=True)
    taken = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pytest ({fixture}) failed:\n{done.stdout[-3000:]}{done.stderr}")
    return taken


def pytest_benchmark_figures(path: Path) -> tuple[dict[str, float], float]:
    """Each benchmark's median, and the seconds spent in timed rounds."""
    data = json.loads(path.read_text())
    return ({b["name"]: b["stats"]["median"] for b in data["benchmarks"]},
            sum(b["stats"]["total"] for b in data["benchmarks"]))


def torchmark_figures(path: Path) -> tuple[dict[str, float], float]:
    """Each benchmark's median, and the seconds spent in timed blocks."""
    from torchmark.records import load_results

    results = [r for r in load_results(path) if r.summary]
    return ({r.case.sub_label: r.summary.median for r in results},
            sum(sum(r.samples) * r.number_per_run for r in results))


SESSIONS = {  # name: (fixture, plugin left out, options (budget B), figures)
    "pytest-benchmark": ("benchmark", "torchmark", [
        "--benchmark-max-time={B}", "--benchmark-warmup=on",
        "--benchmark-warmup-iterations=1000", "--benchmark-disable-gc",
        "--benchmark-json={out}.json"], pytest_benchmark_figures),
    "torchmark": ("torchmark", "benchmark", [
        "--torchmark-min-run-time={B}", "--torchmark-store={store}",
        "--torchmark-json={out}.jsonl"], torchmark_figures),
    "pytest-benchmark, no warm-up": ("benchmark", "torchmark", [
        "--benchmark-max-time={B}", "--benchmark-disable-gc",
        "--benchmark-json={out}.json"], pytest_benchmark_figures),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.2,
                        help="Seconds of timing a benchmark, for both plugins.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "test_ops.py").write_text(textwrap.dedent(BENCHMARKS))
        store = f"sqlite:///{folder / 'store.db'}"
        import torchmark.store

        torchmark.store.open(store).close()  # a user's store exists before their run
        times: dict[str, list[float]] = {name: [] for name in SESSIONS}
        timed: dict[str, list[float]] = {name: [] for name in SESSIONS}
        medians: dict[str, list[dict[str, float]]] = {name: [] for name in SESSIONS}
        for i in range(args.rounds):
            for k, (name, (fixture, left_out, options, figures)) in \
                    enumerate(SESSIONS.items()):
                out = folder / f"r{i}s{k}"
                values = {"B": f"{args.budget:g}", "out": out, "store": store}
                times[name].append(session(folder, fixture, [
                    "-p", f"no:{left_out}", *(o.format(**values) for o in options)]))
                found, seconds = figures(Path(f"{out}{Path(options[-1]).suffix}"))
                medians[name].append(found)
                timed[name].append(seconds)
            print(f"round {i}: " + ", ".join(f"{name} {times[name][-1]:.2f} s"
                                             for name in SESSIONS))
    names = list(medians["pytest-benchmark"][0])
    rows = []
    for name in names:
        pb = statistics.median(m[name] for m in medians["pytest-benchmark"])
        tm = statistics.median(m[name] for m in medians["torchmark"])
        rows.append((name, pb, tm, tm / pb))
    print(f"\n{'benchmark':<22} {'pytest-benchmark':>17} {'torchmark':>10} {'ratio':>7}")
    for name, pb, tm, ratio in rows:
        print(f"{name:<22} {pb * 1e6:>14.2f} us {tm * 1e6:>7.2f} us {ratio:>7.3f}")
    within = sum(abs(r - 1) <= 0.05 for *_, r in rows)
    worst = max(rows, key=lambda row: abs(row[3] - 1))
    print(f"\nmedians within 5% of pytest-benchmark's: {within}/{len(rows)} (target: all; "
          f"farthest {worst[0]}: {worst[3] - 1:+.1%})")
    print(f"\nsessions (median of {args.rounds}), budget {args.budget:g} s a benchmark:")
    for name in SESSIONS:
        print(f"  {name:<29} {statistics.median(times[name]):6.2f} s, timed runs "
              f"{statistics.median(timed[name]):5.2f} s")
    ratio = statistics.median(times["torchmark"]) / statistics.median(
        times["pytest-benchmark"])
    print(f"session time ratio, torchmark / pytest-benchmark: {ratio:.3f} (target <= 1.0)")


if __name__ == "__main__":
    main()
