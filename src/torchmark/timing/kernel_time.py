"""Kernel time: the sum of a call's CUDA kernel durations, from the GPU's own timestamps
(CUPTI activity records, through torch.profiler / kineto: what nsys and ncu report),
per call.

A measurement runs the statement in profiled passes of calls, each call inside a
`record_function` range named `torchmark.call.<i>` (the flush, with a cold L2, runs
outside it). A pass's trace is reduced at once to one figure a call and dropped (no
trace is kept): each kernel is attributed to the call whose range holds the host-side
launch of it (the CUDA runtime or driver call with the kernel's CUPTI correlation id;
failing that, the torch op it is linked to), and a call's kernel time is the sum of its
kernels' durations. Memory copies and memsets are not kernels (ncu and nsys's kernel
summary leave them out too): their time is reported beside, never added. Gaps between
a call's kernels are not counted either: that is what device time (CUDA events) adds.

`attribute()` is the pure part (constructed event lists in tests); `trace_events()`
reads kineto's events into its input; `measure_kernel_time()` runs the passes on a GPU.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.timing.stopping import StopDecision, StopRule

CALL_RANGE = "torchmark.call."  # the record_function range around the i-th call of a pass
MIN_PASS_CALLS, MAX_PASS_CALLS = 10, 500  # calls a profiled pass: its trace stays small
PASS_TARGET_S = 0.02  # host time a pass aims at (the profiler's start and stop amortized)
MAX_KERNEL_NAMES = 20  # kernels named in the report, by share; the rest summed as "other"
MAX_SEQUENCES = 8  # distinct launch orders a tally follows; calls past them are counted
MAX_SEQUENCE_KERNELS = 20  # a launch order longer than this is not reported

_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
          "cuda_runtime": "runtime", "cuda_driver": "runtime",
          "user_annotation": "annotation", "cpu_op": "op"}


@dataclasses.dataclass(frozen=True)
class TraceEvent:
    """One profiler event, as the attribution reads it. `kind`: "kernel", "memcpy",
    "memset" (on the device), "runtime" (a CUDA runtime or driver call on the host),
    "annotation" (a record_function range), "op" (a torch op) or "other".
    `correlation`: CUPTI's correlation id for device events and runtime calls, the op's
    own id for ops and annotations; `linked`: a device event's or runtime call's torch
    op (0: none)."""

    name: str
    kind: str
    start_ns: int
    duration_ns: int
    correlation: int = 0
    linked: int = 0


def event_kind(activity: str, name: str, on_device: bool, annotation: bool) -> str:
    """A kineto event's kind (see TraceEvent) from its activity type (a string such as
    "kernel", "gpu_memcpy", "cuda_runtime", "cpu_op"), falling back on its name and
    device where a kineto release names activities otherwise."""
    kind = _KINDS.get(activity)
    if kind is not None:
        if kind == "annotation" and on_device:  # never a call's range: a GPU-side copy
            return "other"
        return kind
    if on_device:
        if annotation or activity.startswith("gpu_user"):
            return "other"
        if name.startswith("Memcpy"):
            return "memcpy"
        if name.startswith("Memset"):
            return "memset"
        if "sync" in activity.lower() or activity.startswith("overhead"):
            return "other"
        return "kernel"
    if annotation:
        return "annotation"
    if name.startswith("cu") and not name.startswith("cuda::"):
        return "runtime"
    return "op" if activity in ("", "cpu_op") else "other"


def trace_events(kineto_events: Iterable[Any]) -> list[TraceEvent]:
    """torch's kineto events (`prof.profiler.kineto_results.events()`) as TraceEvents."""
    from torch.autograd import DeviceType

    out = []
    for e in kineto_events:
        on_device = e.device_type() != DeviceType.CPU
        name = e.name()
        activity = e.activity_type() if hasattr(e, "activity_type") else ""
        kind = event_kind(str(activity), name, on_device, bool(e.is_user_annotation()))
        out.append(TraceEvent(name=name, kind=kind, start_ns=int(e.start_ns()),
                              duration_ns=int(e.duration_ns()),
                              correlation=int(e.correlation_id()),
                              linked=int(e.linked_correlation_id())))
    return out


@dataclasses.dataclass(frozen=True)
class CallKernels:
    """What one call ran on the device: its kernels (name, seconds) in launch order, their
    sum (the call's kernel time), and the seconds of its copies and memsets (not
    counted)."""

    index: int
    kernels: tuple[tuple[str, float], ...]
    copies_s: float = 0.0

    @property
    def seconds(self) -> float:
        return math.fsum(s for _, s in self.kernels)


@dataclasses.dataclass(frozen=True)
class Attribution:
    """A pass's calls (by index) and the device events outside every call (the flush,
    a sentinel) or that could not be placed (no launch found)."""

    calls: list[CallKernels]
    outside: int
    unplaced: int


def attribute(events: Sequence[TraceEvent], prefix: str = CALL_RANGE) -> Attribution:
    """Each call's kernels: the calls are the annotation ranges named `prefix<i>`; a
    device event belongs to the call whose range holds its launch's host time (the
    runtime call with its correlation id, else the op it is linked to)."""
    windows: list[tuple[int, int, int]] = []  # start, end, index
    for e in events:
        if e.kind == "annotation" and e.name.startswith(prefix):
            suffix = e.name[len(prefix):]
            if suffix.isdigit():
                windows.append((e.start_ns, e.start_ns + e.duration_ns, int(suffix)))
    windows.sort()
    starts = [w[0] for w in windows]
    launches: dict[int, tuple[int, int]] = {}  # correlation: host start, linked op
    ops: dict[int, int] = {}
    for e in events:
        if e.kind == "runtime" and e.correlation:
            launches.setdefault(e.correlation, (e.start_ns, e.linked))
        elif e.kind in ("op", "annotation") and e.linked == 0 and e.correlation:
            ops.setdefault(e.correlation, e.start_ns)
    kernels: dict[int, list[tuple[str, float]]] = {w[2]: [] for w in windows}
    copies: dict[int, float] = {w[2]: 0.0 for w in windows}
    outside = unplaced = 0
    device = sorted((e for e in events if e.kind in ("kernel", "memcpy", "memset")),
                    key=lambda e: e.start_ns)
    for e in device:
        host = None
        launch = launches.get(e.correlation) if e.correlation else None
        # a launch linked to another op than the kernel is not its launch
        if launch is not None and (not launch[1] or not e.linked or launch[1] == e.linked):
            host = launch[0]
        if host is None and e.linked:
            host = ops.get(e.linked)
        if host is None:
            unplaced += 1
            continue
        i = bisect.bisect_right(starts, host) - 1
        if i < 0 or host > windows[i][1]:
            outside += 1
            continue
        index = windows[i][2]
        if e.kind == "kernel":
            kernels[index].append((e.name, e.duration_ns / 1e9))
        else:
            copies[index] += e.duration_ns / 1e9
    calls = [CallKernels(index=w[2], kernels=tuple(kernels[w[2]]), copies_s=copies[w[2]])
             for w in windows]
    return Attribution(calls=calls, outside=outside, unplaced=unplaced)


@dataclasses.dataclass(frozen=True)
class KernelShare:
    """A kernel name's part of the calls' kernel time: launches a call, mean seconds a
    call, and its share of the total."""

    name: str
    per_call: float
    seconds: float
    share: float


@dataclasses.dataclass(frozen=True)
class KernelSequence:
    """The calls' commonest launch order: each position's kernel name and its mean
    seconds, and the share of the calls with kernels that launched exactly these (a low
    share: the calls' orders vary, or the commonest was not followed)."""

    kernels: tuple[tuple[str, float], ...]
    share: float

    def to_dict(self) -> dict[str, Any]:
        return {"share": self.share,
                "kernels": [{"name": n, "seconds": s} for n, s in self.kernels]}


@dataclasses.dataclass
class _Order:
    """A launch order's calls and its positions' seconds summed over them."""

    calls: int
    sums: list[float]


class KernelTally:
    """Kernels by name over the calls added so far (a count and seconds a name: the
    calls themselves are not kept), their copies' seconds, and the seconds of each
    position of the calls' launch orders (up to MAX_SEQUENCES distinct ones)."""

    def __init__(self) -> None:
        self.calls = 0
        self.with_kernels = 0
        self.copies_s = 0.0
        self._totals: dict[str, list[float]] = {}
        # launch order (its names): the calls that ran it, seconds summed a position
        self._sequences: dict[tuple[str, ...], _Order] = {}

    def add(self, calls: Iterable[CallKernels]) -> None:
        for call in calls:
            self.calls += 1
            self.with_kernels += bool(call.kernels)
            self.copies_s += call.copies_s
            for name, seconds in call.kernels:
                entry = self._totals.setdefault(name, [0, 0.0])
                entry[0] += 1
                entry[1] += seconds
            self._follow(call)

    def _follow(self, call: CallKernels) -> None:
        names = tuple(name for name, _ in call.kernels)
        if not names or len(names) > MAX_SEQUENCE_KERNELS:
            return
        order = self._sequences.get(names)
        if order is None:
            if len(self._sequences) >= MAX_SEQUENCES:
                return
            order = self._sequences[names] = _Order(0, [0.0] * len(names))
        order.calls += 1
        for i, (_, seconds) in enumerate(call.kernels):
            order.sums[i] += seconds

    def sequence(self) -> KernelSequence | None:
        """The commonest of the launch orders followed (the first MAX_SEQUENCES distinct
        ones of at most MAX_SEQUENCE_KERNELS kernels; the order the GPU ran them, which
        on one stream is the order they were launched), each position's mean seconds;
        its share says how many of the calls with kernels ran it. None when no order was
        followed."""
        if not self._sequences or not self.with_kernels:
            return None
        names, order = max(self._sequences.items(), key=lambda item: item[1].calls)
        return KernelSequence(
            kernels=tuple((n, t / order.calls) for n, t in zip(names, order.sums, strict=True)),
            share=order.calls / self.with_kernels)

    def shares(self, limit: int = MAX_KERNEL_NAMES) -> list[KernelShare]:
        """Largest share first; beyond `limit` names, the rest as one "(other kernels)"
        entry."""
        if not self.calls:
            return []
        whole = math.fsum(t[1] for t in self._totals.values())
        n = self.calls
        shares = sorted((KernelShare(name, count / n, total / n,
                                     total / whole if whole else 0.0)
                         for name, (count, total) in self._totals.items()),
                        key=lambda k: (-k.seconds, k.name))
        if len(shares) > limit:
            rest = shares[limit:]
            shares = shares[:limit] + [KernelShare(
                f"(other kernels: {len(rest)} names)", math.fsum(k.per_call for k in rest),
                math.fsum(k.seconds for k in rest), math.fsum(k.share for k in rest))]
        return shares


def kernel_shares(calls: Sequence[CallKernels],
                  limit: int = MAX_KERNEL_NAMES) -> list[KernelShare]:
    """The kernels by name over `calls` (see KernelTally.shares)."""
    tally = KernelTally()
    tally.add(calls)
    return tally.shares(limit)


def pass_calls(enqueue_s: float) -> int:
    """Calls a profiled pass: about PASS_TARGET_S of host time, within MIN/MAX_PASS_CALLS."""
    if not enqueue_s > 0:
        return MAX_PASS_CALLS
    return int(min(max(PASS_TARGET_S / enqueue_s, MIN_PASS_CALLS), MAX_PASS_CALLS))


@dataclasses.dataclass(frozen=True)
class KernelTimeOptions:
    l2: str = "cold"
    rule: StopRule = StopRule()
    calls_per_pass: int | None = None  # None: from the warm-up (pass_calls)

    def __post_init__(self) -> None:
        if self.l2 not in ("cold", "hot"):
            raise UsageError(f"kernel time: l2 must be 'cold' or 'hot', got {self.l2!r}")
        n = self.calls_per_pass
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise UsageError(f"kernel time: calls_per_pass must be a positive int, got {n!r}")


def call_range(index: int) -> Any:
    """The profiler range of call `index` (a context manager)."""
    from torch.profiler import record_function

    return record_function(f"{CALL_RANGE}{index}")


def profile_ranges(body: Callable[[Callable[[int], Any]], Any],
                   sync: Callable[[], None]) -> Attribution:
    """`body(call_range)` under the profiler (CUDA and CPU activities), the device
    synchronized before and at the end; `body` runs each call inside `call_range(i)`.
    The trace is reduced to each call's kernels, then dropped."""
    from torch.profiler import ProfilerActivity, profile

    from torchmark.profiler_logs import quietly_entered

    sync()
    manager = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with quietly_entered(manager) as prof:
        body(call_range)
        sync()
    return attribute(trace_events(prof.profiler.kineto_results.events()))


def profiled_pass(torch: Any, call: Callable[[], Any], calls: int,
                  flush: Callable[[], None], sync: Callable[[], None],
                  sentinel: Callable[[], None] | None = None) -> Attribution:
    """`calls` calls under the profiler, each in its range, the flush before each
    outside it (see profile_ranges). `sentinel` runs first, outside every range (a
    kernel that shows whether the profiler records the device at all)."""

    def body(in_range: Callable[[int], Any]) -> None:
        if sentinel is not None:
            sentinel()
        for i in range(calls):
            flush()
            with in_range(i):
                call()
    return profile_ranges(body, sync)


def saw_the_device(attribution: Attribution) -> bool:
    """Whether a profiled pass recorded any device activity (kernels, copies, anywhere):
    False when CUPTI is not delivering (held by another profiler, not permitted)."""
    return bool(attribution.outside or attribution.unplaced or
                any(c.kernels or c.copies_s for c in attribution.calls))


NO_ACTIVITY = ("the profiler recorded no CUDA activity, not even a kernel launched to "
               "check it (is CUPTI available to this process? another profiler running, "
               "such as ncu or nsys?)")


@dataclasses.dataclass(frozen=True)
class KernelRun:
    """What measure_kernel_time gives: per-call kernel seconds, the kernels' shares,
    the copies' mean seconds a call, the stop decision, the passes and their size, the
    device events whose launch was not found (not counted), and the calls' commonest
    launch order with each kernel's mean seconds."""

    times: list[float]
    shares: list[KernelShare]
    copies_s: float
    decision: StopDecision
    passes: int
    calls_per_pass: int
    unplaced: int
    sequence: KernelSequence | None = None


def measure_kernel_time(call: Callable[[], Any], options: KernelTimeOptions,
                        device: Any = None) -> KernelRun:
    """Kernel seconds per call of `call` on a CUDA device (see the module docstring)."""
    import torch

    from torchmark.timing.cuda_device import indexed_cuda_device, require_cuda

    require_cuda()
    device = indexed_cuda_device(device)
    with torch.cuda.device(device):
        return _measure(torch, call, options, device)


def _measure(torch: Any, call: Callable[[], Any], options: KernelTimeOptions,
             device: Any) -> KernelRun:
    from torchmark.timing.cuda_device import WARM_UP_S
    from torchmark.timing.gpu_sampler import GpuSampler, sample_until

    flush = None
    if options.l2 == "cold":
        from torchmark.timing.l2 import L2Flusher

        # ncu's convention (--cache-control all): the L2 written back and clean, so the
        # call's kernels do not pay the flush's own write-back (see L2Flusher)
        flush = L2Flusher(device, clean=True).flush
    sampler = GpuSampler(torch, device, flush=flush, blocking=False)
    enqueue = sampler.warm_up(lambda _: (sampler.flush(), call()), calls=3,
                              min_time=WARM_UP_S)
    n = options.calls_per_pass or pass_calls(min(enqueue))
    # The profiler's first pass in a process starts CUPTI (hundreds of ms) and its calls
    # may differ: it is run, checked and thrown away.
    first = profiled_pass(torch, call, min(n, MIN_PASS_CALLS), sampler.flush, sampler.sync,
                          sentinel=lambda: torch.cuda._sleep(1000))
    if not saw_the_device(first):
        raise RuntimeError(f"kernel time: {NO_ACTIVITY}")
    tally = KernelTally()
    passes = [0]
    unplaced = [0]

    def take_batch() -> tuple[list[float], list[float], bool]:
        result = profiled_pass(torch, call, n, sampler.flush, sampler.sync)
        passes[0] += 1
        unplaced[0] += result.unplaced
        tally.add(result.calls)
        return [c.seconds for c in result.calls], [], True

    sampled = sample_until(options.rule, take_batch, clock=time.perf_counter)
    if not tally.with_kernels:
        raise UsageError("kernel time: the statement launched no CUDA kernel (its device "
                         "work, if any, was copies or memsets: time it with device time)")
    return KernelRun(times=sampled.times, shares=tally.shares(),
                     copies_s=tally.copies_s / max(tally.calls, 1),
                     decision=sampled.decision, passes=passes[0], calls_per_pass=n,
                     unplaced=unplaced[0], sequence=tally.sequence())


def kernel_metadata(run: KernelRun, l2: str, device: str) -> dict[str, Any]:
    """A kernel-time Measurement's metadata (JSON): clock "cupti" marks the quantity."""
    return {"clock": "cupti", "l2": l2, "l2_flush": "clean" if l2 == "cold" else None,
            "device": device, "stop": run.decision.to_dict(),
            "kernels": [dataclasses.asdict(k) for k in run.shares],
            "copies_s": run.copies_s, "passes": run.passes,
            "calls_per_pass": run.calls_per_pass, "unplaced": run.unplaced,
            "sequence": run.sequence.to_dict() if run.sequence else None}
