"""`torchmark export`: the store's results as one file (JSON lines, CSV or Parquet)."""

from __future__ import annotations

import csv
import json

import click

from torchmark.cli.store_options import db_option


@click.command("export")
@click.option("--since", default=None, help="Runs started on or after this date (ISO).")
@click.option("--machine", default=None, help="A machine fingerprint or hostname.")
@click.option("--env", default=None, help="An environment label.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]),
              default="jsonl", show_default=True,
              help="jsonl: a results file (every result with its raw samples and its "
                   "run's provenance: `torchmark import` reads it back); csv: the summary "
                   "columns, each case's title and a column a parameter; parquet: the "
                   "summary columns (needs pandas and pyarrow).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
@db_option
def export_cmd(since, machine, env, fmt, output, db):
    """Write the store's results (one row a run, case and metric) to OUTPUT, replaced
    whole when done (a reader never sees half a file)."""
    from torchmark.cli.store_options import open_store
    from torchmark.core.atomic_files import atomic_output
    from torchmark.store.store import TABLE_COLUMNS

    store = open_store(db)
    if fmt == "jsonl":
        from torchmark.core.results_file import results_text

        count = 0
        with atomic_output(output) as f:
            f.write(results_text([]))
            for state, results in store.iter_runs_results(since=since, machine=machine,
                                                          env=env):
                f.write(results_text(results, header=False, run=state))
                count += len(results)
        click.echo(f"{count} result{'s' if count != 1 else ''} -> {output}")
        return
    rows = store.results(since=since, machine=machine, env=env)
    if fmt == "csv":
        from torchmark.core.neutralise import csv_cell

        params = store.case_params()
        names = sorted({name for row in rows for name in params.get(row["case_id"], {})})
        titles = store.case_titles()
        with atomic_output(output, newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["title", *TABLE_COLUMNS, *(f"param:{n}" for n in names)])
            for row in rows:
                values = params.get(row["case_id"], {})
                writer.writerow([csv_cell(v) for v in [
                    titles.get(row["case_id"], ""), *(row.get(k) for k in TABLE_COLUMNS),
                    *(_param_cell(values[n]) if n in values else "" for n in names)]])
    else:
        try:
            import pandas as pd
        except ImportError:
            raise click.UsageError("--format parquet needs pandas and pyarrow: pip install "
                                   "pandas pyarrow (or use jsonl or csv)") from None
        with atomic_output(output, "wb") as f:
            pd.DataFrame([{k: row.get(k) for k in TABLE_COLUMNS} for row in rows]
                         ).to_parquet(f)
    click.echo(f"{len(rows)} result{'s' if len(rows) != 1 else ''} -> {output}")


def _param_cell(value: object) -> object:
    """A case parameter in a CSV cell: a number or text as it is, anything else (an ops
    config) as compact JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
