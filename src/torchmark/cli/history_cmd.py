"""`torchmark history`: one case's values over the runs that measured it."""

from __future__ import annotations

import json

import click

from torchmark.cli.store_options import db_option
from torchmark.core.neutralise import terminal_text
from torchmark.core.result import METRICS

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """A bar a value, scaled between the smallest and the largest."""
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(BARS[min(int((v - low) / span * (len(BARS) - 1) + 0.5), len(BARS) - 1)]
                   for v in values)


@click.command("history")
@click.argument("case")
@click.option("--glob", is_flag=True, help="CASE is a shell pattern of ids and names "
                                           "('mul: n=*').")
@click.option("--metric", type=click.Choice(list(METRICS)),
              default=None, help="One metric (default: all the case has).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines.")
@db_option
def history_cmd(case, glob, metric, as_json, db):
    """CASE's median a run, oldest first, with its sample count, commit ("+": the tree
    had uncommitted changes) and machine, and a sparkline: one table a metric, machine
    and env (values from two machines are two histories). CASE: a case id (as `show RUN
    --format json` and `regressions` give it), its name exactly or, for a pytest
    benchmark, its node id (`tests/test_x.py::test_x[8]`); with --glob, a shell
    pattern matched against ids and names. A run of fewer than 3 samples is marked: its
    median is a sample or two, and change-point detection leaves it out."""
    from torchmark.cli.store_options import open_store
    from torchmark.core.plain_table import align
    from torchmark.core.provenance import commit_label
    from torchmark.core.result import cases_named
    from torchmark.core.stats import select_unit

    store = open_store(db)
    titles = store.case_titles()
    ids = cases_named(titles, [case], glob)
    points = [{"case_id": i, **p} for i in ids for p in store.history(i, metric)]
    if not points:
        raise click.UsageError(
            f"the store holds no {metric + ' ' if metric else ''}results of a case "
            f"{case!r} (`torchmark regressions` and `torchmark show RUN --format json` "
            "give case ids and names" + ("" if glob else "; --glob takes a pattern such "
                                         "as 'mul*'") + ")")
    if as_json:
        for point in points:
            click.echo(json.dumps(point, default=str))
        return
    hosts = store.hostnames()
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        groups.setdefault((p["case_id"], p["metric"], p["machine"], p["run_env"]),
                          []).append(p)
    for (case_id, name, machine, env), series in groups.items():
        values = [p["median"] for p in series if p["median"] is not None]
        seconds = series[0]["unit"] == "s"
        unit, scale = select_unit(min(values)) if seconds and values else (series[0]["unit"],
                                                                          1.0)
        where = f"{hosts.get(machine or '', machine) or '?'}" + (f", env {env}" if env else "")
        click.echo(terminal_text(f"{case_id} [{name}]  {sparkline(values)}  "
                                 f"{titles.get(case_id, '')} ({where})"))
        rows = [[str(p["run_id"]), p["started"][:19].replace("T", " "),
                 f"{p['median'] / scale:.4g} {unit}" if p["median"] is not None else
                 f"failed: {p['failure']}",
                 f"{p['n']}{' (few)' if p['median'] is not None and p['n'] < 3 else ''}",
                 commit_label(p["git_commit"], p["git_dirty"]),
                 p["torch_version"] or ""] for p in series]
        for line in align(["run", "started (UTC)", "median", "samples", "commit", "torch"],
                          rows, [True, False, True, True, False, False], rule=True):
            click.echo(line)
