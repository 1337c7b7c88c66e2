"""Mirrors torch.utils.benchmark.utils.timer: Timer, Language and the default clock `timer`."""

import typing

from torchmark.utils._lazy import lazy_exports as _lazy_exports

__all__ = ["Language", "Timer", "timer"]

__getattr__, __dir__ = _lazy_exports(globals(), __all__, not_mirrored={
    "CPPTimer": "torch's internal C++ timer; torchmark's is torchmark.cpp.CppTimer, used "
                "through Timer(language='cpp')",
})

if typing.TYPE_CHECKING:
    from torchmark.timing.clocks import timer as timer
    from torchmark.timing.timer_class import Language as Language
    from torchmark.timing.timer_class import Timer as Timer
