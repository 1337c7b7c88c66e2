"""torchmark: PyTorch micro-benchmarking.

A drop-in for `torch.utils.benchmark` (`import torchmark as benchmark`) that measures
better on CPU and GPU. Names are loaded on first use, so `import torchmark` stays cheap
(torch itself is imported only by the parts that need it).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ABResult": "torchmark.compare.ab",
    "ab_test": "torchmark.compare.ab",
    "ab_environments": "torchmark.compare.env_ab",
    "EnvABResult": "torchmark.compare.env_ab",
    "measure_in_processes": "torchmark.compare.processes",
    "CallgrindStats": "torchmark.callgrind.stats",
    "CopyIfCallgrind": "torchmark.callgrind.globals_bridge",
    "FunctionCount": "torchmark.callgrind.function_counts",
    "FunctionCounts": "torchmark.callgrind.function_counts",
    "Colorize": "torchmark.compare.layout",
    "Compare": "torchmark.compare.compare",
    "FuzzedParameter": "torchmark.fuzzing.parameters",
    "ParameterAlias": "torchmark.fuzzing.parameters",
    "FuzzedSparseTensor": "torchmark.fuzzing.sparse",
    "FuzzedTensor": "torchmark.fuzzing.tensors",
    "Fuzzer": "torchmark.fuzzing.fuzzer",
    "CompileError": "torchmark.cpp.compile_cache",
    "Language": "torchmark.timing.timer_class",
    "Timer": "torchmark.timing.timer_class",
    "Measurement": "torchmark.timing.measurement",
    "measure_ab": "torchmark.compare.interleave",
    "TaskSpec": "torchmark.core.task_spec",
    "set_torch_threads": "torchmark.core.threads",
    "timer": "torchmark.timing.clocks",
    "ordered_unique": "torchmark.core.stats",
    "select_unit": "torchmark.core.stats",
    "trim_sigfig": "torchmark.core.stats",
    "unit_to_english": "torchmark.core.stats",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if name in ("op_fuzzers", "callgrind", "compare", "cpp", "fuzzing", "timing", "suite",
                    "ops", "replay", "utils", "records", "store", "regressions", "report"):
            return importlib.import_module(f"torchmark.{name}")
        raise AttributeError(f"module 'torchmark' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
