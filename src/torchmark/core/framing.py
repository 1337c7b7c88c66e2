"""Length-prefixed pickle frames over pipe file descriptors."""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from collections.abc import Callable
from typing import Any

_HEADER = struct.Struct("!Q")


def send_frame(fd: int, obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, remaining = [], n
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(fd: int) -> Any:
    """The next object, or None at end of stream."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    payload = _read_exact(fd, length)
    if payload is None:
        return None
    return pickle.loads(payload)


TIMED_OUT = object()


def recv_frame_within(fd: int, timeout: float, alive: Callable[[], bool]) -> Any:
    """The next frame from `fd`; None when the stream ends or the sender dies (`alive()`
    turns false); TIMED_OUT after `timeout` seconds without one."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return TIMED_OUT
        ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
        if ready:
            return recv_frame(fd)
        if not alive():
            return None
