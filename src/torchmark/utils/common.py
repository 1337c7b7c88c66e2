"""Mirrors torch.utils.benchmark.utils.common: TaskSpec, Measurement and the unit helpers."""

import typing

from torchmark.utils._lazy import lazy_exports as _lazy_exports

__all__ = ["Measurement", "TaskSpec", "ordered_unique", "select_unit", "set_torch_threads",
           "trim_sigfig", "unit_to_english"]

__getattr__, __dir__ = _lazy_exports(globals(), __all__)

if typing.TYPE_CHECKING:
    from torchmark.core.stats import ordered_unique as ordered_unique
    from torchmark.core.stats import select_unit as select_unit
    from torchmark.core.stats import trim_sigfig as trim_sigfig
    from torchmark.core.stats import unit_to_english as unit_to_english
    from torchmark.core.task_spec import TaskSpec as TaskSpec
    from torchmark.core.threads import set_torch_threads as set_torch_threads
    from torchmark.timing.measurement import Measurement as Measurement
