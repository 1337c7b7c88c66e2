"""`torchmark runs`: the runs the store holds, newest first, one line each."""

from __future__ import annotations

import json

import click

from torchmark.cli.store_options import db_option


@click.command("runs")
@click.option("--since", default=None, help="Runs started on or after this date (ISO).")
@click.option("--machine", default=None, help="A machine fingerprint or hostname.")
@click.option("--env", default=None, help="An environment label.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON lines.")
@db_option
def runs_cmd(since, machine, env, limit, as_json, db):
    """One line a run: id, time, command, commit, torch, machine, results, status."""
    from torchmark.cli.store_options import open_store
    from torchmark.core.plain_table import align
    from torchmark.core.provenance import commit_label

    runs = open_store(db).runs(since=since, machine=machine, env=env, limit=limit)
    if as_json:
        for run in runs:
            click.echo(json.dumps(run, default=str))
        return
    rows = [[str(r["id"]), r["started"][:19].replace("T", " "),
             " ".join(r["command"][1:3]) if r["command"] else "",
             commit_label(r["git_commit"], r["git_dirty"]),
             r["torch_version"] or "", (r["machine"] or "")[:8], r["env"] or "",
             str(r["results"]), r["status"]] for r in runs]
    header = ["run", "started (UTC)", "command", "commit", "torch", "machine", "env",
              "results", "status"]
    for line in align(header, rows, [True, False, False, False, False, False, False, True,
                                     False], rule=True):
        click.echo(line)
