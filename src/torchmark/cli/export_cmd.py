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
              help="jsonl: a result a line with its raw samples; csv and parquet: the "
                   "summary columns (parquet needs pandas and pyarrow).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
@db_option
def export_cmd(since, machine, env, fmt, output, db):
    """Write the store's results (one row a run, case and metric) to OUTPUT."""
    from torchmark.cli.store_options import open_store
    from torchmark.store.store import TABLE_COLUMNS

    rows = open_store(db).results(since=since, machine=machine, env=env,
                                  samples=fmt == "jsonl")
    if fmt == "jsonl":
        with open(output, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, default=str) + "\n")
    elif fmt == "csv":
        with open(output, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=TABLE_COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    else:
        try:
            import pandas as pd
        except ImportError:
            raise click.UsageError("--format parquet needs pandas and pyarrow: pip install "
                                   "pandas pyarrow (or use jsonl or csv)") from None
        pd.DataFrame([{k: row.get(k) for k in TABLE_COLUMNS} for row in rows]).to_parquet(output)
    click.echo(f"{len(rows)} result{'s' if len(rows) != 1 else ''} -> {output}")
