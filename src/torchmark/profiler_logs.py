"""torch's profiler and execution-trace observer write log lines to the process's stderr,
from C++, as they start and stop (`USDT: ... profiler_start`, `[W... Enabling Execution
Trace Observer`): lines that tell a torchmark user nothing. `quiet()` holds stderr's file
descriptor around such a call and passes every other line on."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

_NOISE = re.compile(r"^(?:USDT:|STAGE:)|execution_trace_observer\.cpp:\d+\] "
                    r"(?:Enabling|Disabling) Execution Trace Observer")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Drop the profiler's start and stop log lines written to stderr within the body
    (keep the body short: the other lines it writes come out when it ends)."""
    fd = 2  # where torch's C++ logging writes, whatever sys.stderr is
    try:
        os.fstat(fd)
    except OSError:  # no stderr at all
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), fd)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().decode(errors="replace").splitlines(True)
                    if not _NOISE.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


@contextlib.contextmanager
def quietly_entered(manager: Any) -> Iterator[Any]:
    """`with manager` (a torch profiler), its start and stop under `quiet()` and its body
    not."""
    with quiet():
        value = manager.__enter__()
    try:
        yield value
    except BaseException:
        with quiet():
            suppressed = manager.__exit__(*sys.exc_info())
        if not suppressed:
            raise
    else:
        with quiet():
            manager.__exit__(None, None, None)
