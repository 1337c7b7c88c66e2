"""Measuring one benchmark with the Timer, as its options ask: wall time
(`blocked_autorange`, 5 blocks at least), device time (`device_time`: CUDA events, the L2
flushed or not), instruction counts (`collect_callgrind`, in torchmark's valgrind host)
or memory (`Timer.memory`: peak bytes and bytes allocated a call); or pytest-benchmark's pedantic rounds, each one call (or `iterations` calls) timed
by the Timer's clock or between CUDA events. Each gives a Result of the test's case."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.result import Case, Result
from torchmark.pytest_plugin.options import BenchOptions


def call_timer(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
               options: BenchOptions) -> Any:
    """A Timer of `fn(*args, **kwargs)`: the call pytest-benchmark's `benchmark(fn, *args,
    **kwargs)` makes, so that both time the same thing (benchmarks/pytest_overhead.py).
    Each argument is a global of its own, which the setup gathers into `_args` and
    `_kwargs`: the instruction counter sends each (a tensor, a module, plain data) to its
    process, where the setup runs too."""
    from torchmark.timing.timer_class import Timer

    globals_: dict[str, Any] = {"_fn": fn}
    positional, keywords = [], []
    for i, value in enumerate(args):
        globals_[f"_arg{i}"] = value
        positional.append(f"_arg{i}")
    for i, (key, value) in enumerate(kwargs.items()):
        globals_[f"_kwarg{i}"] = value
        keywords.append(f"{key!r}: _kwarg{i}")
    setup = f"_args = ({''.join(f'{p}, ' for p in positional)})\n" \
            f"_kwargs = {{{', '.join(keywords)}}}"
    return Timer("_fn(*_args, **_kwargs)", setup, globals=globals_,
                 num_threads=options.num_threads)


def measure(timer: Any, options: BenchOptions, case: Case) -> list[Result]:
    """`timer`'s statement measured by `options.metric`, as Results of `case` (one; two
    for memory: its peak bytes and bytes allocated a call)."""
    from torchmark.records.convert import from_callgrind, from_measurement

    if options.compile:  # compile time, and wall time compiled and eager
        from torchmark.compilation import measure_compile

        compile_time, compiled, eager = measure_compile(
            timer, min_run_time=options.min_run_time).results(frontend="pytest")
        eager_case = dataclasses.replace(case, id=f"{case.id}#eager", description="eager")
        return [dataclasses.replace(compile_time, case=case),
                dataclasses.replace(compiled, case=case),
                dataclasses.replace(eager, case=eager_case)]
    if options.metric == "memory":
        from torchmark.timing.results import memory_to_results

        on = options.device if options.device.startswith("cuda") else "cpu"
        return [dataclasses.replace(r, case=case) for r in
                memory_to_results(timer.memory(device=on), frontend="pytest")]
    if options.metric == "instructions":
        result = from_callgrind(timer.collect_callgrind(number=options.number))
    elif options.metric == "device":
        device = options.device if options.device.startswith("cuda") else None
        result = from_measurement(timer.device_time(l2=options.l2, device=device,
                                                    min_run_time=options.min_run_time),
                                  frontend="pytest")
    else:  # enough blocks for the gate's interval of the ratio, however long each is
        from torchmark.verdicts.intervals import MIN_SAMPLES

        result = from_measurement(timer.blocked_autorange(min_run_time=options.min_run_time,
                                                          min_blocks=MIN_SAMPLES),
                                  frontend="pytest")
    return [dataclasses.replace(result, case=case)]


def prepared_arguments(setup: Callable[[], Any] | None, args: tuple[Any, ...],
                       kwargs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A round's arguments, as pytest-benchmark's pedantic makes them: what `setup()`
    returns, `(args, kwargs)`, when it returns something (then `args` and `kwargs` must
    not be given too), else `args` and `kwargs`."""
    if setup is not None:
        prepared = setup()
        if prepared:
            if args or kwargs:
                raise UsageError("torchmark.pedantic: setup returned the arguments, so "
                                 "args and kwargs cannot be given too")
            try:
                new_args, new_kwargs = prepared
            except (TypeError, ValueError):
                raise UsageError(f"torchmark.pedantic: setup must return None or (args, "
                                 f"kwargs), got {prepared!r}") from None
            return tuple(new_args), dict(new_kwargs)
    return args, dict(kwargs)


def check_pedantic(*, setup: Callable[[], Any] | None, rounds: Any, iterations: Any,
                   warmup_rounds: Any, options: BenchOptions) -> None:
    """pytest-benchmark's checks of pedantic's counts, and what a metric cannot do."""
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
    if setup is not None and options.metric == "instructions":
        raise UsageError("torchmark.pedantic: instruction counts cannot take a setup a "
                         "round (the calls are counted in another process, after a warm-up "
                         "on the same arguments); call setup in the test and count with "
                         "torchmark(fn, *args), or time the rounds (metric 'wall' or "
                         "'device')")
    if setup is not None and options.metric == "memory":
        raise UsageError("torchmark.pedantic: memory is sampled a call at a time, on the "
                         "same arguments; call setup in the test and measure with "
                         "torchmark(fn, *args)")


def pedantic_rounds(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
                    *, setup: Callable[[], Any] | None, teardown: Callable[..., Any] | None,
                    rounds: int, iterations: int, warmup_rounds: int,
                    options: BenchOptions, case: Case) -> tuple[Result, Any]:
    """pytest-benchmark's pedantic rounds, timed by `options.metric`: `warmup_rounds`
    untimed rounds, then `rounds` timed ones, each `iterations` calls; before each round
    `setup()` (untimed; it may return the round's `(args, kwargs)`), after it
    `teardown(*args, **kwargs)` (untimed). Wall time: the Timer's clock (which waits for
    the device) around each round. Device time: a pair of CUDA events around each
    round, on the marker's device (the current one for "cuda"), the L2 flushed before
    each round unless `l2="hot"`, read after one synchronization at the end. The Result
    (a sample a round, per call) and the last call's value."""
    from torchmark.core.threads import set_torch_threads

    value: Any = None

    def one_round(call_args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> None:
        nonlocal value
        for _ in range(iterations):
            value = fn(*call_args, **call_kwargs)

    with set_torch_threads(options.num_threads):
        if options.metric == "device":
            times = _device_rounds(one_round, args, kwargs, setup=setup, teardown=teardown,
                                   rounds=rounds, warmup_rounds=warmup_rounds,
                                   options=options)
        else:
            times = _wall_rounds(one_round, args, kwargs, setup=setup, teardown=teardown,
                                 rounds=rounds, warmup_rounds=warmup_rounds)
    times = [max(t, 1e-12) for t in times]  # statistics divide by the median
    if options.metric == "device":
        result = Result(case=case, metric="device",
                        samples=tuple(t / iterations for t in times),
                        number_per_run=iterations, extra={"l2": options.l2})
    else:
        from torchmark.core.task_spec import TaskSpec
        from torchmark.records.convert import from_measurement
        from torchmark.timing.measurement import Measurement

        spec = TaskSpec(stmt=case.stmt, setup="pass", num_threads=options.num_threads)
        result = dataclasses.replace(
            from_measurement(Measurement(iterations, times, spec), frontend="pytest"),
            case=case)
    return result, value


def _wall_rounds(one_round: Callable[..., None], args: tuple[Any, ...],
                 kwargs: Mapping[str, Any], *, setup: Callable[[], Any] | None,
                 teardown: Callable[..., Any] | None, rounds: int,
                 warmup_rounds: int) -> list[float]:
    from torchmark.timing import clocks

    times: list[float] = []
    for round_ in range(warmup_rounds + rounds):
        call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
        started = clocks.timer()
        one_round(call_args, call_kwargs)
        taken = clocks.timer() - started
        if teardown is not None:
            teardown(*call_args, **call_kwargs)
        if round_ >= warmup_rounds:
            times.append(taken)
    return times


def _device_rounds(one_round: Callable[..., None], args: tuple[Any, ...],
                   kwargs: Mapping[str, Any], *, setup: Callable[[], Any] | None,
                   teardown: Callable[..., Any] | None, rounds: int, warmup_rounds: int,
                   options: BenchOptions) -> list[float]:
    import torch

    from torchmark.timing import l2
    from torchmark.timing.cuda_device import indexed_cuda_device
    from torchmark.timing.gpu_sampler import GpuSampler

    device = indexed_cuda_device(options.device if options.device.startswith("cuda")
                                 else None)
    with torch.cuda.device(device):
        flush = l2.L2Flusher(device).flush if options.l2 == "cold" else None
        sampler = GpuSampler(torch, device, flush=flush, blocking=False)

        def untimed_round(_: int) -> None:
            call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
            sampler.flush()
            one_round(call_args, call_kwargs)
            if teardown is not None:
                teardown(*call_args, **call_kwargs)

        sampler.warm_up(untimed_round, warmup_rounds, timed=False)
        timing = sampler.timed_pass()
        for _ in range(rounds):
            call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
            timing.time(one_round, (call_args, call_kwargs))
            if teardown is not None:
                teardown(*call_args, **call_kwargs)
        return timing.finish()
