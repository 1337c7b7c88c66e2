"""Mirrors torch.utils.benchmark.utils.compare: Compare, Colorize and the ANSI colour codes."""

import typing

from torchmark.utils._lazy import lazy_exports as _lazy_exports

__all__ = ["Colorize", "Compare"]

_LAYOUT = "torchmark.compare.layout internals; render through Compare"

__getattr__, __dir__ = _lazy_exports(
    globals(), __all__,
    elsewhere={name: "torchmark.compare.text"
               for name in ("BEST", "GOOD", "BAD", "VERY_BAD", "BOLD", "TERMINATE")},
    not_mirrored={"Table": f"torch's internal table builder; {_LAYOUT}",
                  "optional_min": f"torch's internal helper; {_LAYOUT}"})

if typing.TYPE_CHECKING:
    from torchmark.compare.compare import Compare as Compare
    from torchmark.compare.layout import Colorize as Colorize
    from torchmark.compare.text import BAD as BAD
    from torchmark.compare.text import BEST as BEST
    from torchmark.compare.text import BOLD as BOLD
    from torchmark.compare.text import GOOD as GOOD
    from torchmark.compare.text import TERMINATE as TERMINATE
    from torchmark.compare.text import VERY_BAD as VERY_BAD
