"""Instruction counting: torchmark's collector against torch.utils.benchmark's, one run.

Each measurement runs in a fresh Python process, so start-up costs are included as a
user would pay them:

1. one collection of `x * y` (128 floats, number=100, repeats=1): torchmark, then torch
   (torch launched with this interpreter's folder first on PATH, as it requires); both
   scripts have torch imported before the clock starts (torch's Timer import does it);
   the host's start is broken down, and the floor (valgrind running `import torch` with
   instrumentation off) is timed alone;
2. a second collection in the same torchmark process (the valgrind host is reused);
3. ten different statements in one `torchmark.callgrind.collect_many` call;
4. repeats=5 of `x * y`: (max - min) / median;
5. with TORCHMARK_CALLGRIND_KEEPALIVE (a valgrind host shared between processes): one
   collection in a new process, once another process has started the shared host.

Targets (issue #4): one collection >= 6x faster than torch; ten statements < 60 s;
per-iteration counts within 5% of torch's; repeat spread <= 0.5%.

    python benchmarks/callgrind_vs_torch.py [--skip-torch]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MUL = ("x * y", "x = torch.ones(128); y = torch.ones(128)")

TORCHMARK_ONE = """
import json, time, torch, torchmark
from torchmark.callgrind import collector
t0 = time.perf_counter()
s = torchmark.Timer(*{mul!r}).collect_callgrind(number=100, repeats=1)[0]
t1 = time.perf_counter()
phases = collector.default_host().start_timings
torchmark.Timer(*{mul!r}).collect_callgrind(number=100, repeats=1)
t2 = time.perf_counter()
s5 = torchmark.Timer(*{mul!r}).collect_callgrind(number=100, repeats=5)
t3 = time.perf_counter()
print(json.dumps({{"first_s": t1 - t0, "phases": phases, "count": s.counts(),
                  "second_s": t2 - t1,
                  "five_s": t3 - t2, "repeat_totals": [x.counts() for x in s5]}}))
"""

TORCH_ONE = """
import json, time
from torch.utils.benchmark import Timer
t0 = time.perf_counter()
s = Timer(*{mul!r}).collect_callgrind(number=100)
print(json.dumps({{"first_s": time.perf_counter() - t0, "count": s.counts()}}))
"""

TEN = [
    ("pass", "pass"), MUL, ("x + y", MUL[1]), ("torch.relu(x)", "x = torch.randn(128)"),
    ("x.sum()", "x = torch.randn(128)"), ("torch.empty(())", "pass"),
    ("x[0]", "x = torch.randn(8, 8)"), ("x.view(-1)", "x = torch.randn(8, 8)"),
    ("torch.mm(a, b)", "a = torch.randn(8, 8); b = torch.randn(8, 8)"),
    ("x.clone()", "x = torch.randn(128)"),
]

TORCHMARK_TEN = """
import json, time, torchmark
from torchmark.callgrind import collect_many
t0 = time.perf_counter()
timers = [torchmark.Timer(s, setup) for s, setup in {ten!r}]
stats = collect_many(timers, number=100)
print(json.dumps({{"total_s": time.perf_counter() - t0,
                  "counts": [s.counts() for s in stats]}}))
"""


def run_python(code: str, env: dict | None = None) -> tuple[dict, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


SHARED_ONE = """
import json, time, torchmark
t0 = time.perf_counter()
s = torchmark.Timer(*{mul!r}).collect_callgrind(number=100, repeats=1)[0]
print(json.dumps({{"first_s": time.perf_counter() - t0, "count": s.counts()}}))
"""


def floor_s() -> float:
    """valgrind (callgrind, instrumentation off) running `python -c "import torch"`: what
    any collector that runs torch under valgrind pays before its first count."""
    from torchmark.callgrind.collector import valgrind_path

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        subprocess.run([valgrind_path(), "--tool=callgrind", "--instr-atstart=no", "-q",
                        f"--callgrind-out-file={folder}/out.%p", sys.executable, "-c",
                        "import torch"], check=True, capture_output=True)
        return time.perf_counter() - start


def shared_host_rows() -> tuple[dict, float, dict, float]:
    """(starting process, its wall), (next process, its wall), then stop the host."""
    env = dict(os.environ, TORCHMARK_CALLGRIND_KEEPALIVE="300")
    cold, cold_wall = run_python(SHARED_ONE.format(mul=MUL), env=env)
    warm, warm_wall = run_python(SHARED_ONE.format(mul=MUL), env=env)
    run_python("import json\nfrom torchmark.callgrind import collector\n"
               "collector.SharedHost(1).stop()\nprint(json.dumps({}))", env=env)
    return cold, cold_wall, warm, warm_wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-torch", action="store_true", help="torchmark only (fast)")
    args = parser.parse_args()

    ours, ours_wall = run_python(TORCHMARK_ONE.format(mul=MUL))
    totals = ours["repeat_totals"]
    spread = (max(totals) - min(totals)) / sorted(totals)[len(totals) // 2]
    ten, ten_wall = run_python(TORCHMARK_TEN.format(ten=TEN))
    print(f"{'measurement':<52} {'torchmark':>12} {'torch':>12} {'ratio':>8}")
    row = "{:<52} {:>12} {:>12} {:>8}"
    if args.skip_torch:
        theirs = None
    else:
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep +
                   os.environ.get("PATH", ""))
        theirs, _ = run_python(TORCH_ONE.format(mul=MUL), env=env)
    t_first = theirs["first_s"] if theirs else None
    print(row.format("x * y, number=100: one collection (s)", f"{ours['first_s']:.1f}",
                     f"{t_first:.1f}" if theirs else "-",
                     f"{t_first / ours['first_s']:.1f}x" if theirs else "-"))
    phases = ours["phases"]
    print(row.format(f"  host start {phases['start_s']:.1f} s: import torch "
                     f"{phases['import_s']:.1f}, warm-up {phases['warm_up_s']:.1f}", "", "",
                     ""))
    floor = floor_s()
    print(row.format("  floor: valgrind running `import torch` (s)", f"{floor:.1f}", "-",
                     f"{t_first / floor:.1f}x" if theirs else "-"))
    print(row.format("  the same, second call in the same process (s)",
                     f"{ours['second_s']:.1f}", "-",
                     f"{t_first / ours['second_s']:.0f}x" if theirs else "-"))
    print(row.format("  instructions per iteration", f"{ours['count'] / 100:,.0f}",
                     f"{theirs['count'] / 100:,.0f}" if theirs else "-",
                     f"{ours['count'] / theirs['count']:.3f}" if theirs else "-"))
    print(row.format(f"repeats=5 spread (max - min) / median ({ours['five_s']:.1f} s)",
                     f"{spread:.4%}", "-", "-"))
    print(row.format("10 statements, one collect_many call (s)", f"{ten['total_s']:.1f}",
                     "-", "-"))
    cold, cold_wall, warm, warm_wall = shared_host_rows()
    print(row.format("shared host: process that starts it (s, wall)",
                     f"{cold_wall:.1f}", "-", f"{t_first / cold_wall:.1f}x" if theirs else "-"))
    print(row.format("shared host: next process, one collection (s, wall)",
                     f"{warm_wall:.1f}", f"{t_first:.1f}" if theirs else "-",
                     f"{t_first / warm_wall:.0f}x" if theirs else "-"))
    print(f"process wall times: torchmark one-collection script {ours_wall:.1f} s, "
          f"ten-statement script {ten_wall:.1f} s")


if __name__ == "__main__":
    main()
