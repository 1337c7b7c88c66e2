"""`torchmark import`: results files into the store (every format torchmark has written;
a file imported twice adds nothing)."""

from __future__ import annotations

import click

from torchmark.cli.store_options import db_option


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@db_option
def import_cmd(files, db):
    """Record the results of FILES (measurements, callgrind counts, ops, replay and suite
    results) in the store, one run a file, keyed by its content."""
    from torchmark.cli.store_options import open_store

    store = open_store(db, create=True)
    total = 0
    for path in files:
        added = store.import_file(path)
        total += added
        click.echo(f"{path}: {added} result{'s' if added != 1 else ''}"
                   + ("" if added else " (already in the store)"))
    click.echo(f"{total} result{'s' if total != 1 else ''} added to {store.where}")
