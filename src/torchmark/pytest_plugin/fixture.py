"""The `torchmark` fixture's object, and a whole test measured (`@pytest.mark.torchmark`
without the fixture). One benchmark a test: its Result (or, when the benchmarked code
raised, a Result carrying the failure, and the error goes on to fail the test) is kept
on the test item for the plugin to put on the test's report."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from torchmark.core.errors import USER_CODE_FAILURES, UsageError, error_line
from torchmark.core.result import Case, Failure, Result
from torchmark.pytest_plugin.options import BenchOptions, Settings

RESULTS = pytest.StashKey[list]()  # an item's Results, for its report


def bench_options(item: Any, settings: Settings) -> BenchOptions:
    """The options of the benchmark in `item` (its closest marker's over the session's);
    a bad option fails the test with one line naming it."""
    mark = item.get_closest_marker("torchmark")
    try:
        return BenchOptions.resolve(mark.args if mark else (), mark.kwargs if mark else {},
                                    settings)
    except UsageError as e:
        pytest.fail(str(e), pytrace=False)


def _skip_without_cuda(options: BenchOptions) -> None:
    if options.metric == "device" or options.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            pytest.skip(f"needs CUDA ({options.metric} time on {options.device}), and "
                        "torch.cuda.is_available() is False here")


def _describe_callable(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return type(fn).__name__
    return f"{module}.{name}" if module and module != "builtins" else name


class TorchmarkFixture:
    """Measures one benchmark of the test that requested it, with torchmark's Timer:
    `torchmark(fn, *args, **kwargs)` (returns what `fn` returns), `torchmark.timeit(stmt,
    setup, globals)`, or `torchmark.pedantic(fn, ...)` (rounds you control). How: the
    test's `@pytest.mark.torchmark(...)` options over the `--torchmark-*` ones. With
    --torchmark-disable each runs its code once, untimed."""

    def __init__(self, item: Any, settings: Settings) -> None:
        self._item = item
        self._settings = settings
        self._used = False

    @property
    def options(self) -> BenchOptions:
        return bench_options(self._item, self._settings)

    def __call__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Measure `fn(*args, **kwargs)`; what one (untimed) call of it returned."""
        __tracebackhide__ = True
        if not callable(fn):
            raise UsageError(f"torchmark(fn, ...): fn must be callable, got {fn!r}")
        options = self._start()
        if self._settings.disabled:
            return fn(*args, **kwargs)
        from torchmark.pytest_plugin.measure import call_timer, measure

        case = self._case(options, _describe_callable(fn))
        with self._failure_kept(case, options):
            value = fn(*args, **kwargs)
            self._keep(*measure(call_timer(fn, args, kwargs, options), options, case))
        return value

    def timeit(self, stmt: str = "pass", setup: str = "pass",
               globals: dict[str, Any] | None = None) -> Result | None:
        """Measure `stmt` after `setup`, as `torchmark.Timer(stmt, setup, globals=...)`
        would; its Result (None with --torchmark-disable, which runs both once)."""
        __tracebackhide__ = True
        options = self._start()
        from torchmark.timing.timer_class import Timer

        timer = Timer(stmt, setup, globals=globals, num_threads=options.num_threads)
        spec = timer.task_spec
        if self._settings.disabled:
            import torch

            namespace = {"torch": torch, **(globals or {})}
            exec(compile(spec.setup, "<setup>", "exec"), namespace)
            exec(compile(spec.stmt, "<stmt>", "exec"), namespace)
            return None
        from torchmark.pytest_plugin.measure import measure

        case = self._case(options, spec.stmt, spec.setup if spec.setup != "pass" else "")
        with self._failure_kept(case, options):
            results = measure(timer, options, case)
        self._keep(*results)
        return results[0]

    def pedantic(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                 kwargs: Mapping[str, Any] | None = None, *,
                 setup: Callable[[], Any] | None = None,
                 teardown: Callable[..., Any] | None = None, rounds: int = 1,
                 warmup_rounds: int = 0, iterations: int = 1) -> Any:
        """pytest-benchmark's `pedantic`: `rounds` timed rounds of `iterations` calls of
        `fn`, after `warmup_rounds` untimed ones; `setup()` before each round (untimed; it
        may return the round's `(args, kwargs)`), `teardown(*args, **kwargs)` after it.
        Wall time by the Timer's clock, device time by CUDA events around each round;
        instruction counts (exact: rounds do not apply) count `iterations` calls and take
        no setup. What the last call returned."""
        __tracebackhide__ = True
        if not callable(fn):
            raise UsageError(f"torchmark.pedantic(fn, ...): fn must be callable, got {fn!r}")
        options = self._start()
        args, kwargs = tuple(args), dict(kwargs or {})
        from torchmark.pytest_plugin.measure import check_pedantic, prepared_arguments

        check_pedantic(setup=setup, rounds=rounds, iterations=iterations,
                       warmup_rounds=warmup_rounds, options=options)
        if self._settings.disabled:
            args, kwargs = prepared_arguments(setup, args, kwargs)
            value = fn(*args, **kwargs)
            if teardown is not None:
                teardown(*args, **kwargs)
            return value
        from torchmark.pytest_plugin.measure import call_timer, measure, pedantic_rounds

        case = self._case(options, _describe_callable(fn))
        with self._failure_kept(case, options):
            if options.metric in ("instructions", "memory"):
                value = fn(*args, **kwargs)
                self._keep(*measure(call_timer(fn, args, kwargs, options),
                                    dataclasses.replace(options, number=iterations), case))
            else:
                result, value = pedantic_rounds(
                    fn, args, kwargs, setup=setup, teardown=teardown, rounds=rounds,
                    iterations=iterations, warmup_rounds=warmup_rounds, options=options,
                    case=case)
                self._keep(result)
        return value

    # -- one benchmark a test -----------------------------------------------------------
    def _start(self) -> BenchOptions:
        if self._used:
            raise UsageError("the torchmark fixture measures one benchmark a test; "
                             "parametrize the test, or split it, for more")
        self._used = True
        options = self.options
        if not self._settings.disabled:
            _skip_without_cuda(options)
        return options

    def _case(self, options: BenchOptions, stmt: str, setup: str = "") -> Case:
        from torchmark.pytest_plugin.cases import case_of

        return case_of(self._item, stmt=stmt, setup=setup, group=options.group,
                       threads=options.num_threads, device=options.device)

    def _keep(self, *results: Result) -> None:
        self._item.stash.setdefault(RESULTS, []).extend(results)

    @contextlib.contextmanager
    def _failure_kept(self, case: Case, options: BenchOptions) -> Iterator[None]:
        """When the code measured raises, a Result with its failure is kept (the error
        still fails the test)."""
        __tracebackhide__ = True
        try:
            yield
        except USER_CODE_FAILURES as e:
            self._keep(Result(case=case, metric=options.metric,
                              failure=Failure(error_line(e))))
            raise


def benchmark_test(item: Any, settings: Settings) -> None:
    """Measure the whole test function of `item` (called with its fixtures)."""
    __tracebackhide__ = True
    testargs = {name: item.funcargs[name] for name in item._fixtureinfo.argnames}
    TorchmarkFixture(item, settings)(item.obj, **testargs)
