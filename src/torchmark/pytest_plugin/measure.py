"""Measuring one benchmark with the Timer, as its options ask: wall time
(`blocked_autorange`, 5 blocks at least), device time (`device_time`: CUDA events, the L2 flushed or not),
or instruction counts (`collect_callgrind`, in torchmark's valgrind host); or pedantic
rounds, each one call (or `iterations` calls) timed by the Timer's clock. Each gives a
Result of the test's case."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.result import Case, Result
from torchmark.pytest_plugin.options import BenchOptions


def call_timer(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
               options: BenchOptions) -> Any:
    """A Timer of `fn(*args, **kwargs)`: each argument a global of its own, so that the
    instruction counter can send each (a tensor, a module, plain data) to its process."""
    from torchmark.timing.timer_class import Timer

    globals_: dict[str, Any] = {"_fn": fn}
    parts = []
    for i, value in enumerate(args):
        globals_[f"_arg{i}"] = value
        parts.append(f"_arg{i}")
    for i, (key, value) in enumerate(kwargs.items()):
        globals_[f"_kwarg{i}"] = value
        parts.append(f"{key}=_kwarg{i}" if key.isidentifier() else f"**{{{key!r}: _kwarg{i}}}")
    return Timer(f"_fn({', '.join(parts)})", globals=globals_,
                 num_threads=options.num_threads)


def measure(timer: Any, options: BenchOptions, case: Case) -> Result:
    """`timer`'s statement measured by `options.metric`, as a Result of `case`."""
    from torchmark.records.convert import from_callgrind, from_measurement

    if options.metric == "instructions":
        result = from_callgrind(timer.collect_callgrind(number=options.number))
    elif options.metric == "device":
        device = options.device if options.device.startswith("cuda") else None
        result = from_measurement(timer.device_time(l2=options.l2, device=device,
                                                    min_run_time=options.min_run_time),
                                  frontend="pytest")
    else:  # enough blocks for the gate's interval of the ratio, however long each is
        from torchmark.compare.ab import MIN_SAMPLES

        result = from_measurement(timer.blocked_autorange(min_run_time=options.min_run_time,
                                                          min_blocks=MIN_SAMPLES),
                                  frontend="pytest")
    return dataclasses.replace(result, case=case)


def pedantic_rounds(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
                    *, setup: Callable[[], Any] | None, teardown: Callable[..., Any] | None,
                    rounds: int, iterations: int, warmup_rounds: int,
                    options: BenchOptions, case: Case) -> tuple[Result, Any]:
    """`rounds` timed rounds of `iterations` calls (after `warmup_rounds` untimed ones),
    `setup` before each round (it may return the round's `(args, kwargs)`) and
    `teardown(*args, **kwargs)` after it, both untimed; the Result and the last call's
    value. Wall time only (the clock waits for the device)."""
    from torchmark.core.task_spec import TaskSpec
    from torchmark.core.threads import set_torch_threads
    from torchmark.records.convert import from_measurement
    from torchmark.timing import clocks
    from torchmark.timing.measurement import Measurement

    if options.metric != "wall":
        raise UsageError(f"torchmark.pedantic with a setup times rounds by the wall clock; "
                         f"metric {options.metric!r} needs torchmark(fn, ...), "
                         "torchmark.timeit, or pedantic without a setup")
    for name, count in (("rounds", rounds), ("iterations", iterations)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UsageError(f"torchmark.pedantic: {name} must be an int >= 1, got {count!r}")
    if isinstance(warmup_rounds, bool) or not isinstance(warmup_rounds, int) or \
            warmup_rounds < 0:
        raise UsageError(f"torchmark.pedantic: warmup_rounds must be an int >= 0, got "
                         f"{warmup_rounds!r}")
    if setup is not None and iterations > 1:
        raise UsageError("torchmark.pedantic: with a setup each round is one call "
                         "(iterations=1): the setup prepares that call")
    times: list[float] = []
    value: Any = None
    with set_torch_threads(options.num_threads):
        for round_ in range(warmup_rounds + rounds):
            call_args, call_kwargs = args, dict(kwargs)
            if setup is not None:
                prepared = setup()
                if prepared is not None:
                    call_args, call_kwargs = prepared
            started = clocks.timer()
            for _ in range(iterations):
                value = fn(*call_args, **call_kwargs)
            taken = clocks.timer() - started
            if teardown is not None:
                teardown(*call_args, **call_kwargs)
            if round_ >= warmup_rounds:
                times.append(max(taken, 1e-9))
    spec = TaskSpec(stmt=case.stmt, setup="pass", num_threads=options.num_threads)
    result = from_measurement(Measurement(iterations, times, spec), frontend="pytest")
    return dataclasses.replace(result, case=case), value
