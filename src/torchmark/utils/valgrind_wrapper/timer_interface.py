"""Mirrors torch.utils.benchmark.utils.valgrind_wrapper.timer_interface: CallgrindStats, FunctionCounts, CopyIfCallgrind."""

import typing

from torchmark.utils._lazy import lazy_exports as _lazy_exports

__all__ = ["CallgrindStats", "CopyIfCallgrind", "FunctionCount", "FunctionCounts"]

_COLLECTOR = ("torch's collector internals; torchmark's collector is torchmark.callgrind "
              "(Host, collect_many), reached through Timer.collect_callgrind")

__getattr__, __dir__ = _lazy_exports(
    globals(), __all__,
    elsewhere={"Serialization": "torchmark.callgrind.globals_bridge"},
    not_mirrored={"GlobalsBridge": _COLLECTOR, "wrapper_singleton": _COLLECTOR})

if typing.TYPE_CHECKING:
    from torchmark.callgrind.function_counts import FunctionCount as FunctionCount
    from torchmark.callgrind.function_counts import FunctionCounts as FunctionCounts
    from torchmark.callgrind.globals_bridge import CopyIfCallgrind as CopyIfCallgrind
    from torchmark.callgrind.globals_bridge import Serialization as Serialization
    from torchmark.callgrind.stats import CallgrindStats as CallgrindStats
