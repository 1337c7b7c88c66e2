"""Timing one operator case: warm-up, iterations, execution modes, backward, memory.

Modes: `discrete` times each call alone (host clock, device synchronized around it);
`continuous` puts one timer around all iterations and reports the mean; and
`continuous_events` records CUDA events around each call, queued in chunks behind a
spin kernel (so the events time the kernels, not the CPU's launch gaps), synchronizing
once at the end: the GPU sampler's (timing/gpu_sampler.py) pass, stopped at a
FixedCount.
With `metric="kernel"` (a CUDA device), each call's kernel time instead: the sum of its
kernels' durations from the GPU's timestamps (timing/kernel_time.py), the calls run in
profiled passes, each in its range, the flush and the resets outside it.
With `metric="memory"`, each call's allocations instead (peak bytes above its start,
bytes and number of allocations, bytes kept), from torch's allocator, a sample a call.
With `backward`, each iteration runs the forward untimed, makes the gradient (ones)
outside the timed region, and times the backward pass alone. Times are in seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from torchmark.core.errors import USER_CODE_FAILURES, error_line
from torchmark.core.threads import MAX_THREADS
from torchmark.timing.gpu_sampler import (
    SPIN_CHUNK,
    GpuSampler,
    TimedPass,
    capture_graph,
    warm_up,
)
from torchmark.timing.stopping import FixedCount

EXEC_MODES = ("discrete", "continuous", "continuous_events")
# time: by the exec mode; kernel: kernel time (CUDA); memory: each call's bytes from
# torch's allocator (timing/memory.py), per call, no time
METRICS = ("time", "kernel", "memory")
PROFILER_RANGE_ENV = "TORCHMARK_PROFILER_RANGE"  # "1": timed calls in a cudaProfiler range
_NO_RANGE = contextlib.nullcontext()


@dataclasses.dataclass
class RunOptions:
    warmup: int = 5
    iterations: int = 20
    backward: bool = False
    device: str = "cpu"
    threads: int | None = 1  # as torch's Timer; None: torch's own default
    exec_mode: str = "discrete"
    l2_flush: bool = False
    cuda_graph: bool = False
    compile: bool = False
    resume_id: str | None = None
    stop_id: str | None = None
    metric: str = "time"

    def validate(self) -> None:
        """Clear errors for impossible combinations, before anything runs."""
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an int >= 0, got {self.warmup!r}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) \
                or self.iterations < 1:
            raise ValueError(f"iterations must be an int >= 1, got {self.iterations!r}")
        if self.exec_mode not in EXEC_MODES:
            raise ValueError(f"exec mode must be one of {', '.join(EXEC_MODES)}, "
                             f"got {self.exec_mode!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or
                                         not isinstance(self.threads, int) or
                                         not 1 <= self.threads <= MAX_THREADS):
            raise ValueError(f"threads must be an int in 1..{MAX_THREADS}, got "
                             f"{self.threads!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.metric == "kernel":
            import torch

            if not torch.cuda.is_available():
                raise ValueError("--metric kernel: there is no CUDA device here "
                                 "(torch.cuda.is_available() is False); kernel time is read "
                                 "from the GPU's own timestamps")
            if not self.device.startswith("cuda"):
                raise ValueError("--metric kernel reads the GPU's kernel timestamps: add "
                                 "--device cuda")
            if self.exec_mode != "discrete":
                raise ValueError(f"--metric kernel times each call's kernels, whatever the "
                                 f"exec mode: drop --exec-mode {self.exec_mode}")
        if self.metric == "memory":
            given = [flag for flag, on in (("--cuda-graph", self.cuda_graph),
                                           ("--l2-flush", self.l2_flush)) if on]
            if self.exec_mode != "discrete" or given:
                raise ValueError(f"--metric memory counts each call's allocations alone: "
                                 f"drop {', '.join(given) or f'--exec-mode {self.exec_mode}'}")
        kind, _, index = self.device.partition(":")
        if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
            raise ValueError(f"device must be cpu, cuda or cuda:N, got {self.device!r}")
        cuda = kind == "cuda"
        if cuda:
            import torch

            if not torch.cuda.is_available():
                raise ValueError(f"device {self.device}: CUDA is not available on this machine")
            if index and int(index) >= torch.cuda.device_count():
                raise ValueError(f"device {self.device}: this machine has "
                                 f"{torch.cuda.device_count()} CUDA device(s)")
        for flag, what in ((self.l2_flush, "--l2-flush"), (self.cuda_graph, "--cuda-graph"),
                           (self.exec_mode == "continuous_events",
                            "--exec-mode continuous_events")):
            if flag and not cuda:
                raise ValueError(f"{what} needs a CUDA device (--device cuda)")
        if self.l2_flush and self.exec_mode == "continuous":
            raise ValueError("--l2-flush needs a flush between calls: use --exec-mode discrete "
                             "or continuous_events")
        if self.cuda_graph and self.backward:
            raise ValueError("--cuda-graph times the forward only; drop --backward")


def summarize(times: list[float], calls: int | None = None) -> dict[str, Any]:
    """Statistics of per-call times; `calls` is how many calls they cover (continuous
    mode reports one mean over all of them)."""
    return {"times": times, "median": statistics.median(times), "mean": statistics.fmean(times),
            "min": min(times), "max": max(times),
            "iterations": calls if calls is not None else len(times)}


COLD_START_RATIO = 3.0  # a first timed call this many times the others' median: a note


def notes(times: list[float], warmup: int, *others: dict[str, str]) -> dict[str, str]:
    """{"note": ...} joining what the timed calls say: the first far slower than the
    rest (the warm-up did not reach a steady state: a README example with warmup=1 read
    a first row 5x its steady state, silently), and `others` (launch gaps)."""
    said = [o["note"] for o in others if o.get("note")]
    if len(times) >= 5:
        rest = statistics.median(times[1:])
        if rest > 0 and times[0] > COLD_START_RATIO * rest:
            said.insert(0, f"the first timed call took {times[0] / rest:.1f}x the others' "
                           f"median: {warmup} warm-up call(s) did not reach a steady state; "
                           "raise --warmup")
    return {"note": "; ".join(said)} if said else {}


LAUNCH_GAPS = ("{} chunk(s) of up to {} calls outlasted the spin queued ahead of them (a call "
               "synchronizes with the host, or a chunk queues more launches than the queue "
               "holds): their times can include launch gaps")
MAX_CALL_ENQUEUE_S = 1e-3  # the most a call's enqueue estimate sizes the first spin by


class _Clock:
    """Synchronization, flushing and the three ways of timing calls on one device; on a
    GPU in continuous_events mode, through the GPU sampler (timing/gpu_sampler.py)."""

    def __init__(self, options: RunOptions) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(options.device)
        self.cuda = self.device.type == "cuda"
        self.mode = options.exec_mode
        self.flush: Callable[[], None] = lambda: None
        if options.l2_flush:
            from torchmark.timing.l2 import L2Flusher

            # kernel time flushes clean, as ncu does; device time as do_bench (see l2.py)
            self.flush = L2Flusher(self.device, clean=options.metric == "kernel").flush
        # `ops --ncu` profiles only what runs between cudaProfilerStart and Stop: the
        # timed calls, not the warm-up, the flushes or the graph captures
        self.profiled_range = self.cuda and os.environ.get(PROFILER_RANGE_ENV) == "1"
        self.sampler: GpuSampler | None = None
        self.kernel = self.cuda and options.metric == "kernel"
        self.kernels: list[dict[str, Any]] = []  # the last kernel-timed calls' kernels
        if self.cuda and self.mode == "continuous_events":
            # not blocking under ncu, which serializes the kernels it profiles: no spin
            # could cover them, and ncu's own times are the figures there
            self.sampler = GpuSampler(torch, self.device, flush=self.flush,
                                      blocking=not self.profiled_range)
        # continuous_events: chunks of the last timed calls that outlasted their spin (a
        # call synchronizes with the host): their times can include launch gaps
        self.uncovered = 0
        self._enqueue_times: list[float] = []  # of the last warm-up's calls

    def warm_up(self, run: Callable[[int], Any], calls: int) -> None:
        """The warm-up phase: `run(i)` for i < calls, then the device synchronized. Through
        the sampler, each call on an idle device and timed to enqueue: the first spin is
        sized from those times."""
        if self.sampler is not None:
            self._enqueue_times = self.sampler.warm_up(run, calls)
        else:
            warm_up(run, calls)
            self.sync()

    def call_enqueue_s(self) -> float:
        """A call's host time to queue, with its flush and two events: the least a
        warm-up call took, not counting the first (compiling, autotuning) where there are
        others; 20 us without a warm-up; at most MAX_CALL_ENQUEUE_S."""
        times = self._enqueue_times[1:] or self._enqueue_times
        if not times:
            return 2e-5
        return min(max(min(times) + 1e-5, 2e-5), MAX_CALL_ENQUEUE_S)

    def profiled(self) -> contextlib.AbstractContextManager:
        """Around timed calls: the profiler's capture range when `ops --ncu` asked for it
        (else a shared no-op: nothing to build a call)."""
        return self._profiler_range() if self.profiled_range else _NO_RANGE

    @contextlib.contextmanager
    def _profiler_range(self) -> Iterator[None]:
        self.torch.cuda.profiler.start()
        try:
            yield
        finally:
            self.torch.cuda.profiler.stop()

    def gaps_note(self) -> dict[str, str]:
        """{"note": ...} when the last timed calls' device times can include launch gaps."""
        if not self.uncovered:
            return {}
        return {"note": LAUNCH_GAPS.format(self.uncovered, SPIN_CHUNK)}

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time_calls(self, call: Callable[..., Any], n: int,
                   before: Callable[[], Any] | None = None,
                   reset: Callable[[], None] | None = None) -> tuple[list[float], Any]:
        """Times of n calls (per call), by the mode; `before` runs untimed before each
        call and its result is passed to `call` (used for backward); `reset` runs untimed
        before each call, ahead of the flush (not in continuous mode: one timer spans
        the calls)."""
        out = None
        reset = reset or (lambda: None)
        if self.mode == "continuous" and before is None:
            self.sync()
            with self.profiled():
                start = time.perf_counter()
                for _ in range(n):
                    out = call()
                self.sync()
                elapsed = time.perf_counter() - start
            return [elapsed / n], out
        if self.sampler is not None:
            return self._sample(self.sampler, call, n, before, reset)
        if self.kernel:
            return self._kernel_times(call, n, before, reset)
        times = []
        for _ in range(n):
            arg = before() if before else None
            reset()
            self.flush()
            self.sync()
            with self.profiled():
                start = time.perf_counter()
                out = call(arg) if before else call()
                self.sync()
                times.append(time.perf_counter() - start)
        return times, out

    def _sample(self, sampler: GpuSampler, call: Callable[..., Any], n: int,
                before: Callable[[], Any] | None,
                reset: Callable[[], None]) -> tuple[list[float], Any]:
        """continuous_events: one pass of n calls, each between events, queued in chunks
        behind a spin kernel (so that the events time the call's kernels, not the gap the
        CPU leaves while launching them), synchronized once at the end."""
        out = None
        sampler.calibrate(SPIN_CHUNK * self.call_enqueue_s())

        def prepare() -> tuple[Any, ...]:
            arg = before() if before else None
            reset()
            return (arg,) if before else ()

        def queue(timing: TimedPass) -> None:
            nonlocal out
            for _ in range(n):
                out = timing.time(call, prepare=prepare, within=self.profiled)

        sampled = sampler.sample(FixedCount(n), queue)
        self.uncovered = sampler.uncovered()
        return sampled.times, out


    def _kernel_times(self, call: Callable[..., Any], n: int,
                      before: Callable[[], Any] | None,
                      reset: Callable[[], None]) -> tuple[list[float], Any]:
        """--metric kernel: each of n calls' kernel seconds, in profiled passes (the
        first, the profiler's own start, run and thrown away); `before`, the reset and
        the flush run between calls, outside their ranges."""
        from torchmark.timing.kernel_time import (
            MAX_PASS_CALLS,
            MIN_PASS_CALLS,
            NO_ACTIVITY,
            KernelTally,
            profiled_pass,
            saw_the_device,
        )

        torch = self.torch
        pending: list[Any] = []
        out: list[Any] = [None]

        def between() -> None:
            arg = before() if before else None
            reset()
            self.flush()
            pending.append(arg)

        def timed() -> None:
            arg = pending.pop()
            out[0] = call(arg) if before else call()

        first = profiled_pass(torch, timed, min(n, MIN_PASS_CALLS), between, self.sync,
                              sentinel=lambda: torch.cuda._sleep(1000))
        if not saw_the_device(first):
            raise RuntimeError(f"--metric kernel: {NO_ACTIVITY}")
        times: list[float] = []
        tally = KernelTally()
        while len(times) < n:
            result = profiled_pass(torch, timed, min(n - len(times), MAX_PASS_CALLS),
                                   between, self.sync)
            tally.add(result.calls)
            times += [c.seconds for c in result.calls]
        self.kernels = [{"name": k.name, "per_call": k.per_call, "share": round(k.share, 4)}
                        for k in tally.shares(limit=5)]
        return times, out[0]


def _grad_output(out: Any):
    import torch

    candidates = [out] if isinstance(out, torch.Tensor) else \
        [t for t in out if isinstance(t, torch.Tensor)] if isinstance(out, (list, tuple)) else []
    for t in candidates:
        if t.grad_fn is not None:
            return t
    raise ValueError("--backward: the output has no gradient history (no input requires "
                     "grad, or the op is not differentiable)")


def _rss_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class _Memory:
    """Peak device memory of the timed calls (CUDA), or the growth of the process's
    resident set while they ran (CPU)."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        torch = clock.torch
        if clock.cuda:
            torch.cuda.reset_peak_memory_stats(clock.device)
            self.base = torch.cuda.memory_allocated(clock.device)
        else:
            self.base = _rss_bytes("VmRSS")
            try:  # reset the peak resident size (Linux), so VmHWM is this region's peak
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
                self.peak_field = "VmHWM"
            except OSError:
                self.peak_field = "VmRSS"

    def result(self) -> dict[str, Any]:
        torch = self.clock.torch
        if self.clock.cuda:
            return {"peak_bytes": int(torch.cuda.max_memory_allocated(self.clock.device)
                                      - self.base)}
        peak = _rss_bytes(self.peak_field)
        if peak is None or self.base is None:
            return {}
        return {"rss_growth_bytes": max(int(peak - self.base), 0)}


def measure(fn: Callable, args: list[Any], kwargs: dict[str, Any],
            options: RunOptions, in_place: bool = False) -> tuple[dict[str, Any], Any]:
    """Metrics of one case ({"forward": {...}, "backward": {...}}) and its last output.
    `in_place`: the operator changes its inputs, which are put back before each call."""
    clock = _Clock(options)
    if not clock.cuda:
        return _measure(fn, args, kwargs, options, clock, in_place)
    # Events, streams and graphs work on the current device: make it the case's (cuda:N).
    with clock.torch.cuda.device(clock.device):
        return _measure(fn, args, kwargs, options, clock, in_place)


class _Inputs:
    """The inputs an in-place operator changes, saved before its first call and put back
    (outside the timed region) before each later one: otherwise every call would start
    from what the previous left (x.mul_(0.5) reaches denormals, and slows ~20x). Shape
    and strides are put back too (t_, squeeze_, resize_ change them)."""

    def __init__(self, torch_, args: list[Any], kwargs: dict[str, Any]) -> None:
        from torchmark.ops.throughput import tensors_in

        self.torch = torch_
        self.saved = [(t, t.detach().clone(), t._version, _layout(t))
                      for t in tensors_in([args, kwargs])]

    def keep_changed(self) -> None:
        """After the first call: keep only the inputs it changed."""
        self.saved = [s for s in self.saved if s[0]._version != s[2]]

    def restore(self) -> None:
        with self.torch.no_grad():
            for tensor, copy, _, layout in self.saved:
                if tensor.grad_fn is not None:
                    # with --backward the last call left autograd history on the input:
                    # the next would chain onto it, each backward walking every earlier one
                    tensor.detach_()
                if _layout(tensor) != layout:
                    tensor.as_strided_(*layout)
                tensor.copy_(copy)


def _layout(t: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    return tuple(t.shape), t.stride(), t.storage_offset()


class BackwardFailed(Exception):
    """The forward was measured but the backward failed: `metrics` holds the forward."""

    def __init__(self, metrics: dict[str, Any], out: Any, error: BaseException) -> None:
        super().__init__(f"backward: {error_line(error)}")
        self.metrics, self.out = metrics, out


def _measure(fn: Callable, args: list[Any], kwargs: dict[str, Any], options: RunOptions,
             clock: _Clock, in_place: bool = False) -> tuple[dict[str, Any], Any]:
    torch_ = clock.torch
    if options.compile:
        # dynamo caches per code object, and every case's wrapper shares one: after its
        # recompile limit (8) later cases would silently run eager
        torch_._dynamo.reset()
    target = torch_.compile(fn) if options.compile else fn
    # Forward-only timing records no autograd graph (and in-place ops on inputs that
    # require grad work); with --backward the graph is the point.
    grad_mode = torch_.enable_grad if options.backward else torch_.no_grad

    def forward(_: Any = None) -> Any:
        with grad_mode():
            return target(*args, **kwargs)

    inputs = _Inputs(torch_, args, kwargs) if in_place else None
    reset = inputs.restore if inputs is not None else None
    # torch.compile compiles on the first call: never inside the timed calls, even at -w 0;
    # an in-place op's first call tells which inputs it changes
    first = 1 if options.compile or inputs is not None else 0

    def warm(i: int) -> None:
        if i and reset is not None:  # the reset is queued before each timed call too
            reset()
        forward()
        if i == 0 and inputs is not None:
            inputs.keep_changed()

    clock.warm_up(warm, max(options.warmup, first))
    if options.metric == "memory":
        out = forward()
        metrics = {"forward": memory_phase(clock, forward, options.iterations, reset=reset)}
        if options.backward:
            try:
                metrics["backward"] = _measure_backward(forward, options, clock, reset)
            except USER_CODE_FAILURES as e:
                raise BackwardFailed(metrics, out, e) from e
        return metrics, out
    timed: Callable = forward
    # With a CUDA graph, what the calls allocate is allocated once, at capture, in the
    # graph's pool: its peak is measured from before the capture.
    memory = _Memory(clock)
    if options.cuda_graph:
        replay = capture_graph(forward)

        def timed(_: Any = None) -> Any:
            return replay()
    times, out = clock.time_calls(timed, options.iterations, reset=reset)
    metrics = {"forward": {**summarize(times, options.iterations), "memory": memory.result(),
                           **notes(times, options.warmup, clock.gaps_note()),
                           **_kernels(clock)}}
    if inputs is not None and inputs.saved:  # continuous mode cannot put them back
        metrics["forward"]["inputs_restored"] = options.exec_mode != "continuous"
    if options.cuda_graph:
        out = forward()
    if options.backward:
        try:
            metrics["backward"] = _measure_backward(forward, options, clock, reset)
        except USER_CODE_FAILURES as e:  # the forward's figures stand; the record says why
            raise BackwardFailed(metrics, out, e) from e
    return metrics, out


def _measure_backward(forward: Callable[[], Any], options: RunOptions,
                      clock: _Clock, reset: Callable[[], None] | None = None
                      ) -> dict[str, Any]:
    """The backward pass alone, per call: each needs a fresh forward (untimed) first, so
    it is timed call by call in every exec mode; `reset` (an in-place op's inputs put
    back, their autograd history cut) runs before each forward."""
    torch_ = clock.torch

    def make_graph(_: Any = None) -> tuple[Any, Any]:
        if reset is not None:
            reset()
        y = _grad_output(forward())
        return y, torch_.ones_like(y)

    def warm(_: int) -> None:  # its enqueue times (a forward too) size the spin
        y, grad = make_graph()
        y.backward(grad)

    clock.warm_up(warm, max(options.warmup, 1) if options.compile else options.warmup)
    if options.metric == "memory":
        return memory_phase(clock, lambda pair: pair[0].backward(pair[1]), options.iterations,
                            before=make_graph)
    memory = _Memory(clock)
    times, _ = clock.time_calls(lambda pair: pair[0].backward(pair[1]),
                                options.iterations, before=make_graph)
    return {**summarize(times, options.iterations), "memory": memory.result(),
            **notes(times, options.warmup, clock.gaps_note()), **_kernels(clock)}


def memory_phase(clock: _Clock, call: Callable[..., Any], n: int, *,
                 before: Callable[[], Any] | None = None,
                 reset: Callable[[], None] | None = None) -> dict[str, Any]:
    """--metric memory: n calls' allocations, one sample a call (timing/memory.py), with
    `before` (its result passed to `call`) and `reset` run outside each sample:
    {"bytes": {field: [a value a call]}, "median": the peaks' median, "iterations": n}."""
    from torchmark.timing.memory import columns, sample

    samples = []
    for _ in range(n):
        one = functools.partial(call, before()) if before else call
        if reset is not None:
            reset()
        samples.append(sample(one, clock.device if clock.cuda else None))
    return bytes_record(columns(samples, reserved=clock.cuda))


def bytes_record(counted: dict[str, list[int]]) -> dict[str, Any]:
    """A pass's record under --metric memory: {"bytes": a list a field, "median": the
    peaks' median, "iterations": the calls sampled} (results_file.py reads it)."""
    return {"bytes": counted, "median": statistics.median(counted["peak"]),
            "iterations": len(counted["peak"])}


def _kernels(clock: _Clock) -> dict[str, Any]:
    """{"kernels": [...]}: with --metric kernel, the timed calls' kernels by share."""
    return {"kernels": clock.kernels} if clock.kernel else {}
