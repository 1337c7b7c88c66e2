"""`torchmark compare`: one table from measurements saved in several files."""

from __future__ import annotations

import dataclasses
import sys

import click

from torchmark.cli.env_options import allow_env_diff_option
from torchmark.cli.params import Proportion
from torchmark.cli.store_options import db_option


@click.command("compare")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv"]), default="text",
              show_default=True)
@click.option("--trim/--no-trim", default=True, show_default=True,
              help="Trim digits to the significant figures.")
@click.option("--color/--no-color", default=None,
              help="Colour the text table (default: when stdout is a terminal).")
@click.option("--rowwise", is_flag=True, help="Colour against the best in each row.")
@click.option("--warnings", "highlight", is_flag=True, help="Mark high-variance cells.")
@click.option("--threshold", type=Proportion(0, 10, high_open=True), default=0.01,
              show_default=True, help="Two stored runs: the smallest change a verdict "
                                      "calls (a fraction, 0.01, or a percent, 1%).")
@allow_env_diff_option
@db_option
def compare_cmd(files, fmt, trim, color, rowwise, highlight, threshold, allow_env_diff, db):
    """Print a Compare table of the measurements in FILES (JSON from `timeit --save`,
    `demo`, or `torchmark.timing.files.save_measurements`; or `torchmark ops` results,
    a column per file; or sides of the store: a run, `run:N` or N, `latest`, `commit:SHA`
    or `env:LABEL`, read as `gate` reads them). When files hold the same
    task (one statement saved before and after a change), each file gets its own column
    (or, where the measurements have descriptions, its name in their env) instead of
    pooling into one cell. Two sides of the store also get each case's verdict (faster,
    slower, same, unsure, unmeasured, failed) from the verdict engine, as `gate` gives
    it at the same threshold. Files (when all are files) or two runs whose environments
    differ in what changes performance (their fingerprints) are refused unless
    --allow-env-diff."""
    from torchmark.cli.env_options import check_files
    from torchmark.cli.measurement_files import (
        is_store_ref,
        read_measurement_files,
        tell_files_apart,
    )
    from torchmark.compare import Compare

    plain = [f for f in files if not is_store_ref(f)]
    if len(plain) == len(files) > 1:  # runs of the store: run_verdicts checks them
        check_files(list(files), allow_env_diff)
    sides: dict = {}  # those of the store, as the table read them: the verdicts' too
    from torchmark.compare.ab import failure_of

    read = read_measurement_files(list(files), db, sides, failed=True)
    groups = [[m for m in group if failure_of(m) is None] for group in read]

    def row(spec) -> str:
        return " / ".join(filter(None, [spec.label, spec.sub_label or spec.stmt]))

    verdicts = len(files) == 2 and all(is_store_ref(f) for f in files)  # name them too
    failed = [f"failed in {name}: {row(m.task_spec)}: {failure_of(m)}"  # a blank cell:
              for name, group in zip(files, read, strict=True) for m in group  # why
              if failure_of(m) is not None and not verdicts]
    if len(files) == 2 and all(f in sides for f in files):  # as `gate` refuses them
        from torchmark.regressions.refs import check_distinct

        check_distinct(sides[files[0]], sides[files[1]])
    measurements = [m for group in tell_files_apart(groups, list(files)) for m in group]
    if not measurements:
        raise click.UsageError("the files hold no measurements")
    # two sides of the store are judged before anything is printed: sides that cannot
    # be compared (their environments differ, no case in common) print no table first
    judged = run_verdicts(files, threshold, db, markdown=fmt == "markdown",
                          allow_env_diff=allow_env_diff, sides=sides) \
        if len(files) == 2 and all(is_store_ref(f) for f in files) else None
    compare = Compare(measurements)
    if trim:
        compare.trim_significant_figures()
    if highlight:
        compare.highlight_warnings()
    use_color = sys.stdout.isatty() if color is None else color
    if use_color or fmt != "text":
        compare.colorize(rowwise=rowwise)
    if fmt == "markdown":
        click.echo(compare.to_markdown(), nl=False)
    elif fmt == "csv":
        click.echo(compare.to_csv(), nl=False)
    else:
        click.echo(compare.render(color=use_color), nl=False, color=use_color)
    if failed and fmt != "csv":
        from torchmark.core.neutralise import terminal_text

        click.echo("\n".join(["", *(terminal_text(line) for line in failed)]))
    if judged is not None and fmt != "csv":
        click.echo("\n".join(["", *judged]))


def run_verdicts(runs: list[str], threshold: float, db: str | None,
                 markdown: bool = False, allow_env_diff: bool = False,
                 sides: dict | None = None) -> list[str]:
    """Each case of two sides of the store (is_store_ref) judged by the verdict engine as
    the gate judges it (the drift from the case's A/A history where the store holds
    one): a table, the reasons, the counts. Sides of environments that differ in what
    changes performance are refused unless `allow_env_diff` (the verdicts then marked).
    `sides`: those already resolved, by name (read_measurement_files)."""
    from torchmark.cli.env_options import check_environments
    from torchmark.cli.measurement_files import side_ref
    from torchmark.cli.store_options import open_store
    from torchmark.compare.verdict_table import markdown_table, text_table
    from torchmark.regressions.aa_history import pair_histories
    from torchmark.regressions.comparability import mark_rows, marked
    from torchmark.regressions.gate import gate
    from torchmark.regressions.refs import check_distinct, resolve_side

    store = open_store(db)
    base, cand = ((sides or {}).get(r) or resolve_side(side_ref(r), store) for r in runs)
    check_distinct(base, cand)
    found = check_environments(base.results, cand.results, allow_env_diff,
                               f"{runs[0]} and {runs[1]}")
    report = gate(base.results, cand.results, max_slowdown=threshold,
                  histories=pair_histories(store, base, cand))
    if not report.rows:  # as `gate` and `ab` refuse them: nothing could be judged
        from torchmark.core.result import unpaired_why

        raise click.UsageError(f"{runs[0]} and {runs[1]} hold no case in common"
                               + unpaired_why((r.case for r in base.results),
                                              (r.case for r in cand.results)))
    report = dataclasses.replace(report, rows=mark_rows(report.rows, found))
    head = (f"baseline: {base.describe()}; candidate: {cand.describe()}; threshold "
            f"{threshold:.1%}")
    table = (markdown_table if markdown else text_table)(report.rows)
    counts = ", ".join(f"{n} {v}" for v, n in report.counts().items())
    note = [f"note: every verdict above is of {marked(found)}"] if found else []
    return [head, *([""] if markdown else []), *table, counts, *note]
