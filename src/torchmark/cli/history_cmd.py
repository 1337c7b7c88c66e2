"""`torchmark history`: one case's values over the runs that measured it."""

from __future__ import annotations

import json

import click

from torchmark.cli.store_options import db_option

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
@click.option("--metric", type=click.Choice(["wall", "device", "instructions", "memory"]),
              default=None, help="One metric (default: all the case has).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines.")
@db_option
def history_cmd(case, metric, as_json, db):
    """CASE's median a run, oldest first, with commit and machine, and a sparkline."""
    from torchmark.cli.store_options import open_store
    from torchmark.compare.plain_table import align
    from torchmark.core.stats import select_unit

    points = open_store(db).history(case, metric)
    if not points:
        raise click.UsageError(f"the store holds no results of case {case!r} (`torchmark "
                               "runs` and `torchmark show RUN` list what it holds)")
    if as_json:
        for point in points:
            click.echo(json.dumps(point, default=str))
        return
    for name in sorted({p["metric"] for p in points}):
        series = [p for p in points if p["metric"] == name]
        values = [p["median"] for p in series if p["median"] is not None]
        seconds = series[0]["unit"] == "s"
        unit, scale = select_unit(min(values)) if seconds and values else (series[0]["unit"],
                                                                          1.0)
        click.echo(f"{case} [{name}]  {sparkline(values)}")
        rows = [[str(p["run_id"]), p["started"][:19].replace("T", " "),
                 f"{p['median'] / scale:.4g} {unit}" if p["median"] is not None else
                 f"failed: {p['failure']}", (p["git_commit"] or "")[:10],
                 (p["machine"] or "")[:8], p["run_env"] or ""] for p in series]
        for line in align(["run", "started (UTC)", "median", "commit", "machine", "env"], rows,
                          [True, False, True, False, False, False], rule=True):
            click.echo(line)
