"""The GPU sampler that the Timer's device time, the ops executor's continuous_events
mode and the trace replay share, and the one place torchmark creates CUDA events.

A measurement goes through three named phases (nvbench's state machine, `Phase`):

1. warm-up: the call run a number of times and for a minimum time (lazy init, the
   allocator, autotuning, clocks), each on an idle device, its host time to enqueue read;
2. calibration: the spin kernel's rate measured (once per device and process) and the
   first spin sized from the warm-up's enqueue time;
3. sampling: passes (`TimedPass`) of calls, each after the flush and between a pair of
   CUDA events, queued in chunks behind a spin kernel (nvbench's blocking kernel) so
   that no call waits for its launch, read after one synchronization; a StopCriterion
   (timing/stopping.py) decides after each pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from torchmark.timing.measurement import SpinReport
from torchmark.timing.stopping import (
    NoiseHistory,
    RunningStats,
    StopCriterion,
    StopDecision,
    StopRule,
)
from torchmark.timing.warm_up import MIN_BLOCKS_TESTED, WarmUp, still_stationary, warm_up_end

CALIBRATION_CYCLES = 2_000_000  # about a millisecond of spin at 2 GHz
CALIBRATION_LEAD = 200_000  # a spin ahead of the timed one hides its launch
_SPIN_RATES: dict[int, float] = {}
MAX_SPIN_S = 0.05  # the bound of a spin, or 4x the first enqueue estimate (at most 1 s)
SPIN_CHUNK = 64  # calls (ops) queued behind one spin: ~200 launches with their events
# Uncovered batches in a row before the spin is dropped. Each doubles the spin, so six
# in a row is a statement that synchronizes, not a host that paused (a GC pass, another
# process): on an H100 three in a row once ended blocking mode after 1272 good batches.
SPIN_GIVE_UP = 6
THROTTLED_PATIENCE = 100  # throttled samples taken before a low clock is accepted
_NO_CONTEXT = contextlib.nullcontext()


class Phase(enum.Enum):
    WARM_UP = "warm-up"
    CALIBRATION = "calibration"
    SAMPLING = "sampling"


def cuda_event(torch: Any, timing: bool) -> Any:
    """A CUDA event on the current device: the one place torchmark creates them."""
    return torch.cuda.Event(enable_timing=timing)


class EventPairs:
    """Timing events recorded in pairs around calls on the current device, read after one
    synchronization."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.pairs: list[tuple[Any, Any]] = []

    def around(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Record an event, run `call`, record another; the call's result."""
        start = cuda_event(self.torch, True)
        end = cuda_event(self.torch, True)
        start.record()
        out = call(*args, **kwargs)
        end.record()
        self.pairs.append((start, end))
        return out

    def seconds(self, per: int = 1) -> list[float]:
        """Each pair's time in seconds (over `per` calls a pair); the device must have
        reached the last event (synchronize first)."""
        return [start.elapsed_time(end) / 1000.0 / per for start, end in self.pairs]


def spin_rate(torch: Any) -> float:
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


def spin(torch: Any, seconds: float) -> None:
    """Queue a kernel on the current device that keeps it busy for about `seconds`."""
    torch.cuda._sleep(int(max(seconds, 1e-5) * spin_rate(torch)))


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

    def __init__(self, torch: Any, enqueue_s: float) -> None:
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
            self._spun = cuda_event(self.torch, False)
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

    def report(self) -> SpinReport:
        return SpinReport(batches=self.batches, uncovered=self.uncovered,
                          left_out=self.left_out, spin_dropped=self.dropped)


def warm_up(run: Callable[[int], Any], calls: int, min_time: float = 0.0,
            sync: Callable[[], None] | None = None) -> list[float]:
    """The warm-up phase: `run(i)` for i = 0, 1, ... at least `calls` times and for
    `min_time` seconds. With `sync` (the device's synchronize) each run starts on an idle
    device and the host times to enqueue them are returned; without, none are."""
    times: list[float] = []
    i, started = 0, time.perf_counter()
    while i < calls or (min_time > 0 and time.perf_counter() - started < min_time):
        if sync is None:
            run(i)
        else:
            sync()
            t0 = time.perf_counter()
            run(i)
            times.append(time.perf_counter() - t0)
        i += 1
    return times


class ClockReader(Protocol):
    """The SM clock (device_time.SmClock): its reading as a share of its maximum."""

    def ratio(self) -> float | None: ...


@dataclasses.dataclass(frozen=True)
class Sampled:
    """What the sampling phase kept: per-call device times, their host enqueue times,
    the samples dropped for a throttled clock, and the decision that ended it."""

    times: list[float]
    host_times: list[float]
    dropped: int
    decision: StopDecision


class GpuSampler:
    """Samples calls on one CUDA device through the three phases: `warm_up()`,
    `calibrate()`, then `sample()` (passes until a stop rule says stop) or passes of the
    caller's own (`timed_pass()`).

    `flush` runs before each timed call, outside its events (the L2 flush; default
    nothing). With `blocking`, calls are queued `chunk` at a time behind a spin; one
    SpinCover serves every chunk, or with `cover_per_chunk` each chunk position of a pass
    keeps its own across passes (the replay, whose chunks hold different ops). With
    `judge`, a pass whose chunk the spin did not cover is left out (see
    SpinCover.end_and_judge); without, every pass is kept."""

    def __init__(self, torch: Any, device: Any, *, flush: Callable[[], None] | None = None,
                 blocking: bool = True, chunk: int = SPIN_CHUNK,
                 cover_per_chunk: bool = False, judge: bool = False) -> None:
        self.torch, self.device = torch, device
        self.flush: Callable[[], None] = flush or _nothing
        self.blocking, self.chunk = blocking, chunk
        self.cover_per_chunk, self.judge = cover_per_chunk, judge
        self.phase: Phase | None = None  # None: not started
        self.phases: list[Phase] = []  # the phases entered, in order
        self.covers: list[SpinCover] = []
        self.clock_ratios: list[float] = []  # a pass's SM clock, as a share of its maximum
        self._chunk_enqueue_s = 0.0

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def _enter(self, phase: Phase) -> None:
        if phase is not self.phase:
            self.phase = phase
            self.phases.append(phase)

    def warm_up(self, run: Callable[[int], Any], calls: int, min_time: float = 0.0,
                timed: bool = True) -> list[float]:
        """Phase 1 (see warm_up()): `timed`, each run on an idle device and its host time
        to enqueue returned, the device synchronized after the last; else runs only."""
        self._enter(Phase.WARM_UP)
        if not timed:
            return warm_up(run, calls, min_time)
        times = warm_up(run, calls, min_time, self.sync)
        self.sync()
        return times

    def calibrate(self, chunk_enqueue_s: float) -> None:
        """Phase 2: with `blocking`, the spin kernel's rate on this device (measured once
        per process); each chunk's first spin sized for `chunk_enqueue_s` of host time to
        enqueue it. Forgets the covers of earlier passes."""
        self._enter(Phase.CALIBRATION)
        if self.blocking:
            with self.torch.cuda.device(self.device):
                spin_rate(self.torch)
        self._chunk_enqueue_s = chunk_enqueue_s
        self.covers = []

    def cover(self, index: int) -> SpinCover:
        """The SpinCover of a pass's chunk `index`."""
        index = index if self.cover_per_chunk else 0
        while len(self.covers) <= index:
            self.covers.append(SpinCover(self.torch, self._chunk_enqueue_s))
        return self.covers[index]

    def uncovered(self) -> int:
        """Chunks (of every pass since calibrate()) that outlasted their spin."""
        return sum(c.uncovered for c in self.covers)

    def timed_pass(self, per: int = 1, host_times: bool = False) -> TimedPass:
        """Phase 3: a new pass (see TimedPass)."""
        self._enter(Phase.SAMPLING)
        return TimedPass(self, per, host_times)

    def sample(self, rule: StopCriterion, queue: Callable[[TimedPass], Any], *, per: int = 1,
               host_times: bool = False, clock: ClockReader | None = None,
               min_clock_ratio: float = 0.0) -> Sampled:
        """Phase 3: passes until `rule` decides (see sample_until); `queue(p)` queues one
        pass's calls on `p`. With `clock`, the SM clock is read as each pass starts to
        run and as it ends (a clock falling during it, as at a power cap, shows in the
        second): the lower reading counts, and a pass below `min_clock_ratio` is
        throttled."""

        def take_batch() -> tuple[list[float], list[float], bool]:
            timing = self.timed_pass(per, host_times)
            queue(timing)
            times = timing.finish(clock)
            if timing.clock_ratio is not None:
                self.clock_ratios.append(timing.clock_ratio)
            if not timing.kept:  # launch gaps in a pass the spin should have covered
                return [], [], True
            keep = timing.clock_ratio is None or timing.clock_ratio >= min_clock_ratio
            return times, timing.host_times or [], keep

        return sample_until(rule, take_batch)


def _nothing() -> None:
    """The flush of a hot-cache measurement."""


class TimedPass:
    """A pass of the sampling phase: calls queued after the flush and between a pair of
    events (in chunks behind a spin each, when the sampler is blocking), read after one
    synchronization. `per`: calls a pair times (a graph replay's); `host_times`: record
    each call's host time to enqueue, per call."""

    def __init__(self, sampler: GpuSampler, per: int = 1, host_times: bool = False) -> None:
        self.sampler = sampler
        self.events = EventPairs(sampler.torch)
        self.per = per
        self.host_times: list[float] | None = [] if host_times else None
        self.calls = 0
        self.kept = True  # False: judged, a chunk was left out
        self.clock_ratio: float | None = None
        self._cover: SpinCover | None = None

    def time(self, call: Callable[..., Any], args: Sequence[Any] = (),
             kwargs: dict[str, Any] | None = None, *,
             prepare: Callable[[], Sequence[Any]] | None = None,
             within: Callable[[], contextlib.AbstractContextManager] | None = None) -> Any:
        """Queue `call(*args, **kwargs)` between a pair of events; its result. A chunk's
        first call ends the chunk before and queues a spin; then, untimed, `prepare()`
        (its result replaces `args`) and the flush; the events and the call run inside
        `within()` when given (the profiler's range)."""
        sampler = self.sampler
        if sampler.blocking and self.calls % sampler.chunk == 0:
            self._end_chunk()
            self._cover = sampler.cover(self.calls // sampler.chunk)
            self._cover.begin()
        self.calls += 1
        if prepare is not None:
            args = prepare()
        sampler.flush()
        with within() if within is not None else _NO_CONTEXT:
            if self.host_times is None:
                return self.events.around(call, *args, **(kwargs or {}))
            t0 = time.perf_counter()
            out = self.events.around(call, *args, **(kwargs or {}))
            self.host_times.append((time.perf_counter() - t0) / self.per)
            return out

    def _end_chunk(self) -> None:
        if self._cover is not None:
            if not self._cover.end_and_judge() and self.sampler.judge:
                self.kept = False
            self._cover = None

    def finish(self, clock: ClockReader | None = None) -> list[float]:
        """End the chunk being queued, synchronize, and return each call's device
        seconds (`kept` then says whether to use them). With `clock`, `clock_ratio` is
        the lower of its readings before and after the synchronization."""
        self._end_chunk()
        started = clock.ratio() if clock is not None else None
        self.sampler.sync()
        ended = clock.ratio() if clock is not None else None
        readings = [r for r in (started, ended) if r is not None]
        self.clock_ratio = min(readings) if readings else None
        return self.events.seconds(self.per)


def sample_until(rule: StopCriterion,
                 take_batch: Callable[[], tuple[list[float], list[float], bool]],
                 clock: Callable[[], float] = time.perf_counter) -> Sampled:
    """Take batches until `rule` says stop: `take_batch()` gives (samples, their host
    times, whether kept: False for a throttled clock). If no batch ran at full clock, the
    throttled ones are judged once THROTTLED_PATIENCE samples are in (clocks ramping up
    pass sooner) or at the timeout, and returned with `all_below_clock` in the decision
    and nothing counted as dropped: a GPU whose clocks are locked low is measured, not
    refused. `clock` is injectable for tests."""
    samples: list[float] = []
    hosts: list[float] = []
    low: list[float] = []
    low_hosts: list[float] = []
    kept, throttled = RunningStats(), RunningStats()
    kept_noise, throttled_noise = NoiseHistory(), NoiseHistory()
    started = clock()
    warm = WarmUp(0, 0.0)  # the samples left out as warm-up (a StopRule's, checked)
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
                return Sampled(low, low_hosts, 0,
                               dataclasses.replace(decision, all_below_clock=True))
            if isinstance(rule, StopRule):  # a fixed count is taken as it is
                cut = warm_up_end(samples)
                if cut:  # the first samples were still getting faster: left out
                    warm = WarmUp(warm.calls + cut, warm.seconds + math.fsum(samples[:cut]),
                                  warm.dropped_blocks + cut)
                    samples, hosts = samples[cut:], hosts[cut:]
                    kept, kept_noise = RunningStats(), NoiseHistory()
                    kept.extend(samples)
                    if elapsed < rule.max_time:  # time left: sample on
                        continue
                    # time is up: the kept samples, tested once more, are what is told,
                    # and what the decision counts (at the timeout, rsd or noise: the
                    # steady rule's history went with the dropped samples)
                    warm = dataclasses.replace(warm, stationary=still_stationary(samples))
                    redecided = rule.decide(kept, elapsed)
                    assert redecided is not None  # elapsed >= max_time: it stops
                    decision = redecided
                decision = dataclasses.replace(decision, warm_up=dataclasses.replace(
                    warm, tested=len(samples) >= MIN_BLOCKS_TESTED).to_dict())
            return Sampled(samples, hosts, len(low), decision)


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
