"""`torchmark db`: where the result store is, what it holds, and its schema upgrade."""

from __future__ import annotations

import json

import click

from torchmark.cli.store_options import db_option


@click.group("db")
def db_cmd() -> None:
    """The result store: `info` (location, schema, size, counts), `upgrade`, `backup`,
    `prune`."""


@db_cmd.command("info")
@db_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def info_cmd(db, as_json):
    """Where the store is, its schema version, size and counts."""
    from torchmark.cli.store_options import open_store

    info = open_store(db, create=True).info()
    if as_json:
        click.echo(json.dumps(info))
        return
    size = f"{info['bytes'] / 2**20:.1f} MiB" if info["bytes"] is not None else "n/a"
    click.echo(f"store: {info['url']} ({info['dialect']}, schema {info['schema']}, {size})")
    click.echo(f"runs: {info['runs']}, results: {info['results']}, cases: {info['cases']}, "
               f"machines: {info['machines']}")


@db_cmd.command("upgrade")
@db_option
def upgrade_cmd(db):
    """Migrate the store's schema to this torchmark's (every machine sharing a
    PostgreSQL store then needs this torchmark or newer)."""
    from torchmark.store import Store

    store = Store(db, upgrade=False)
    before = store.schema_version()
    after = store.upgrade()
    click.echo(f"{store.where}: schema {before or '(none)'} -> {after}")


@db_cmd.command("backup")
@click.argument("path", type=click.Path(dir_okay=False))
@db_option
def backup_cmd(path, db):
    """Copy a SQLite store to PATH (a new file) with SQLite's online backup API: a
    consistent copy, write-ahead log included, while others may write. A PostgreSQL
    store: use pg_dump."""
    from torchmark.cli.store_options import open_store

    store = open_store(db)
    target = store.backup(path)
    click.echo(f"{store.where} -> {target}")


@db_cmd.command("prune")
@click.option("--before", required=True, metavar="DATE",
              help="Remove the runs that started before this date (ISO: 2026-01-31).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (for scripts).")
@db_option
def prune_cmd(before, yes, db):
    """Remove the runs that started before DATE, with their results and what was said of
    their changes (asks first, unless --yes)."""
    from torchmark.cli.store_options import confirm, open_store

    store = open_store(db)
    ids = store.runs_before(before)
    if not ids:
        click.echo(f"no run of {store.where} started before {before}")
        return 0
    confirm(f"remove {len(ids)} run(s) started before {before} (runs {ids[0]} to "
            f"{ids[-1]}) and their results from {store.where}?", yes)
    click.echo(f"{store.delete_runs(ids)} run(s) removed from {store.where}")
    return 0
