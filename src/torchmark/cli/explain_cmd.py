"""`torchmark explain`: where an instruction-count change lives (rootcause/explain.py)."""

from __future__ import annotations

import shlex

import click

from torchmark.cli.params import check_syntax
from torchmark.cli.store_options import db_option, store_for_refs


@click.command("explain")
@click.argument("before")
@click.argument("after")
@click.option("--case", "pattern", default=None, metavar="PATTERN",
              help="Only the cases whose title or id matches this glob.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True,
              help="Functions listed a table.")
@click.option("--collect", is_flag=True,
              help="Count STMT now at both commits (BEFORE and AFTER as commit:SHA, in "
                   "--repo) and profile its Python functions, instead of reading stored "
                   "counts.")
@click.option("--stmt", default=None, help="The statement to count with --collect.")
@click.option("-s", "--setup", multiple=True, help="Its setup (repeatable; lines).")
@click.option("--repo", default=".", show_default=True, type=click.Path(file_okay=False),
              help="The git repository of the code under test (--collect).")
@click.option("--import-path", "import_subdir", default=None, metavar="DIR",
              help="The folder of the repository the code is imported from (--collect).")
@click.option("--number", type=click.IntRange(min=1), default=100, show_default=True,
              help="Runs of the statement a count (--collect).")
@db_option
def explain_cmd(before, after, pattern, top, collect, stmt, setup, repo, import_subdir,
                number, db):
    """Explain an instruction-count change from BEFORE to AFTER: the compiled functions
    whose counts changed most (exclusive and inclusive, by library) and, with --collect,
    the Python functions whose executed lines changed.

    BEFORE and AFTER are runs (12, run:12, latest), commit:SHA or env:LABEL of the store,
    or results files; with --collect, two commits of --repo."""
    from torchmark.rootcause.explain import collect_at_commits, explain_stored, lines

    if collect:
        if stmt is None:
            raise click.UsageError("--collect counts a statement: give --stmt")
        code = "\n".join(setup) or "pass"
        check_syntax(("the statement", stmt), ("the setup", code))
        from torchmark.rootcause.git_history import repository

        top_folder = repository(repo)
        refs = tuple(ref.removeprefix("commit:") for ref in (before, after))
        explanation = collect_at_commits(top_folder, (refs[0], refs[1]), stmt, code,
                                         number=number, top=top, import_subdir=import_subdir)
        for line in lines(explanation, top):
            click.echo(line)
        argv = ["torchmark", "explain", before, after, "--collect", "--stmt", stmt,
                *[part for s in setup for part in ("-s", s)], "--repo", str(top_folder)]
        click.echo(f"reproduce: {shlex.join(argv)}")
        return
    if stmt is not None or setup:
        raise click.UsageError("--stmt and -s are for --collect")
    from torchmark.regressions.refs import resolve_side

    store = store_for_refs((before, after), db)
    sides = [resolve_side(ref, store) for ref in (before, after)]
    explained, lacking = explain_stored(sides[0].results, sides[1].results, pattern=pattern,
                                        top=top)
    click.echo(f"before: {sides[0].describe()}")
    click.echo(f"after:  {sides[1].describe()}")
    for explanation in explained:
        click.echo("")
        for line in lines(explanation, top):
            click.echo(line)
        click.echo(f"reproduce: {_reproduce(explanation)}")
    for title in lacking:
        click.echo(f"\n{title}: no per-function counts stored on both sides; count both "
                   "commits now with `torchmark explain commit:A commit:B --collect --stmt "
                   "STMT -s SETUP --repo PATH`")
    if not explained and not lacking:
        raise click.ClickException("no instruction-count case is on both sides"
                                   + (f" matching {pattern!r}" if pattern else ""))


def _reproduce(explanation) -> str:
    argv = ["torchmark", "callgrind", explanation.stmt]
    if explanation.setup and explanation.setup != "pass":
        argv += ["-s", explanation.setup]
    return f"{shlex.join(argv)}  (at each of the two commits)"
