"""The plugin's settings: the session's, from the command line (`Settings`), and one
benchmark's, from its `@pytest.mark.torchmark(...)` over them (`BenchOptions`). Both are
checked when made: bad input is a UsageError naming the option, what was expected and
what was given. Nothing heavier than the stdlib: pytest reads this at start-up."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchmark.core.errors import UsageError

METRICS = ("wall", "device", "instructions", "memory")
DEFAULT_MIN_RUN_TIME = 0.2  # seconds of timed blocks a benchmark, as Timer.blocked_autorange
DEFAULT_NUMBER = 100  # runs a count of instructions, as Timer.collect_callgrind
MARK_OPTIONS = ("min_run_time", "num_threads", "device", "metric", "group", "l2", "number",
                "compile")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The session's options (`--torchmark-*`)."""

    only: bool = False
    skip: bool = False
    disabled: bool = False
    store: str | None = None
    no_store: bool = False
    env: str | None = None
    baseline: str | None = None
    allow_env_diff: bool = False
    fail_slower: float | None = None
    metric: str | None = None
    json_path: str | None = None
    min_run_time: float = DEFAULT_MIN_RUN_TIME

    def __post_init__(self) -> None:
        if self.only and self.skip:
            raise UsageError("--torchmark-only and --torchmark-skip exclude each other")
        if self.store and self.no_store:
            raise UsageError("--torchmark-store and --torchmark-no-store exclude each other")
        if self.fail_slower is not None and not self.baseline:
            raise UsageError("--torchmark-fail-slower needs --torchmark-baseline REF (what "
                             "to be slower than)")
        if self.metric is not None and self.metric not in METRICS:
            raise UsageError(f"--torchmark-metric must be one of {', '.join(METRICS)}, got "
                             f"{self.metric!r}")
        _seconds("--torchmark-min-run-time", self.min_run_time)
        if self.json_path and not Path(self.json_path).absolute().parent.is_dir():
            raise UsageError(f"--torchmark-json {self.json_path}: its folder does not exist")

    @classmethod
    def from_options(cls, get: Any) -> Settings:
        """From pytest's `config.getoption`."""
        from torchmark.core.proportion import parse_proportion

        fail_slower = get("torchmark_fail_slower")
        if fail_slower is not None:
            try:
                fail_slower = parse_proportion(fail_slower, 0, 10, high_open=True)
            except UsageError as e:
                raise UsageError(f"--torchmark-fail-slower: {e}") from None
        min_run_time = get("torchmark_min_run_time")
        return cls(only=get("torchmark_only"), skip=get("torchmark_skip"),
                   disabled=get("torchmark_disable"), store=get("torchmark_store"),
                   no_store=get("torchmark_no_store"), env=get("torchmark_env"),
                   baseline=get("torchmark_baseline"),
                   allow_env_diff=bool(get("torchmark_allow_env_diff")),
                   fail_slower=fail_slower,
                   metric=get("torchmark_metric"), json_path=get("torchmark_json"),
                   min_run_time=DEFAULT_MIN_RUN_TIME if min_run_time is None
                   else min_run_time)


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """How one benchmark is measured."""

    metric: str
    min_run_time: float
    num_threads: int
    device: str
    group: str | None
    l2: str
    number: int
    compile: bool = False  # the call is a torch.compile one: measured apart (compilation/)

    @classmethod
    def resolve(cls, mark_args: tuple[Any, ...], mark_kwargs: Mapping[str, Any],
                settings: Settings) -> BenchOptions:
        """The marker's options over the session's: the marker's `metric` first, then
        --torchmark-metric, then device time for a CUDA `device`, else wall time."""
        if mark_args:
            raise UsageError(f"@pytest.mark.torchmark takes keyword options only "
                             f"({', '.join(MARK_OPTIONS)}), got {mark_args!r}")
        unknown = sorted(set(mark_kwargs) - set(MARK_OPTIONS))
        if unknown:
            raise UsageError(f"@pytest.mark.torchmark: unknown option(s) {', '.join(unknown)}"
                             f"; it takes {', '.join(MARK_OPTIONS)}")
        device = mark_kwargs.get("device", "cpu")
        if not isinstance(device, str) or not (device == "cpu" or device == "cuda" or
                                               device.startswith("cuda:")):
            raise UsageError(f"@pytest.mark.torchmark: device must be 'cpu', 'cuda' or "
                             f"'cuda:N', got {device!r}")
        metric = mark_kwargs.get("metric") or settings.metric or \
            ("device" if device.startswith("cuda") else "wall")
        if metric not in METRICS:
            raise UsageError(f"@pytest.mark.torchmark: metric must be one of "
                             f"{', '.join(METRICS)}, got {metric!r}")
        l2 = mark_kwargs.get("l2", "cold")
        if l2 not in ("cold", "hot"):
            raise UsageError(f"@pytest.mark.torchmark: l2 must be 'cold' or 'hot', got {l2!r}")
        group = mark_kwargs.get("group")
        if group is not None and (not isinstance(group, str) or not group.strip()):
            raise UsageError(f"@pytest.mark.torchmark: group must be a non-empty str, got "
                             f"{group!r}")
        compiled = mark_kwargs.get("compile", False)
        if not isinstance(compiled, bool):
            raise UsageError(f"@pytest.mark.torchmark: compile must be True or False, got "
                             f"{compiled!r}")
        if compiled and metric != "wall":
            raise UsageError(f"@pytest.mark.torchmark: compile=True measures compile time "
                             f"and wall time against eager, not {metric}")
        return cls(metric=metric, compile=compiled,
                   min_run_time=_seconds("@pytest.mark.torchmark: min_run_time",
                                         mark_kwargs.get("min_run_time",
                                                         settings.min_run_time)),
                   num_threads=_count("num_threads", mark_kwargs.get("num_threads", 1)),
                   device=device, group=group, l2=l2,
                   number=_count("number", mark_kwargs.get("number", DEFAULT_NUMBER)))


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value < math.inf:
        raise UsageError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"@pytest.mark.torchmark: {name} must be an int >= 1, got {value!r}")
    return value
