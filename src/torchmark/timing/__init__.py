"""Timer, Measurement, TaskSpec and the clocks they use."""

from torchmark.core.stats import ordered_unique, select_unit, trim_sigfig, unit_to_english
from torchmark.core.task_spec import TaskSpec
from torchmark.core.threads import set_torch_threads
from torchmark.timing.clocks import timer
from torchmark.timing.measurement import Measurement
from torchmark.timing.timer_class import Language, Timer

__all__ = [
    "Language", "Measurement", "TaskSpec", "Timer", "ordered_unique", "select_unit",
    "set_torch_threads", "timer", "trim_sigfig", "unit_to_english",
]
