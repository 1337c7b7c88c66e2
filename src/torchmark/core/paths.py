"""Where torchmark keeps files between runs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """TORCHMARK_CACHE_DIR, else $XDG_CACHE_HOME/torchmark, else ~/.cache/torchmark
    (not created)."""
    root = os.environ.get("TORCHMARK_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "torchmark"


def cache_dir(*parts: str) -> Path:
    """The cache folder with `parts` appended; created if missing."""
    path = cache_root().joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        where = "TORCHMARK_CACHE_DIR" if os.environ.get("TORCHMARK_CACHE_DIR") else \
            "the cache folder"
        error = OSError(f"torchmark cannot use {where} ({cache_root()}): cannot make "
                        f"{path}: {e.strerror or e}; point TORCHMARK_CACHE_DIR at a "
                        "writable folder")
        error.errno = e.errno
        raise error from None
    return path
