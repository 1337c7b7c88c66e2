"""CppTimer: the inner timer of `Timer(language="cpp")`, backed by a compiled snippet."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from typing import Any

from torchmark.cpp.compile_cache import default_builder


class SnippetError(RuntimeError):
    """The snippet raised a C++ exception (for example a c10::Error) while running."""


# (library, entry suffix) pairs whose state (setup thread, variables) a timer already owns
_STARTED: set[tuple[str, str]] = set()


def _load_private(path: str, entry_suffix: str) -> ctypes.CDLL:
    """The library, with state of its own: a snippet keeps its setup thread and variables
    in the library's globals, and loading one path twice gives the same copy, so a
    second timer of the same snippet loads a private copy (unlinked once loaded)."""
    key = (path, entry_suffix)
    if key not in _STARTED:
        _STARTED.add(key)
        return ctypes.CDLL(path)
    fd, copy = tempfile.mkstemp(prefix="torchmark-snippet-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as library:
            shutil.copyfileobj(library, out)
        return ctypes.CDLL(copy)
    finally:
        os.unlink(copy)


class CppTimer:
    """Compiles `stmt` / `setup` / `global_setup` on first use (or takes them from the
    cache), runs setup once on a dedicated thread, and times runs of stmt there.

    Constructed like `timeit.Timer` (`stmt=, setup=, timer=, globals=`) plus
    `global_setup` and `num_threads`.
    """

    def __init__(self, stmt: str, setup: str, global_setup: str = "",
                 timer: Callable[[], float] | None = None,
                 globals: dict[str, Any] | None = None, num_threads: int = 1) -> None:
        if globals:
            raise ValueError("Timer: C++ snippets cannot use globals; declare what the "
                             "statement needs in `setup` (or `global_setup`)")
        self.stmt = textwrap.dedent(stmt)
        self.setup = textwrap.dedent(setup)
        self.global_setup = textwrap.dedent(global_setup)
        self.num_threads = num_threads
        self._lib: ctypes.CDLL | None = None
        self.library_path: str | None = None
        self.entry_suffix = ""

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
            self.library_path = str(default_builder().build(self.stmt, self.setup,
                                                            self.global_setup))
        return self.library_path

    def _start(self) -> ctypes.CDLL:
        lib = _load_private(self.build(), self.entry_suffix)
        start, timeit, last_error = (self._entry(lib, name) for name in
                                     ("tm_timer_start", "tm_timer_timeit", "tm_last_error"))
        start.argtypes = [ctypes.c_int]
        start.restype = ctypes.c_int
        timeit.argtypes = [ctypes.c_int64]
        timeit.restype = ctypes.c_double
        last_error.restype = ctypes.c_char_p
        self._timeit_fn, self._last_error_fn = timeit, last_error
        if start(self.num_threads) != 0:
            raise SnippetError(f"C++ setup failed: {last_error().decode(errors='replace')}")
        return lib

    def timeit(self, number: int) -> float:
        """Seconds for `number` runs of stmt (setup is not repeated)."""
        if self._lib is None:
            self._lib = self._start()
        seconds = self._timeit_fn(int(number))
        if seconds < 0:
            error = self._last_error_fn().decode(errors="replace")
            raise SnippetError(f"C++ statement failed: {error}")
        return seconds
