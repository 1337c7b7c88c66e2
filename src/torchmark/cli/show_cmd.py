"""`torchmark show`: a stored run's results, as a Compare table (times) and a line each
of the other metrics' (instruction counts, memory, compile time) and failures."""

from __future__ import annotations

import dataclasses
import json

import click

from torchmark.cli.store_options import db_option
from torchmark.core.neutralise import terminal_text


class RunId(click.ParamType):
    """A run of the store: 12, run:12, or latest (the newest run that ended `ok` or
    `interrupted`, as `gate` reads it: a failed run is left out)."""

    name = "RUN"

    def convert(self, value, param, ctx):
        text = str(value).removeprefix("run:")
        if text == "latest":
            return text
        if not text.isdigit() or int(text) < 1:
            self.fail(f"{value!r} is not a run id (12, run:12 or latest)", param, ctx)
        return int(text)


@click.command("show")
@click.argument("run", type=RunId())
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv", "json"]),
              default="text", show_default=True)
@db_option
def show_cmd(run, fmt, db):
    """RUN's results: times as a Compare table; instruction counts, other metrics
    (memory, compile time) and failures listed."""
    from torchmark.cli.store_options import open_store
    from torchmark.compare import Compare

    store = open_store(db)
    if run == "latest":
        newest = store.finished_runs()[:1]
        if not newest:
            raise click.UsageError(f"the store at {store.where} holds no finished run")
        run = newest[0]["id"]
    rows = store.results(run=run, samples=True)
    if not rows:
        raise click.UsageError(f"the store holds no results of run {run} (`torchmark runs` "
                               "lists the runs)")
    if fmt == "json":
        for row in rows:
            click.echo(json.dumps({k: v for k, v in row.items() if k != "samples"},
                                  default=str))
        return
    measurements = store.measurements(run)
    for m in measurements:  # unlabelled (timeit's): under the run's title, not an empty one
        if not m.task_spec.label:
            m.task_spec = dataclasses.replace(m.task_spec, label=f"run {run}")
    if measurements:
        compare = Compare(measurements)
        compare.trim_significant_figures()
        text = {"text": compare.render, "markdown": compare.to_markdown,
                "csv": compare.to_csv}[fmt]()
        click.echo(text if isinstance(text, str) else str(text))
    from torchmark.compare.verdict_table import format_value
    from torchmark.store.store import TIME_QUANTITIES

    titles = store.case_titles(sorted({row["case_id"] for row in rows}))
    for row in rows:
        if row["metric"] == "instructions" and row["median"] is not None:
            click.echo(terminal_text(f"{titles.get(row['case_id'], row['case_id'])}: "
                                     f"{row['median']:,.0f} instructions a run"))
        elif row["metric"] not in TIME_QUANTITIES and row["median"] is not None:
            # what a Compare table of times does not hold: memory, compile time
            click.echo(terminal_text(
                f"{titles.get(row['case_id'], row['case_id'])}: "
                f"{format_value(row['median'], row['unit'])}"
                f"{'' if row['unit'] == 's' else ' ' + row['unit']} ({row['metric']}, "
                f"median of {row['n']})"))
        if row["failure"]:
            click.echo(terminal_text(f"{titles.get(row['case_id'], row['case_id'])}: "
                                     f"failed: {row['failure']}"))
