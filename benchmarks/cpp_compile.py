"""C++ snippet build times: torchmark's compile cache against torch's cpp_extension path.

Each row runs in a fresh Python process and measures from process start to the first
Measurement of `x * y` on 128 floats (Timer(language="cpp").timeit(1000)):

1. torchmark, empty cache (first compile; the precompiled header is not there yet);
2. torchmark, same snippet, new process (cache hit);
3. torchmark, a new snippet once the precompiled header exists;
4. torch.utils.benchmark, new process (it compiles into a temporary folder every time);
5. instruction counts of a new snippet (collect_callgrind, repeats=1), from process start:
   as torchmark does it (the valgrind host launched before the compile, so the two
   overlap), and compile-then-start one after the other.

Targets (issue #5): a cached snippet measures in under 2 s from process start; a first
compile at least 1.5x faster than torch's.

    python benchmarks/cpp_compile.py [--skip-torch]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

SNIPPET = """
import time
t0 = time.perf_counter()
from {module} import Timer
m = Timer({stmt!r}, "auto x = torch::ones({{128}}); auto y = torch::ones({{128}});",
          language="cpp").timeit(1000)
print(m.median)
"""


CALLGRIND = """
import time
t0 = time.perf_counter()
from torchmark import Timer
from torchmark.callgrind.collector import collect
t = Timer({stmt!r}, "auto x = torch::ones({{128}}); auto y = torch::ones({{128}});",
          language="cpp")
if {overlap}:
    stats = t.collect_callgrind(number=100, repeats=1)
else:  # compile, then start the host
    stats = collect(t._callgrind_request(100, 1, False))
print(time.perf_counter() - t0, stats[0].counts())
"""


def callgrind_run(stmt: str, overlap: bool, env: dict) -> float:
    proc = subprocess.run([sys.executable, "-c", CALLGRIND.format(stmt=stmt, overlap=overlap)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"failed:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.split()[-2])


def timed_run(module: str, stmt: str, env: dict) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", SNIPPET.format(module=module, stmt=stmt)],
                          capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{module} failed:\n{proc.stderr[-2000:]}")
    return wall, float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-torch", action="store_true")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="torchmark-cpp-bench-")
    env = dict(os.environ, TORCHMARK_CACHE_DIR=cache)
    rows = []
    first, median = timed_run("torchmark", "x * y;", env)
    rows.append(("torchmark: first compile, empty cache", first, median))
    cached, median = timed_run("torchmark", "x * y;", env)
    rows.append(("torchmark: cached, new process", cached, median))
    pch_start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "torchmark.cpp.build_pch"], env=env, check=True,
                   capture_output=True)
    pch_s = time.perf_counter() - pch_start
    with_pch, median = timed_run("torchmark", "x * y; // another snippet", env)
    rows.append(("torchmark: new snippet, precompiled header ready", with_pch, median))
    if not args.skip_torch:
        torch_s, median = timed_run("torch.utils.benchmark", "x * y;", env)
        rows.append(("torch.utils.benchmark: new process", torch_s, median))
    print(f"{'process start -> first Measurement':<52} {'wall s':>8} {'median':>10}")
    for name, seconds, med in rows:
        print(f"{name:<52} {seconds:>8.1f} {med * 1e6:>7.2f} us")
    print(f"\nprecompiled header build (once per torch version and compiler): {pch_s:.1f} s")
    if not args.skip_torch:
        print(f"first compile: torch / torchmark = {torch_s / first:.2f}x; "
              f"with the header: {torch_s / with_pch:.2f}x; cached: {torch_s / cached:.0f}x")
    overlapped = callgrind_run("x * y; // counted, overlapped", True, env)
    serial = callgrind_run("x * y; // counted, one after the other", False, env)
    print(f"\ninstruction counts of a new snippet, process start -> CallgrindStats: "
          f"{overlapped:.1f} s with the valgrind host launched before the compile, "
          f"{serial:.1f} s compile then host ({serial / overlapped:.2f}x)")


if __name__ == "__main__":
    main()
