"""Per-call GPU time: CUDA events around each call, L2 control, launch-overhead hiding,
CUDA-graph replay, clock-throttle awareness and a noise-based stopping rule.

Modes:
- "events": events around each call (the device time includes any launch gap the CPU
  leaves between kernels of one call);
- "blocking": a spin kernel queued first keeps the GPU busy while the CPU enqueues a
  batch of calls, so none of them waits for a launch (nvbench's blocking kernel);
- "graph": `graph_calls` calls captured in a CUDA graph; each sample is one replay,
  reported per call. With `l2="cold"` the flush runs before each replay, so a graph holds
  one call (graph_calls=1): a second call in it would find the L2 warm.

Samples whose batch ran with the SM clock below `min_clock_ratio` of its maximum are
dropped; if every batch was below it (clocks locked or power-capped), they are kept and
the report says so.

With `l2="cold"` a device buffer the size of the L2 is zeroed before each call, outside
the events; "hot" leaves the cache as the previous call left it.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.timing.stopping import NoiseHistory, RunningStats, StopRule

MODES = ("events", "blocking", "graph")
L2_MODES = ("cold", "hot")
BATCH = 10
THROTTLED_PATIENCE = 10 * BATCH  # throttled samples taken before a low clock is accepted


@dataclasses.dataclass(frozen=True)
class DeviceTimeOptions:
    l2: str = "cold"
    mode: str = "events"
    rule: StopRule = StopRule()
    min_clock_ratio: float = 0.75  # samples taken below this share of the max SM clock drop
    graph_calls: int | None = None  # None: 1 with a cold L2, else 10

    def __post_init__(self) -> None:
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
        if self.mode == "graph" and self.l2 == "cold" and self.graph_calls > 1:
            raise UsageError(
                f"device time: l2='cold' flushes before each graph replay, so only the "
                f"first of graph_calls={self.graph_calls} calls would start cold; use "
                f"graph_calls=1, or l2='hot'")


def _nothing() -> None:
    """The flush of a hot-cache measurement."""


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("device time needs a CUDA device, and torch.cuda.is_available() is "
                           "False here; use blocked_autorange() for host time")


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


WARM_UP_S = 0.025  # as triton's do_bench: long enough for clocks and caches to settle


CALIBRATION_CYCLES = 2_000_000  # about a millisecond of spin at 2 GHz
CALIBRATION_LEAD = 200_000  # a spin ahead of the timed one hides its launch
_SPIN_RATES: dict[int, float] = {}


class EventPairs:
    """CUDA timing events recorded in pairs around calls on the current device, read
    after one synchronization: the one place torchmark creates timing events (the Timer's
    device time, the ops executor's events mode and the replay use it)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.pairs: list[tuple[Any, Any]] = []

    def around(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Record an event, run `call`, record another; the call's result."""
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        out = call(*args, **kwargs)
        end.record()
        self.pairs.append((start, end))
        return out

    def seconds(self, per: int = 1) -> list[float]:
        """Each pair's time in seconds (over `per` calls a pair); the device must have
        reached the last event (synchronize first)."""
        return [start.elapsed_time(end) / 1000.0 / per for start, end in self.pairs]


def spin_rate(torch) -> float:
    """Cycles a second of torch's spin kernel on the current device, measured once per
    process with events rather than read from the device properties, whose `clock_rate`
    is absent from some torch releases and from CUDA 13's cudaDeviceProp (torch 2.11 +
    CUDA 13 on an H100 still reported 1980000 kHz; the spin measured 1.97 G cycles/s).
    The fastest of three timings counts, or the properties' rate where that is higher (a
    spin too long only idles the GPU; too short, it stops covering launches); a
    nonsensical timing falls back to the properties' rate, else 1.5 GHz."""
    index = torch.cuda.current_device()
    if index in _SPIN_RATES:
        return _SPIN_RATES[index]
    best = 0.0
    for _ in range(3):
        torch.cuda._sleep(CALIBRATION_LEAD)
        timing = EventPairs(torch)
        timing.around(torch.cuda._sleep, CALIBRATION_CYCLES)
        torch.cuda.synchronize()
        seconds = timing.seconds()[0]
        if seconds > 0:
            best = max(best, CALIBRATION_CYCLES / seconds)
    props = torch.cuda.get_device_properties(index)
    listed = (getattr(props, "clock_rate", 0) or 0) * 1e3  # kHz where it exists
    listed = listed if 1e7 <= listed <= 1e11 else 0.0
    if not 1e7 <= best <= 1e11:
        best = listed or 1.5e9
    # timed while the GPU idled at a low clock, the rate would be low and every spin
    # short: the listed (maximum) rate, where it is higher, errs on the long side
    best = max(best, listed)
    _SPIN_RATES[index] = best
    return best


def spin(torch, seconds: float) -> None:
    """Queue a kernel on the current device that keeps it busy for about `seconds`."""
    torch.cuda._sleep(int(max(seconds, 1e-5) * spin_rate(torch)))


MAX_SPIN_S = 0.05  # the bound of a spin, or 4x the first enqueue estimate (at most 1 s)
SPIN_CHUNK = 64  # calls (ops) queued behind one spin: ~200 launches with their events
# Uncovered batches in a row before the spin is dropped. Each doubles the spin, so six
# in a row is a statement that synchronizes, not a host that paused (a GC pass, another
# process): on an H100 three in a row once ended blocking mode after 1272 good batches.
SPIN_GIVE_UP = 6


class SpinCover:
    """The spin kernel queued ahead of a batch of launches (nvbench's blocking kernel),
    sized and checked.

    `begin()` queues the spin and an event behind it; `end()`, once the batch is queued,
    asks that event whether the spin is already over. If it is, the GPU caught up with
    the host during the batch (the statement synchronizes, as `.item()` and `nonzero`
    do, or its launches filled the queue) and the batch's times include launch gaps: the
    batch counts as uncovered. The spin lasts twice the last covered batch's enqueue
    time plus 200 us, at most MAX_SPIN_S (or four times the first estimate, for statements
    slow to enqueue; never over a second). An uncovered batch doubles it instead (its
    enqueue time may include waiting the spin out, so it is not used: sizing from it
    would double the spin every batch); after SPIN_GIVE_UP uncovered batches in a row
    the spin is dropped, as it cannot help and would only idle the GPU."""

    def __init__(self, torch, enqueue_s: float) -> None:
        self.torch = torch
        self.enqueue_s = enqueue_s
        self.cap = min(max(MAX_SPIN_S, 4 * enqueue_s), 1.0)
        self.batches = self.uncovered = self.left_out = 0
        self.dropped = False
        self._streak = 0
        self._spun: Any = None
        self._queued_at = 0.0

    def seconds(self) -> float:
        return min(2 * self.enqueue_s + 2e-4, self.cap)

    def begin(self) -> None:
        if not self.dropped:
            spin(self.torch, self.seconds())
            self._spun = self.torch.cuda.Event()
            self._spun.record()
        self._queued_at = time.perf_counter()

    def end(self) -> bool:
        """Whether the batch just queued was covered (its times free of launch gaps)."""
        took = time.perf_counter() - self._queued_at
        self.batches += 1
        if self.dropped:
            self.uncovered += 1
            return False
        if not self._spun.query():  # still spinning: every launch was queued behind it
            self.enqueue_s, self._streak = took, 0
            return True
        self.uncovered += 1
        self._streak += 1
        self.enqueue_s = min(2 * self.enqueue_s, self.cap)
        self.dropped = self._streak >= SPIN_GIVE_UP
        return False

    def end_and_judge(self) -> bool:
        """End the batch (as end()); whether to keep its samples. An uncovered batch is
        left out (and counted) while the spin covers others: a host pause, whose launch
        gaps would only blur the figure; kept once the spin was dropped, or before any
        batch was covered (nothing else would be kept)."""
        was_dropped = self.dropped
        if self.end() or was_dropped or self.batches == self.uncovered:
            return True
        self.left_out += 1
        return False

    def report(self) -> dict[str, Any]:
        return {"batches": self.batches, "uncovered": self.uncovered,
                "left_out": self.left_out, "spin_dropped": self.dropped}


def _warm_up(torch, device, timed: Callable[[], Any], flush: Callable[[], None]) -> float:
    """Run `timed` (after `flush`) at least 3 times and for WARM_UP_S: lazy init,
    allocator, autotuning, clocks. Returns the host time to enqueue one flush and call."""
    calls, started = 0, time.perf_counter()
    enqueue = float("inf")
    while calls < 3 or time.perf_counter() - started < WARM_UP_S:
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        flush()
        timed()
        enqueue = min(enqueue, time.perf_counter() - t0)
        calls += 1
    torch.cuda.synchronize(device)
    return enqueue


def measure_device_time(call: Callable[[], Any], options: DeviceTimeOptions,
                        device: Any = None) -> tuple[list[float], list[float], dict[str, Any]]:
    """(device seconds per call, host launch seconds per call, report)."""
    import torch

    require_cuda()
    device = torch.device(device or "cuda")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    # Events, streams, graphs and the spin kernel all work on the current device.
    with torch.cuda.device(device):
        return _measure_on_device(torch, call, options, device)


def _measure_on_device(torch, call: Callable[[], Any], options: DeviceTimeOptions,
                       device: Any) -> tuple[list[float], list[float], dict[str, Any]]:
    flush: Callable[[], None] = _nothing
    if options.l2 == "cold":
        from torchmark.timing.l2 import L2Flusher

        flush = L2Flusher(device).flush
    per_sample = 1
    timed = call
    if options.mode == "graph":
        per_sample = options.graph_calls or 1
        timed = capture_graph(call, per_sample)
    # The first spin is sized from the warm-up: a batch of flushes and calls to enqueue.
    enqueue = BATCH * _warm_up(torch, device, timed, flush)
    clock = SmClock.for_device(torch, device)

    cover = SpinCover(torch, enqueue) if options.mode == "blocking" else None
    ratios: list[float] = []  # the SM clock of each batch, as a share of its maximum

    def take_batch() -> tuple[list[float], list[float], bool]:
        events = EventPairs(torch)
        hosts = []
        if cover is not None:
            cover.begin()
        for _ in range(BATCH):
            flush()
            t0 = time.perf_counter()
            events.around(timed)
            hosts.append((time.perf_counter() - t0) / per_sample)
        keep_batch = cover.end_and_judge() if cover is not None else True
        # read as the batch starts to run and as it ends (a clock that falls during the
        # batch, as at a power cap, shows in the second): the lower reading counts
        started = clock.ratio()
        torch.cuda.synchronize(device)
        ended = clock.ratio()
        readings = [r for r in (started, ended) if r is not None]
        ratio = min(readings) if readings else None
        if ratio is not None:
            ratios.append(ratio)
        if not keep_batch:  # launch gaps in a batch the spin should have covered
            return [], [], True
        keep = ratio is None or ratio >= options.min_clock_ratio
        return events.seconds(per_sample), hosts, keep

    device_times, host_times, dropped, decision = sample_until(options.rule, take_batch)
    if clock.note:
        check = clock.note
    elif decision.get("all_below_clock"):
        check = (f"every sample ran below {options.min_clock_ratio:.0%} of the max SM clock "
                 "(clocks locked or power-capped?): kept, not dropped")
    else:
        check = f"samples below {options.min_clock_ratio:.0%} of the max SM clock dropped"
    report = {"clock": "cuda_events", "l2": options.l2, "mode": options.mode,
              "stop": decision, "dropped_low_clock": dropped, "clock_check": check}
    if ratios:
        report["sm_clock"] = clock_summary(ratios, clock.max_mhz)
    if options.mode == "graph":
        report["graph_calls"] = options.graph_calls
    if cover is not None:
        report["spin"] = cover.report()
        if cover.uncovered:
            kept = cover.uncovered - cover.left_out
            report["spin_note"] = (
                f"{cover.uncovered} of {cover.batches} batches outlasted the spin (the "
                "statement synchronizes with the host, or queues more launches than fit)"
                + (f"; {cover.left_out} left out" if cover.left_out else "")
                + ("; the spin was dropped" if cover.dropped else "")
                + (f": the times of {kept} include launch gaps" if kept else ""))
    return device_times, host_times, report


def clock_summary(ratios: list[float], max_mhz: float) -> dict[str, float]:
    """The SM clock read during the batches: median and lowest MHz, and the maximum."""
    return {"median_mhz": round(statistics.median(ratios) * max_mhz),
            "min_mhz": round(min(ratios) * max_mhz), "max_mhz": round(max_mhz),
            "batches": len(ratios)}


def sample_until(rule: StopRule, take_batch: Callable[[], tuple[list[float], list[float], bool]],
                 clock: Callable[[], float] = time.perf_counter
                 ) -> tuple[list[float], list[float], int, dict[str, Any]]:
    """Take batches until `rule` says stop: (kept samples, their host times, samples dropped
    for a throttled clock, the decision). If no batch ran at full clock, the throttled
    ones are judged once THROTTLED_PATIENCE samples are in (clocks ramping up pass
    sooner) or at the timeout, and returned with "all_below_clock": True in the decision
    and nothing counted as dropped: a GPU whose clocks are locked low is measured, not
    refused. `clock` is injectable for tests."""
    samples: list[float] = []
    hosts: list[float] = []
    low: list[float] = []
    low_hosts: list[float] = []
    kept, throttled = RunningStats(), RunningStats()
    kept_noise, throttled_noise = NoiseHistory(), NoiseHistory()
    started = clock()
    while True:
        batch, batch_hosts, keep = take_batch()
        if keep:
            samples += batch
            hosts += batch_hosts
            kept.extend(batch)
        else:
            low += batch
            low_hosts += batch_hosts
            throttled.extend(batch)
        elapsed = clock() - started
        if samples or len(low) < THROTTLED_PATIENCE:
            decision = rule.decide(kept, elapsed, kept_noise)
        else:
            decision = rule.decide(throttled, elapsed, throttled_noise)
        if decision is not None:
            if not samples:  # describe what is returned: the throttled samples
                decision = rule.decide(throttled, elapsed) or decision
                return low, low_hosts, 0, {**decision.to_dict(), "all_below_clock": True}
            return samples, hosts, len(low), decision.to_dict()


def capture_graph(call: Callable[[], Any], calls: int = 1) -> Callable[[], Any]:
    """A CUDA graph of `calls` calls on the current device; its replay.

    The warm-up and the capture run on one side stream of that device: without
    `stream=`, torch.cuda.graph captures on a stream it made once for the whole process,
    on whichever device was current then, and libraries that keep per-stream workspaces
    (cuBLAS) would first allocate them during the capture."""
    import torch

    index = torch.cuda.current_device()
    stream = torch.cuda.Stream(device=index)
    stream.wait_stream(torch.cuda.current_stream(index))
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream(index).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            call()
    return graph.replay
