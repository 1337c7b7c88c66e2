"""torchmark's own overhead per operator case: expansion, data generation, bookkeeping.

Runs the 121-case matmul sweep (`examples/ops/mm_sweep.json`, [[128, 2048, 16], 64] x
[64, 32]) on the CPU with 1 warm-up and 1 iteration, writing JSON lines like the CLI, and
reports (total time - time spent in the op itself) / cases. The op's own time is its
measured median per call times the calls made (warm-up + iterations). Repeated --rounds
times; the median round is reported.

Target (issue #7): under 5 ms per case. The anchor, PARAM's run_benchmark, cannot be
installed here (no network); measured before the project started on the same kind of
machine it took 17.4 s for this sweep, 3 s of it `import torch`: about 118 ms per case.

    python benchmarks/ops_overhead.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

PARAM_MS_PER_CASE = 118.0  # ../shared/notes/measurements-2026-11-22.md


def one_round(config_path: Path, out: Path) -> tuple[float, float, int]:
    from torchmark.ops import RunOptions, load_config, run

    started = time.perf_counter()
    config = load_config(config_path)
    records = run(config, RunOptions(warmup=1, iterations=1), out=out)
    total = time.perf_counter() - started
    op_time = sum(2 * r["metrics"]["forward"]["median"] for r in records if r["metrics"])
    return total, op_time, len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import torch  # noqa: F401  (import time is not torchmark's overhead)

    config = Path(__file__).parents[1] / "examples" / "ops" / "mm_sweep.json"
    rounds = []
    with tempfile.TemporaryDirectory() as folder:
        one_round(config, Path(folder) / "warm.jsonl")  # first-call costs (allocator, MKL)
        for i in range(args.rounds):
            total, op_time, cases = one_round(config, Path(folder) / f"r{i}.jsonl")
            rounds.append((total, op_time, cases))
            print(f"round {i}: {cases} cases, total {total * 1000:.0f} ms, in the op "
                  f"{op_time * 1000:.0f} ms, overhead {(total - op_time) / cases * 1000:.2f} "
                  "ms/case")
    per_case = statistics.median((t - o) / n * 1000 for t, o, n in rounds)
    print(f"\ntorchmark overhead per case (median of {args.rounds} rounds): {per_case:.2f} ms "
          f"(target < 5 ms)")
    print(f"PARAM (pre-project measurement): {PARAM_MS_PER_CASE:.0f} ms per case -> "
          f"{PARAM_MS_PER_CASE / per_case:.0f}x less overhead")


if __name__ == "__main__":
    main()
