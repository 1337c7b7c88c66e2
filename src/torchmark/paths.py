"""Where torchmark keeps files between runs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """The cache folder (TORCHMARK_CACHE_DIR, else $XDG_CACHE_HOME/torchmark, else
    ~/.cache/torchmark), with `parts` appended; created if missing."""
    root = os.environ.get("TORCHMARK_CACHE_DIR")
    if root:
        base = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "torchmark"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
