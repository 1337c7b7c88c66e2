"""`torchmark replay` (re-run a recorded execution trace) and `torchmark trace` (record one)."""

from __future__ import annotations

import runpy
import sys
import traceback
from pathlib import Path

import click

from torchmark.cli.store_options import recorder, recording_options
from torchmark.core.threads import MAX_THREADS


@click.command("replay")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("-d", "--device", default="cpu", show_default=True, help="cpu or cuda.")
@click.option("-w", "--warmup", type=click.IntRange(min=0), default=2, show_default=True)
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--subgraph", default=None, help="Replay only the ops under the first node "
                                               "with this name (e.g. a record_function label).")
@click.option("--step", type=click.IntRange(min=0), default=None,
              help="Replay only the ops under ProfilerStep#STEP.")
@click.option("--profile", is_flag=True, help="Write a profiler trace of one replayed "
                                              "iteration to PREFIX.trace.json.")
@click.option("-o", "--output-prefix", "prefix", default=None,
              help="Write JSON lines (the operator-config format) to PREFIX.jsonl.")
@click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=1, show_default=True,
              help="torch CPU threads for the replay (as torch's Timer and every torchmark "
                   "command). The count is printed and recorded in the results.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True)
@click.option("--metric", type=click.Choice(["time", "kernel", "memory"]), default="time",
              show_default=True,
              help="time: each op's device time on a GPU (CUDA events), host time on the "
                   "CPU; kernel: each op's kernel time, the sum of its kernels' durations "
                   "from the GPU's timestamps (torch.profiler; --device cuda); memory: "
                   "each op's peak bytes and bytes allocated a call, from torch's "
                   "allocator (docs/metrics.md). See docs/gpu.md.")
@click.option("--allow-unsafe-ops", is_flag=True,
              help="Also run ops with side effects (files, process-wide state), which are "
                   "refused by default: only for a trace you trust (docs/security.md).")
@recording_options
def replay_cmd(trace, device, warmup, iterations, subgraph, step, profile, prefix, threads,
               top, metric, allow_unsafe_ops, db, no_store):
    """Replay the top-level aten ops of an execution TRACE and time them."""
    from torchmark.cli.output_files import prepare_output
    from torchmark.ops.results_file import SCHEMA
    from torchmark.records import from_replay_report
    from torchmark.replay.session import replay, summary_lines

    if prefix is not None:
        prefix = prefix.removesuffix(".jsonl")
        if not prefix:
            raise click.UsageError("-o/--output-prefix: give a path prefix (PREFIX.jsonl)")
        prepare_output(f"{prefix}.jsonl", f"{SCHEMA}/replay", "replay results", "-o")
    trace_out = f"{prefix or Path(trace).stem}.trace.json" if profile else None
    with recorder(db, no_store, trace=str(trace)) as rec:
        report = replay(trace, device=device, warmup=warmup, iterations=iterations,
                        subgraph=subgraph, step=step, threads=threads,
                        out=f"{prefix}.jsonl" if prefix else None, profile=trace_out,
                        allow_unsafe_ops=allow_unsafe_ops, metric=metric)
        rec.add(from_replay_report(report))
    for line in summary_lines(report, top):
        click.echo(line)
    if prefix:
        click.echo(f"records: {prefix}.jsonl")
    if trace_out:
        click.echo(f"profiler trace: {trace_out}")


@click.command("trace", context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", default="trace.json", show_default=True,
              help="The execution trace (its op durations go to NAME.kineto.json).")
@click.option("--no-timing", is_flag=True,
              help="Only the execution trace, no profiler (op durations). A script that "
                   "starts its own torch.profiler ends the durations there by itself.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def trace_cmd(output, no_timing, command):
    """Record an execution trace of a Python script: torchmark trace -- python s.py ARGS."""
    from torchmark.replay.record import record, timing_path

    args = list(command)
    if args and Path(args[0]).name.startswith("python"):
        args = args[1:]
    if not args or not args[0].endswith(".py"):
        raise click.UsageError("expected a Python script: torchmark trace -- python script.py")
    script = Path(args[0])
    if not script.is_file():
        raise FileNotFoundError(f"{script}: no such script")
    if not output or Path(output).is_dir():
        raise click.UsageError(f"-o {output!r}: the trace is a file; name one (a folder or "
                               "an empty name cannot hold it)")
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *args[1:]]
    sys.path.insert(0, str(script.parent.resolve()))
    saved = f"execution trace: {output}" + \
        ("" if no_timing else f" (op durations: {timing_path(output)})")
    try:
        with record(output, with_timing=not no_timing,
                    on_timing_cut=lambda message: click.echo(f"note: {message}", err=True)):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as e:
                if e.code not in (0, None):  # sys.exit("text") exits 1, as in Python
                    status = e.code if isinstance(e.code, int) else 1
                    how = f"with status {status}" if isinstance(e.code, int) else \
                        f"with status 1 ({e.code})"
                    failure = click.ClickException(f"{script} exited {how}; what ran before "
                                                   f"is in the {saved}")
                    failure.exit_code = status
                    raise failure from None
            except Exception as e:  # the script's own error: its traceback, not ours
                _print_script_traceback(e, script)
                raise click.ClickException(f"{script} raised {type(e).__name__}: {e}; what "
                                           f"ran before is in the {saved}") from None
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    click.echo(saved)


def _print_script_traceback(error: BaseException, script: Path) -> None:
    """The traceback from the script's first frame on (runpy and torchmark left out)."""
    tb = error.__traceback__
    target = str(script.resolve())
    while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()) != target:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(error), error, tb or error.__traceback__))
    click.echo(text.rstrip(), err=True)
