"""Memory per call, from torch's own allocator, not the process's RSS:

- on CPU, the profiler's memory events (`profile_memory=True`: one event an allocation
  or free, with its bytes, from c10's CPU allocator), walked in order;
- on CUDA, the caching allocator's statistics (`torch.cuda.memory_stats`) read before
  and after the call, with its peak reset.

Each sample is one call: the peak bytes allocated above the level the call started at,
the bytes allocated in all, the number of allocations, the bytes it left allocated
(what it kept), and on CUDA the peak bytes the caching allocator reserved above its
starting level. Counts are exact (no timing involved), so the samples of a statement
that does the same work each call are equal; samples that differ are reported (a
caching allocator warming up, a statement that keeps what it allocates, a cache filled
on first use).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from torchmark.core.task_spec import TaskLabels, TaskSpec

SCHEMA_NAME = "torchmark.memory"
SCHEMA_VERSION = 1
DEFAULT_SAMPLES = 5
DEFAULT_WARM_UP = 1  # calls before sampling: a first call's one-off allocations
MAX_MEMORY_SAMPLES = 1000
FIELDS = ("peak", "allocated", "allocations", "retained", "reserved")


@dataclasses.dataclass(frozen=True)
class MemorySample:
    """One call's allocations: bytes at the peak above the starting level, bytes and
    number of allocations in all, bytes still allocated at its end (negative: it freed
    more than it allocated), and on CUDA the caching allocator's reserved bytes at their
    peak above the starting level (None on CPU)."""

    peak: int
    allocated: int
    allocations: int
    retained: int
    reserved: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@contextlib.contextmanager
def sampling(device: Any = None) -> Iterator[list[MemorySample]]:
    """The allocations of the body as one sample, appended to the list it yields when
    the body ends: on `device` (a CUDA torch.device) from the caching allocator's
    statistics, else on the CPU from the profiler's memory events."""
    taken: list[MemorySample] = []
    if device is not None:
        import torch

        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_stats(device)
        yield taken
        torch.cuda.synchronize(device)
        taken.append(_from_stats(before, torch.cuda.memory_stats(device)))
        return
    from torch.profiler import ProfilerActivity, profile

    from torchmark.profiler_logs import quietly_entered

    with quietly_entered(profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                                 record_shapes=False)) as prof:
        yield taken
    taken.append(_walk(prof.profiler.kineto_results.events()))


def sample(call: Callable[[], Any], device: Any = None) -> MemorySample:
    """One call's allocations (see `sampling`: on `device` when it is a CUDA one, else
    on the CPU)."""
    with sampling(device) as taken:
        call()
    return taken[0]


def columns(samples: Sequence[MemorySample], reserved: bool) -> dict[str, list[int]]:
    """The samples as one list a field (FIELDS; `reserved` only when asked: CUDA's)."""
    return {name: [getattr(s, name) for s in samples] for name in FIELDS
            if name != "reserved" or reserved}


def _walk(events: Any) -> MemorySample:
    """The sample that a session's memory events make, in the order they happened."""
    changes = sorted(((e.start_ns(), i, int(e.nbytes())) for i, e in enumerate(events)
                      if e.name() == "[memory]" and e.device_type().name == "CPU"))
    level = peak = allocated = allocations = 0
    for _, _, nbytes in changes:
        level += nbytes
        peak = max(peak, level)
        if nbytes > 0:
            allocated += nbytes
            allocations += 1
    return MemorySample(peak, allocated, allocations, level)


def _from_stats(before: Mapping[str, Any], after: Mapping[str, Any]) -> MemorySample:
    """The sample that the caching allocator's statistics before and after a call make."""
    def get(stats: Mapping[str, Any], key: str) -> int:
        return int(stats.get(key, 0))

    start = get(before, "allocated_bytes.all.current")
    return MemorySample(
        peak=get(after, "allocated_bytes.all.peak") - start,
        allocated=get(after, "allocated_bytes.all.allocated")
        - get(before, "allocated_bytes.all.allocated"),
        allocations=get(after, "allocation.all.allocated") - get(before, "allocation.all.allocated"),
        retained=get(after, "allocated_bytes.all.current") - start,
        reserved=get(after, "reserved_bytes.all.peak") - get(before, "reserved_bytes.all.current"))


@dataclasses.dataclass(frozen=True)
class MemoryMeasurement(TaskLabels):
    """A statement's memory samples, one a call, after `warm_up` calls not sampled."""

    samples: tuple[MemorySample, ...]
    task_spec: TaskSpec
    device: str = "cpu"
    warm_up: int = DEFAULT_WARM_UP

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("MemoryMeasurement: no samples")

    @property
    def steady(self) -> MemorySample:
        """The last sample: the state the statement settles in."""
        return self.samples[-1]

    @property
    def peak(self) -> int:
        return self.steady.peak

    @property
    def allocated(self) -> int:
        return self.steady.allocated

    @property
    def allocations(self) -> int:
        return self.steady.allocations

    # -- what Compare reads of a measurement (compare/layout.py) -----------------------
    quantity: ClassVar[str] = "memory"
    exact: ClassVar[bool] = True  # counts, shown whole

    @property
    def median(self) -> float:
        """The peak bytes a call (the last sample's), as Compare shows it."""
        return float(self.peak)

    @property
    def mean(self) -> float:
        return float(self.peak)

    @property
    def iqr(self) -> float:
        """The samples' peaks' range (0 when they agree): the spread Compare flags."""
        peaks = [s.peak for s in self.samples]
        return float(max(peaks) - min(peaks))

    @property
    def significant_figures(self) -> int:
        return max(len(str(abs(self.peak))), 1)

    @property
    def has_warnings(self) -> bool:
        return bool(self.warnings)

    @property
    def agree(self) -> bool:
        """Whether every sample counted the same (peak, bytes, allocations, kept)."""
        first = self.samples[0]
        return all(dataclasses.replace(s, reserved=None) ==
                   dataclasses.replace(first, reserved=None) for s in self.samples)

    @property
    def warnings(self) -> tuple[str, ...]:
        out = []
        if not self.agree:
            differing = [name for name in FIELDS[:4]
                         if len({getattr(s, name) for s in self.samples}) > 1]
            out.append(f"the {len(self.samples)} samples differ in {', '.join(differing)} "
                       "(a caching allocator warming up, a cache filled on first use, or "
                       "a statement that keeps what it allocates): the last is reported")
        if self.steady.retained > 0:
            out.append(f"each call keeps {self.steady.retained:,} bytes allocated after "
                       "it returns")
        return tuple(out)

    def __repr__(self) -> str:
        return f"<torchmark.MemoryMeasurement object at {hex(id(self))}>\n{self.summary()}"

    def summary(self) -> str:
        """The statement and its counts, with any warnings, as lines."""
        spec = self.task_spec
        head = spec.label or (spec.stmt.splitlines() or ["statement"])[0]
        s = self.steady
        lines = [f"{head}" + (f": {spec.sub_label}" if spec.sub_label else ""),
                 f"  peak {s.peak:,} bytes above the start of a call, {s.allocated:,} bytes "
                 f"in {s.allocations:,} allocation(s) ({self.device})"]
        if s.reserved is not None:
            lines.append(f"  reserved by the caching allocator: {s.reserved:,} bytes at the "
                         "peak above the start")
        lines.append(f"  {len(self.samples)} calls sampled after {self.warm_up} warm-up "
                     f"call(s): {'all equal' if self.agree else 'they differ'}")
        lines += [f"  WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, "device": self.device,
                "warm_up": self.warm_up, "task_spec": dataclasses.asdict(self.task_spec),
                "samples": [s.to_dict() for s in self.samples]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def measure_memory(call: Callable[[], Any], task_spec: TaskSpec, *, device: Any = None,
                   samples: int = DEFAULT_SAMPLES,
                   warm_up: int = DEFAULT_WARM_UP) -> MemoryMeasurement:
    """Sample `call`'s allocations `samples` times, one call each, after `warm_up` calls;
    on `device` (a CUDA torch.device) from the caching allocator, else on the CPU."""
    for _ in range(warm_up):  # sampled and left out: the profiler then knows the size
        sample(call, device)  # of what a warm-up call keeps, when a sampled call frees it
    taken = [sample(call, device) for _ in range(samples)]
    return MemoryMeasurement(tuple(taken), task_spec, str(device) if device else "cpu",
                             warm_up)
