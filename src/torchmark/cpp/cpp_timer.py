"""CppTimer: the inner timer of `Timer(language="cpp")`, backed by a compiled snippet."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import textwrap
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchmark.core.announce import announced
from torchmark.core.errors import MeasurementError, UsageError
from torchmark.cpp.compile_cache import default_builder, wait_for_own_builds
from torchmark.cpp.snippet_source import check_function_body_code


class SnippetError(MeasurementError):
    """The snippet raised a C++ exception (for example a c10::Error) while running."""


# (library, entry suffix) pairs whose state (setup thread, variables) a timer already owns
_STARTED: set[tuple[str, str]] = set()


def _load_private(path: str, entry_suffix: str) -> ctypes.CDLL:
    """The library, with state of its own: a snippet keeps its setup thread and variables
    in the library's globals, and loading one path twice gives the same copy, so a
    second timer of the same snippet loads a private copy (unlinked once loaded)."""
    key = (path, entry_suffix)
    if key not in _STARTED:
        lib = ctypes.CDLL(path)
        _STARTED.add(key)
        return lib
    try:  # beside the library: a temporary folder may be mounted noexec
        fd, copy = tempfile.mkstemp(prefix=".private-", suffix=".so", dir=Path(path).parent)
    except OSError:  # a read-only cache
        fd, copy = tempfile.mkstemp(prefix="torchmark-snippet-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as library:
            shutil.copyfileobj(library, out)
        return ctypes.CDLL(copy)
    finally:
        os.unlink(copy)


def _stop_unless_interrupted(stop, state: dict) -> None:
    """Stop a dropped timer's setup thread, unless an interrupted call may still run
    there (stopping would wait for it)."""
    if not state["interrupted"]:
        stop()


class CppTimer:
    """Compiles `stmt` / `setup` / `global_setup` (or takes them from the cache) and runs
    setup once on a dedicated thread, in `prepare()`, which the Timer calls before it
    times anything; times runs of stmt there.

    Constructed like `timeit.Timer` (`stmt=, setup=, timer=, globals=`) plus
    `global_setup` and `num_threads`.
    """

    def __init__(self, stmt: str, setup: str, global_setup: str = "",
                 timer: Callable[[], float] | None = None,
                 globals: dict[str, Any] | None = None, num_threads: int = 1) -> None:
        if globals:
            raise UsageError("Timer: C++ snippets cannot use globals; declare what the "
                             "statement needs in `setup` (or `global_setup`)")
        self.stmt = textwrap.dedent(stmt)
        self.setup = textwrap.dedent(setup)
        self.global_setup = textwrap.dedent(global_setup)
        check_function_body_code(self.stmt, self.setup)
        self.num_threads = num_threads
        self._lib: ctypes.CDLL | None = None
        self.library_path: str | None = None
        self.entry_suffix = ""
        self._state = {"interrupted": False}  # shared with the finalizer

    def use_library(self, path: str, entry_suffix: str) -> None:
        """Run this snippet from an already built library (a bundle of many snippets,
        see `SnippetBuilder.build_bundle`) instead of compiling it alone."""
        self.library_path, self.entry_suffix = str(path), entry_suffix
        self._lib = None

    def _entry(self, lib: ctypes.CDLL, name: str):
        return getattr(lib, name + self.entry_suffix)

    def build(self) -> str:
        """Compile (or find in the cache) the snippet's library; its path."""
        if self.library_path is None:
            with announced("compiling the C++ snippet (cached for later runs)"):
                self.library_path = str(default_builder().build(self.stmt, self.setup,
                                                                self.global_setup))
        return self.library_path

    def prepare(self) -> None:
        """Compile, load and run setup now, before any timing: the first measurement of
        a new snippet then is the same as a cached one's (a compile, or a header build it
        started in the background, would otherwise run beside the calibration)."""
        if self._lib is None:
            self.build()
            wait_for_own_builds()
            self._lib = self._start()
            # the statement's first runs pay one-time costs (ATen's lazy initialization,
            # the thread pool): 0.2 to 2 ms, enough for the calibration's first block of
            # one run to pass for a full block and time blocks of 1 (15 us for a 1.6 us
            # statement). Outside any timing, as torch's own warm-up is.
            first = self._call(self._timeit_fn, 1)
            if 0 <= first < 1e-3:  # a slow statement is warm after one run
                self._call(self._timeit_fn, 10)

    def _start(self) -> ctypes.CDLL:
        try:
            lib = _load_private(self.build(), self.entry_suffix)
        except OSError:  # a damaged cached library (cut short, overwritten): build again
            if self.entry_suffix:  # a bundle is the suite's to rebuild
                raise
            default_builder().forget(Path(self.build()))
            self.library_path = None
            lib = _load_private(self.build(), self.entry_suffix)
        start, timeit, last_error = (self._entry(lib, name) for name in
                                     ("tm_timer_start", "tm_timer_timeit", "tm_last_error"))
        start.argtypes = [ctypes.c_int]
        start.restype = ctypes.c_int
        timeit.argtypes = [ctypes.c_int64]
        timeit.restype = ctypes.c_double
        last_error.restype = ctypes.c_char_p
        self._timeit_fn, self._last_error_fn = timeit, last_error
        stop = self._entry(lib, "tm_timer_stop")
        stop.restype = None
        if self._call(start, self.num_threads) != 0:
            raise SnippetError(f"C++ setup failed: {last_error().decode(errors='replace')}")
        # a dropped timer stops its setup thread, which frees setup's variables (not at
        # exit: a statement still running there would hold the interpreter up)
        weakref.finalize(self, _stop_unless_interrupted, stop, self._state).atexit = False
        return lib

    def _call(self, fn, *args):
        """`fn(*args)` on a helper thread, waited for in slices so that Ctrl-C reaches
        Python while setup or the statement runs in C++. After an interrupt the snippet
        may still be running: this timer is then unusable."""
        if self._state["interrupted"]:
            raise SnippetError("this C++ timer was interrupted while its snippet ran; make "
                               "a new Timer")
        result: list = []
        done = threading.Event()

        def call() -> None:
            result.append(fn(*args))
            done.set()

        threading.Thread(target=call, daemon=True, name="torchmark-cpp-snippet").start()
        try:
            while not done.wait(0.1):
                pass
        except KeyboardInterrupt:
            self._state["interrupted"] = True
            raise
        return result[0]

    def timeit(self, number: int) -> float:
        """Seconds for `number` runs of stmt (setup is not repeated)."""
        self.prepare()
        seconds = self._call(self._timeit_fn, int(number))
        if seconds < 0:
            error = self._last_error_fn().decode(errors="replace")
            raise SnippetError(f"C++ statement failed: {error}")
        return seconds
