"""Per-call GPU time: CUDA events around each call, L2 control, launch-overhead hiding,
CUDA-graph replay, clock-throttle awareness and a noise-based stopping rule.

Modes:
- "events": events around each call (the device time includes any launch gap the CPU
  leaves between kernels of one call);
- "blocking": a spin kernel queued first keeps the GPU busy while the CPU enqueues a
  batch of calls, so none of them waits for a launch (nvbench's blocking kernel);
- "graph": `graph_calls` calls captured in a CUDA graph; each sample is one replay,
  reported per call. With `l2="cold"` the flush runs before each replay, so a graph holds
  one call (graph_calls=1): a second call in it would find the L2 warm;
- "batch": batch time (nvbench's batch measurement), a quantity of its own: `batch_calls`
  calls back to back between one pair of events, behind the spin (with `batch_graph`,
  one replay of a CUDA graph holding them), the L2 hot; a sample is the pair's time
  divided by the calls: the throughput of calls queued back to back, kernels overlapping
  nothing but their neighbours' tails.

With `subtract_event_overhead` (per-call modes: events, blocking) the events' own cost
is taken off each sample: an empty kernel (torch.cuda._sleep(0)) is timed the same way
(same mode, same L2), and its device time less its kernel time (CUPTI) is that cost
(event_overhead()).

Samples whose batch ran with the SM clock below `min_clock_ratio` of its maximum are
dropped; if every batch was below it (clocks locked or power-capped), they are kept and
the report says so.

With `l2="cold"` a device buffer the size of the L2 is zeroed before each call, outside
the events; "hot" leaves the cache as the previous call left it.

The phases (warm-up, calibration, sampling) are timing/gpu_sampler.py's; this module
sets them up for a statement and reports how it went (a DeviceReport).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.timing.cuda_device import WARM_UP_S, indexed_cuda_device, require_cuda
from torchmark.timing.gpu_sampler import GpuSampler, Sampled, TimedPass, capture_graph
from torchmark.timing.measurement import DeviceReport, SmClockSummary
from torchmark.timing.stopping import StopRule

MODES = ("events", "blocking", "graph", "batch")
L2_MODES = ("cold", "hot")
BATCH = 10  # calls a pass (one SM-clock check and, in blocking mode, one spin each)
BATCH_TARGET_S = 2e-3  # host time to enqueue one batch (batch mode): sizes batch_calls
# A batch-mode pass is one batch behind its own spin: the launches queued behind a spin
# must fit CUDA's launch queue (about a thousand; beyond, the host waits for the spin and
# the batch times the host's launch rate: 8 us a call for a 1 us relu, on an H100)
MIN_BATCH_CALLS, MAX_BATCH_CALLS = 10, 256


@dataclasses.dataclass(frozen=True)
class DeviceTimeOptions:
    l2: str | None = None  # None: "hot" in batch mode, else "cold"
    mode: str = "events"
    rule: StopRule = StopRule()
    min_clock_ratio: float = 0.75  # samples taken below this share of the max SM clock drop
    graph_calls: int | None = None  # None: 1 with a cold L2, else 10
    batch_calls: int | None = None  # batch mode: None sizes it from the warm-up
    batch_graph: bool = False  # batch mode: the batch captured in one CUDA graph
    subtract_event_overhead: bool = False

    def __post_init__(self) -> None:
        if self.l2 is None:
            object.__setattr__(self, "l2", "hot" if self.mode == "batch" else "cold")
        if self.l2 not in L2_MODES:
            raise UsageError(f"device time: l2 must be 'cold' or 'hot', got {self.l2!r}")
        if self.mode not in MODES:
            raise UsageError(f"device time: mode must be one of {', '.join(MODES)}, "
                             f"got {self.mode!r}")
        if not 0 <= self.min_clock_ratio <= 1:
            raise UsageError(f"device time: min_clock_ratio must be in [0, 1], got "
                             f"{self.min_clock_ratio!r}")
        if self.graph_calls is None:
            object.__setattr__(self, "graph_calls", 1 if self.l2 == "cold" else 10)
        if isinstance(self.graph_calls, bool) or not isinstance(self.graph_calls, int) \
                or self.graph_calls < 1:
            raise UsageError(f"device time: graph_calls must be a positive int, got "
                             f"{self.graph_calls!r}")
        n = self.batch_calls
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise UsageError(f"device time: batch_calls must be a positive int, got {n!r}")
        if self.mode != "batch" and (n is not None or self.batch_graph):
            raise UsageError("device time: batch_calls and batch_graph are for "
                             "mode='batch'")
        if self.mode == "batch" and self.l2 == "cold":
            raise UsageError("device time: batch mode times calls back to back with a hot "
                             "L2 (a flush before the batch would reach its first call "
                             "only); use l2='hot', or a per-call mode for a cold L2")
        if self.subtract_event_overhead and self.mode not in ("events", "blocking"):
            raise UsageError(f"device time: subtract_event_overhead is for the per-call "
                             f"modes (events, blocking), not {self.mode!r}: a "
                             f"{self.mode} sample's events are shared by its calls")
        if self.mode == "graph" and self.l2 == "cold" and self.graph_calls > 1:
            raise UsageError(
                f"device time: l2='cold' flushes before each graph replay, so only the "
                f"first of graph_calls={self.graph_calls} calls would start cold; use "
                f"graph_calls=1, or l2='hot'")


def cuda_device(device: Any) -> Any:
    """`device` ("cuda", "cuda:1", 1, a torch.device) as a torch.device of type cuda, or
    a ValueError naming what was given."""
    import torch

    try:
        parsed = torch.device("cuda", device) if isinstance(device, int) and \
            not isinstance(device, bool) else torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.type != "cuda":
        raise UsageError(f"device time: device must be a CUDA device ('cuda', 'cuda:N' or an "
                         f"index), got {device!r}")
    if parsed.index is not None and not 0 <= parsed.index < torch.cuda.device_count():
        raise UsageError(f"device time: {parsed} does not exist here "
                         f"({torch.cuda.device_count()} CUDA device(s))")
    return parsed


def device_of_tensors(namespace: dict[str, Any]) -> Any:
    """The CUDA device the tensors (and modules) of `namespace` are on, when they share
    one; None when they hold no CUDA tensor or several devices."""
    import torch

    found = set()
    for value in namespace.values():
        if isinstance(value, torch.nn.Module):
            value = next(value.parameters(), next(value.buffers(), None))
        if isinstance(value, torch.Tensor) and value.is_cuda:
            found.add(value.device)
    return found.pop() if len(found) == 1 else None


class SmClock:
    """The SM clock through NVML (nvidia-ml-py), when it is installed.

    NVML numbers devices in PCI order whatever CUDA_VISIBLE_DEVICES says, so the device
    is found by its UUID (torch's index only where the UUID is unknown)."""

    def __init__(self, device_index: int, uuid: str | None = None) -> None:
        self.handle = None
        self.max_mhz = 0
        self.note = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            if uuid:
                name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
                try:
                    self.handle = pynvml.nvmlDeviceGetHandleByUUID(name)
                except TypeError:  # pynvml releases before 11.5 take bytes
                    self.handle = pynvml.nvmlDeviceGetHandleByUUID(name.encode())
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self.max_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM)
        except ImportError:
            self.note = "SM clock not checked (install nvidia-ml-py to check it)"
        except Exception as e:  # NVML present but this device not found: say why
            self.handle = None
            self.note = f"SM clock not checked (NVML: {type(e).__name__}: {e})"

    @classmethod
    def for_device(cls, torch: Any, device: Any) -> SmClock:
        """The clock of a torch CUDA device (its current index when none is given)."""
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        return cls(index, str(uuid) if uuid is not None else None)

    def ratio(self) -> float | None:
        """The SM clock now, as a share of its maximum; None when it cannot be read."""
        if self.handle is None or not self.max_mhz:
            return None
        try:
            mhz = self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
        except Exception as e:  # NVML failing mid-run: stop checking, say why
            self.handle = None
            self.note = f"SM clock check stopped ({type(e).__name__}: {e})"
            return None
        return mhz / self.max_mhz


def measure_device_time(call: Callable[[], Any], options: DeviceTimeOptions,
                        device: Any = None) -> tuple[list[float], DeviceReport]:
    """(device seconds per call, the report: host launch seconds per call among it)."""
    import torch

    require_cuda()
    device = indexed_cuda_device(device)
    # Events, streams, graphs and the spin kernel all work on the current device.
    with torch.cuda.device(device):
        return _measure_on_device(torch, call, options, device)


def _measure_on_device(torch: Any, call: Callable[[], Any], options: DeviceTimeOptions,
                       device: Any) -> tuple[list[float], DeviceReport]:
    flush = None
    if options.l2 == "cold":
        from torchmark.timing.l2 import L2Flusher

        flush = L2Flusher(device).flush
    per_sample = 1
    timed = call
    if options.mode == "graph":
        per_sample = options.graph_calls or 1
        timed = capture_graph(call, per_sample)
    # a pass: BATCH calls (batch mode: one batch), behind one spin in blocking and batch modes
    per_pass = 1 if options.mode == "batch" else BATCH
    sampler = GpuSampler(torch, device, flush=flush,
                         blocking=options.mode in ("blocking", "batch"), chunk=per_pass,
                         judge=True)
    if options.mode == "batch":
        per_sample, timed = _batched(sampler, call, options)
    enqueue = sampler.warm_up(lambda _: (sampler.flush(), timed()), calls=3,
                              min_time=WARM_UP_S)
    clock = SmClock.for_device(torch, device)
    # The first spin is sized from the warm-up: a batch of flushes and calls to enqueue.
    sampler.calibrate(per_pass * min(enqueue))

    def queue(timing: TimedPass) -> None:
        for _ in range(per_pass):
            timing.time(timed)

    rule = options.rule
    if options.mode == "batch":  # a sample stands for per_sample calls' device time
        rule = dataclasses.replace(rule, min_time=rule.min_time / per_sample)
    sampled = sampler.sample(rule, queue, per=per_sample, host_times=True,
                             clock=clock, min_clock_ratio=options.min_clock_ratio)
    report = _report(options, sampled, sampler, clock)
    times = sampled.times
    if options.mode == "batch":
        report = dataclasses.replace(report, batch_calls=per_sample,
                                     batch_graph=options.batch_graph)
    if options.subtract_event_overhead:
        overhead = event_overhead(torch, device, options)
        times = [max(t - overhead, 0.0) for t in times]
        report = dataclasses.replace(report, event_overhead=overhead)
    return times, report


def batch_size(enqueue_s: float) -> int:
    """Calls a batch: about BATCH_TARGET_S of host time to enqueue, within
    MIN_BATCH_CALLS..MAX_BATCH_CALLS (so that a batch fits behind its spin)."""
    if not enqueue_s > 0:
        return MAX_BATCH_CALLS
    return int(min(max(BATCH_TARGET_S / enqueue_s, MIN_BATCH_CALLS), MAX_BATCH_CALLS))


def _batched(sampler: GpuSampler, call: Callable[[], Any],
             options: DeviceTimeOptions) -> tuple[int, Callable[[], Any]]:
    """Batch mode's timed call: (calls a batch, the batch) after a warm-up of single
    calls that sizes it; with batch_graph, the batch as one CUDA graph's replay."""
    single = sampler.warm_up(lambda _: call(), calls=3, min_time=WARM_UP_S)
    n = options.batch_calls or batch_size(min(single))
    if options.batch_graph:
        return n, capture_graph(call, n)

    def batch() -> None:
        for _ in range(n):
            call()
    return n, batch


_OVERHEADS: dict[tuple[int, str, str], float] = {}
OVERHEAD_RULE = StopRule(rsd=0.01, min_time=0.02, max_time=2.0)


def empty_kernel(torch: Any) -> None:
    """The smallest kernel torch launches: its spin kernel asked for no cycle."""
    torch.cuda._sleep(0)


def event_overhead(torch: Any, device: Any, options: DeviceTimeOptions) -> float:
    """The events' own cost in `options`' per-call mode and L2 state: an empty kernel's
    median device time less its median kernel time (its kernel time counted as 0 where
    the profiler cannot record it), at least 0; measured once per device, mode and L2
    state in a process."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, options.mode, options.l2 or "cold")
    if key not in _OVERHEADS:
        empty = dataclasses.replace(options, subtract_event_overhead=False, rule=OVERHEAD_RULE)
        times, _ = _measure_on_device(torch, lambda: empty_kernel(torch), empty, device)
        device_s = statistics.median(times)
        _OVERHEADS[key] = max(device_s - empty_kernel_time(torch, device, options), 0.0)
    return _OVERHEADS[key]


def empty_kernel_time(torch: Any, device: Any, options: DeviceTimeOptions) -> float:
    """The empty kernel's median kernel time (CUPTI), or 0 where it cannot be measured."""
    from torchmark.timing.kernel_time import KernelTimeOptions, measure_kernel_time

    try:
        run = measure_kernel_time(lambda: empty_kernel(torch),
                                  KernelTimeOptions(l2=options.l2 or "cold",
                                                    rule=OVERHEAD_RULE), device)
    except (RuntimeError, UsageError):
        return 0.0
    return statistics.median(run.times)


def _report(options: DeviceTimeOptions, sampled: Sampled, sampler: GpuSampler,
            clock: SmClock) -> DeviceReport:
    if clock.note:
        check = clock.note
    elif sampled.decision.all_below_clock:
        check = (f"every sample ran below {options.min_clock_ratio:.0%} of the max SM clock "
                 "(clocks locked or power-capped?): kept, not dropped")
    else:
        check = f"samples below {options.min_clock_ratio:.0%} of the max SM clock dropped"
    ratios = sampler.clock_ratios
    spin = sampler.covers[0].report() if sampler.covers else None
    note = None
    if spin is not None and spin.uncovered:
        kept = spin.uncovered - spin.left_out
        note = (f"{spin.uncovered} of {spin.batches} batches outlasted the spin (the "
                "statement synchronizes with the host, or queues more launches than fit)"
                + (f"; {spin.left_out} left out" if spin.left_out else "")
                + ("; the spin was dropped" if spin.spin_dropped else "")
                + (f": the times of {kept} include launch gaps" if kept else ""))
    return DeviceReport(
        l2=options.l2, mode=options.mode, stop=sampled.decision,
        dropped_low_clock=sampled.dropped, clock_check=check,
        sm_clock=clock_summary(ratios, clock.max_mhz) if ratios else None,
        graph_calls=options.graph_calls if options.mode == "graph" else None,
        spin=spin, spin_note=note, host_times=tuple(sampled.host_times))


def clock_summary(ratios: list[float], max_mhz: float) -> SmClockSummary:
    """The SM clock read during the batches: median and lowest MHz, and the maximum."""
    return SmClockSummary(median_mhz=round(statistics.median(ratios) * max_mhz),
                          min_mhz=round(min(ratios) * max_mhz), max_mhz=round(max_mhz),
                          batches=len(ratios))
