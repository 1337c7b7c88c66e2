"""`torchmark regressions`: every change detected across the store's history."""

from __future__ import annotations

import json
import math

import click

from torchmark.cli.params import Proportion
from torchmark.cli.store_options import db_option
from torchmark.core.neutralise import terminal_text
from torchmark.core.result import METRICS


def _rows(changes) -> list[list[str]]:
    from torchmark.compare.verdict_table import format_value

    rows = []
    for c in changes:
        p = c.point
        interval = f"[{p.low:.3f}, {p.high:.3f}]" if math.isfinite(p.low) else "-"
        good, bad = c.last_good, c.first_bad
        rows.append([
            c.series.title, c.series.metric,
            f"{format_value(p.before, c.series.unit)} -> "
            f"{format_value(p.after, c.series.unit)}",
            f"{p.ratio - 1:+.1%}", interval,
            f"run {good.run_id} {good.commit_label}".rstrip(),
            f"run {bad.run_id} {bad.commit_label} {bad.torch or ''}".rstrip(),
            f"yes (run {c.recovered_at.run_id})" if c.recovered_at else "no",
            c.mark or "", c.key])
    return rows


HEADER = ["case", "metric", "level", "change", "95% CI of ratio", "last good", "first bad",
          "recovered", "mark", "key"]


@click.command("regressions")
@click.option("--since", default=None, help="Only runs started on or after this date (ISO).")
@click.option("--case", "cases", multiple=True, metavar="CASE",
              help="Only this case: its id or name exactly (repeatable); shell patterns "
                   "with --glob.")
@click.option("--glob", is_flag=True, help="--case values are shell patterns.")
@click.option("--machine", default=None, help="A machine fingerprint or hostname.")
@click.option("--env", default=None, help="An environment label.")
@click.option("--metric", type=click.Choice(list(METRICS)),
              default=None, help="One metric (default: all).")
@click.option("--fdr", "q", type=Proportion(0, 1, low_open=True, high_open=True),
              default=0.05, show_default=True,
              help="The false discovery rate allowed across every series checked.")
@click.option("--calibrate-on", "aa", metavar="env:LABEL|commit:SHA", default=None,
              help="Measure the thresholds on A/A history (one build measured again and "
                   "again, under that env label or at that commit) instead of the "
                   "defaults: at most 1 false alarm per 1,000 runs there.")
@click.option("--improvements", is_flag=True, help="List improvements too.")
@click.option("--confirm", is_flag=True,
              help="Re-measure each suspect case here and mark it confirmed or "
                   "not-confirmed (timeit, C++ and callgrind cases).")
@click.option("--min-run-time", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="Of each re-measurement (--confirm).")
@click.option("--dismiss", "dismiss", metavar="KEY", multiple=True,
              help="Mark the change KEY (last column) dismissed; it stays listed, marked.")
@click.option("--acknowledge", "acknowledge", metavar="KEY", multiple=True,
              help="Mark the change KEY acknowledged (a known, accepted change).")
@click.option("--reopen", "reopen", metavar="KEY", multiple=True,
              help="Take back the mark of the change KEY (it reads as detected again).")
@click.option("--note", default="", help="Why (stored with --dismiss, --acknowledge or "
                                         "--reopen).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one a change.")
@db_option
def regressions_cmd(since, cases, glob, machine, env, metric, q, aa, improvements, confirm,
                    min_run_time, dismiss, acknowledge, reopen, note, as_json, db):
    """Every change detected across the store's history, newest first: the case, its
    metric, the level before and after with the ratio's interval, the last good and first
    bad run (commit, "+" for a tree with uncommitted changes; torch build), and whether
    later runs recovered. Each (case, metric, machine, env) is its own series, so a
    change of machine is no regression; runs of fewer than 3 samples are left out of the
    detection, and named."""
    from torchmark.cli.store_options import open_store
    from torchmark.core.plain_table import align
    from torchmark.regressions.history import calibrated, load_series, scan, with_marks
    from torchmark.regressions.thresholds import MIN_SEGMENT

    marking = bool(dismiss or acknowledge or reopen)
    if note and not marking:
        raise click.UsageError("--note goes with --dismiss, --acknowledge or --reopen")
    twice = sorted((set(dismiss) & set(acknowledge)) | (set(reopen) & {*dismiss, *acknowledge}))
    if twice:
        raise click.UsageError("a change is given one mark at a time (dismissed, "
                               f"acknowledged or reopened): {', '.join(twice)}")
    store = open_store(db)
    thresholds = calibrated(store, aa, cases=cases, glob=glob) if aa else None
    for name, limits in (thresholds or {}).items():
        click.echo(f"calibrated on {aa}: {name}: changes under {limits.min_effect:.2%} "
                   f"ignored, run-to-run noise at least {limits.noise_floor:.2%}", err=True)
    series = load_series(store, cases=cases, metric=metric, since=since, machine=machine,
                         env=env, glob=glob)
    if not series:
        raise click.UsageError("no results match (" + ", ".join(
            f"{name} {value}" for name, value in (
                ("--case", " ".join(cases)), ("--metric", metric), ("--since", since),
                ("--machine", machine), ("--env", env)) if value) + ")" if any(
            (cases, metric, since, machine, env)) else "the store holds no results")
    short = sum(len(s.points) < MIN_SEGMENT * 2 for s in series)
    click.echo(f"{len(series)} series checked ({short} with under {MIN_SEGMENT * 2} runs, "
               "too few to tell a change)" if short else f"{len(series)} series checked",
               err=True)
    changes = scan(store, series=series, q=q,
                   improvements=improvements or marking,
                   thresholds=thresholds)
    by_key = {c.key: c for c in changes}
    for keys, mark in ((dismiss, "dismissed"), (acknowledge, "acknowledged"),
                       (reopen, "reopened")):
        for key in keys:
            change = by_key.get(key)
            if change is None:
                raise click.UsageError(f"no detected change {key!r} (the last column of "
                                       "`torchmark regressions` names each)")
            store.mark_change(case_id=change.series.case_id, metric=change.series.metric,
                              first_bad_run=change.first_bad.run_id, mark=mark, note=note,
                              machine=change.series.machine, env=change.series.env)
            click.echo(f"{key}: {mark}")
    if marking:
        return 0
    if confirm:
        from torchmark.regressions.confirm import confirm as confirm_change

        for change in changes:
            if change.kind != "regression" or change.mark == "dismissed":
                continue
            outcome = confirm_change(change, store, min_run_time=min_run_time)
            click.echo(f"{change.key}: {outcome.verdict}: {outcome.note}", err=True)
        # the marks --confirm stored; the changes themselves are as detected above
        changes = with_marks(changes, store)
    if as_json:
        for change in changes:
            click.echo(json.dumps(change.to_dict(), default=str))
        return 0
    if not changes:
        click.echo("no change detected")
        return 0
    for line in align(HEADER, _rows(changes), [False, False, False, True, False, False,
                                              False, False, False, False], rule=True):
        click.echo(line)
    for change in changes:  # what was said of each marked change
        if change.note:
            click.echo(terminal_text(f"{change.key}: {change.mark}: {change.note}"))
    from torchmark.rootcause.explain import explain_changes

    for change, explanation in explain_changes(changes, store):
        click.echo("")
        click.echo(terminal_text(f"{change.key}: where the change lives (last good run "
                                 "against first bad run)"))
        for line in explanation:
            click.echo(terminal_text(line))
    for change in changes:
        if change.few_samples:
            click.echo(f"{change.key}: {len(change.few_samples)} run(s) of fewer than 3 "
                       f"samples left out of the detection: run(s) "
                       f"{', '.join(map(str, change.few_samples[:10]))}"
                       f"{' ...' if len(change.few_samples) > 10 else ''}")
    return 0
