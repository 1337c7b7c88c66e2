"""Per-call GPU time: CUDA events around each call, L2 control, launch-overhead hiding,
CUDA-graph replay, clock-throttle awareness and a noise-based stopping rule.

Modes:
- "events": events around each call (the device time includes any launch gap the CPU
  leaves between kernels of one call);
- "blocking": a spin kernel queued first keeps the GPU busy while the CPU enqueues a
  batch of calls, so none of them waits for a launch (nvbench's blocking kernel);
- "graph": `graph_calls` calls captured in a CUDA graph; each sample is one replay,
  reported per call (with `l2="cold"` the flush runs before each replay, so only the
  first call of a replay starts cold).

With `l2="cold"` a device buffer the size of the L2 is zeroed before each call, outside
the events; "hot" leaves the cache as the previous call left it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from torchmark.timing.stopping import StopRule

MODES = ("events", "blocking", "graph")
L2_MODES = ("cold", "hot")
BATCH = 10


@dataclasses.dataclass(frozen=True)
class DeviceTimeOptions:
    l2: str = "cold"
    mode: str = "events"
    rule: StopRule = StopRule()
    min_clock_ratio: float = 0.75  # samples taken below this share of the max SM clock drop
    graph_calls: int = 10

    def __post_init__(self) -> None:
        if self.l2 not in L2_MODES:
            raise ValueError(f"device time: l2 must be 'cold' or 'hot', got {self.l2!r}")
        if self.mode not in MODES:
            raise ValueError(f"device time: mode must be one of {', '.join(MODES)}, "
                             f"got {self.mode!r}")
        if not 0 <= self.min_clock_ratio <= 1:
            raise ValueError(f"device time: min_clock_ratio must be in [0, 1], got "
                             f"{self.min_clock_ratio!r}")
        if isinstance(self.graph_calls, bool) or not isinstance(self.graph_calls, int) \
                or self.graph_calls < 1:
            raise ValueError(f"device time: graph_calls must be a positive int, got "
                             f"{self.graph_calls!r}")


def _nothing() -> None:
    """The flush of a hot-cache measurement."""


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("device time needs a CUDA device, and torch.cuda.is_available() is "
                           "False here; use blocked_autorange() for host time")


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
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(name)
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self.max_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM)
        except Exception as e:  # no NVML: report that the check did not run
            self.handle = None
            self.note = f"SM clock not checked ({type(e).__name__}: install nvidia-ml-py)"

    @classmethod
    def for_device(cls, torch: Any, device: Any) -> SmClock:
        """The clock of a torch CUDA device (its current index when none is given)."""
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        return cls(index, str(uuid) if uuid is not None else None)

    def ratio(self) -> float | None:
        if self.handle is None or not self.max_mhz:
            return None
        mhz = self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
        return mhz / self.max_mhz


def _spin(torch, seconds: float) -> None:
    """Queue a kernel that keeps the GPU busy for about `seconds`."""
    rate = torch.cuda.get_device_properties(torch.cuda.current_device()).clock_rate * 1e3
    torch.cuda._sleep(int(max(seconds, 1e-5) * (rate or 1.5e9)))


def measure_device_time(call: Callable[[], Any], options: DeviceTimeOptions,
                        device: Any = None) -> tuple[list[float], list[float], dict[str, Any]]:
    """(device seconds per call, host launch seconds per call, report)."""
    import torch

    require_cuda()
    device = torch.device(device or "cuda")
    flush: Callable[[], None] = _nothing
    if options.l2 == "cold":
        from torchmark.timing.l2 import L2Flusher

        flush = L2Flusher(device).flush
    per_sample = 1
    timed = call
    if options.mode == "graph":
        timed, per_sample = capture_graph(call, options.graph_calls), options.graph_calls
    for _ in range(3):  # warm-up: lazy init, allocator, autotuning
        timed()
    torch.cuda.synchronize(device)
    clock = SmClock.for_device(torch, device)
    launch = [0.0]

    def take_batch() -> tuple[list[float], list[float], bool]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(BATCH)]
        hosts = []
        if options.mode == "blocking":
            _spin(torch, 2 * launch[0] + 2e-4)
        for start, end in events:
            flush()
            t0 = time.perf_counter()
            start.record()
            timed()
            end.record()
            hosts.append((time.perf_counter() - t0) / per_sample)
        torch.cuda.synchronize(device)
        launch[0] = sum(hosts) * per_sample
        ratio = clock.ratio()
        keep = ratio is None or ratio >= options.min_clock_ratio
        return [s.elapsed_time(e) / 1000.0 / per_sample for s, e in events], hosts, keep

    device_times, host_times, dropped, decision = sample_until(options.rule, take_batch)
    report = {"clock": "cuda_events", "l2": options.l2, "mode": options.mode,
              "stop": decision, "dropped_low_clock": dropped,
              "clock_check": clock.note or f"samples below {options.min_clock_ratio:.0%} of "
                                           "the max SM clock dropped"}
    return device_times, host_times, report


def sample_until(rule: StopRule, take_batch: Callable[[], tuple[list[float], list[float], bool]],
                 clock: Callable[[], float] = time.perf_counter
                 ) -> tuple[list[float], list[float], int, dict[str, Any]]:
    """Take batches until `rule` says stop: (kept samples, their host times, samples dropped
    for a throttled clock, the decision). `clock` is injectable for tests."""
    samples: list[float] = []
    hosts: list[float] = []
    dropped = 0
    started = clock()
    while True:
        batch, batch_hosts, keep = take_batch()
        if keep:
            samples += batch
            hosts += batch_hosts
        else:
            dropped += len(batch)
        decision = rule.decide(samples, clock() - started)
        if decision is not None:
            if not samples:
                raise RuntimeError(f"device time: all {dropped} samples were taken while the "
                                   "GPU clock was throttled; nothing to report")
            return samples, hosts, dropped, decision


def capture_graph(call: Callable[[], Any], calls: int = 1) -> Callable[[], Any]:
    """A CUDA graph of `calls` calls (after a warm-up on a side stream); its replay."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    return graph.replay
