"""`torchmark gate`: a CI check that fails when a candidate regressed against a baseline."""

from __future__ import annotations

import click

from torchmark.cli.env_options import allow_env_diff_option
from torchmark.cli.params import Proportion
from torchmark.cli.store_options import db_option
from torchmark.core.neutralise import markdown_text, terminal_text
from torchmark.core.result import METRICS


@click.command("gate")
@click.option("--baseline", required=True, metavar="REF",
              help="A run id (12 or run:12), latest, commit:SHA (every run of the commit, "
                   "pooled), env:LABEL, or a results file.")
@click.option("--candidate", required=True, metavar="REF", help="As --baseline.")
@click.option("--max-slowdown", type=Proportion(0, 10, high_open=True), default=0.05,
              show_default=True,
              help="The slowdown allowed: a fraction (0.05) or a percent (5%).")
@click.option("--metric", type=click.Choice(list(METRICS)), default=None,
              help="Gate one metric (default: every metric both sides hold).")
@click.option("--cases", "patterns", multiple=True, metavar="CASE",
              help="Only this case: its id or title exactly (repeatable); shell patterns "
                   "with --glob.")
@click.option("--glob", is_flag=True, help="--cases are shell patterns (add_*[128]).")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the verdict (failing cases as a table) as Markdown, for a "
                   "pull-request comment.")
@click.option("--allow-unmeasured", is_flag=True,
              help="A case that could not be measured well enough for a verdict (too few "
                   "samples or processes, a baseline that failed), or that the candidate "
                   "lacks, does not fail the gate.")
@click.option("--remeasure", is_flag=True,
              help="Measure the candidate's unmeasured cases again here, longer, until an "
                   "interval exists (timeit statements, C++ snippets, callgrind counts; "
                   "for a candidate that is this checkout).")
@click.option("--confidence", type=Proportion(0.5, 1, low_open=True, high_open=True),
              default=0.95, show_default=True, help="Of the ratio's interval (times).")
@allow_env_diff_option
@db_option
def gate_cmd(baseline, candidate, max_slowdown, metric, patterns, glob, markdown_file,
             allow_unmeasured, remeasure, confidence, allow_env_diff, db):
    """Exit 0 when no case of the candidate is slower than the baseline by more than
    --max-slowdown, 1 when one is, failed, or could not be measured, or a case of the
    baseline is missing from the candidate (unless --allow-unmeasured), 2 for bad usage.

    Each case is judged by the verdict engine: instruction counts exactly, times by the
    interval of the ratio of their medians (runs over several processes, `timeit
    --processes`: of their processes' medians) widened by the drift between two runs of
    the same code: from the case's A/A history in the store (consecutive runs of one
    clean commit on the candidate's machine; `torchmark calibrate` adds them), else
    from the runs' own spreads, and by the runs' common shift. A change within that
    drift is unsure, never slower. Each of n cases is judged at confidence
    1 - (1 - CONFIDENCE) / n, so unchanged code fails the gate at most 5% of the
    time however many cases it has (docs/verdicts.md).

    The two sides must have run in comparable environments (the same hardware, torch
    build and thread settings: `torchmark env diff`); otherwise the gate stops with
    exit 2 and the differences, unless --allow-env-diff."""

    import dataclasses

    from torchmark.cli.env_options import check_environments
    from torchmark.cli.store_options import store_for_refs
    from torchmark.compare.verdict_table import markdown_table, text_table
    from torchmark.regressions.comparability import mark_rows, marked
    from torchmark.regressions.gate import gate
    from torchmark.regressions.refs import check_distinct, resolve_side

    store = store_for_refs((baseline, candidate), db)
    base = resolve_side(baseline, store)
    cand = resolve_side(candidate, store)
    check_distinct(base, cand)  # `latest` against `latest`, say
    env_differences = check_environments(base.results, cand.results, allow_env_diff,
                                         f"{baseline} and {candidate}")
    histories = {}
    if store is not None:
        from torchmark.regressions.aa_history import pair_histories

        histories = pair_histories(store, base, cand)
    options = dict(max_slowdown=max_slowdown, metric=metric, cases=patterns, glob=glob,
                   confidence=confidence, histories=histories,
                   allow_unmeasured=allow_unmeasured)
    report = gate(base.results, cand.results, **options)
    if remeasure:
        again = _remeasured(report, cand.results)
        if again:
            click.echo(f"re-measured here until an interval exists: {len(again)} case(s) "
                       "(not recorded in the store)", err=True)
            fresh = {(r.case.id, r.metric): r for r in again}
            report = gate(base.results, [fresh.get((r.case.id, r.metric), r)
                                         for r in cand.results], **options)
    report = dataclasses.replace(report, rows=mark_rows(report.rows, env_differences))
    if not report.rows:
        from torchmark.core.result import unpaired_why

        raise click.UsageError(
            f"{baseline} and {candidate} hold no case in common"
            + unpaired_why((r.case for r in base.results), (r.case for r in cand.results))
            + (f" with metric {metric}" if metric else "")
            + (f" {'matching' if glob else 'named'} {', '.join(patterns)}" if patterns
               else "") + ("" if glob or not patterns else " (--glob for patterns)"))
    click.echo(f"baseline: {base.describe()}")
    click.echo(f"candidate: {cand.describe()}")
    if base.machines and cand.machines and set(base.machines) != set(cand.machines):
        click.echo(f"warning: the two sides ran on different machines ({', '.join(base.machines)}"
                   f"; {', '.join(cand.machines)}): a difference may be the machine's",
                   err=True)
    if env_differences:
        click.echo(f"note: {terminal_text(marked(env_differences))}")
    each = report.rows[0].verdict.confidence  # family-wise: each case at a higher one
    family = (f"{confidence:.0%} for the {len(report.rows)} cases together: each "
              f"case's interval at {each * 100:.4g}%" if len(report.rows) > 1
              else f"a {confidence:.0%} interval")
    click.echo(f"a case fails when it is slower by more than {max_slowdown:.1%} beyond "
               f"the drift between runs ({family}), failed, "
               f"{'unmeasured (allowed here)' if allow_unmeasured else 'unmeasured'} or "
               f"missing from the candidate{' (allowed here)' if allow_unmeasured else ''}")
    for line in text_table(report.rows):
        click.echo(line)
    for side, names in (("baseline", report.only_baseline),
                        ("candidate", report.only_candidate)):
        if names:
            click.echo(terminal_text(f"only in the {side}: {', '.join(names)}"))
    click.echo(", ".join(f"{n} {v}" for v, n in report.counts().items()))
    explained = _explanations(report, base.results, cand.results)
    for explanation in explained:
        click.echo("")
        for line in explanation:
            click.echo(terminal_text(line))
    if markdown_file:
        from torchmark.core.atomic_files import write_atomically

        try:
            write_atomically(markdown_file, markdown(
                report, baseline, candidate, markdown_table, explained,
                marked(env_differences) if env_differences else ""))
        except OSError as e:
            raise click.UsageError(f"--markdown {markdown_file}: {e.strerror or e}") \
                from None
    if not report.passed:
        counts = {v: sum(r.kind == v for r in report.failing)
                  for v in ("slower", "failed", "unmeasured")}
        counts["missing from the candidate"] = len(report.missing)
        hint = (" (measure longer for an interval, or --allow-unmeasured)"
                if counts["unmeasured"] else "") + \
            (" (not measured there: --cases or --metric for the part of the baseline the "
             "candidate measured, or --allow-unmeasured)" if report.missing else "")
        click.echo("gate: " + ", ".join(f"{n} case(s) {v}" for v, n in counts.items() if n)
                   + hint, err=True)
        return 1
    return 0


def markdown(report, baseline: str, candidate: str, table, explained=(),
             env_note: str = "") -> str:
    """The verdict as Markdown for a pull-request comment: the failing cases as a
    table (a line saying so when there are none), then where each slower case's
    change lives (`explained`: the lines of rootcause.explain, one list a case);
    `env_note`: the mark of a comparison across differing environments."""
    head = (f"**torchmark gate**: candidate `{candidate}` against baseline `{baseline}`, "
            f"threshold {report.max_slowdown:.1%} slower"
            + (f" ({markdown_text(env_note)})" if env_note else ""))
    counts = ", ".join(f"{n} {v}" for v, n in report.counts().items()) or "no case"
    if report.passed:
        return f"{head}: passed ({counts}).\n"
    lines = [f"{head}: **{len(report.failing) + len(report.missing)} case(s) failed the "
             f"gate** ({counts})", "", *table(report.failing)]
    if report.missing:
        lines += ["", f"Missing from the candidate (not measured there): "
                      f"{markdown_text(', '.join(report.missing))}"]
    for explanation in explained:
        first, *rest = explanation
        lines += ["", f"**Why** ({markdown_text(first)})", "",
                  *(f"- {markdown_text(line.strip())}" for line in rest)]
    return "\n".join(lines) + "\n"


def _explanations(report, baseline, candidate) -> list[list[str]]:
    """For each slower case whose two sides hold what explains it (per-function counts,
    a kernel list), the lines saying where the change lives (rootcause/explain.py),
    top 5."""
    from torchmark.rootcause.explain import explain_results

    slower = {row.case_id for row in report.failing
              if row.kind == "slower" and row.metric in ("instructions", "kernel")}
    if not slower:
        return []
    return explain_results([r for r in baseline if r.case.id in slower],
                           [r for r in candidate if r.case.id in slower], top=5,
                           threshold=report.max_slowdown, ops=False).sections(5)


def _remeasured(report, results) -> list:
    """The candidate's unmeasured cases that can be re-run from what a result holds
    (timeit, C++, callgrind), measured again here with twice the time each try (three
    tries) until they hold enough samples for an interval."""
    from torchmark.regressions.confirm import RERUNNABLE, remeasured
    from torchmark.verdicts.intervals import MIN_SAMPLES

    unmeasured = {(r.case_id, r.metric) for r in report.rows if r.kind == "unmeasured"}
    out = []
    for result in results:
        if (result.case.id, result.metric) not in unmeasured or \
                result.case.frontend not in RERUNNABLE or not result.ok:
            continue
        seconds = 0.5
        for _ in range(3):
            fresh = remeasured(result.case, result.metric, seconds)
            if len(fresh.samples) >= MIN_SAMPLES or result.metric == "instructions":
                break
            seconds *= 2
        out.append(fresh)
    return out
