"""Compare tables and their renderers.

`Compare` and `Colorize` are imported on first use, so that a command needing only a
renderer of this package (the verdict tables of `gate`) does not import the Timer with
them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchmark.compare.compare import Compare
    from torchmark.compare.layout import Colorize

__all__ = ["Colorize", "Compare"]


def __getattr__(name: str) -> Any:
    if name == "Compare":
        from torchmark.compare.compare import Compare
        return Compare
    if name == "Colorize":
        from torchmark.compare.layout import Colorize
        return Colorize
    raise AttributeError(f"module 'torchmark.compare' has no attribute {name!r}")
