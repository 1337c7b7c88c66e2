"""The process that measures wall times of suite cases (never under valgrind).

    python -m torchmark.suite.wall_worker --requests FD --responses FD [--log FILE]

Each request names a case's TimerArgs (and, for C++, the bundle library holding it);
the reply carries `blocked_autorange`'s measurement or the error the case raised. A
worker whose parent vanished (killed, so it never asked the worker to stop) removes its
log file, which the parent would have removed, and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import traceback

from torchmark.core.framing import recv_frame, send_frame
from torchmark.core.worker import enter_driver_folder
from torchmark.suite.wall_messages import (
    Stop,
    WallFailed,
    WallRequest,
    WallTimes,
    WorkerReady,
)


def measure(request: WallRequest) -> WallTimes:
    from torchmark.suite.timer_args import TimerArgs

    if request.cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, request.cpus)
    timer = TimerArgs.from_dict(request.timer_args).timer()
    if request.library:
        timer._timer.use_library(request.library, request.entry_suffix)
    m = timer.blocked_autorange(min_run_time=request.min_run_time)
    return WallTimes(median=m.median, mean=m.mean, iqr=m.iqr,
                     number_per_run=int(m.number_per_run), times=tuple(m.times))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--responses", type=int, required=True)
    parser.add_argument("--log", help="this worker's log file (its stdout and stderr)")
    args = parser.parse_args()
    enter_driver_folder()
    import torch  # noqa: F401  (paid once, before the first request)

    try:
        serve(args.requests, args.responses)
    except BrokenPipeError:  # the parent is gone: no one will read the log
        pass
    else:
        return
    if args.log:
        with contextlib.suppress(OSError):
            os.unlink(args.log)


def serve(requests: int, responses: int) -> None:
    """Answer requests until asked to stop; BrokenPipeError when the parent vanished
    (end of its requests without a shutdown, or a reply it cannot receive)."""
    send_frame(responses, WorkerReady(os.getpid()))
    while True:
        request = recv_frame(requests)
        if request is None:
            raise BrokenPipeError("the parent closed the request pipe without a shutdown")
        if isinstance(request, Stop):
            return
        reply: WallTimes | WallFailed
        try:
            if not isinstance(request, WallRequest):
                raise TypeError(f"not a WallRequest: {type(request).__name__}")
            reply = measure(request)
        except BaseException as e:  # reported per case; the worker goes on
            reply = WallFailed(error=f"{type(e).__name__}: {e}".strip(),
                               traceback=traceback.format_exc())
        send_frame(responses, reply)


if __name__ == "__main__":
    main()
