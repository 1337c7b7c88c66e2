"""An exclusive hold on a results file for the length of a run, so that two runs never
write one file at once (records lost, lines torn, resumed cases run twice). The lock is
filelock's (flock on a hidden `.NAME.lock` beside the file, released by the kernel when
the process dies); the holder writes its pid and command line into it, so that a refused
run can name the other process, and removes it when it lets go (filelock's waiters then
take a new one: no `.NAME.lock` is left beside every results file). A lock path that is a
symbolic link is refused, never followed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from torchmark.core.bounded_input import brief
from torchmark.core.errors import BusyError, UsageError
from torchmark.core.secrets import mask_argv


def lock_path(path: str | os.PathLike) -> Path:
    """The lock beside the file a path leads to (a symbolic link resolved, so that two
    runs writing one file through two paths still meet)."""
    path = Path(path).resolve()
    return path.with_name(f".{path.name}.lock")


class ResultsLock:
    """Holds `path`'s lock from acquire() to release() (or the end of a with block)."""

    def __init__(self, path: str | os.PathLike, what: str = "results file") -> None:
        from filelock import FileLock

        self.path, self.what = Path(path), what
        # not thread-bound: a run may take the lock on one thread and end on another
        self._lock = FileLock(str(lock_path(path)), timeout=0, thread_local=False)

    def acquire(self, wait: float = 0.0) -> ResultsLock:
        """Take the lock, waiting up to `wait` seconds; BusyError naming the holder."""
        from filelock import Timeout

        self.path.parent.mkdir(parents=True, exist_ok=True)
        where = lock_path(self.path)
        if where.is_symlink():
            raise UsageError(f"{self.what} {brief(str(self.path))}: its lock {where.name} is "
                             "a symbolic link; torchmark never follows one there (remove "
                             "it)")
        try:
            self._lock.acquire(timeout=wait)
        except Timeout:
            raise BusyError(f"{self.what} {brief(str(self.path))}: another torchmark run is "
                            f"writing it ({self._holder()}); wait for it to end, or write "
                            "another file") from None
        except OSError as e:
            raise UsageError(f"{self.what} {brief(str(self.path))}: cannot lock it "
                             f"({e.strerror or e})") from None
        fd = os.open(where, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"pid {os.getpid()}: {brief(' '.join(mask_argv(sys.argv)), 300)}\n")
        return self

    def _holder(self, patience: float = 1.0) -> str:
        """Who holds the lock, as it wrote into the lock file; a holder that has only
        just taken it is given `patience` seconds to write."""
        deadline = time.monotonic() + patience
        while True:
            try:
                text = lock_path(self.path).read_text(encoding="utf-8",
                                                      errors="replace").strip()
            except OSError:
                text = ""
            if text or time.monotonic() > deadline:
                return brief(text, 300) if text else "a process that has not said its pid"
            time.sleep(0.02)

    def release(self) -> None:
        """Let the file go, its lock file removed first (again: nothing happens)."""
        if self._lock.is_locked:
            try:  # still held: a waiter that then wins the old inode sees it gone
                lock_path(self.path).unlink()
            except OSError:
                pass
            self._lock.release(force=True)

    def __enter__(self) -> ResultsLock:
        return self if self._lock.is_locked else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
