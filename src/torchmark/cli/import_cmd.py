"""`torchmark import`: results files into the store (every format torchmark has written;
bounded, validated and stored in one transaction a file; a file imported twice adds
nothing)."""

from __future__ import annotations

import click

from torchmark.cli.store_options import db_option


class Size(click.ParamType):
    """A size: bytes, or a number with k, M or G (`2G`)."""

    name = "SIZE"

    def convert(self, value, param, ctx):
        from torchmark.core.bounded_input import parse_size

        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--max-size", type=Size(), default=None,
              help="The largest file imported [default: $TORCHMARK_MAX_IMPORT_SIZE, else "
                   "8G].")
@db_option
def import_cmd(files, max_size, db):
    """Record the results of FILES (results files, measurements, callgrind counts, ops,
    replay and suite results) in the store: each file checked (a regular file within
    --max-size, every record a valid result) before the store is touched, then stored in
    one transaction, one run a provenance it names. Results the store holds already
    (recorded when the file was written, or imported before) are not added again."""
    from torchmark.cli.store_options import open_store
    from torchmark.store.importing import check_file

    for path in files:  # every file's bounds before the store is opened or created
        check_file(path, max_size)
    store = open_store(db, create=True)
    total = 0
    for path in files:
        added = store.import_file(path, max_size)
        total += added
        click.echo(f"{path}: {added} result{'s' if added != 1 else ''}"
                   + ("" if added else " (already in the store)"))
    click.echo(f"{total} result{'s' if total != 1 else ''} added to {store.where}")
