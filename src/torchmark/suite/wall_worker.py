"""The process that measures wall times of suite cases (never under valgrind).

    python -m torchmark.suite.wall_worker --requests FD --responses FD

Each request names a case's TimerArgs (and, for C++, the bundle library holding it);
the reply carries `blocked_autorange`'s measurement or the error the case raised.
"""

from __future__ import annotations

import argparse
import os
import traceback

from torchmark.callgrind.framing import recv_frame, send_frame


def measure(request: dict) -> dict:
    from torchmark.suite.timer_args import TimerArgs

    cpus = request.get("cpus")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    args = TimerArgs.from_dict(request["timer_args"])
    timer = args.timer()
    if request.get("library"):
        timer._timer.use_library(request["library"], request["entry_suffix"])
    m = timer.blocked_autorange(min_run_time=request["min_run_time"])
    return {"median": m.median, "mean": m.mean, "iqr": m.iqr,
            "number_per_run": m.number_per_run, "times": list(m.times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--responses", type=int, required=True)
    args = parser.parse_args()
    import torch  # noqa: F401  (paid once, before the first request)

    send_frame(args.responses, {"ready": True, "pid": os.getpid()})
    while True:
        request = recv_frame(args.requests)
        if request is None or request.get("op") == "shutdown":
            return
        try:
            reply = {"ok": True, "wall": measure(request)}
        except BaseException as e:  # reported per case; the worker goes on
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}".strip(),
                     "traceback": traceback.format_exc()}
        send_frame(args.responses, reply)


if __name__ == "__main__":
    main()
