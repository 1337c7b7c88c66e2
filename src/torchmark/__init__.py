"""torchmark: PyTorch micro-benchmarking.

A drop-in for `torch.utils.benchmark` (`import torchmark as benchmark`) that measures
better on CPU and GPU.
"""

from torchmark.callgrind import (
    CallgrindStats,
    CopyIfCallgrind,
    FunctionCount,
    FunctionCounts,
)
from torchmark.compare import Colorize, Compare
from torchmark.fuzzing import (
    FuzzedParameter,
    FuzzedSparseTensor,
    FuzzedTensor,
    Fuzzer,
    ParameterAlias,
)
from torchmark.timing import (
    Language,
    Measurement,
    TaskSpec,
    Timer,
    ordered_unique,
    select_unit,
    set_torch_threads,
    timer,
    trim_sigfig,
    unit_to_english,
)

__version__ = "0.1.0"

__all__ = [
    "CallgrindStats", "Colorize", "Compare", "CopyIfCallgrind", "FunctionCount",
    "FunctionCounts", "FuzzedParameter", "FuzzedSparseTensor", "FuzzedTensor", "Fuzzer",
    "Language", "ParameterAlias", "Measurement", "TaskSpec", "Timer", "__version__",
    "ordered_unique", "select_unit", "set_torch_threads", "timer", "trim_sigfig",
    "unit_to_english",
]
