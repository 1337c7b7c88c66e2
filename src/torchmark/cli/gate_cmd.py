"""`torchmark gate`: a CI check that fails when a candidate regressed against a baseline."""

from __future__ import annotations

import click

from torchmark.cli.params import Proportion
from torchmark.cli.store_options import db_option


@click.command("gate")
@click.option("--baseline", required=True, metavar="REF",
              help="A run id (12 or run:12), latest, commit:SHA, env:LABEL, or a results "
                   "file.")
@click.option("--candidate", required=True, metavar="REF", help="As --baseline.")
@click.option("--max-slowdown", type=Proportion(0, 10, high_open=True), default=0.05,
              show_default=True,
              help="The slowdown allowed: a fraction (0.05) or a percent (5%).")
@click.option("--metric", type=click.Choice(["wall", "instructions", "device", "kernel", "batch"]), default=None,
              help="Gate one metric (default: every metric both sides hold).")
@click.option("--cases", "patterns", multiple=True, metavar="PATTERN",
              help="Only the cases whose id or name matches this shell pattern (repeatable).")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the verdict (offending cases as a table) as Markdown, for a "
                   "pull-request comment.")
@click.option("--fail-unchecked", is_flag=True,
              help="A case the gate cannot check (under 5 samples a side, a baseline that "
                   "failed) fails it too.")
@click.option("--confidence", type=Proportion(0.5, 1, low_open=True, high_open=True),
              default=0.95, show_default=True, help="Of the ratio's interval (times).")
@db_option
def gate_cmd(baseline, candidate, max_slowdown, metric, patterns, markdown_file,
             fail_unchecked, confidence, db):
    """Exit 0 when no case of the candidate is slower than the baseline beyond
    --max-slowdown with confidence, 1 when one is (or failed), 2 for bad usage.

    Instruction counts are gated exactly (any increase beyond the threshold); wall and
    device times by the bootstrap interval of the ratio of their medians, from the raw
    samples (runs over several processes, `timeit --processes`: by their processes'
    medians): regressed when the whole interval lies beyond the threshold, unsure (not
    failing) when only the ratio does."""
    from pathlib import Path

    from torchmark.compare.plain_table import align
    from torchmark.regressions.gate import HEADER, RIGHT, gate, markdown, table_rows
    from torchmark.regressions.refs import resolve_side

    store = None
    if not (Path(baseline).exists() and Path(candidate).exists()):
        from torchmark.cli.store_options import open_store

        store = open_store(db)
    base = resolve_side(baseline, store)
    cand = resolve_side(candidate, store)
    report = gate(base.results, cand.results, max_slowdown=max_slowdown, metric=metric,
                  cases=patterns, confidence=confidence)
    if not report.rows:
        raise click.UsageError(
            f"{baseline} and {candidate} hold no case in common"
            + (f" with metric {metric}" if metric else "")
            + (f" matching {', '.join(patterns)}" if patterns else ""))
    click.echo(f"baseline: {base.describe()}")
    click.echo(f"candidate: {cand.describe()}")
    if base.machines and cand.machines and set(base.machines) != set(cand.machines):
        click.echo(f"warning: the two sides ran on different machines ({', '.join(base.machines)}"
                   f"; {', '.join(cand.machines)}): a difference may be the machine's",
                   err=True)
    click.echo(f"a case fails when it is more than {max_slowdown:.1%} slower with "
               f"{confidence:.0%} confidence")
    for line in align(HEADER, table_rows(report.rows), RIGHT, rule=True):
        click.echo(line)
    for side, names in (("baseline", report.only_baseline),
                        ("candidate", report.only_candidate)):
        if names:
            click.echo(f"only in the {side}: {', '.join(names)}")
    click.echo(", ".join(f"{n} {v}" for v, n in report.counts().items()))
    unchecked = [r for r in report.rows if r.verdict == "unchecked"]
    if unchecked:
        click.echo(f"{'' if fail_unchecked else 'warning: '}{len(unchecked)} case(s) not "
                   f"checked: {', '.join(r.title for r in unchecked)} (measure longer for "
                   "5 samples a side or more)", err=True)
    if markdown_file:
        try:
            Path(markdown_file).write_text(markdown(report, baseline, candidate))
        except OSError as e:
            raise click.UsageError(f"--markdown {markdown_file}: {e.strerror}") from None
    failing = [r for r in report.rows if r.verdict in ("regressed", "failed")
               or (fail_unchecked and r.verdict == "unchecked")]
    if failing:
        counts = {v: sum(r.verdict == v for r in failing)
                  for v in ("regressed", "failed", "unchecked")}
        click.echo("gate: " + ", ".join(f"{n} case(s) {v}" for v, n in counts.items() if n),
                   err=True)
        return 1
    return 0
