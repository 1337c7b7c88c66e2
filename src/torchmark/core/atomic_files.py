"""Files written whole or not at all, and never through a link someone planted: the
content goes to a new temporary file beside the target (tempfile.mkstemp: a random name,
created exclusively with O_EXCL, so an existing name or a symbolic link there is never
opened), which then replaces the target by a rename (a symbolic link at the target is
replaced, not followed). A reader sees the old file or the new one, never half of one;
an interrupted writer leaves the target as it was."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w",
                  encoding: str | None = "utf-8", newline: str | None = None
                  ) -> Iterator[IO[Any]]:
    """A file to write `path`'s new content into; it replaces `path` when the block ends
    without an error (the temporary file is removed otherwise). Text by default; `mode`
    "wb" for bytes. The new file has the permissions a plain open would give it."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:  # named as the output, not as the temporary file beside it
        error = type(e)(f"cannot write {path}: {(e.strerror or str(e)).lower()} "
                        f"({path.parent})")
        error.errno = e.errno  # what a caller tells kinds of failure apart by
        raise error from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding,
                       newline=None if "b" in mode else newline) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomically(path: str | os.PathLike, data: str | bytes) -> None:
    """`path` replaced whole by `data` (see the module docstring)."""
    with atomic_output(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
