"""The wall-time worker's protocol: typed requests and replies over pipes."""

from __future__ import annotations

import os
import threading

from torchmark.core.framing import recv_frame, send_frame
from torchmark.suite.timer_args import TimerArgs
from torchmark.suite.wall_messages import (
    Stop,
    WallFailed,
    WallRequest,
    WallTimes,
    WorkerReady,
)
from torchmark.suite.wall_worker import serve


def test_the_worker_answers_each_request_with_a_typed_reply():
    requests_r, requests_w = os.pipe()
    responses_r, responses_w = os.pipe()
    worker = threading.Thread(target=serve, args=(requests_r, responses_w))
    worker.start()
    try:
        assert isinstance(recv_frame(responses_r), WorkerReady)
        args = TimerArgs(stmt="x + 1", setup="x = 1")
        send_frame(requests_w, WallRequest(timer_args=args.to_dict(), min_run_time=0.01))
        times = recv_frame(responses_r)
        assert isinstance(times, WallTimes) and times.median > 0 and times.times
        assert times.to_dict()["times"] == list(times.times)
        send_frame(requests_w, WallRequest(timer_args=TimerArgs(stmt="1 / 0").to_dict(),
                                           min_run_time=0.01))
        failed = recv_frame(responses_r)
        assert isinstance(failed, WallFailed) and failed.error.startswith("ZeroDivisionError")
        send_frame(requests_w, {"op": "collect"})  # not a message of this protocol
        assert "not a WallRequest" in recv_frame(responses_r).error
        send_frame(requests_w, Stop())
        worker.join(timeout=30)
        assert not worker.is_alive()
    finally:
        for fd in (requests_r, requests_w, responses_r, responses_w):
            os.close(fd)
