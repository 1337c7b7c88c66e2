"""`torchmark runs`: the runs the store holds, newest first, one line each."""

from __future__ import annotations

import json

import click

from torchmark.cli.store_options import db_option


@click.group("runs", invoke_without_command=True)
@click.option("--since", default=None, help="Runs started on or after this date (ISO).")
@click.option("--machine", default=None, help="A machine fingerprint or hostname.")
@click.option("--env", default=None, help="An environment label.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON lines.")
@db_option
@click.pass_context
def runs_cmd(ctx, since, machine, env, limit, as_json, db):
    """One line a run: id, time, command, commit, torch, machine, results, status.
    `runs delete RUN...` removes runs."""
    if ctx.invoked_subcommand is not None:
        return
    from torchmark.cli.store_options import open_store
    from torchmark.core.plain_table import align
    from torchmark.core.provenance import commit_label

    runs = open_store(db).runs(since=since, machine=machine, env=env, limit=limit)
    if as_json:
        for run in runs:
            click.echo(json.dumps(run, default=str))
        return
    rows = [[str(r["id"]), r["started"][:19].replace("T", " "),
             _command(r["command"]),
             commit_label(r["git_commit"], r["git_dirty"]),
             r["torch_version"] or "", (r["machine"] or "")[:8], r["env"] or "",
             str(r["results"]), r["status"]] for r in runs]
    header = ["run", "started (UTC)", "command", "commit", "torch", "machine", "env",
              "results", "status"]
    for line in align(header, rows, [True, False, False, False, False, False, False, True,
                                     False], rule=True):
        click.echo(line)


def _command(words: list[str] | None) -> str:
    """A run's command line (without the program where it is torchmark's own: `timeit
    ...`; `pytest ...` stays), quoted as a shell takes it, cut to COMMAND_CHARS (`runs
    --json` and `show` give it whole)."""
    import shlex

    words = [str(word) for word in words or []]
    text = shlex.join(words[1:] if words[:1] == ["torchmark"] else words)
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."


COMMAND_CHARS = 48


@runs_cmd.command("delete")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN...")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (for scripts).")
@db_option
def delete_cmd(run_ids, yes, db):
    """Remove runs (12 or run:12), with their results and what was said of their
    changes (asks first, unless --yes)."""
    from torchmark.cli.show_cmd import RunId
    from torchmark.cli.store_options import confirm, open_store

    ids = [RunId().convert(r, None, None) for r in run_ids]
    store = open_store(db)
    missing = [i for i in ids if not store.has_run(i)]
    if missing:
        raise click.UsageError(f"the store at {store.where} holds no run "
                               f"{', '.join(map(str, missing))} (`torchmark runs` lists them)")
    confirm(f"remove run(s) {', '.join(map(str, ids))} and their results from "
            f"{store.where}?", yes)
    click.echo(f"{store.delete_runs(ids)} run(s) removed from {store.where}")
