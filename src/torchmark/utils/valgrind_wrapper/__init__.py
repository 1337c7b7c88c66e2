"""Mirrors torch.utils.benchmark.utils.valgrind_wrapper: holds `timer_interface`."""

from torchmark.utils._lazy import lazy_submodules as _lazy_submodules

__getattr__, __dir__ = _lazy_submodules(globals(), ("timer_interface",))
