"""Compare tables and their renderers."""

from torchmark.compare.compare import Compare
from torchmark.compare.layout import Colorize

__all__ = ["Colorize", "Compare"]
