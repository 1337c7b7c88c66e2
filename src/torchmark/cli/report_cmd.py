"""`torchmark report`: the store's history as one self-contained HTML file."""

from __future__ import annotations

import click

from torchmark.cli.store_options import db_option


@click.command("report")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The HTML file to write (replaced).")
@click.option("--since", default=None, help="Only runs started on or after this date (ISO).")
@click.option("--case", "cases", multiple=True, metavar="CASE",
              help="Only this case: its id or name exactly (repeatable); shell patterns "
                   "with --glob.")
@click.option("--glob", is_flag=True, help="--case values are shell patterns.")
@click.option("--run", type=click.IntRange(min=1), default=None,
              help="The run whose raw samples are shown [default: the newest].")
@click.option("--ab", nargs=2, type=click.IntRange(min=1), default=None,
              metavar="BASELINE CANDIDATE",
              help="The two runs of the A/B view [default: the newest run sharing a case "
                   "with an earlier one, and the newest such].")
@db_option
def report_cmd(output, since, cases, glob, run, ab, db):
    """Write one HTML file that works offline (plotly.js embedded): the runs, the
    regressions (each linking to its case) and where each lives (functions, kernels),
    every case's history with its change points
    and the spread of its raw samples, an A/B view of two runs, and one run's raw
    samples."""
    from torchmark.cli.store_options import open_store
    from torchmark.report import write_report
    from torchmark.rootcause.explain import explain_changes

    store = open_store(db)
    if cases:
        from torchmark.core.result import cases_named

        if not cases_named(store.case_titles(), cases, glob):
            raise click.UsageError(f"--case: the store at {store.where} holds no case "
                                   f"{'matching' if glob else 'named'} "
                                   f"{', '.join(repr(c) for c in cases[:3])} "
                                   "(`torchmark runs`, then `torchmark show RUN`, list them)")
    for wanted in ([run] if run else []) + list(ab or []):
        if not store.has_run(wanted):
            raise click.UsageError(f"the store at {store.where} holds no run {wanted} "
                                   "(`torchmark runs` lists them)")
    if ab:
        from torchmark.report.data import run_keys

        if not run_keys(store, ab[0]) & run_keys(store, ab[1]):
            raise click.UsageError(f"--ab {ab[0]} {ab[1]}: the two runs hold no case in "
                                   "common: nothing to compare")
    path = write_report(store, output, since=since, cases=cases, glob=glob, run=run,
                        ab=tuple(ab) if ab else None,
                        explainer=lambda changes: explain_changes(changes, store))
    size = path.stat().st_size
    click.echo(f"wrote {path} ({size / 1e6:.1f} MB)")
    return 0
