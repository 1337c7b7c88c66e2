"""Recording an execution trace of a user's program (with op durations beside it)."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from torchmark.profiler_logs import quiet


def timing_path(trace_path: str | os.PathLike) -> Path:
    """Where the durations of a trace's ops go: `run.json` -> `run.kineto.json`."""
    path = Path(trace_path)
    name = path.name[:-len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(name + ".kineto.json")


@contextlib.contextmanager
def record(path: str | os.PathLike, *, with_timing: bool = True,
           on_timing_cut: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Record what the body runs as an execution trace at `path`; with `with_timing`
    also a profiler trace (`timing_path(path)`) whose op durations let a replay report
    its time-weighted coverage.

    Only one torch profiler runs at a time (two crash inside torch): if the body starts
    its own, the durations recorded so far are written and the timing stops there, with
    a message to `on_timing_cut` (default: a warning); the execution trace goes on to the
    end."""
    from torch.profiler import ExecutionTraceObserver

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    timing_path(path).unlink(missing_ok=True)  # an older run's durations are not this one's
    with quiet():
        observer = ExecutionTraceObserver().register_callback(str(path))
        observer.start()
    timing = _TimingProfiler(timing_path(path), on_timing_cut) if with_timing else None
    try:
        if timing is not None:
            timing.start()
        yield path
    finally:  # a body that raised still leaves the trace and durations of what it ran
        try:
            if timing is not None:
                timing.stop()
        finally:
            with quiet():
                observer.stop()
                observer.unregister_callback()


CUT_KEY = "torchmark_timing_cut"  # in a durations file that stops before the trace does


def _mark_cut(out: Path) -> None:
    """Say in the durations file that it stops where the program's own profiler began,
    so a replay can tell its time-weighted coverage covers the ops before that only."""
    import json

    from torchmark.core.atomic_files import write_atomically

    try:
        data = json.loads(out.read_text())
        data[CUT_KEY] = True
        write_atomically(out, json.dumps(data))
    except (OSError, ValueError, TypeError):  # no file, or not an object: nothing to mark
        pass


class _TimingProfiler:
    """The op durations beside an execution trace: a kineto profiler that gives way when
    the recorded program starts a profiler of its own."""

    def __init__(self, out: Path, on_cut: Callable[[str], None] | None = None) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.out, self.on_cut = out, on_cut
        self.profiler = profile(activities=activities)
        self.active = False
        self._patched: tuple[type, object] | None = None

    def start(self) -> None:
        import torch
        import torch.autograd.profiler as autograd_profiler

        if torch._C._autograd._profiler_enabled():  # the caller's own is running: keep it
            self._say(f"a torch profiler is already running: no op durations are recorded "
                      f"({self.out} is not written); the execution trace is")
            return
        with quiet():
            self.profiler.start()
        self.active = True
        # every torch profiler (torch.profiler.profile, torch.autograd.profiler.profile)
        # prepares its trace here before it enables kineto: the program's own comes later
        cls = autograd_profiler.profile
        original = cls._prepare_trace
        timing = self

        def prepare_trace(profiler_self, *args, **kwargs):
            timing.give_way()
            return original(profiler_self, *args, **kwargs)

        cls._prepare_trace = prepare_trace  # type: ignore[method-assign,assignment]
        self._patched = (cls, original)

    def give_way(self) -> None:
        """Stop and write the durations so far: the program starts its own profiler."""
        if not self.active:
            return
        self._finish()
        _mark_cut(self.out)
        self._say(f"the recorded program started its own torch profiler: the op durations "
                  f"in {self.out} stop there (one profiler runs at a time); the execution "
                  "trace goes on")

    def _say(self, message: str) -> None:
        if self.on_cut is not None:
            self.on_cut(message)
        else:
            warnings.warn(message, stacklevel=5)

    def stop(self) -> None:
        if self._patched is not None:
            cls, original = self._patched
            cls._prepare_trace = original  # type: ignore[attr-defined]
            self._patched = None
        if self.active:
            self._finish()

    def _finish(self) -> None:
        self.active = False
        with quiet():
            self.profiler.stop()
        self.profiler.export_chrome_trace(str(self.out))
