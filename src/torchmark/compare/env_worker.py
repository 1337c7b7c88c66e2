"""The worker of a cross-environment A/B (env_ab.py), run by another Python environment's
interpreter with the driver's torchmark on its PYTHONPATH:

    PY -m torchmark.compare.env_worker --requests FD --responses FD

It imports that environment's torch (or says it cannot: StartFailed), makes one Timer
(Prepare), then times blocks of it or counts its instructions with its own callgrind
collector, one request at a time (env_messages.py). A request that raises is answered
with Failed and the worker goes on; it exits on Stop or when the driver is gone."""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import traceback
from typing import Any

from torchmark.compare.env_messages import (
    ClockOverhead,
    CountBlock,
    EstimateBlock,
    Failed,
    Prepare,
    Prepared,
    StartFailed,
    Stop,
    TimeBlock,
    Value,
    WorkerReady,
)
from torchmark.core.errors import error_line
from torchmark.core.framing import recv_frame, send_frame
from torchmark.core.worker import enter_driver_folder


class Session:
    """The one Timer a worker measures, made by Prepare."""

    def __init__(self) -> None:
        self.timer: Any = None

    def answer(self, request: Any) -> Any:
        if isinstance(request, Prepare):
            return self.prepare(request)
        if self.timer is None:
            raise RuntimeError(f"{type(request).__name__} before Prepare")
        timer = self.timer
        if isinstance(request, EstimateBlock):
            return Value(timer._estimate_block_size(request.min_run_time))
        if isinstance(request, TimeBlock):
            with timer._threads():
                return Value(timer._timeit(request.number))
        if isinstance(request, ClockOverhead):
            with timer._threads():
                return Value(timer._clock_overhead())
        if isinstance(request, CountBlock):
            stats = timer.collect_callgrind(request.number, repeats=1,
                                            collect_baseline=False)
            return Value(stats[0])
        raise TypeError(f"not a request: {type(request).__name__}")

    def prepare(self, request: Prepare) -> Prepared:
        import torchmark
        from torchmark.core.provenance import Provenance
        from torchmark.timing.timer_class import Timer

        self.timer = Timer(request.stmt, request.setup, num_threads=request.num_threads,
                           label=request.label, env=request.env)
        if request.metric == "instructions":  # valgrind brings up Python and torch (~20 s)
            from torchmark.callgrind.collector import default_host

            default_host().launch()  # while the other environment's host starts too
        provenance = Provenance.capture(env=request.env, command=list(request.command))
        # the torchmark that runs here is the driver's (on PYTHONPATH), whatever this
        # environment may have installed under that name
        provenance = dataclasses.replace(provenance,
                                         torchmark_version=torchmark.__version__)
        cpus = tuple(sorted(os.sched_getaffinity(0))) \
            if hasattr(os, "sched_getaffinity") else ()
        return Prepared(self.timer.task_spec, provenance, cpus)


def serve(requests: int, responses: int) -> None:
    """Answer requests until Stop; BrokenPipeError when the driver vanished."""
    session = Session()
    while True:
        request = recv_frame(requests)
        if request is None:
            raise BrokenPipeError("the driver closed the request pipe without a Stop")
        if isinstance(request, Stop):
            return
        try:
            reply = session.answer(request)
        except BaseException as e:  # the statement's own errors, sys.exit() included
            if isinstance(e, KeyboardInterrupt):
                raise
            reply = Failed(error_line(e), traceback.format_exc())
        send_frame(responses, reply)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--responses", type=int, required=True)
    args = parser.parse_args()
    enter_driver_folder()
    try:
        import torch
    except BaseException as e:  # ImportError, or a broken build failing as it loads
        if isinstance(e, KeyboardInterrupt):
            raise
        send_frame(args.responses, StartFailed(f"cannot import torch ({error_line(e)})"))
        return
    send_frame(args.responses, WorkerReady(
        os.getpid(), f"{platform.python_implementation()} {platform.python_version()}",
        str(torch.__version__), os.path.dirname(torch.__file__ or "")))
    try:
        serve(args.requests, args.responses)
    except BrokenPipeError:  # the driver is gone
        pass


if __name__ == "__main__":
    main()
