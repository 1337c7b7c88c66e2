"""Callgrind client requests (start instrumentation, toggle collection, dump) for Python.

A few-line C library built once with the system C compiler against valgrind's
`callgrind.h` (Debian's valgrind package ships it; torch's own copy is the fallback)
and cached; the counted process loads it with ctypes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from torchmark.core.paths import cache_dir
from torchmark.core.torch_install import torch_callgrind_header_dir

HELPER_SOURCE = r"""
#ifdef TORCHMARK_LOCAL_HEADERS
#include "callgrind.h"
#else
#include <valgrind/callgrind.h>
#endif

int tm_running_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
void tm_start_instrumentation(void) { CALLGRIND_START_INSTRUMENTATION; }
void tm_stop_instrumentation(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void tm_toggle_collect(void) { CALLGRIND_TOGGLE_COLLECT; }
void tm_zero_stats(void) { CALLGRIND_ZERO_STATS; }
void tm_toggle_collect_and_dump(const char *reason) {
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(reason);
}
"""

LIBRARY_NAME = "libtorchmark_callgrind.so"


class HelperBuildError(OSError):
    pass


def _compiler() -> str:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise HelperBuildError(
        "no C compiler found (tried $CC, cc, gcc, clang); torchmark builds a small helper "
        "for callgrind client requests: install one, e.g. `apt-get install gcc`")


def helper_path() -> Path:
    """The built helper library, compiling it on first use (atomically)."""
    cc = _compiler()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                                 check=False).stdout
    except OSError as e:
        raise HelperBuildError(f"cannot run the C compiler {cc!r}: {e}") from None
    key = hashlib.sha256((HELPER_SOURCE + version).encode()).hexdigest()[:16]
    folder = cache_dir("callgrind", key)
    library = folder / LIBRARY_NAME
    if library.exists():
        return library
    source = folder / f"helper.{os.getpid()}.c"
    source.write_text(HELPER_SOURCE)
    tmp = folder / f".{LIBRARY_NAME}.{os.getpid()}.tmp"
    attempts: list[list[str]] = [[]]
    torch_headers = torch_callgrind_header_dir()
    if torch_headers is not None:
        attempts.append(["-DTORCHMARK_LOCAL_HEADERS", f"-I{torch_headers}"])
    errors = []
    for extra in attempts:
        proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", *extra, "-o", str(tmp), str(source)],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            os.replace(tmp, library)
            source.unlink(missing_ok=True)
            return library
        errors.append(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    source.unlink(missing_ok=True)
    raise HelperBuildError(
        "could not build the callgrind client-request helper (is valgrind's callgrind.h "
        f"installed? `apt-get install valgrind`): {'; '.join(errors)}")


class ClientRequests:
    """ctypes bindings of the helper (inside a process running under valgrind)."""

    def __init__(self, library: str | os.PathLike) -> None:
        lib = ctypes.CDLL(str(library))
        self.running_on_valgrind = lib.tm_running_on_valgrind
        self.running_on_valgrind.restype = ctypes.c_int
        self.start_instrumentation = lib.tm_start_instrumentation
        self.stop_instrumentation = lib.tm_stop_instrumentation
        self.toggle_collect = lib.tm_toggle_collect
        self.zero_stats = lib.tm_zero_stats
        self.toggle_collect_and_dump = lib.tm_toggle_collect_and_dump
        self.toggle_collect_and_dump.argtypes = [ctypes.c_char_p]
        for fn in (self.start_instrumentation, self.stop_instrumentation, self.toggle_collect,
                   self.zero_stats, self.toggle_collect_and_dump):
            fn.restype = None
