"""`torchmark import`: results files into the store (every format torchmark has written,
and other tools' files and folders: store/formats/; bounded, validated and stored in one
transaction a file; a file imported twice adds nothing)."""

from __future__ import annotations

import click

from torchmark.cli.store_options import db_option

FORMAT_NAMES = ("pytest-benchmark", "pyperf", "asv", "google-benchmark", "nvbench",
                "torch-pickle")  # store/formats/FORMATS' names (not imported here: lazy)


def _format_of(path: str, fmt: str | None, max_size: int | None) -> str | None:
    """The other tool's format `path` is in (None: a torchmark file, checked here);
    a UsageError for a missing path or a folder no format claims."""
    import os

    from torchmark.core.bounded_input import brief
    from torchmark.core.errors import UsageError
    from torchmark.store.formats import detect_format
    from torchmark.store.importing import check_file, is_streamable

    if not os.path.exists(path):
        raise UsageError(f"{brief(path)}: no such file or folder")
    if fmt is not None:
        return fmt
    if not os.path.isdir(path) and is_streamable(path):
        check_file(path, max_size)
        return None
    found = detect_format(path)
    if found is None and os.path.isdir(path):
        raise UsageError(f"{brief(path)}: is a directory of no format torchmark reads "
                         "(an asv results folder or a pytest-benchmark .benchmarks folder: "
                         "say which with --from)")
    if found is None:
        check_file(path, max_size)
    return found


class Size(click.ParamType):
    """A size: bytes, or a number with k, M or G (`2G`)."""

    name = "SIZE"

    def convert(self, value, param, ctx):
        from torchmark.core.bounded_input import parse_size

        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


def _imported(store, files, max_size, formats) -> list[tuple[int, int, bool]]:
    """store.import_files, waiting for a write lock another process holds (a SQLite
    store: another import) up to TORCHMARK_STORE_WAIT seconds, said on stderr; a
    StoreError (one line, exit 1, nothing imported) when it stays held."""
    from torchmark.store.recorder import BUSY_TRY_S, store_wait
    from torchmark.store.store import StoreError, is_locked

    wait = store_wait()
    for attempt in (BUSY_TRY_S, wait):
        try:
            with store.lock_wait(attempt):
                return store.import_files(files, max_size, formats)
        except Exception as e:
            if not is_locked(e):
                raise
        if attempt == BUSY_TRY_S:
            click.echo(f"torchmark: the store is busy (another process holds its write "
                       f"lock, an import say): waiting up to {wait:g} s "
                       "(TORCHMARK_STORE_WAIT)", err=True)
    raise StoreError(f"the store at {store.where} stayed busy for {wait:g} s (another "
                     "process holds its write lock): nothing imported; import again "
                     "when it is done")


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--from", "fmt", type=click.Choice(FORMAT_NAMES), default=None,
              help="The tool that wrote FILES [default: detected where only one format "
                   "fits; a torchmark file otherwise].")
@click.option("--max-size", type=Size(), default=None,
              help="The largest file imported [default: results files (JSON lines, "
                   "streamed): $TORCHMARK_MAX_IMPORT_SIZE, else 8G; files read whole "
                   "(other tools' JSON, measurements documents): --max-input-size, else "
                   "64M]. Given, it is the limit of both.")
@db_option
def import_cmd(files, fmt, max_size, db):
    """Record the results of FILES in the store: torchmark's files (results files,
    measurements, callgrind counts, ops, replay and suite results) and other tools'
    (pytest-benchmark JSON or its .benchmarks folder, pyperf JSON, an asv results
    folder, Google Benchmark JSON, nvbench JSON, torch.utils.benchmark Measurements
    pickled; docs/import.md). Each file is checked (a regular file within --max-size,
    every record a valid result) and stored in one transaction with the others, one run
    a provenance it names: a file refused stores nothing. Results the store holds already
    (recorded when the file was written, or imported before) are not added again."""
    from torchmark.cli.store_options import open_store
    from torchmark.core.bounded_input import set_max_bytes

    if max_size is not None:  # files read whole too (other tools' documents)
        set_max_bytes(max_size, raise_with="--max-size")
    formats = [_format_of(path, fmt, max_size) for path in files]  # before the store
    store = open_store(db, create=True)
    total = 0
    for path, (added, read, before) in zip(files, _imported(store, files, max_size, formats),
                                           strict=True):
        total += added
        why = "" if added else " (already in the store)" if read or before else \
            " (the file holds none)"
        click.echo(f"{path}: {added} result{'s' if added != 1 else ''}{why}")
    click.echo(f"{total} result{'s' if total != 1 else ''} added to {store.where}")
