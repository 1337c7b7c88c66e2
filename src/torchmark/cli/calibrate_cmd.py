"""`torchmark calibrate`: measure how far two runs of the same code differ on this
machine, case by case, and keep that A/A history in the store."""

from __future__ import annotations

import click

from torchmark.cli.store_options import db_option


@click.command("calibrate")
@click.argument("run", required=False, default="latest", metavar="[RUN]")
@click.option("--runs", "repeats", type=click.IntRange(2, 50), default=5, show_default=True,
              help="Runs of each case to add (each pair of consecutive ones is an A/A "
                   "pair).")
@click.option("--cases", "patterns", multiple=True, metavar="CASE",
              help="Only this case of RUN: its id or title exactly (repeatable); shell "
                   "patterns with --glob.")
@click.option("--glob", is_flag=True, help="--cases are shell patterns.")
@click.option("--min-run-time", type=click.FloatRange(min=0, min_open=True), default=0.5,
              show_default=True, help="Seconds of wall time a case a run.")
@db_option
def calibrate_cmd(run, repeats, patterns, glob, min_run_time, db):
    """Measure RUN's cases again, --runs times each, here and now, and record each round
    as a run of the store under RUN's env label: consecutive runs of one build on one
    machine are the A/A history from which `gate`, `compare`, `ab` and the pytest
    plugin take the drift between two runs of the same code (docs/verdicts.md). Then
    print each case's drift. RUN: a run id or latest (default). Cases re-measured from
    the store alone: timeit statements, C++ snippets and callgrind counts; others
    (pytest, ops, suite) calibrate by running their own command again at one commit."""
    from torchmark.cli.store_options import open_store, recorder
    from torchmark.core.plain_table import align
    from torchmark.core.provenance import Machine
    from torchmark.regressions.aa_history import history_ratios
    from torchmark.regressions.confirm import RERUNNABLE, remeasured
    from torchmark.regressions.refs import resolve_side
    from torchmark.verdicts.drift import from_history

    store = open_store(db)
    side = resolve_side(run if run == "latest" else f"run:{run.removeprefix('run:')}",
                        store)
    chosen = [r for r in side.results if r.ok and r.case.named(patterns, glob)]
    cases = [r for r in chosen if r.case.frontend in RERUNNABLE and
             r.metric in ("wall", "instructions")]
    if not cases:
        others = sorted({r.case.frontend for r in chosen} - set(RERUNNABLE))
        raise click.UsageError(
            f"{side.describe()} holds no case that can be re-measured from the store "
            f"({', '.join(RERUNNABLE)})" + (f"; its {', '.join(others)} cases calibrate "
                                          "by running their command again at one commit"
                                          if others else ""))
    import secrets

    token = secrets.token_hex(6)  # the rounds' common tag: one build, whatever git says
    added = []
    for k in range(repeats):
        click.echo(f"round {k + 1} of {repeats}: {len(cases)} case(s)", err=True)
        with recorder(db, False, env=side.env, calibrate=side.runs[0], aa=token) as rec:
            rec.add([remeasured(r.case, r.metric, min_run_time) for r in cases])
        if rec.run_id is not None:
            added.append(rec.run_id)
    keys = {(r.case.id, r.metric) for r in cases}
    histories = history_ratios(store, keys, machine=Machine.capture().fingerprint,
                               env=side.env)
    drifts = {key: from_history(ratios) for key, ratios in histories.items()}
    rows = [[r.case.title, r.metric, drift.describe()
             if (drift := drifts.get((r.case.id, r.metric))) else "-"] for r in cases]
    click.echo(f"runs {', '.join(map(str, added))} added to {store.where}")
    for line in align(["case", "metric", "drift between two runs of the same code"], rows,
                      rule=True):
        click.echo(line)
    return 0
