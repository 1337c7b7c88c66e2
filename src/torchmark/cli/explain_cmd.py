"""`torchmark explain`: where a change lives: functions, kernels, ops (rootcause/explain.py)."""

from __future__ import annotations

import shlex

import click

from torchmark.cli.params import check_syntax
from torchmark.cli.store_options import db_option, store_for_refs
from torchmark.core.neutralise import terminal_text


@click.command("explain")
@click.argument("before")
@click.argument("after")
@click.option("--case", "pattern", default=None, metavar="PATTERN",
              help="Only the cases whose title or id matches this glob.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True,
              help="Functions listed a table.")
@click.option("--bisect", "from_bisect", is_flag=True,
              help="BEFORE and AFTER are commits, as bisect prints its last good and "
                   "first bad commit (the same as commit:BEFORE commit:AFTER).")
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
def explain_cmd(before, after, pattern, top, from_bisect, collect, stmt, setup, repo,
                import_subdir, number, db):
    """Explain a change from BEFORE to AFTER: for instruction counts, the compiled
    functions whose counts changed most (exclusive and inclusive, by library) and, with
    --collect, the Python functions whose executed lines changed; for kernel time, the
    kernels added, removed and changed; for ops sweeps and replays, the ops whose time
    changed most, with their shapes.

    BEFORE and AFTER are runs (12, run:12, latest), commit:SHA or env:LABEL of the store,
    or results files; with --collect, two commits of --repo; with --bisect, two bare
    commits (as bisect prints them), read as commit:SHA: every finished run of each."""
    from torchmark.rootcause.explain import collect_at_commits, explain_results, lines

    if from_bisect:
        before, after = (ref if ref.startswith("commit:") else f"commit:{ref}"
                         for ref in (before, after))
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
            click.echo(terminal_text(line))
        return
    if stmt is not None or setup:
        raise click.UsageError("--stmt and -s are for --collect")
    from torchmark.regressions.refs import resolve_side

    store = store_for_refs((before, after), db)
    sides = [resolve_side(ref, store) for ref in (before, after)]
    found = explain_results(sides[0].results, sides[1].results, pattern=pattern, top=top)
    if not (found.sections() or found.unexplained):  # a usage error: nothing printed first
        raise click.UsageError("no case is on both sides"
                               + (f" matching {pattern!r}" if pattern else ""))
    click.echo(f"before: {terminal_text(sides[0].describe())}")
    click.echo(f"after:  {terminal_text(sides[1].describe())}")
    for section in found.sections(top):
        click.echo("")
        for line in section:
            click.echo(terminal_text(line))
    for result in found.unexplained:
        click.echo("")
        click.echo(terminal_text(_collect_hint(result, sides[0].results)))


def _collect_hint(result, before) -> str:
    """What to run to explain a case nothing stored explains: a statement's counts and
    Python profile collected at the two sides' commits."""
    title = result.case.title
    if result.case.frontend not in ("timeit", "suite", "fuzz") or \
            not result.case.stmt.strip() or result.unit != "s":
        return f"{title}: nothing stored explains its change ({result.metric}; no " \
               "per-function counts, kernels or ops on both sides)"
    old = next((r for r in before if r.case.id == result.case.id), None)
    commits = [r.provenance.git_commit if r is not None and r.provenance else None
               for r in (old, result)]
    refs = [f"commit:{c}" if c else f"commit:{role}" for c, role in
            zip(commits, ("GOOD", "BAD"), strict=True)]
    argv = ["torchmark", "explain", *refs, "--collect", "--stmt", result.case.stmt]
    if result.case.setup.strip() and result.case.setup.strip() != "pass":
        argv += ["-s", result.case.setup]
    return (f"{title}: {result.metric} only, no per-function counts stored; count it and "
            f"profile its Python functions at both commits with\n  {shlex.join(argv)} "
            "--repo PATH")
