"""SIGTERM (a scheduler or a CI job stopping the work) handled as Ctrl-C is, so that a
stopped run still writes its files and is marked interrupted; and a note of each such
signal, so that a Ctrl-C a library turned into its own error (pydantic-core building a
validator raised SchemaError) is still told as an interrupt. The CLI's commands and the
pytest plugin's recording session use the one mechanism."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that runs write their footer and say what was not
    run."""


_interrupts: list[int] = []  # the signals that interrupted the present body


def interrupted_by() -> int | None:
    """The signal that interrupted the body (SIGINT or SIGTERM), if one did."""
    return _interrupts[-1] if _interrupts else None


@contextlib.contextmanager
def sigterm_as_interrupt(*, only_unhandled: bool = False) -> Iterator[None]:
    """Within the body (in the main thread; elsewhere nothing changes), SIGTERM raises
    Terminated and Ctrl-C KeyboardInterrupt, each noted. A child process forked meanwhile
    meets SIGTERM as it would have without this (it dies of it). `only_unhandled`: only
    when SIGTERM has its default handling (a pytest session: not over a test suite's own
    handler). Each handler is put back after, unless the body set another meanwhile."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if only_unhandled and previous is not signal.SIG_DFL:
        yield
        return
    _interrupts.clear()  # this body's only
    owner = os.getpid()

    def terminate(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a forked child: handled as it was before
            if callable(previous):
                previous(signum, frame)
                return
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        _interrupts.append(signum)
        raise Terminated()

    def interrupt(signum: int, frame: Any) -> None:
        _interrupts.append(signum)
        raise KeyboardInterrupt

    previous_int = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGTERM, terminate)
    if previous_int is signal.default_int_handler:  # not when Ctrl-C is ignored
        signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is terminate:
            signal.signal(signal.SIGTERM, previous)
        if signal.getsignal(signal.SIGINT) is interrupt:
            signal.signal(signal.SIGINT, previous_int)
