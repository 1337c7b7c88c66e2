"""Mirrors torch.utils.benchmark.utils: torch's module paths, re-exporting torchmark's own objects."""

# Code written for torch ports by one prefix substitution, `torch.utils.benchmark.X` ->
# `torchmark.X` (`torchmark.utils.common.TaskSpec`, `torchmark.utils.timer.Timer`, ...).
# Each module loads what it names on first use, so importing it stays cheap (torch is
# imported only when a name that needs it is used: the fuzzers, say). Names torch's
# modules have and torchmark leaves out are listed in docs/compat.md.

from torchmark.utils._lazy import lazy_submodules as _lazy_submodules

__getattr__, __dir__ = _lazy_submodules(
    globals(), ("common", "compare", "fuzzer", "sparse_fuzzer", "timer", "valgrind_wrapper"))
