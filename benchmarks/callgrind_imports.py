"""Counting a statement whose code lives in a module the valgrind host has not imported.

Each measurement is a fork of the host, so such a module is imported again for every
collection. torchmark imports it with instrumentation off (`Host.last_fresh_imports`
names what was); this script times that against importing it instrumented (the host
told there is nothing new to import), alternating the two, in one process.

    python benchmarks/callgrind_imports.py [--rounds 3] [--library pytest]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--library", default="pytest",
                        help="What the user's module imports (any installed module).")
    args = parser.parse_args()

    import torch

    import torchmark
    from torchmark.callgrind import collector

    folder = Path(tempfile.mkdtemp(prefix="callgrind-imports-"))
    (folder / "bench_user_module.py").write_text(
        f"import {args.library}  # noqa: F401\n\n\ndef scale(a):\n    return a * 2\n")
    sys.path.insert(0, str(folder))
    import bench_user_module

    timer = torchmark.Timer("f(x)", globals={"f": bench_user_module.scale,
                                             "x": torch.ones(16)})
    began = time.perf_counter()
    timer.collect_callgrind(number=10)
    print(f"host start and first collection: {time.perf_counter() - began:.1f} s")
    host = collector.default_host()
    times: dict[str, list[float]] = {"uninstrumented": [], "instrumented": []}
    counts: dict[str, list[int]] = {"uninstrumented": [], "instrumented": []}
    for _ in range(args.rounds):
        for how in times:
            patch = mock.patch.object(collector, "modules_needed", return_value=[]) \
                if how == "instrumented" else contextlib.nullcontext()
            with patch:
                began = time.perf_counter()
                stats = timer.collect_callgrind(number=10)
                times[how].append(time.perf_counter() - began)
            counts[how].append(stats.counts())
            assert bool(host.last_fresh_imports) == (how == "uninstrumented")
    for how, values in times.items():
        print(f"{how:>15}: median {statistics.median(values):6.2f} s  "
              f"({', '.join(f'{v:.1f}' for v in values)}); counts {counts[how]}")
    ratio = statistics.median(times["instrumented"]) / statistics.median(times["uninstrumented"])
    print(f"instrumented / uninstrumented import: {ratio:.2f}x")


if __name__ == "__main__":
    main()
