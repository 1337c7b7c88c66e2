"""Saying what a long wait is for: a spinner with the phase and the seconds elapsed, on a
terminal's stderr, once a wait has lasted 2 s (compiling a C++ snippet, starting
valgrind, building a precompiled header...). Nothing is shown off a terminal, unless
TORCHMARK_PROGRESS=1 (0 turns it off everywhere)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

AFTER_S = 2.0


def progress_wanted() -> bool:
    setting = os.environ.get("TORCHMARK_PROGRESS", "")
    if setting in ("0", "1"):
        return setting == "1"
    return sys.stderr.isatty()


@contextlib.contextmanager
def announced(message: str, after: float = AFTER_S) -> Iterator[None]:
    """Within the body: after `after` seconds, `message` and the elapsed seconds on
    stderr (a rich spinner on a terminal, one plain line otherwise), cleared at the end."""
    if not progress_wanted():
        yield
        return
    stop = threading.Event()
    started = time.monotonic()

    def show() -> None:
        if stop.wait(after):
            return
        from rich.console import Console

        console = Console(stderr=True)
        if not console.is_terminal:  # forced on (TORCHMARK_PROGRESS=1): one plain line
            sys.stderr.write(f"torchmark: {message}...\n")
            sys.stderr.flush()
            stop.wait()
            return
        with console.status(message) as status:
            while not stop.wait(0.25):
                status.update(f"{message} ({time.monotonic() - started:.0f} s)")

    thread = threading.Thread(target=show, daemon=True, name="torchmark-announce")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)
