"""`torchmark timeit`: time one statement, like `python -m timeit`."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import click

from torchmark.cli.params import FiniteRange, check_syntax
from torchmark.cli.store_options import recorder, recording_options
from torchmark.core.errors import UsageError
from torchmark.core.threads import MAX_THREADS


def _check_device(ctx, param, value: str) -> str:
    kind, colon, index = value.partition(":")
    if value == "cpu" or (kind == "cuda" and (not colon or index.isdigit())):
        return value
    raise click.BadParameter(f"expected cpu, cuda or cuda:N, got {value!r}")


@click.command("timeit")
@click.argument("stmt", nargs=-1, required=True)
@click.option("-s", "--setup", multiple=True, help="Setup code, run once (repeatable; lines).")
@click.option("-t", "--threads", "num_threads", type=click.IntRange(1, MAX_THREADS), default=1,
              show_default=True, help="torch thread count during the measurement.")
@click.option("--min-run-time", type=FiniteRange(min=0, min_open=True), default=0.2,
              show_default=True, help="Seconds of measurement to collect (more than 0).")
@click.option("--label", default=None, help="Label (table title in `compare`).")
@click.option("--sub-label", default=None, help="Sub-label (row name in `compare`).")
@click.option("--description", default=None, help="Description (column in `compare`).")
@click.option("--env", default=None, help="Environment tag for A/B comparisons.")
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Append the Measurement to this JSON file.")
@click.option("--device", default="cpu", show_default=True, callback=_check_device,
              help="cuda or cuda:N: GPU time per call (CUDA events) beside the host launch "
                   "time.")
@click.option("--metric", type=click.Choice(["wall", "device", "kernel", "memory"]),
              default=None,
              help="What to measure: wall (host time; the default on cpu), device (CUDA "
                   "events around each call; the default with --device cuda; --mode batch "
                   "gives batch time), kernel (the sum of the call's kernel durations, from "
                   "the GPU's timestamps through torch.profiler; implies --device cuda) or "
                   "memory (a call's peak bytes and its allocations, from torch's "
                   "allocator on --device; docs/metrics.md). See docs/gpu.md.")
@click.option("--samples", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="--metric memory: calls sampled (one a sample; they must agree).")
@click.option("--compile", "compiled", is_flag=True,
              help="STMT calls something torch.compile made: measure its compile time "
                   "(cold, and with inductor's caches warm), graphs, graph breaks and "
                   "recompilations, and its steady state against eager, interleaved "
                   "(docs/metrics.md).")
@click.option("--fail-on-recompile", is_flag=True,
              help="--compile: a recompilation while measuring is an error (exit 1).")
@click.option("--l2", type=click.Choice(["cold", "hot"]), default=None,
              help="With --device cuda: flush the GPU's L2 before each call, or not "
                   "[default: cold; hot in --mode batch].")
@click.option("--mode", type=click.Choice(["events", "blocking", "graph", "batch"]),
              default="events", show_default=True,
              help="With --device cuda: plain events, calls queued behind a spin kernel, "
                   "CUDA-graph replay, or batch time (many calls back to back between one "
                   "pair of events, behind the spin; L2 hot).")
@click.option("--batch-calls", type=click.IntRange(min=1), default=None,
              help="--mode batch: calls a batch [default: sized from the warm-up].")
@click.option("--batch-graph", is_flag=True,
              help="--mode batch: the batch captured in one CUDA graph.")
@click.option("--minus-event-cost", is_flag=True,
              help="--mode events or blocking: take the events' own cost off each call "
                   "(an empty kernel timed the same way, less its kernel time).")
@click.option("--rsd", type=FiniteRange(min=0), default=0.02, show_default=True,
              help="With --device cuda: stop at this relative standard deviation.")
@click.option("--max-run-time", type=FiniteRange(min=0), default=5.0, show_default=True,
              help="With --device cuda: stop after this many seconds regardless.")
@click.option("--processes", type=click.IntRange(1, 64), default=None, metavar="N",
              help="Time STMT in N fresh processes, one after the other, --min-run-time in "
                   "all (wall time only): a process's speed is drawn at its start, and "
                   "`ab` compares two such runs by their processes' medians (docs/ab.md).")
@click.option("--vs", "candidate", default=None, metavar="STMT",
              help="Also time this statement, in blocks interleaved with STMT's, and say "
                   "whether it is faster or slower (measure_ab; host time only).")
@recording_options
def timeit_cmd(stmt, setup, num_threads, min_run_time, label, sub_label, description, env, save,
               device, metric, samples, compiled, fail_on_recompile, l2, mode, batch_calls,
               batch_graph, minus_event_cost, rsd,
               max_run_time, processes, candidate, db, no_store):
    """Time STMT with blocked_autorange and print the Measurement.

    Several STMT arguments are joined as lines, as in `python -m timeit`.
    """
    source = click.get_current_context().get_parameter_source
    device = _device_for(metric, device, source("device") is
                         not click.core.ParameterSource.DEFAULT)
    given = {name: source(name) is not click.core.ParameterSource.DEFAULT
             for name in ("l2", "mode", "rsd", "max_run_time", "batch_calls", "batch_graph",
                          "minus_event_cost")}
    if metric == "kernel":
        misplaced = [f"--{name.replace('_', '-')}" for name in ("mode", "batch_calls",
                                                                "batch_graph",
                                                                "minus_event_cost")
                     if given[name]]
        if misplaced:
            raise click.UsageError(f"{', '.join(misplaced)}: for device time; --metric "
                                   "kernel sums the kernels' own durations (drop them)")
    if fail_on_recompile and not compiled:
        raise click.UsageError("--fail-on-recompile: for --compile")
    if compiled:
        others = [name for name, on in (("--metric", metric is not None),
                                        ("--device", device != "cpu"),
                                        ("--processes", processes is not None),
                                        ("--vs", candidate is not None)) if on]
        if others:
            raise click.UsageError(f"--compile measures compile time and wall time beside "
                                   f"eager's; it does not take {', '.join(others)}")
    if metric == "memory" and processes is not None:
        raise click.UsageError("--processes times wall time; --metric memory counts bytes, "
                               "the same in every process (drop one of them)")
    if metric != "memory" and source("samples") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--samples: for --metric memory (time stops by --min-run-time)")
    if device == "cpu" or metric == "memory":
        gpu_only = [f"--{name.replace('_', '-')}" for name, on in given.items() if on]
        if gpu_only:
            raise click.UsageError(f"{', '.join(gpu_only)}: for GPU time only; add "
                                   "--device cuda (or drop them)" if metric != "memory"
                                   else f"{', '.join(gpu_only)}: for GPU time, not "
                                   "--metric memory (drop them)")
    if processes is not None and device != "cpu":
        raise click.UsageError("--processes times wall time on the host; it does not take "
                               "--device or --metric device/kernel")
    if candidate is not None:
        given_ = [name for name, value in (("--device", device != "cpu"), ("--save", save),
                                          ("--processes", processes is not None),
                                          ("--metric memory", metric == "memory"),
                                          ("--sub-label", sub_label),
                                          ("--description", description), ("--env", env))
                 if value]
        if given_:
            raise click.UsageError(f"--vs times two statements on the host and prints a "
                                   f"verdict; it does not take {', '.join(given_)}")
    check_syntax(("the statement", "\n".join(stmt)), ("the setup", "\n".join(setup)),
                 *([("the --vs statement", candidate)] if candidate is not None else []))
    if candidate is not None:
        with recorder(db, no_store) as rec:
            return _versus("\n".join(stmt), candidate, "\n".join(setup) or "pass",
                           num_threads, min_run_time, label, rec)
    from torchmark.timing.files import load_compared
    from torchmark.timing.timer_class import Timer

    timer = Timer(
        stmt="\n".join(stmt),
        setup="\n".join(setup) or "pass",
        num_threads=num_threads,
        label=label,
        sub_label=sub_label,
        description=description,
        env=env,
    )
    if save and Path(save).exists() and Path(save).stat().st_size:  # empty: a new file
        load_compared(save)  # a file it cannot append to fails now, not after measuring
    with recorder(db, no_store, env=env) as rec:  # --env labels the run as TORCHMARK_ENV
        gpu = {"l2": l2, "mode": mode, "batch_calls": batch_calls, "batch_graph": batch_graph,
               "subtract_event_overhead": minus_event_cost}
        try:
            if compiled:
                _compiled(timer, rec, save, min_run_time, fail_on_recompile)
            elif metric == "memory":
                _memory(timer, rec, save, device, samples)
            elif processes is not None:
                _in_processes(timer, rec, save, processes, min_run_time)
            else:
                _time(timer, rec, save, device, metric, gpu, rsd, min_run_time,
                      max_run_time)
        except click.ClickException as e:  # the case failed: the store says why
            if not isinstance(e, click.UsageError):
                failed = _failed(timer, device, metric, e.format_message())
                rec.add([failed])
                if save:  # and the file: its older samples must not stand for this run
                    _save_results(save, [failed], rec)
            raise


def _failed(timer: Any, device: str, metric: str | None, why: str) -> Any:
    """The case `timer` measures, failed with `why` (as the store keeps a failure)."""
    from torchmark.core.result import METRICS, Failure, Result, timer_case

    name = metric if metric in METRICS else "wall"
    return Result(case=timer_case(timer.task_spec, "timeit", device), metric=name,
                  unit=METRICS[name], number_per_run=1, samples=(),
                  failure=Failure(why[:2000]))


def _device_for(metric: str | None, device: str, device_given: bool) -> str:
    """The device a --metric times on: device and kernel time on cuda (the default
    --device when not given), wall time on the host."""
    if metric in ("device", "kernel") and device == "cpu":
        if device_given:
            raise click.UsageError(f"--metric {metric} times a CUDA device, not --device cpu")
        return "cuda"
    if metric == "wall" and device != "cpu":
        raise click.UsageError(f"--metric wall times the host; --device {device} gives "
                               "device time (drop one of them)")
    return device


def _time(timer, rec, save, device, metric, gpu, rsd, min_run_time, max_run_time) -> None:
    """Measure, print, record in the store and save (--save)."""
    if device != "cpu":
        import torch

        if not torch.cuda.is_available():
            what = f"--metric {metric}" if metric in ("device", "kernel") else \
                f"--device {device}"
            raise click.UsageError(f"{what}: there is no CUDA device here "
                                   "(torch.cuda.is_available() is False); drop it to time "
                                   "on the host")
        where = None if device == "cuda" else device
        if metric == "kernel":
            m = _measure(lambda: timer.kernel_time(l2=gpu["l2"] or "cold", rsd=rsd,
                                                   min_run_time=min_run_time,
                                                   max_run_time=max_run_time, device=where),
                         {"the statement": timer})
            results = [m]
        else:
            m = _measure(lambda: timer.device_time(rsd=rsd, min_run_time=min_run_time,
                                                   max_run_time=max_run_time, device=where,
                                                   **gpu),
                         {"the statement": timer})
            results = [m, m.host_measurement()]
    else:
        blocks: list[tuple[int, float]] = []
        try:
            with _block_progress(min_run_time) as advance:
                def on_block(number: int, seconds: float) -> None:
                    blocks.append((number, seconds))
                    advance(seconds)

                results = [_measure(lambda: timer.blocked_autorange(
                    min_run_time=min_run_time, callback=on_block), {"the statement": timer})]
        except KeyboardInterrupt:
            if not blocks:
                raise
            # what was measured is kept: printed (and saved) before the interrupt ends it
            from torchmark.timing.measurement import Measurement

            partial = Measurement(blocks[0][0], [s for _, s in blocks], timer.task_spec)
            click.echo(partial.summary())
            click.echo(f"(interrupted after {len(blocks)} blocks, "
                       f"{sum(s for _, s in blocks):.2f} s of the {min_run_time:g} s asked)")
            _keep(rec, save, [partial])
            raise
    click.echo(results[0].summary())
    _keep(rec, save, results)


def _memory(timer, rec, save, device: str, samples: int) -> None:
    """Count a call's allocations, print, record in the store and save (--save: a
    results file)."""
    from torchmark.records import results_of

    if device != "cpu":
        import torch

        if not torch.cuda.is_available():
            raise click.UsageError(f"--device {device}: there is no CUDA device here "
                                   "(torch.cuda.is_available() is False)")
    m = _measure(lambda: timer.memory(samples=samples, device=device),
                 {"the statement": timer})
    click.echo(m.summary())
    results = results_of(m)
    rec.add(results)
    if save:
        _save_results(save, results, rec)


def _compiled(timer, rec, save, min_run_time: float, fail_on_recompile: bool) -> None:
    """--compile: measure, print, record in the store and save (a results file)."""
    from torchmark.compilation import measure_compile

    m = _measure(lambda: measure_compile(timer, min_run_time=min_run_time,
                                         fail_on_recompile=fail_on_recompile),
                 {"the statement": timer})
    click.echo(m.summary())
    results = m.results()
    rec.add(results)
    if save:
        _save_results(save, results, rec)


def _save_results(save: str, results: list, rec) -> None:
    """Results into --save's file (a results file; measurements written before kept)."""
    from torchmark.core.provenance import Provenance
    from torchmark.core.results_file import save_results

    provenance = rec.provenance or Provenance.capture(env=rec.env)
    save_results(save, [dataclasses.replace(r, provenance=provenance) for r in results],
                 what="measurements file", older=_older_measurements)
    click.echo(f"saved to {save} ({len(results)} results: "
               f"{', '.join(sorted({r.metric for r in results}))})")


def _older_measurements(path):
    """A measurements file written before Results, as Results (kept when appending)."""
    from torchmark.timing.files import load_measurements
    from torchmark.timing.results import measurement_to_result

    return [measurement_to_result(m) for m in load_measurements(path)]


def _in_processes(timer, rec, save, processes: int, min_run_time: float) -> None:
    """Measure in fresh processes (compare/processes.py), print, record and save."""
    import sys

    from torchmark.compare.processes import measure_in_processes
    from torchmark.core.errors import MeasurementError

    spec = timer.task_spec
    with _block_progress(min_run_time) as advance:
        try:
            m = measure_in_processes(
                spec.stmt, spec.setup, processes=processes, min_run_time=min_run_time,
                num_threads=spec.num_threads, label=spec.label, sub_label=spec.sub_label,
                description=spec.description, env=spec.env,
                callback=lambda _, number, seconds: advance(seconds), command=sys.argv)
        except MeasurementError as e:  # the statement raised in a worker: one line
            raise click.ClickException(str(e)) from None
    click.echo(m.summary())
    _keep(rec, save, [m])


def _keep(rec, save: str | None, results: list) -> None:
    """Into the store (unless recording is off), then into --save's file."""
    from torchmark.records import results_of

    rec.add(results_of(results))
    if save:
        from torchmark.core.provenance import Provenance

        _save(save, results, rec.provenance or Provenance.capture(env=rec.env))


def _save(path: str, results: list, provenance) -> None:
    from torchmark.timing.files import save_measurements

    held = save_measurements(path, results, append=True, provenance=provenance)
    click.echo(f"saved to {path} ({len(held)} measurement{'s' if len(held) > 1 else ''})")


@contextlib.contextmanager
def _block_progress(min_run_time: float):
    """A bar of the seconds measured out of `min_run_time`, on a terminal, for a
    measurement of 2 s or more; yields the function a finished block calls."""
    from torchmark.core.announce import AFTER_S, progress_wanted

    if min_run_time < AFTER_S or not progress_wanted():
        yield lambda seconds: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(TextColumn("timing blocks"), BarColumn(),
                  TextColumn("{task.completed:.1f} / {task.total:g} s"),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("timing", total=min_run_time)
        yield lambda seconds: progress.advance(task, seconds)


def _versus(baseline: str, candidate: str, setup: str, num_threads: int,
            min_run_time: float, label: str | None, rec) -> None:
    """Both statements in interleaved blocks, both Measurements, then the verdict."""
    from torchmark.compare.interleave import measure_ab
    from torchmark.records import results_of
    from torchmark.timing.timer_class import Timer

    a, b = (Timer(stmt=s, setup=setup, num_threads=num_threads, label=label,
                  sub_label=None if label is None else s) for s in (baseline, candidate))
    result = _measure(lambda: measure_ab(a, b, min_run_time=max(min_run_time, 1e-3)),
                      {"the statement": a, "the --vs statement": b})
    rec.add(results_of([result.baseline, result.candidate]))
    click.echo(f"{result.baseline.summary()}\n\n{result.candidate.summary()}\n")
    click.echo(f"candidate / baseline (--vs {candidate!r} / {baseline!r}, median of "
               f"{len(result.baseline.times)} paired blocks): {result.estimate()}")


def _raised_in(error: BaseException, timers: dict) -> str:
    """Which piece of user code `error` came from: the setup, or the statement of one of
    `timers` (name -> Timer), from the frame of timeit's generated function."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == "<timeit-src>":
            for name, timer in timers.items():
                inner = getattr(getattr(timer, "_timer", None), "inner", None)
                if getattr(inner, "__code__", None) is code:
                    # timeit's template: a blank line, `def inner(...)`, then the setup
                    setup_lines = len(timer.task_spec.setup.splitlines()) or 1
                    return "the setup" if tb.tb_lineno <= 2 + setup_lines else name
        tb = tb.tb_next
    return "the statement or its setup"


def _measure(measure, timers: dict):
    """Run a measurement; the user code's own error is one line naming the piece that
    raised, exit 1."""
    try:
        return measure()
    except SystemExit as e:  # the statement's own sys.exit(): say so, keep its status
        failure = click.ClickException(f"{_raised_in(e, timers)} called sys.exit("
                                       f"{e.code!r})")
        failure.exit_code = e.code if isinstance(e.code, int) and e.code else 1  # type: ignore[misc]
        raise failure from None
    except BaseException as e:  # GeneratorExit, a BaseException of the user's own, ...
        if isinstance(e, KeyboardInterrupt):
            raise
        from torchmark.core.errors import MeasurementError

        if isinstance(e, MeasurementError):  # torchmark's own finding: said as it is
            raise click.ClickException(str(e)) from None
        # options click cannot check alone (e.g. --max-run-time below --min-run-time)
        if isinstance(e, UsageError):
            raise click.UsageError(str(e)) from None
        raise click.ClickException(f"{_raised_in(e, timers)} raised "
                                   f"{type(e).__name__}: {e}") from None
