"""SIGTERM handled like Ctrl-C, so that a stopped run still writes its footer; and a
note of every Ctrl-C, so that one a library turned into its own error (pydantic-core
building a validator raised SchemaError) is still told as an interrupt."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler stopping the job), raised like Ctrl-C so that runs write their
    footer and say what was not run."""


_interrupts: list[int] = []  # the signals that interrupted this command line


def _terminate(signum, frame) -> None:
    _interrupts.append(signum)
    raise Terminated()


def _interrupt(signum, frame) -> None:
    _interrupts.append(signum)
    raise KeyboardInterrupt


def interrupted_by() -> int | None:
    """The signal that interrupted the command (SIGINT or SIGTERM), if one did."""
    return _interrupts[-1] if _interrupts else None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the body, SIGTERM raises Terminated and Ctrl-C KeyboardInterrupt, each
    noted (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _interrupts.clear()  # this command line's only
    previous = signal.signal(signal.SIGTERM, _terminate)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # not when Ctrl-C is ignored
        signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
