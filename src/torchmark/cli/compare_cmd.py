"""`torchmark compare`: one table from measurements saved in several files."""

from __future__ import annotations

import sys

import click

from torchmark.cli.store_options import db_option


@click.command("compare")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv"]), default="text",
              show_default=True)
@click.option("--trim/--no-trim", default=True, show_default=True,
              help="Trim digits to the significant figures.")
@click.option("--color/--no-color", default=None,
              help="Colour the text table (default: when stdout is a terminal).")
@click.option("--rowwise", is_flag=True, help="Colour against the best in each row.")
@click.option("--warnings", "highlight", is_flag=True, help="Mark high-variance cells.")
@db_option
def compare_cmd(files, fmt, trim, color, rowwise, highlight, db):
    """Print a Compare table of the measurements in FILES (JSON from `timeit --save`,
    `demo`, or `torchmark.timing.files.save_measurements`; or `torchmark ops` results,
    a column per file; or runs of the store: `run:N`, or N). When files hold the same
    task (one statement saved before and after a change), each file gets its own column
    (or, where the measurements have descriptions, its name in their env) instead of
    pooling into one cell. Two runs of the store also get each case's verdict (faster,
    slower, no significant change, unsure) with the ratio's interval, as `ab` gives it."""
    from torchmark.cli.measurement_files import (
        is_run_id,
        read_measurement_files,
        tell_files_apart,
    )
    from torchmark.compare import Compare

    groups = read_measurement_files(list(files), db)
    measurements = [m for group in tell_files_apart(groups, list(files)) for m in group]
    if not measurements:
        raise click.UsageError("the files hold no measurements")
    compare = Compare(measurements)
    if trim:
        compare.trim_significant_figures()
    if highlight:
        compare.highlight_warnings()
    use_color = sys.stdout.isatty() if color is None else color
    if use_color or fmt != "text":
        compare.colorize(rowwise=rowwise)
    if fmt == "markdown":
        click.echo(compare.to_markdown(), nl=False)
    elif fmt == "csv":
        click.echo(compare.to_csv(), nl=False)
    else:
        click.echo(compare.render(color=use_color), nl=False, color=use_color)
    if len(files) == 2 and all(is_run_id(f) for f in files) and fmt != "csv":
        # two stored runs: each case's verdict from the raw samples, as `ab` gives it
        from torchmark.cli.ab_cmd import compare_sides, verdict_lines

        results, only_a, only_b, errors = compare_sides(groups, 0.95, 0.01, 0)
        click.echo("\n".join(["", *verdict_lines(results, only_a, only_b, errors,
                                                  [f"run {f.removeprefix('run:')}"
                                                   for f in files], 0.95, 0.01,
                                                  markdown_table=fmt == "markdown")]))
