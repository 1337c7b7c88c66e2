"""The whole standard suite, 2 workers, 5 callgrind repeats per case: total wall time,
time per case, and how steady the counts are.

Targets (issue #6): all cases in under 15 minutes on a 2-core machine; >= 95% of cases
with their 5 repeats within 0.5% of each other.

The anchor, torch's instruction-count runner, starts one process per case and repeat,
each paying valgrind's instrumented start-up: its time is estimated from one timed
`torch.utils.benchmark` collect_callgrind of a small case in this run (skip with
--skip-torch), times cases x repeats / workers. Running it for real would take hours.

    python benchmarks/suite_full.py [--workers 2] [--out results.jsonl] [--skip-torch]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TORCH_ONE = """
import time
from torch.utils.benchmark import Timer
t0 = time.perf_counter()
Timer("x + y", "x = torch.ones((4, 4)); y = torch.ones((4, 4))").collect_callgrind(number=100)
print(time.perf_counter() - t0)
"""


def torch_one_collection() -> float:
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep +
               os.environ.get("PATH", ""))
    out = subprocess.run([sys.executable, "-c", TORCH_ONE], capture_output=True, text=True,
                         env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    parser.add_argument("--filter", default=None)
    parser.add_argument("--skip-torch", action="store_true")
    args = parser.parse_args()

    from torchmark.suite.materialize import select
    from torchmark.suite.runner import RunOptions, SuiteRunner
    from torchmark.suite.standard import standard_cases

    cases = select(standard_cases(), args.filter)
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="suite-full-"), "results.jsonl")
    done = [0]

    def on_record(record: dict) -> None:
        done[0] += 1
        if done[0] % 20 == 0 or record["status"] != "ok":
            print(f"  {done[0]}/{len(cases)} {record['status']}: {record['id']}"
                  + (f" ({record['error']})" if record["error"] else ""), flush=True)

    started = time.perf_counter()
    summary = SuiteRunner(cases, out, RunOptions(workers=args.workers, repeats=args.repeats),
                          on_record=on_record, on_phase=lambda p: print(p, flush=True)).run()
    total = time.perf_counter() - started
    counted = [r["instructions"] for r in summary.records if r.get("instructions")]
    steady = sum(c["spread"] <= 0.005 for c in counted)
    spreads = sorted((c["spread"], r["id"]) for r in summary.records
                     if (c := r.get("instructions")))
    print(f"\nresults: {out}")
    print(f"cases: {summary.total} ({summary.ok} ok, {summary.failed} failed), "
          f"workers: {args.workers}, repeats: {args.repeats}")
    print(f"total wall time: {total:.1f} s ({total / 60:.1f} min; C++ bundles compiled in "
          f"{summary.compile_s:.1f} s)")
    print(f"time per case: {total / max(summary.total, 1):.2f} s")
    if counted:
        print(f"repeats within 0.5%: {steady}/{len(counted)} = {steady / len(counted):.1%}; "
              f"median spread {statistics.median(s for s, _ in spreads):.4%}")
        for spread, case_id in spreads[-5:]:
            print(f"  widest: {spread:.3%} {case_id}")
    if not args.skip_torch:
        one = torch_one_collection()
        estimate = one * summary.total * args.repeats / args.workers
        print(f"torch.utils.benchmark: one collect_callgrind {one:.1f} s; its runner "
              f"(a process per case and repeat) would need about {estimate / 3600:.1f} h "
              f"for this suite on {args.workers} workers: {estimate / total:.0f}x torchmark")


if __name__ == "__main__":
    main()
