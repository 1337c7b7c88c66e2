"""The store's options: --db URL (every command that reads or writes the store),
--no-store (every command that measures), --resume-run RUN (those that can continue a
stored run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

DB_HELP = ("The result store: a SQLite file or path, or postgresql+psycopg://... "
           "[default: $TORCHMARK_DB, else results.db in the user data folder].")


def db_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", "db", metavar="URL", default=None, help=DB_HELP)(command)


def open_store(db: str | None, create: bool = False) -> Any:
    """The store at `db` (see DB_HELP). A command that only reads refuses a SQLite file
    that does not exist (a mistyped --db would otherwise read as an empty history);
    `create` for those that write."""
    from torchmark.store import open as open_store
    from torchmark.store.store import resolve_url, sqlite_path

    url = resolve_url(db)
    path = sqlite_path(url)
    if not create and path is not None and not path.exists():
        raise click.UsageError(f"no store at {path}: nothing has been recorded there "
                               "(--db or TORCHMARK_DB names another)")
    return open_store(url)


def store_for_refs(refs: Sequence[str], db: str | None) -> Any:
    """The store that `refs` (regressions/refs.py's forms) are read from; None when each
    names an existing file, which is read without one."""
    from pathlib import Path

    return None if all(Path(ref).exists() for ref in refs) else open_store(db)


def recording_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--db URL and --no-store, for a command that measures (its results go to the store
    as they come unless --no-store or TORCHMARK_NO_STORE=1)."""
    command = click.option("--no-store", is_flag=True,
                           help="Do not record the results in the store "
                                "(TORCHMARK_NO_STORE=1 does the same).")(command)
    return db_option(command)


COMMAND_LINE: list[str] = []  # set by cli.main for each command line it runs


def recorder(db: str | None, no_store: bool, resume_run: int | None = None,
             env: str | None = None, provenance: Any = None, resumable: bool = False,
             **tags: Any) -> Any:
    """A RunRecorder for this command line; `env`: the run's env label (a command's --env;
    default $TORCHMARK_ENV); `provenance`: the run's, when it was captured elsewhere (in
    another Python environment: `ab --python`); `resumable`: the command takes
    --resume-run (an interrupted run then says how to continue it)."""
    from torchmark.store.recorder import RunRecorder

    return RunRecorder(db, enabled=not no_store, tags=tags,
                       command=list(COMMAND_LINE) or None, resume_run=resume_run, env=env,
                       provenance=provenance, resumable=resumable)


def resume_run_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--resume-run RUN, for a command that can continue a run of the store."""
    return click.option("--resume-run", type=click.IntRange(min=1), default=None,
                        metavar="RUN",
                        help="Continue run RUN of the store: its cases recorded without "
                             "failure are skipped, the others recorded into it.")(command)


def resumed_cases(db: str | None, no_store: bool, resume_run: int | None,
                  command: str, group: Callable[[str], str] | None = None) -> set[str]:
    """The ids of the cases stored run `resume_run` (and its Ray node runs) measured,
    their newest result not failed, which `--resume-run` skips (none without it). With
    `group` (a case id's group: an ops record's passes), the groups of those, less each
    group with a case whose newest result failed (a record whose backward failed is
    measured again, forward too). A usage error when
    recording is off, the store holds no such run, or another torchmark command (not
    `command`) made it: checked before the command replaces any file or writes to the
    run."""
    if resume_run is None:
        return set()
    from torchmark.store.store import recording_off

    if no_store:
        raise click.UsageError("--resume-run reads the store: drop --no-store")
    if recording_off():
        raise click.UsageError("--resume-run reads the store: unset TORCHMARK_NO_STORE")
    from torchmark.store.recorder import node_runs

    store = open_store(db)
    try:
        made = store.runs_page(run=resume_run, limit=1)[0]
        from torchmark.store.store import resume_refused

        refused = resume_refused(resume_run, made[0].get("tags") or {},
                                 made[0]["status"]) if made else None
        if refused:  # checked again as the run is reopened (store.reopen_run)
            raise click.UsageError(f"--resume-run {resume_run}: {refused}")
        words = list(made[0]["command"] or []) if made else []
        if len(words) > 1 and words[0] == "torchmark" and words[1] != command:
            raise click.UsageError(f"--resume-run {resume_run}: `torchmark {words[1]}` made "
                                   f"that run, not `torchmark {command}`: resume it with "
                                   "the command that made it")
        runs = [resume_run, *node_runs(store, resume_run).values()]  # Ray nodes' too
        outcomes = store.newest_outcomes(runs)  # a case's newest result, in any of them
        whole = group or (lambda case: case)
        done = {whole(case) for case, ok in outcomes.items() if ok} - \
            {whole(case) for case, ok in outcomes.items() if not ok}
        # a run with cases exists; only one without needs the list of runs
        if not outcomes and not store.has_run(resume_run):
            raise click.UsageError(f"--resume-run {resume_run}: the store at {store.where} "
                                   f"holds no run {resume_run} (`torchmark runs` lists them)")
        return done
    finally:
        store.close()


def resumed_records(db: str | None, resume_run: int | None, record_of: Any,
                    key: Any = lambda result: result.case.id) -> list[dict[str, Any]]:
    """The records of the cases stored run `resume_run` (and the runs of its Ray nodes)
    finished, rebuilt from their measured Results (`record_of` a record's Results,
    grouped by `key`; a group with a case whose newest result failed is left out, to be
    measured again, as resumed_cases says): what a resumed command writes to its output
    file first, so that the file holds the whole run and not only the cases still to
    run."""
    if resume_run is None:
        return []
    from torchmark.store.recorder import node_runs

    store = open_store(db)
    try:
        runs = [resume_run, *node_runs(store, resume_run).values()]
        measured = store.newest_outcomes(runs)  # what resumed_cases skips, alike
        grouped: dict[str, list[Any]] = {}
        for run in runs:
            for result in store.result_records(run=run):
                grouped.setdefault(key(result), []).append(result)
        return [record_of([r for r in group if r.ok]) for group in grouped.values()
                if all(measured.get(r.case.id) for r in group)]
    finally:
        store.close()


def confirm(question: str, yes: bool) -> None:
    """Go on when `yes`, or when a person at a terminal answers yes; else stop (exit 2
    without a terminal to ask: a script says --yes)."""
    import sys

    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"{question.rstrip('?')}: confirm with --yes (no terminal to "
                               "ask)")
    if not click.confirm(question, default=False):
        raise click.Abort()
