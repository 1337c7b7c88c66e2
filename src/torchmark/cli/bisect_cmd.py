"""`torchmark bisect`: the first commit at which a case got slower (rootcause/bisect.py)."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import uuid

import click

from torchmark.cli.params import FiniteRange, Proportion, check_syntax
from torchmark.cli.store_options import open_store, recorder, recording_options
from torchmark.core.threads import MAX_THREADS


@click.command("bisect")
@click.argument("case", nargs=-1, required=True)
@click.option("--good", required=True, metavar="REF", help="A commit where the case is fast.")
@click.option("--bad", required=True, metavar="REF", help="A later commit where it is slow.")
@click.option("--repo", default=".", show_default=True, type=click.Path(file_okay=False),
              help="The git repository of the code under test (the user's project, or a "
                   "checkout of a library installed editable).")
@click.option("-s", "--setup", multiple=True, help="Setup code of a statement (repeatable; "
                                                   "lines).")
@click.option("-t", "--threads", "num_threads", type=click.IntRange(1, MAX_THREADS),
              default=1, show_default=True)
@click.option("--metric", type=click.Choice(["auto", "instructions", "wall"]), default="auto",
              show_default=True,
              help="instructions (exact, one count a commit; the default where valgrind is "
                   "installed) or wall (each commit interleaved with both ends).")
@click.option("--build", "build_cmd", default=None, metavar="CMD",
              help="A shell command run in each commit's worktree before measuring (a C++ "
                   "extension's build); a commit whose build fails is skipped.")
@click.option("--import-path", "import_subdir", default=None, metavar="DIR",
              help="The folder of the repository the code is imported from [default: src "
                   "when there is one, else the top].")
@click.option("--number", type=click.IntRange(min=1), default=100, show_default=True,
              help="Runs of the statement a count (instructions).")
@click.option("--min-run-time", type=FiniteRange(min=0.1), default=2.0, show_default=True,
              help="Seconds a side of each interleaved comparison (wall).")
@click.option("--worker-pairs", type=click.IntRange(min=1), default=5, show_default=True,
              help="Fresh worker pairs of each comparison (wall).")
@click.option("--min-step", type=Proportion(0, 10, low_open=True, high_open=True),
              default="0.2%", show_default=True,
              help="The smallest change between the ends worth bisecting (5% or 0.05).")
@recording_options
def bisect_cmd(case, good, bad, repo, setup, num_threads, metric, build_cmd, import_subdir,
               number, min_run_time, worker_pairs, min_step, db, no_store):
    """Find the first commit between --good and --bad at which CASE got slower.

    CASE is a statement (with -s setup, as `timeit`), `case:ID`, a case of the store
    (its statement, setup and threads come from there), or a pytest benchmark's node id
    (tests/test_x.py::test_y, relative to the repository's top; counted by the plugin). Each commit tried gets a git
    worktree of its own (the working tree of --repo is never touched), whose import folder
    comes first on the path of the process that measures it."""
    from torchmark.rootcause.bisect import BisectOptions, NoRegression, bisect
    from torchmark.rootcause.git_history import repository
    from torchmark.rootcause.search import first_bad_range

    code = _case_code(case, setup, num_threads, db)
    if metric == "auto":
        metric = "instructions" if shutil.which("valgrind") else "wall"
    options = BisectOptions(metric=metric, number=number, min_run_time=min_run_time,
                            worker_pairs=worker_pairs, min_step=min_step, build=build_cmd,
                            import_subdir=import_subdir)
    top = repository(repo)
    bisection = uuid.uuid4().hex[:12]

    def record(commit, role, results) -> None:
        from torchmark.core.provenance import Provenance

        provenance = dataclasses.replace(Provenance.capture(), git_commit=commit.sha,
                                         git_dirty=False)
        with recorder(db, no_store, provenance=provenance, bisect=bisection,
                      bisect_role=role) as rec:
            rec.add(results)

    try:
        result = bisect(top, good, bad, code, options,
                        progress=lambda line: click.echo(f"bisect: {line}", err=True),
                        record=record)
    except NoRegression as e:
        raise click.ClickException(str(e)) from None
    names = [c.short for c in result.commits]
    outcome = result.outcome
    change = result.change()
    click.echo(f"case: {code.stmt!r}" + (f" after {code.setup!r}" if code.setup != "pass"
                                         else "") + f" ({metric})")
    click.echo(f"ends: {result.commits[0].short} (good) -> {result.commits[-1].short} (bad): "
               f"{result.ends.change:+.2%} {result.ends.interval()}")
    if outcome.exact:
        click.echo(f"first bad commit: {result.first_bad.describe()}")
        click.echo(f"change: {change.change:+.3%} {change.interval()} ({change.method})")
    else:
        click.echo(f"first bad commit: {first_bad_range(outcome, names)}; the others in that "
                   "range could not be judged:")
        for index in outcome.candidates:
            trial = result.trial(index)
            why = f"{trial.judgement}: {trial.reason}" if trial else "the last bad one"
            click.echo(f"  {result.commits[index].describe()}  {why}")
    skipped = [t for t in result.trials if t.judgement == "skip"]
    for trial in skipped:
        click.echo(f"skipped {trial.commit.short}: {trial.reason}")
    click.echo(f"{result.measurements} measurements of {len(result.commits)} commits "
               f"({len(skipped)} skipped) in {result.seconds:.0f} s"
               + ("" if no_store else f"; stored with the tag bisect={bisection}"))
    if outcome.exact and code.pytest_node is None and not no_store:
        click.echo(f"explain it: torchmark explain commit:{result.commits[outcome.last_good].short}"
                   f" commit:{result.first_bad.short}")
    elif outcome.exact and code.pytest_node is None:  # nothing stored: counted again
        argv = ["torchmark", "explain", f"commit:{result.commits[outcome.last_good].short}",
                f"commit:{result.first_bad.short}", "--collect", "--stmt", code.stmt,
                *(["-s", code.setup] if code.setup != "pass" else []), "--repo", str(top),
                *(["--import-path", import_subdir] if import_subdir else [])]
        click.echo(f"explain it: {shlex.join(argv)}")
    elif outcome.exact:  # pytest keeps no per-function counts: the statement's are collected
        click.echo(f"explain it: torchmark explain commit:{result.commits[outcome.last_good].short}"
                   f" commit:{result.first_bad.short} --collect --stmt STMT -s SETUP "
                   "(the benchmark's statement and setup: pytest keeps no per-function "
                   "counts)")


def _case_code(case, setup, num_threads, db):
    """CASE as a statement with its setup, or `case:ID` read from the store."""
    from torchmark.rootcause.probes import CaseCode

    text = "\n".join(case)
    if len(case) == 1 and text.startswith("case:"):
        if setup:
            raise click.UsageError("case:ID brings its own setup: drop -s")
        store = open_store(db)
        records = store.result_records(case=text.removeprefix("case:"))
        if not records:
            raise click.UsageError(f"{text}: no such case in the store ({store.where})")
        stored = records[-1].case
        if stored.frontend not in ("timeit", "callgrind") or not stored.stmt:
            raise click.UsageError(f"{text}: a {stored.frontend} case, not a statement "
                                   "bisect can run")
        return CaseCode(stored.stmt, stored.setup or "pass", stored.threads, stored.label)
    if len(case) == 1 and "::" in text and text.split("::", 1)[0].endswith(".py"):
        if setup:
            raise click.UsageError("a pytest node id brings its own setup: drop -s")
        return CaseCode(text, num_threads=num_threads, pytest_node=text)
    setup_code = "\n".join(setup) or "pass"
    check_syntax(("the statement", text), ("the setup", setup_code))
    return CaseCode(text, setup_code, num_threads)
