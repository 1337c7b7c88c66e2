"""`torchmark suite`: list, run and compare the instruction-count suite."""

from __future__ import annotations

import json
from collections import defaultdict

import click

from torchmark.cli.executor_options import executor_from, executor_options, node_provenance
from torchmark.cli.params import FiniteRange, Proportion
from torchmark.cli.store_options import (
    recorder,
    recording_options,
    resume_run_option,
    resumed_cases,
    resumed_records,
)

_FILTER = click.option("--filter", "pattern", default=None,
                       help="Only cases whose id matches this regular expression "
                            "(case-insensitive).")
_DEFINITIONS = click.option("--definitions", type=click.Path(dir_okay=False), default=None,
                            help="A Python file defining DEFINITIONS (default: the standard "
                                 "suite).")


@click.group("suite")
def suite_cmd() -> None:
    """The instruction-count suite: grouped definitions run as many cases."""


@suite_cmd.command("list")
@_FILTER
@_DEFINITIONS
@click.option("--format", "fmt", type=click.Choice(["text", "json", "jsonl"]), default="text",
              show_default=True, help="json: one array of the cases; jsonl: a case a line.")
@click.option("--show-code", is_flag=True, help="Print each case's stmt and setup too.")
def list_cmd(pattern, definitions, fmt, show_code):
    """Print the cases (ids) the suite defines."""
    from torchmark.suite.loading import load_cases
    from torchmark.suite.materialize import select

    cases = select(load_cases(definitions), pattern)
    if fmt == "json":
        click.echo(json.dumps([case.to_dict() for case in cases], indent=1))
        return
    if fmt == "jsonl":
        for case in cases:
            click.echo(json.dumps(case.to_dict()))
        return
    for case in cases:
        click.echo(case.id)
        if show_code:
            args = case.timer_args
            for name in ("global_setup", "setup", "stmt"):
                code = getattr(args, name)
                if code and code != "pass":
                    click.echo(f"  {name}:\n" + "\n".join(f"    {ln}" for ln in code.splitlines()))
    click.echo(f"{len(cases)} cases", err=True)


def _summary_table(records: list[dict]) -> object:
    from rich.markup import escape
    from rich.table import Table

    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[r["label"][0] if r.get("label") else r["id"]].append(r)
    table = Table(title="suite run")
    for name, justify in (("group", "left"), ("cases", "right"), ("failed", "right"),
                          ("median instr/run", "right"), ("median wall/run", "right"),
                          ("max spread", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    from torchmark.core.stats import select_unit

    for name, rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        counts = sorted(r["instructions"]["per_run"] for r in ok if r.get("instructions"))
        walls = sorted(r["wall"]["median"] for r in ok if r.get("wall"))
        spreads = [r["instructions"]["spread"] for r in ok if r.get("instructions")]
        wall = ""
        if walls:
            w = walls[len(walls) // 2]
            unit, scale = select_unit(w)
            wall = f"{w / scale:.1f} {unit}"
        table.add_row(escape(name), str(len(rs)), str(len(rs) - len(ok)),
                      f"{counts[len(counts) // 2]:,.0f}" if counts else "", wall,
                      f"{max(spreads):.2%}" if spreads else "")
    return table


@suite_cmd.command("run")
@_FILTER
@_DEFINITIONS
@click.option("--subset", type=click.IntRange(min=1), default=None,
              help="Run N cases spread evenly over the (filtered) suite.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker slots (each: a wall-time worker and a valgrind host, pinned).")
@click.option("--out", type=click.Path(dir_okay=False), default="results/suite-results.jsonl",
              show_default=True,
              help="JSON-lines results, written as each case finishes (an existing suite "
                   "results file is replaced unless --resume; another file is refused).")
@click.option("--resume", is_flag=True,
              help="Skip the cases OUT already holds as ok (failed ones run again); refused "
                   "if OUT was run with other measurement options.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Callgrind repeats per case.")
@click.option("--number", type=click.IntRange(min=1), default=100, show_default=True,
              help="Runs of the statement per callgrind repeat.")
@click.option("--min-run-time", type=FiniteRange(min=0, min_open=True), default=0.1,
              show_default=True, help="Seconds of blocked_autorange per case.")
@click.option("--timeout", type=FiniteRange(min=0, min_open=True), default=300.0,
              show_default=True, help="Seconds a case may take per stage before its worker "
                                      "is killed.")
@click.option("--no-wall", is_flag=True, help="Skip wall times.")
@click.option("--no-instructions", is_flag=True, help="Skip instruction counts.")
@executor_options("Extra attempts for a case whose worker died or hung, or whose Ray "
                  "node was lost (a case that raises is not tried again).")
@resume_run_option
@recording_options
def run_cmd(pattern, definitions, subset, workers, out, resume, repeats, number, min_run_time,
            timeout, no_wall, no_instructions, executor, ray_address, ray_resources, retries,
            resume_run, db, no_store):
    """Run the suite: wall times and instruction counts per case, into OUT (on this
    machine's worker slots, or on a Ray cluster with --executor ray)."""
    from rich.console import Console

    from torchmark.cli.output_files import prepare_output
    from torchmark.cli.progress import RecordTicker, progress_bar
    from torchmark.suite.loading import load_cases
    from torchmark.suite.materialize import select
    from torchmark.suite.results import SCHEMA
    from torchmark.suite.runner import RunOptions, SuiteRunner

    options = RunOptions(workers=workers, min_run_time=min_run_time, number=number,
                         repeats=repeats, timeout=timeout, retries=retries, wall=not no_wall,
                         instructions=not no_instructions)
    where = executor_from(executor, ray_address, ray_resources, retries, workers=workers,
                          wall=not no_wall)
    cases = select(load_cases(definitions), pattern, subset)
    if not cases:
        raise click.UsageError("no case matches --filter")
    done = resumed_cases(db, no_store, resume_run, "suite")  # suite results keep the case's own id
    if not resume:
        prepare_output(out, SCHEMA, "suite results", "--out")
    progress = progress_bar()  # shown once the runner has checked its inputs
    task = progress.add_task("preparing", total=len(cases), failed=0)
    on_record = RecordTicker(progress, task)

    def on_phase(phase: str) -> None:
        progress.update(task, description=phase)

    with recorder(db, no_store, resume_run=resume_run, resumable=True, suite=str(out)) as rec:
        from torchmark.records import from_suite_record
        from torchmark.suite.results import results_record

        def on_record_stored(record: dict) -> None:
            on_record(record)
            rec.add(from_suite_record(record, provenance=node_provenance(record)))

        runner = SuiteRunner(cases, out, options, resume=resume, on_record=on_record_stored,
                             on_phase=on_phase, done=done, executor=where,
                             prior=[] if resume else resumed_records(db, resume_run,
                                                                     results_record))
        progress.update(task, total=len(runner.cases), completed=0)
        with progress:
            summary = runner.run()
    Console().print(_summary_table(summary.records))
    where = str(out) if resume_run is None else \
        f"{out} or run {resume_run}" if resume else f"run {resume_run}"
    click.echo(f"{summary.ok} ok, {summary.failed} failed, {summary.skipped} already in {where}; "
               f"{summary.elapsed_s:.1f} s ({summary.compile_s:.1f} s preparing) -> {out}")
    return 1 if summary.failed else 0


@suite_cmd.command("compare")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--threshold", type=Proportion(0, 10, high_open=True), default=0.01,
              show_default=True, help="The smallest change a verdict calls: a fraction "
                                      "(0.01) or a percent (1%).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text",
              show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Show only the N largest changes.")
@click.option("--fail-above", type=Proportion(0, 10, high_open=True), default=None,
              help="The verdicts' threshold (it replaces --threshold): exit 1 when a "
                   "case's count is slower by more, or a case counted in A failed in B.")
def compare_cmd(a, b, threshold, fmt, top, fail_above):
    """Per-case instruction-count changes from A to B, largest first, each with its
    verdict (exact counts; a change within the repeats' spread is unsure)."""
    from torchmark.suite.ab_report import compare_results, render_markdown, render_text
    from torchmark.suite.results import read_records

    try:
        report = compare_results(read_records(a), read_records(b),
                                 threshold if fail_above is None else fail_above,
                                 names=(a, b))
    except OverflowError as e:  # an integer too large for a float
        raise ValueError(f"{a} / {b}: a number is too large ({e})") from None
    click.echo(render_markdown(report, top) if fmt == "markdown" else render_text(report, top))
    if fail_above is not None:
        worse = report.slower
        if worse:
            click.echo(f"{len(worse)} case(s) slower by more than {fail_above:.1%}: "
                       + ", ".join(d.id for d in worse[:5]), err=True)
        if report.broken:  # a case that stopped working must not pass the gate
            click.echo(f"{len(report.broken)} case(s) counted in A failed in B: "
                       + ", ".join(report.broken[:5]), err=True)
        if worse or report.broken:
            return 1
    return 0

