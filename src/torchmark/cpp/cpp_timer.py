"""CppTimer: the inner timer of `Timer(language="cpp")`, backed by a compiled snippet."""

from __future__ import annotations

import ctypes
import textwrap
from collections.abc import Callable
from typing import Any

from torchmark.cpp.compile_cache import default_builder


class SnippetError(RuntimeError):
    """The snippet raised a C++ exception (for example a c10::Error) while running."""


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

    def build(self) -> str:
        """Compile (or find in the cache) the snippet's library; its path."""
        if self.library_path is None:
            self.library_path = str(default_builder().build(self.stmt, self.setup,
                                                            self.global_setup))
        return self.library_path

    def _start(self) -> ctypes.CDLL:
        lib = ctypes.CDLL(self.build())
        lib.tm_timer_start.argtypes = [ctypes.c_int]
        lib.tm_timer_start.restype = ctypes.c_int
        lib.tm_timer_timeit.argtypes = [ctypes.c_int64]
        lib.tm_timer_timeit.restype = ctypes.c_double
        lib.tm_last_error.restype = ctypes.c_char_p
        if lib.tm_timer_start(self.num_threads) != 0:
            raise SnippetError(f"C++ setup failed: {lib.tm_last_error().decode(errors='replace')}")
        return lib

    def timeit(self, number: int) -> float:
        """Seconds for `number` runs of stmt (setup is not repeated)."""
        if self._lib is None:
            self._lib = self._start()
        seconds = self._lib.tm_timer_timeit(int(number))
        if seconds < 0:
            error = self._lib.tm_last_error().decode(errors="replace")
            raise SnippetError(f"C++ statement failed: {error}")
        return seconds
