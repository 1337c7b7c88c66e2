"""A new C++ snippet's first measurement against its cached one, for three new snippets.

Each measurement runs in a fresh process (`Timer(stmt, setup, language="cpp")
.blocked_autorange(min_run_time=0.5)`): first with the snippet new to the cache (it is
compiled, and a precompiled-header build may start, before the calibration), then again
with the snippet cached. Target (issue 22): they agree within 10%.

    python benchmarks/cpp_first_measurement.py [--cache DIR]

`--cache` keeps the cache (by default a fresh temporary one, so the first snippet also
pays for the precompiled header, as on a new machine).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

MEASURE = """
import sys
from torchmark import Timer
m = Timer(sys.argv[1], sys.argv[2], language="cpp").blocked_autorange(min_run_time=0.5)
print(m.median, m.number_per_run, len(m.times))
"""

SNIPPETS = [  # (statement, setup): a constant drawn per run makes each new to the cache
    ("x.add_({c});", "auto x = torch::ones({{77}});"),
    ("auto y = x * {c};", "auto x = torch::ones({{1024}});"),
    ("auto y = torch::relu(x + {c});", "auto x = torch::randn({{64, 64}});"),
]


def measure(stmt: str, setup: str, env: dict) -> tuple[float, int, int, float]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEASURE, stmt, setup], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="cache folder to use (default: a fresh one)")
    args = parser.parse_args()
    cache = args.cache or tempfile.mkdtemp(prefix="torchmark-first-")
    env = dict(os.environ, TORCHMARK_CACHE_DIR=cache)
    print(f"cache: {cache}")
    print(f"{'snippet':<34} {'first':>9} {'cached':>9} {'ratio':>6}  blocks (first / cached)"
          "  process seconds")
    for stmt, setup in SNIPPETS:
        stmt = stmt.format(c=f"{random.randrange(10**6) + 0.25}")
        setup = setup.format()
        first = measure(stmt, setup, env)
        cached = measure(stmt, setup, env)
        print(f"{stmt:<34} {first[0] * 1e6:7.3f}us {cached[0] * 1e6:7.3f}us "
              f"{first[0] / cached[0]:6.3f}  {first[2]} x {first[1]} / {cached[2]} x "
              f"{cached[1]}  {first[3]:.1f} / {cached[3]:.1f}")


if __name__ == "__main__":
    main()
