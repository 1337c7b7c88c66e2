"""The option every command that reads or writes the store takes: --db URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

DB_HELP = ("The result store: a SQLite file or path, or postgresql+psycopg://... "
           "[default: $TORCHMARK_DB, else results.db in the user data folder].")


def db_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", "db", metavar="URL", default=None, help=DB_HELP)(command)


def open_store(db: str | None) -> Any:
    from torchmark.store import open as open_store

    return open_store(db)


def recording_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--db URL and --no-store, for a command that measures (its results go to the store
    as they come unless --no-store or TORCHMARK_NO_STORE=1)."""
    command = click.option("--no-store", is_flag=True,
                           help="Do not record the results in the store "
                                "(TORCHMARK_NO_STORE=1 does the same).")(command)
    return db_option(command)


COMMAND_LINE: list[str] = []  # set by cli.main for each command line it runs


def recorder(db: str | None, no_store: bool, resume_run: int | None = None,
             **tags: Any) -> Any:
    from torchmark.store.recorder import RunRecorder

    return RunRecorder(db, enabled=not no_store, tags=tags,
                       command=list(COMMAND_LINE) or None, resume_run=resume_run)
