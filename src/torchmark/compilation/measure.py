"""torch.compile measured apart: for a statement that calls a compiled function or
module, what compiling cost and what it bought.

- Compile time: the statement's first call after Dynamo forgot every compilation, once
  with inductor's caches empty (a fresh cache folder: `cold`) and `warm_samples` times
  with them warm (`warm`: Dynamo traces again, inductor finds its code in the cache);
  Dynamo's own total for the cold compile beside it.
- What Dynamo made: graphs, graph breaks with their reasons, and every recompilation
  during the measurement with the guard that failed (`fail_on_recompile`: an error).
- The steady state: the statement and the same statement run eagerly
  (`torch.compiler.set_stance("force_eager")`, set in each block's setup), timed in
  interleaved blocks (compare/interleave.py) and judged by the verdict engine.

The compile times become their own metric, `compile` (seconds a compile, the warm ones
the samples), stored and gated like time.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from typing import Any

from torchmark.compilation.dynamo_events import (
    Recompile,
    dynamo_compile_seconds,
    reset,
    state,
)
from torchmark.core.errors import MeasurementError, UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result, timer_case
from torchmark.core.task_spec import TaskSpec
from torchmark.timing.measurement import Measurement
from torchmark.verdicts import Verdict
from torchmark.verdicts.intervals import MIN_SAMPLES

DEFAULT_WARM_SAMPLES = MIN_SAMPLES  # what the gate needs for an interval of the compile time
EAGER_SETUP = "torch.compiler.set_stance('force_eager')"
COMPILED_SETUP = "torch.compiler.set_stance('default')"


@dataclasses.dataclass(frozen=True)
class CompileMeasurement:
    """A compiled statement's compile times, what Dynamo made of it, and its steady
    state beside eager's (see the module docstring)."""

    task_spec: TaskSpec
    cold_s: float
    warm_s: tuple[float, ...]
    dynamo_s: float  # Dynamo's own total for the cold compile (nan: it kept none)
    graphs: int
    breaks: Mapping[str, int]  # graph breaks by reason, in the cold compile
    recompiles: tuple[Recompile, ...]  # during the steady-state measurement
    compiled: Measurement
    eager: Measurement
    verdict: Verdict  # compiled against eager (a ratio below 1: compiled is faster)

    @property
    def graph_breaks(self) -> int:
        return sum(self.breaks.values())

    def summary(self) -> str:
        spec, v = self.task_spec, self.verdict
        head = spec.label or (spec.stmt.splitlines() or ["statement"])[0]
        warm = ", ".join(f"{s:.3g}" for s in self.warm_s) or "-"
        dynamo = "none kept" if math.isnan(self.dynamo_s) else f"{self.dynamo_s:.3g} s"
        lines = [f"{head}" + (f": {spec.sub_label}" if spec.sub_label else ""),
                 f"  compile (first call): cold {self.cold_s:.3g} s (Dynamo's own total: "
                 f"{dynamo}); caches warm: {warm} s",
                 f"  graphs: {self.graphs}, graph breaks: {self.graph_breaks}"]
        lines += [f"    break x{n}: {reason}" for reason, n in self.breaks.items()]
        lines.append(f"  steady state: compiled {self.compiled.median * 1e6:.4g} us, eager "
                     f"{self.eager.median * 1e6:.4g} us a call (interleaved): "
                     f"{v.kind} {v.change:+.1%} {v.interval()}")
        lines.append(f"  recompilations while measuring: {len(self.recompiles)}")
        lines += [f"    {r.function}: {r.reason}" for r in self.recompiles]
        if not self.graphs:
            lines.append("  WARNING: nothing was compiled: Dynamo made no graph, so the "
                         "statement calls no torch.compile'd function or module (compile "
                         "it in the setup: f = torch.compile(f)) and both sides ran eager")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<torchmark.CompileMeasurement object at {hex(id(self))}>\n{self.summary()}"

    def report(self) -> dict[str, Any]:
        """What the compile metric's Result keeps beside its samples (JSON)."""
        return {"cold_s": self.cold_s, "warm_s": list(self.warm_s),
                "dynamo_s": None if math.isnan(self.dynamo_s) else self.dynamo_s,
                "graphs": self.graphs, "graph_breaks": self.graph_breaks,
                "breaks": dict(self.breaks),
                "recompiles": [dataclasses.asdict(r) for r in self.recompiles],
                "vs_eager": self.verdict.to_dict()}

    def results(self, frontend: str = "timeit", *,
                provenance: Provenance | None = None) -> list[Result]:
        """Its Results: the compile time (metric `compile`: the warm compiles the samples,
        the cold one and Dynamo's figures in `extra`), and the steady-state wall time of
        the compiled and of the eager statement (descriptions "compiled" and "eager")."""
        from torchmark.timing.results import measurement_to_result

        compiled_spec = dataclasses.replace(self.task_spec, description="compiled")
        compile_time = Result(case=timer_case(compiled_spec, frontend), metric="compile",
                              samples=self.warm_s or (self.cold_s,), provenance=provenance,
                              extra={"compile": self.report()})
        return [compile_time,
                *(measurement_to_result(m, frontend, provenance=provenance)
                  for m in (self.compiled, self.eager))]


def measure_compile(timer: Any, *, min_run_time: float = 1.0,
                    warm_samples: int = DEFAULT_WARM_SAMPLES,
                    fail_on_recompile: bool = False) -> CompileMeasurement:
    """Measure `timer`'s statement, which calls something torch.compile made (see the
    module docstring). `min_run_time`: seconds of interleaved steady-state blocks;
    `fail_on_recompile`: a recompilation while measuring is a MeasurementError naming
    the guard that failed."""
    import torch

    from torchmark.compare.interleave import measure_ab
    from torchmark.core.threads import set_torch_threads
    from torchmark.timing.timer_class import Timer

    if isinstance(warm_samples, bool) or not isinstance(warm_samples, int) or \
            warm_samples < 0:
        raise UsageError(f"measure_compile: warm_samples must be an int >= 0, got "
                         f"{warm_samples!r}")
    spec = timer.task_spec
    call = timer.prepared_call()
    # compiled under the thread count it is measured with: Dynamo guards on it
    with _fresh_inductor_cache(torch), set_torch_threads(spec.num_threads):
        reset()
        started = time.perf_counter()
        call()
        cold = time.perf_counter() - started
        dynamo_s = dynamo_compile_seconds()
        cold_state = state()
        warm = []
        for _ in range(warm_samples):
            reset()
            started = time.perf_counter()
            call()
            warm.append(time.perf_counter() - started)
        before = state()

        def variant(line: str, description: str) -> Any:
            return Timer(spec.stmt, f"{line}\n{spec.setup}", globals=timer.globals,
                         num_threads=spec.num_threads, label=spec.label,
                         sub_label=spec.sub_label, description=description, env=spec.env)

        try:
            ab = measure_ab(variant(EAGER_SETUP, "eager"), variant(COMPILED_SETUP, "compiled"),
                            min_run_time=min_run_time)
        finally:
            torch.compiler.set_stance("default")
        _, _, recompiles = state().since(before)
    if fail_on_recompile and recompiles:
        raise MeasurementError(
            f"{len(recompiles)} recompilation(s) while measuring (fail_on_recompile): "
            + "; ".join(f"{r.function}: {r.reason}" for r in recompiles[:3]))
    return CompileMeasurement(spec, cold, tuple(warm), dynamo_s, cold_state.graphs,
                              cold_state.breaks, tuple(recompiles), ab.candidate,
                              ab.baseline, ab.judged)


def _fresh_inductor_cache(torch: Any) -> Any:
    """inductor's caches emptied for the body (a fresh cache folder), as a context."""
    import contextlib

    try:
        from torch._inductor.utils import fresh_cache
    except ImportError:  # older torch: the same under its former name
        try:
            from torch._inductor.utils import fresh_inductor_cache as fresh_cache
        except ImportError:
            return contextlib.nullcontext()
    return fresh_cache()
