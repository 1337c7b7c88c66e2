"""torch.compile measured apart (issue 38), on the CPU with inductor and this machine's
compiler:

1. three small models (an MLP, a conv net, an attention block): torchmark's cold compile
   time (the first call, inductor's caches empty) against Dynamo's own total
   (`compile_times()`: `_compile.compile_inner`), their ratio (target: within 10%), the
   warm-cache compiles, and the steady state against eager;
2. five planted recompilation triggers (a new shape, a new dtype, a changed global, a
   Python scalar argument, a grad-mode change), each measured TRIALS times: detected and
   named (the guard's text) each time;
3. graph breaks of three functions against `torch._dynamo.explain`'s count.

    python benchmarks/compile_check.py [--trials 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys

import torch

import torchmark
from torchmark.compilation import measure_compile
from torchmark.demos.compile_models import (
    RECOMPILE_TRIGGERS,
    TRIGGER_SETUP,
    plain,
    trigger_globals,
)
from torchmark.demos.compile_models import models as small_models


def one_break(x):
    y = x.sin()
    print("break", end="\r")
    return y.cos()


def two_breaks(x):
    y = one_break(x)
    if y.sum().item() > 1e9:
        return y
    return y * 2


def measure(stmt: str, setup: str, min_run_time: float = 0.1, **globals_):
    with contextlib.redirect_stdout(io.StringIO()):
        return measure_compile(torchmark.Timer(stmt, setup, globals=globals_),
                               min_run_time=min_run_time, warm_samples=2)


def compile_times() -> int:
    misses = 0
    print(f"{'model':<10} {'cold s':>8} {'Dynamo s':>9} {'ratio':>6} {'warm s':>14}  "
          "steady state against eager")
    for model, shape in small_models():
        m = measure("with torch.no_grad(): f(x)", f"x = torch.randn{shape}", 0.3,
                    f=torch.compile(model().eval()))
        ratio = m.cold_s / m.dynamo_s
        misses += not 0.9 <= ratio <= 1.1
        v = m.verdict
        print(f"{model.__name__:<10} {m.cold_s:>8.3f} {m.dynamo_s:>9.3f} {ratio:>6.3f} "
              f"{', '.join(f'{w:.3f}' for w in m.warm_s):>14}  {v.kind} {v.change:+.1%}")
    return misses


def triggers(trials: int) -> int:
    misses = 0
    for name, stmt, named in RECOMPILE_TRIGGERS:
        found = 0
        reason = ""
        for _ in range(trials):
            try:
                m = measure(stmt, TRIGGER_SETUP, 0.05, **trigger_globals())
            finally:
                torch.set_grad_enabled(True)
            hits = [r for r in m.recompiles if named in r.reason]
            found += bool(hits)
            reason = (hits or m.recompiles or [None])[0]
        misses += found < trials
        print(f"{name:<26} detected and named {found}/{trials}: "
              f"{reason.reason if reason else '-'}")
    return misses


def breaks() -> int:
    misses = 0
    for fn in (plain, one_break, two_breaks):  # none, one and three graph breaks
        with contextlib.redirect_stdout(io.StringIO()):
            explained = torch._dynamo.explain(fn)(torch.ones(4))
        m = measure("f(x)", "x = torch.ones(4)", 0.05, f=torch.compile(fn, backend="eager"))
        same = (m.graphs, m.graph_breaks) == (explained.graph_count,
                                             explained.graph_break_count)
        misses += not same
        print(f"{fn.__name__:<12} torchmark: {m.graphs} graphs, {m.graph_breaks} breaks; "
              f"dynamo.explain: {explained.graph_count} graphs, "
              f"{explained.graph_break_count} breaks [{'equal' if same else 'DIFFER'}]")
    return misses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    misses = compile_times()
    print()
    misses += triggers(args.trials)
    print()
    misses += breaks()
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
