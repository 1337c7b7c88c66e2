"""Recording an execution trace of a user's program (with op durations beside it)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def timing_path(trace_path: str | os.PathLike) -> Path:
    """Where the durations of a trace's ops go: `run.json` -> `run.kineto.json`."""
    path = Path(trace_path)
    name = path.name[:-len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(name + ".kineto.json")


@contextlib.contextmanager
def record(path: str | os.PathLike, *, with_timing: bool = True) -> Iterator[Path]:
    """Record what the body runs as an execution trace at `path`; with `with_timing`
    also a profiler trace (`timing_path(path)`) whose op durations let a replay report
    its time-weighted coverage."""
    import torch
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    observer = ExecutionTraceObserver().register_callback(str(path))
    if not with_timing:
        observer.start()
        try:
            yield path
        finally:
            observer.stop()
            observer.unregister_callback()
        return
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    prof = profile(activities=activities, execution_trace_observer=observer)
    try:
        with prof:
            yield path
    finally:  # a body that raised still leaves the durations of what it ran
        prof.export_chrome_trace(str(timing_path(path)))
