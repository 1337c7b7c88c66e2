"""Timer: timeit-style measurement of PyTorch statements (drop-in for torch.utils.benchmark)."""

from __future__ import annotations

import contextlib
import math
import numbers
import statistics
import textwrap
import time
import timeit
from collections.abc import Callable, Iterator
from typing import Any

from torchmark.callgrind.globals_bridge import CopyIfCallgrind, main_imports
from torchmark.core.errors import ArgumentTypeError, UsageError
from torchmark.core.task_spec import Language, TaskSpec
from torchmark.core.threads import MAX_THREADS, set_torch_threads
from torchmark.cpp.cpp_timer import CppTimer
from torchmark.timing import clocks
from torchmark.timing.measurement import Measurement
from torchmark.timing.warm_up import (
    BUDGET_S,
    MIN_BLOCKS_TESTED,
    WarmUp,
    still_stationary,
    warm_up_end,
)

Callback = Callable[[int, float], Any]

_MAX_BLOCK_SIZE = 2147483647
_LESS_THAN_A_CYCLE = 1e-11  # seconds a run: no statement that runs takes less
_STUCK_CLOCK_SECONDS = 1.0  # a custom timer that reads 0 for a block this long is stuck
_ESTIMATE_OVERHEAD_SAMPLES = 5
_TARGET_RELATIVE_OVERHEAD = 1e-4


def _parse_language(language: Language | str) -> Language:
    if isinstance(language, Language):
        return language
    if isinstance(language, str):
        key = language.lower()
        if key in ("py", "python"):
            return Language.PYTHON
        if key in ("cpp", "c++"):
            return Language.CPP
    raise UsageError(
        f"Timer: invalid language {language!r}; expected Language.PYTHON, Language.CPP, "
        "'python', 'py', 'cpp' or 'c++'"
    )


def clean_code(code: str) -> str:
    """Dedent, drop one leading newline and trailing whitespace."""
    code = textwrap.dedent(code)
    if code.startswith("\n"):
        code = code[1:]
    return code.rstrip()


class Timer:
    """Measure the execution time of a PyTorch statement.

    Based on `timeit.Timer`, with PyTorch-aware defaults: a warm-up before measuring,
    a fixed thread count (one by default) set for the measurement and restored after,
    device synchronization before each clock read, replicates rather than a single
    total, and labels (`label`, `sub_label`, `description`, `env`) that `Compare` uses
    to lay out tables.

    `stmt` runs in a loop; `setup` runs once before. Both are dedented. `globals`
    provides variables (and `torch` is always available). Times are per run, in
    seconds.
    """

    _timer_cls: type = timeit.Timer
    _cpp_timer_cls: type = CppTimer

    def __init__(
        self,
        stmt: str = "pass",
        setup: str = "pass",
        global_setup: str = "",
        timer: Callable[[], float] = clocks.timer,
        globals: dict[str, Any] | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: Language | str = Language.PYTHON,
    ) -> None:
        if not isinstance(stmt, str):
            raise ArgumentTypeError(f"Timer: stmt must be a str, got {type(stmt).__name__}")
        if not isinstance(setup, str):
            raise ArgumentTypeError(f"Timer: setup must be a str, got {type(setup).__name__}")
        num_threads = _positive_int("num_threads", num_threads)
        if num_threads > MAX_THREADS:  # torch would crash the process
            raise UsageError(f"Timer: num_threads must be at most {MAX_THREADS}, got "
                             f"{num_threads}")
        if globals is not None and not isinstance(globals, dict):
            try:  # a mapping proxy, a ChainMap, (name, value) pairs: as torch's dict(...)
                globals = dict(globals)
            except (TypeError, ValueError):
                raise ArgumentTypeError(f"Timer: globals must be a dict (or what dict() "
                                        f"takes), got {type(globals).__name__}") from None
        for name, value in (("label", label), ("sub_label", sub_label),
                            ("description", description), ("env", env)):
            if value is not None and not isinstance(value, str):  # tables print them
                raise UsageError(f"Timer: {name} must be a str or None, got {value!r}")

        self._searched = (0, 0.0)  # the last block-size search's calls and seconds
        self._language = _parse_language(language)
        self._custom_timer = timer is not clocks.timer
        stmt = clean_code(stmt)
        if self._language is Language.CPP:
            if globals:
                raise UsageError("Timer: C++ snippets cannot use globals; declare what the "
                                 "statement needs in `setup` (or `global_setup`)")
            setup = "" if setup == "pass" else clean_code(setup)
            global_setup = clean_code(global_setup)
            self._globals = {}
            self._timer = self._cpp_timer_cls(stmt=stmt, setup=setup, global_setup=global_setup,
                                              timer=timer, globals=None, num_threads=num_threads)
        else:
            if global_setup:
                raise UsageError(
                    f"Timer: global_setup is for C++ snippets only, got {global_setup!r}; "
                    "Python code can go in `setup`"
                )
            import torch

            setup = clean_code(setup)
            self._globals = dict(globals or {})
            self._globals.setdefault("torch", torch)
            self._timer = self._timer_cls(stmt=stmt, setup=setup, timer=timer,
                                          globals=CopyIfCallgrind.unwrap_all(self._globals))
        self._task_spec = TaskSpec(
            stmt=stmt,
            setup=setup,
            global_setup=global_setup,
            label=label,
            sub_label=sub_label,
            description=description,
            env=env,
            num_threads=num_threads,
        )

    @property
    def task_spec(self) -> TaskSpec:
        return self._task_spec

    @property
    def language(self) -> Language:
        return self._language

    # -- primitives -------------------------------------------------------------------
    def _timeit(self, number: int, until_enough: bool = True) -> float:
        """Seconds `number` runs took. `until_enough`: the caller loops until enough time
        has passed, so a custom timer that never advances is refused rather than looped
        on for good (a fixed count, as in timeit and repeat, takes what the timer says)."""
        if not self._custom_timer or not until_enough:
            return max(self._timer.timeit(number), 1e-9)  # statistics divide by the median
        started = time.perf_counter()
        taken = self._timer.timeit(number)
        wall = time.perf_counter() - started
        if taken <= 0 and wall > _STUCK_CLOCK_SECONDS:  # it would never reach min_run_time
            raise UsageError(f"Timer: the `timer` given reported {taken:g} s for {number} "
                             f"runs that took {wall:.2f} s by time.perf_counter; it must be a "
                             "clock that advances (such as time.perf_counter)")
        return max(taken, 1e-9)

    def _measurement(self, number: int, times: list[float]) -> Measurement:
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        # A C++ snippet sets its thread's count itself, but torch's count is process-wide
        # too: set and restored around the calls, so the caller's count survives. Every
        # timing method starts here: a C++ snippet is compiled, loaded and set up first
        # (inside, since its setup sets the count), outside any timing, so that its first
        # measurement equals a cached one's.
        with set_torch_threads(self._task_spec.num_threads):
            prepare = getattr(self._timer, "prepare", None)
            if prepare is not None:
                prepare()
            yield

    # -- timeit-compatible API ----------------------------------------------------------
    def timeit(self, number: int = 1000000) -> Measurement:
        """Run `stmt` `number` times after a warm-up; one measurement of time per run."""
        number = _positive_int("number", number)
        with self._threads():
            self._timeit(max(number // 100, 2), until_enough=False)  # warm-up
            return self._measurement(number, [self._timeit(number, until_enough=False)])

    def repeat(self, repeat: int = 5, number: int = 1000000) -> Measurement:
        """`timeit` `repeat` times (after one warm-up): `repeat` measurements of `number` runs."""
        repeat = _positive_int("repeat", repeat)
        number = _positive_int("number", number)
        with self._threads():
            self._timeit(max(number // 100, 2), until_enough=False)
            return self._measurement(number, [self._timeit(number, until_enough=False)
                                              for _ in range(repeat)])

    def autorange(self, callback: Callback | None = None) -> Measurement:
        """As `timeit.Timer.autorange`: grow the run count (1, 2, 5, 10, 20, ...) until
        one measurement takes at least 0.2 s; that measurement is returned."""
        with self._threads():
            scale = 1
            while True:
                for step in (1, 2, 5):
                    number = scale * step
                    time_taken = self._timeit(number)
                    if callback is not None:
                        callback(number, time_taken)
                    if time_taken >= 0.2 or number >= _MAX_BLOCK_SIZE:
                        return self._measurement(number, [time_taken])
                scale *= 10

    # -- adaptive measurement -----------------------------------------------------------
    def _clock_overhead(self) -> float:
        """The median time of an empty block: what each clock read costs."""
        return statistics.median(self._timeit(0) for _ in range(_ESTIMATE_OVERHEAD_SAMPLES))

    def _estimate_block_size(self, min_run_time: float) -> int:
        """The smallest power of ten whose block time dwarfs the clock's own overhead.

        Doubles as warm-up (its calls and seconds: `_searched`). Stops once the overhead
        is <= 0.01% of the block and the block takes >= min_run_time / 1000, or once one
        block alone exceeds min_run_time.
        """
        self._searched = (0, 0.0)
        with self._threads():
            overhead = self._clock_overhead()
            number = 1
            while True:
                time_taken = self._timeit(number)
                self._searched = (self._searched[0] + number, self._searched[1] + time_taken)
                if (
                    overhead / time_taken <= _TARGET_RELATIVE_OVERHEAD
                    and time_taken >= min_run_time / 1000
                ):
                    break
                if time_taken > min_run_time or number * 10 > _MAX_BLOCK_SIZE:
                    break
                number *= 10
        if time_taken / number < _LESS_THAN_A_CYCLE:  # the loop would never add up
            raise UsageError(
                f"Timer: the statement took {time_taken / number:.2g} s a run, less than a "
                "clock cycle: nothing is left to time (a C++ statement whose result is "
                "unused is removed by the compiler; use its result, e.g. assign it to a "
                "variable declared in setup)")
        return number

    def _measurement_loop(
        self,
        number: int,
        stop_hook: Callable[[list[float]], bool],
        min_run_time: float,
        max_run_time: float | None = None,
        callback: Callback | None = None,
        times: list[float] | None = None,
    ) -> list[float]:
        """Blocks of `number` runs appended to `times` (the blocks kept so far) until
        they add up to `min_run_time` and `stop_hook(times)` agrees, or add up to
        `max_run_time`."""
        times = list(times or [])
        total_time = math.fsum(times)
        can_stop = False
        with self._threads():
            while total_time < min_run_time or not can_stop:
                time_spent = self._timeit(number)
                times.append(time_spent)
                total_time += time_spent
                if callback is not None:
                    callback(number, time_spent)
                can_stop = stop_hook(times)
                if max_run_time and total_time > max_run_time:
                    break
        return times

    def blocked_autorange(
        self, callback: Callback | None = None, min_run_time: float = 0.2, *,
        min_blocks: int = 1,
    ) -> Measurement:
        """Time blocks of `stmt` until their total reaches `min_run_time` seconds (and
        at least `min_blocks` blocks were timed: what an interval of the median needs).

        The block size is chosen first (see `_estimate_block_size`), so that the
        clock's overhead is a negligible share of each block; every block is one
        replicate in the returned Measurement.
        """
        min_run_time = _non_negative("min_run_time", min_run_time)
        min_blocks = _positive_int("min_blocks", min_blocks)
        number = self._estimate_block_size(min_run_time)
        times, warm = self._settled_loop(number, lambda times: len(times) >= min_blocks,
                                         min_run_time, None, callback)
        return self._warmed_measurement(number, times, warm)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback: Callback | None = None,
    ) -> Measurement:
        """Like `blocked_autorange`, but keep measuring until IQR / median < `threshold`
        (checked once there are more than 3 blocks and `min_run_time` has passed), or
        until `max_run_time` seconds have been spent."""
        threshold = _non_negative("threshold", threshold)
        min_run_time = _non_negative("min_run_time", min_run_time)
        if max_run_time is None or max_run_time == 0:  # torch reads both as "no limit"
            raise UsageError(f"Timer: max_run_time must be > 0 (it bounds the measurement), "
                             f"got {max_run_time!r}")
        max_run_time = _non_negative("max_run_time", max_run_time)
        number = self._estimate_block_size(min_run_time=0.05)

        def stop_hook(times: list[float]) -> bool:
            return len(times) > 3 and self._measurement(number, times).meets_confidence(threshold)

        times, warm = self._settled_loop(number, stop_hook, min_run_time, max_run_time,
                                         callback)
        return self._warmed_measurement(number, times, warm)

    def _settled_loop(self, number: int, stop_hook: Callable[[list[float]], bool],
                      min_run_time: float, max_run_time: float | None,
                      callback: Callback | None) -> tuple[list[float], WarmUp]:
        """The measurement loop, its warm-up checked (timing/warm_up.py): while the
        first blocks are slower than the rest, they are dropped and blocks are timed
        again up to `min_run_time` (and `stop_hook`), within `max_run_time` in all
        (blocked_autorange: max(BUDGET_S, 10 x min_run_time))."""
        budget = max_run_time or max(BUDGET_S, 10 * min_run_time)
        calls, seconds = self._searched
        times = self._measurement_loop(number, stop_hook, min_run_time, max_run_time,
                                       callback)
        spent, dropped = math.fsum(times), 0
        while (warm := warm_up_end(times)) > 0:
            calls, seconds = calls + warm * number, seconds + math.fsum(times[:warm])
            dropped += warm
            times = times[warm:]
            if spent >= budget:  # no time to measure on: the kept blocks tested once more
                return times, WarmUp(calls, seconds, dropped,
                                     stationary=still_stationary(times),
                                     tested=len(times) >= MIN_BLOCKS_TESTED)
            before = len(times)
            times = self._measurement_loop(number, stop_hook, min_run_time,
                                           budget - spent + math.fsum(times), callback,
                                           times)
            spent += math.fsum(times[before:])
        return times, WarmUp(calls, seconds, dropped, tested=len(times) >= MIN_BLOCKS_TESTED)

    def _warmed_measurement(self, number: int, times: list[float],
                            warm: WarmUp) -> Measurement:
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec,
                           metadata={"warm_up": warm.to_dict()})


    # -- device time --------------------------------------------------------------------
    def device_time(
        self,
        *,
        l2: str | None = None,
        mode: str = "events",
        rsd: float = 0.02,
        min_run_time: float = 0.05,
        max_run_time: float = 5.0,
        min_clock_ratio: float = 0.75,
        graph_calls: int | None = None,
        device: Any = None,
        batch_calls: int | None = None,
        batch_graph: bool = False,
        subtract_event_overhead: bool = False,
    ) -> Measurement:
        """GPU time per call, from CUDA events around each call of `stmt`.

        `device` ("cuda:1", an index or a torch.device) is made current for the setup and
        the measurement; by default it is the device of the CUDA tensors the setup and
        globals hold (the current device when they hold none): events time the device
        they are recorded on, so they must be the one the statement runs on.

        `l2="cold"` (the default, but in batch mode) zeroes a device buffer the size of
        the GPU's L2 before each call (outside the timed region); `"hot"` does not.
        `mode` is "events", "blocking" (calls queued behind a spin kernel, hiding the
        CPU's launch cost), "graph" (`graph_calls` calls captured in a CUDA graph; replay
        time / graph_calls; by default 10 with a hot L2, 1 with a cold one, which is
        flushed before each replay) or "batch": batch time, a quantity of its own
        (`batch_calls` calls back to back between one pair of events, behind the spin,
        L2 hot; with `batch_graph` in one CUDA graph; per call). With
        `subtract_event_overhead` (events and blocking modes) the events' own cost,
        measured on an empty kernel the same way, is taken off each sample.
        Sampling stops when the relative standard deviation is at most `rsd` (after
        `min_run_time` seconds of device time); or when, past that, it has stayed within
        5% of itself for half a second (the statement's own noise, as a kernel shorter
        than its launch in events mode: more samples would not lower it); or after
        `max_run_time` seconds.
        Samples taken while the SM clock is below `min_clock_ratio` of its maximum are
        dropped (when nvidia-ml-py can read it; if all were, they are kept and flagged).
        The Measurement's times are device times; its metadata holds the host launch
        times, the stopping rule that ended sampling, the sample count and the clock
        check.
        """
        from torchmark.timing.cuda_device import require_cuda
        from torchmark.timing.device_time import DeviceTimeOptions, measure_device_time

        if self._language is not Language.PYTHON:
            raise UsageError("Timer.device_time: only Python statements (C++ snippets time "
                             "the host)")
        options = DeviceTimeOptions(
            l2=l2, mode=mode, min_clock_ratio=_non_negative("min_clock_ratio", min_clock_ratio),
            graph_calls=graph_calls, batch_calls=batch_calls, batch_graph=bool(batch_graph),
            subtract_event_overhead=bool(subtract_event_overhead),
            rule=_stop_rule(rsd, min_run_time, max_run_time))
        require_cuda()
        call, chosen = self._gpu_statement(device, "device_time")
        with self._threads():
            times, report = measure_device_time(call, options, device=chosen)
        return Measurement(number_per_run=1, raw_times=times, task_spec=self._task_spec,
                           metadata=report.to_dict())

    def kernel_time(
        self,
        *,
        l2: str = "cold",
        rsd: float = 0.02,
        min_run_time: float = 0.05,
        max_run_time: float = 5.0,
        device: Any = None,
    ) -> Measurement:
        """Kernel time per call: the sum of the durations of the CUDA kernels `stmt`
        launches, from the GPU's own timestamps (CUPTI, through torch.profiler), as nsys
        and ncu report them; the gaps between them are not counted (device_time counts
        them), nor are copies and memsets (reported beside). `device` and the stopping
        rule as device_time's; `l2="cold"` flushes clean, as ncu's --cache-control all
        (a buffer twice the L2 read through: see timing/l2.py). The metadata names the
        kernels and their share.
        """
        from torchmark.timing.cuda_device import require_cuda
        from torchmark.timing.kernel_time import (
            KernelTimeOptions,
            kernel_metadata,
            measure_kernel_time,
        )

        options = KernelTimeOptions(l2=l2, rule=_stop_rule(rsd, min_run_time, max_run_time))
        require_cuda()
        call, chosen = self._gpu_statement(device, "kernel_time")
        with self._threads():
            run = measure_kernel_time(call, options, device=chosen)
        return Measurement(number_per_run=1, raw_times=run.times, task_spec=self._task_spec,
                           metadata=kernel_metadata(run, options.l2, str(chosen or "cuda")))

    def memory(self, *, samples: int = 5, warm_up: int = 1, device: Any = None) -> Any:
        """Memory per call from torch's allocators (timing/memory.py), as a
        MemoryMeasurement: each of `samples` calls (after `warm_up` calls) gives its peak
        bytes above its start, the bytes and number of its allocations, the bytes it
        kept, and on CUDA the caching allocator's reserved bytes. `device`: "cpu" (the
        profiler's memory events) or a CUDA device (the caching allocator's statistics);
        by default the CUDA device the setup's tensors are on, else the CPU."""
        from torchmark.timing.memory import MAX_MEMORY_SAMPLES, measure_memory

        samples = _positive_int("samples", samples)
        if samples > MAX_MEMORY_SAMPLES:
            raise UsageError(f"Timer.memory: samples must be at most {MAX_MEMORY_SAMPLES}, "
                             f"got {samples}")
        if isinstance(warm_up, bool) or not isinstance(warm_up, int) or warm_up < 0:
            raise UsageError(f"Timer.memory: warm_up must be an int >= 0, got {warm_up!r}")
        on_cpu = device is not None and str(device) == "cpu"
        if device is not None and not on_cpu:
            import torch

            if not torch.cuda.is_available():
                raise UsageError(f"Timer.memory(device={device!r}): there is no CUDA device "
                                 "here (torch.cuda.is_available() is False); leave device "
                                 "unset, or 'cpu', for the CPU allocator's bytes")
        call, chosen = self._gpu_statement(None if on_cpu else device, "memory")
        with self._threads():
            return measure_memory(call, self._task_spec, device=None if on_cpu else chosen,
                                  samples=samples, warm_up=warm_up)

    @property
    def globals(self) -> dict[str, Any]:
        """The globals the Timer was given (with `torch`)."""
        return dict(self._globals)

    def prepared_call(self) -> Callable[[], Any]:
        """The statement as a call, its setup run once now (Python statements only)."""
        return self._gpu_statement(None, "prepared_call")[0]

    def _gpu_statement(self, device: Any, what: str) -> tuple[Callable[[], Any], Any]:
        """The statement as a call, after its setup ran on `device` (made current; by
        default the device of the CUDA tensors the setup and globals hold), and that
        device (None: the current one)."""
        import torch

        from torchmark.timing.device_time import cuda_device, device_of_tensors

        if self._language is not Language.PYTHON:
            raise UsageError(f"Timer.{what}: only Python statements (C++ snippets time "
                             "the host)")
        chosen = cuda_device(device) if device is not None else None
        namespace = dict(CopyIfCallgrind.unwrap_all(self._globals))
        with torch.cuda.device(chosen) if chosen is not None else contextlib.nullcontext():
            exec(compile(self._task_spec.setup, "<setup>", "exec"), namespace)
        if chosen is None:
            chosen = device_of_tensors(namespace)
        code = compile(self._task_spec.stmt, "<stmt>", "exec")
        return (lambda: exec(code, namespace)), chosen

    # -- instruction counts -------------------------------------------------------------
    def _callgrind_request(self, number: int, repeats: int | None, collect_baseline: bool):
        from torchmark.callgrind.batch import DEFAULT_REPEATS
        from torchmark.callgrind.collector import Request

        number = _positive_int("number", number)
        repeats = DEFAULT_REPEATS if repeats is None else _positive_int("repeats", repeats)
        if self._language is Language.CPP:  # no baseline: there is no Python loop
            return Request(self._task_spec, {}, number, repeats, collect_baseline=False,
                           library=self._timer.build(),  # compile errors surface here
                           entry_suffix=getattr(self._timer, "entry_suffix", ""))
        # Syntax errors surface here, before valgrind starts; the statement itself only
        # runs in the counted process (a crashing statement must not take this one down).
        compile(self._task_spec.stmt, "<stmt>", "exec")
        compile(self._task_spec.setup, "<setup>", "exec")
        globals_ = dict(self._globals)
        for name, value in main_imports(self._task_spec.setup).items():
            globals_.setdefault(name, value)
        return Request(self._task_spec, globals_, number, repeats, collect_baseline)

    def collect_callgrind(
        self,
        number: int = 100,
        *,
        repeats: int | None = None,
        collect_baseline: bool = True,
        retain_out_file: bool = False,
    ):
        """Count the instructions of `number` runs of `stmt` with callgrind.

        The statement runs in a process under valgrind that is started once and reused
        by later calls, so only the first call pays for starting Python and torch under
        valgrind. Globals are copied into that process (see CopyIfCallgrind).

        Returns a CallgrindStats: with `repeats=None` the repeat with the median total
        of 3 (their spread is in `.repeat_totals` / `.spread`); with `repeats=R`, a tuple
        of R of them. `collect_baseline` also counts an empty statement (the loop's own
        cost); `retain_out_file` keeps the raw callgrind.out text in each result.
        """
        from torchmark.callgrind.batch import result_for
        from torchmark.callgrind.collector import collect, default_host

        host = default_host()
        if self._language is Language.CPP:
            host.launch()  # valgrind brings up Python and torch while the snippet compiles
        request = self._callgrind_request(number, repeats, collect_baseline)
        return result_for(collect(request, retain_out_file, host), repeats)


def _stop_rule(rsd: float, min_run_time: float, max_run_time: float) -> Any:
    from torchmark.timing.stopping import StopRule

    return StopRule(rsd=_non_negative("rsd", rsd),
                    min_time=_non_negative("min_run_time", min_run_time),
                    max_time=_non_negative("max_run_time", max_run_time))


def _positive_int(name: str, value: Any) -> int:
    """An int >= 1 (numpy integers too, as torch takes them)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise UsageError(f"Timer: {name} must be a positive int, got {value!r}")
    return int(value)


def _non_negative(name: str, value: Any) -> float:
    """A finite number >= 0 (an infinite time would never be reached: the loop would
    not end)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not 0 <= float(value) < math.inf:
        raise UsageError(f"Timer: {name} must be a finite number >= 0, got {value!r}")
    return float(value)
