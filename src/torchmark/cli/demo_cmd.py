"""`torchmark demo`: the main job, the batched-dot study printed and saved."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import click

from torchmark.cli.params import FiniteRange
from torchmark.cli.store_options import recorder, recording_options


@click.command("demo")
@click.option("--quick", is_flag=True, help="Fewer sizes and shorter runs (a smoke test).")
@click.option("--min-run-time", type=FiniteRange(min=0, min_open=True), default=None,
              help="Seconds per measurement (default 0.2; 0.05 with --quick).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto: the CPU, and CUDA too where available.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="results",
              show_default=True, help="Folder for the JSON results.")
@recording_options
def demo_cmd(quick, min_run_time, device, out_dir, db, no_store):
    """Batched dot product, mul/sum against bmm, over sizes and thread counts."""
    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from torchmark.compare import Compare
    from torchmark.core.provenance import Provenance
    from torchmark.demos import batched_dot
    from torchmark.timing.files import save_measurements

    if device == "cuda" and not torch.cuda.is_available():
        raise click.UsageError("--device cuda: CUDA is not available on this machine")
    devices = ["cpu"] if device == "cpu" else ["cuda"] if device == "cuda" else (
        ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    sizes = batched_dot.QUICK_SIZES if quick else batched_dot.FULL_SIZES
    min_run_time = min_run_time if min_run_time is not None else (0.05 if quick else 0.2)
    threads = batched_dot.default_thread_counts()
    cases = batched_dot.plan(sizes, threads, devices)

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), transient=True, disable=not sys.stderr.isatty(),
                  console=None) as progress:
        task = progress.add_task("batched dot", total=len(cases))
        results = batched_dot.run(
            sizes, threads, devices, min_run_time,
            on_case=lambda case, m: progress.advance(task),
        )

    compare = Compare(results)
    compare.trim_significant_figures()
    compare.colorize()
    color = sys.stdout.isatty()
    click.echo(compare.render(color=color), nl=False, color=color)
    click.echo("Rows are [b, n]: b pairs of vectors of n floats, each pair's dot product; "
               "columns: mul/sum and bmm.")

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(out_dir) / f"batched_dot-{stamp}.jsonl"
    save_measurements(path, results,  # first: the verdicts below cannot lose them
                      provenance=Provenance.capture(command=["torchmark", "demo"]))
    from torchmark.records import results_of

    with recorder(db, no_store, demo="batched_dot") as rec:
        rec.add(results_of(results))
    click.echo(f"\n{len(results)} measurements saved to {path}")
    click.echo(f"Compare them later with: torchmark compare {path}")

    shapes = [(sizes[0], sizes[-1]), (sizes[-1], sizes[-1])]
    click.echo("\nIs bmm faster than mul/sum? (measure_ab: interleaved blocks, paired; "
               "CPU, 1 thread)")
    for verdict in batched_dot.verdicts(shapes, min_run_time):
        click.echo(f"  {verdict}")
