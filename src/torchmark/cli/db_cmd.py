"""`torchmark db`: where the result store is, what it holds, and its schema upgrade."""

from __future__ import annotations

import json

import click

from torchmark.cli.store_options import db_option


@click.group("db")
def db_cmd() -> None:
    """The result store: `info` (location, schema, size, counts), `upgrade`."""


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
