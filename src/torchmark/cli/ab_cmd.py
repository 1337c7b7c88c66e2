"""`torchmark ab`: is the candidate faster than the baseline, and can we tell? Saved
files compared case by case, or (`--python A --python B STMT`) one statement measured in
two Python environments at once, in interleaved blocks (compare/env_ab.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from typing import Any

import click

from torchmark.cli.env_options import allow_env_diff_option, check_files
from torchmark.cli.params import FiniteRange, Proportion, check_syntax
from torchmark.cli.store_options import COMMAND_LINE, db_option, recorder
from torchmark.core.neutralise import terminal_text
from torchmark.core.threads import MAX_THREADS


def _time(seconds: float) -> str:
    from torchmark.core.stats import select_unit

    unit, scale = select_unit(seconds)
    return f"{seconds / scale:.4g} {unit}"


def _row(result) -> list[str]:
    from torchmark.compare.ab import failure_of, measurement_side
    from torchmark.verdicts.engine import shown_values

    judged = result.judged  # the interval that decided: the ratio's, widened by the drift
    interval = ("-" if math.isnan(judged.lower)  # too few samples
                else f"[{judged.lower:.3f}, {judged.upper:.3f}]")

    shown = shown_values(measurement_side(result.baseline), measurement_side(result.candidate))

    def value(m, x: float) -> str:  # the means the verdict compares, where a side states
        if failure_of(m) is not None:  # one (verdicts/engine.py shown_values)
            return "failed"
        if shown[2]:
            return f"{_time(x)} (mean)"
        return f"{m.median:.6g} instr" if result.exact else _time(m.median)

    p = ("-" if math.isnan(result.p_value)  # exact counts: no sampling to test
         else "<0.001" if result.p_value < 0.001 else f"{result.p_value:.3f}")
    return [result.name, value(result.baseline, shown[0]),
            value(result.candidate, shown[1]),
            f"{result.ratio:.3f}", interval, p, result.brief_verdict()]


def _split_by_env(measurements, path):
    envs = list(dict.fromkeys(m.env for m in measurements))
    if len(envs) != 2:
        raise click.UsageError(
            f"{path}: one file must hold measurements of exactly two envs (baseline first), "
            f"found {len(envs)}{': ' + ', '.join(map(repr, envs)) if envs else ''}; "
            "or give two files")
    return [[m for m in measurements if m.env == env] for env in envs], envs


def _unmatched(only_a: list[str], only_b: list[str], errors: list[str]) -> list[str]:
    """Lines naming the cases found on one side only and those not compared."""
    return [line for line in (
        terminal_text(f"only in the baseline: {', '.join(only_a)}") if only_a else "",
        terminal_text(f"only in the candidate: {', '.join(only_b)}") if only_b else "",
        *(f"not compared: {e}" for e in errors)) if line]


def _few_samples_hint(results) -> list[str]:
    """Why some cases got no verdict, and how to give them one."""
    from torchmark.verdicts.intervals import MIN_SAMPLES

    lines = []
    unmeasured = [r for r in results if r.verdict == "unmeasured"]
    processes = [r for r in unmeasured if "processes" in r.judged.reason]
    if processes:
        fewest = min(min(len(r.baseline.process_medians), len(r.candidate.process_medians))
                     for r in processes)
        lines.append(f"too few processes: {len(processes)} case(s) were timed in as few as "
                     f"{fewest} process(es) on a side; an interval at this confidence needs "
                     "more (4 and 4 at 95%): `timeit --processes 5` or more")
    few = [r for r in unmeasured if "too few samples" in r.judged.reason]
    if not few:
        return lines
    fewest = min(min(len(r.baseline.times), len(r.candidate.times)) for r in few)
    return lines + [f"too few samples: {len(few)} case(s) have as few as {fewest} time(s) on a "
            f"side; a verdict needs {MIN_SAMPLES}. Measure longer (`timeit --min-run-time`, "
            "a larger min_run_time) or, for `ops` results, run with more iterations "
            f"(`-i {MIN_SAMPLES}` or more) in `--exec-mode discrete` (continuous keeps one "
            "mean per case)"]


def compare_sides(sides, confidence: float, min_effect: float, seed: int, histories=None):
    """Every case the two sides share, judged together (compare/ab.py ab_all): the
    results, the cases found on one side only, and the cases that could not be compared
    (one line each). `histories`: stored case id -> its A/A log ratios (sides read from
    the store)."""
    from torchmark.compare.ab import ab_all, pair_measurements

    pairs, only_a, only_b = pair_measurements(sides[0], sides[1])
    by_name = {}
    for name, _, b in pairs:
        stored = b.metadata.get("case_id") if isinstance(b.metadata, dict) else None
        if stored in (histories or {}):
            by_name[name] = histories[stored]
    results, errors = ab_all(pairs, confidence=confidence, min_effect=min_effect, seed=seed,
                             histories=by_name)
    return results, only_a, only_b, errors


def verdict_lines(results, only_a, only_b, errors, names, confidence: float,
                  min_effect: float, markdown_table: bool = False,
                  head: str | None = None) -> list[str]:
    """The verdicts as a table (text or Markdown) with what was left out and the counts;
    `head`: the first line (default: the sides' names and how the ratio is taken)."""
    from torchmark.core.plain_table import align, markdown

    each = results[0].confidence if results else confidence  # family-wise, a case
    header = ["case", "baseline", "candidate", "ratio", f"{each * 100:.4g}% interval", "p",
              "verdict"]
    right = [False, True, True, True, False, True, False]
    rows = [_row(r) for r in results]
    if head is None:
        how = ("ratio = candidate / baseline median, bootstrap interval (over processes: "
               "their medians' Hodges-Lehmann ratio, exact interval)"
               if any(r.processes[0] for r in results) else
               "ratio = candidate / baseline median, bootstrap interval")
        how += ", widened by the drift between runs as the verdict's (gate's) is"
        head = (f"baseline: {names[0]}; candidate: {names[1]}; {how}; changes under "
                f"{min_effect * 100:g}% count as no change")
    if markdown_table:
        lines = [head, "", *markdown(header, rows, right)]
    else:
        lines = [head, *align(header, rows, right, rule=True)]
    lines += _unmatched(only_a, only_b, errors) + _few_samples_hint(results)
    lines.append(verdict_counts(r.verdict for r in results) or "no cases in common")
    from torchmark.verdicts.engine import ONE_BUILD

    overruled = [r.name for r in results if r.judged.reason.endswith(ONE_BUILD)]
    if overruled:
        lines.append(f"note: {len(overruled)} case(s) changed beyond the drift but are "
                     f"\"unsure\" ({', '.join(overruled[:5])}"
                     f"{' ...' if len(overruled) > 5 else ''}): {ONE_BUILD}")
    if any(r.verdict == "unsure" and r.replicate_ratios for r in results):
        lines.append("note: \"unsure\" with a median of replicates: the change shows over "
                     "all samples but not in the median worker pair; processes of one "
                     "environment differ in speed from one start to the next; measure with "
                     "more worker pairs")
    from torchmark.compare.ab import failure_of

    unpaired = [r for r in results if not r.paired and not r.exact
                and failure_of(r.baseline) is None and failure_of(r.candidate) is None]
    if unpaired:
        sources = sorted({r.judged.drift.detail or r.judged.drift.source for r in unpaired})
        over = ("; cases timed over several processes (`timeit --processes`) are compared "
                "by their processes' medians: Hodges-Lehmann's ratio, an exact interval, the "
                "exact Mann-Whitney p" if any(r.processes[0] for r in results) else
                "; and a side timed in one process read that process's speed, drawn at its "
                "start (pure-Python loops differ by up to 20%): `timeit --processes 5` on "
                "both sides puts that in the interval")
        lines.append(f"note: the two sides were measured at different times, so each "
                     f"interval is widened by the drift between two runs of the same code "
                     f"({'; '.join(sources)}): a change within it is \"unsure\" "
                     f"(docs/ab.md); `torchmark timeit A --vs B` or measure_ab() interleave "
                     f"the two and cancel drift{over}")
    return lines


def verdict_counts(verdicts) -> str:
    """"2 slower, 5 same": how many of each verdict, in the engine's order."""
    from torchmark.verdicts import VERDICTS

    found = list(verdicts)
    return ", ".join(f"{n} {v}" for v in VERDICTS if (n := found.count(v)))


# env mode only: option name -> the parameter's name
_ENV_OPTIONS = {"--env-label": "env_labels", "--setup": "setup", "--threads": "num_threads",
                "--min-run-time": "min_run_time", "--rounds": "rounds", "--metric": "metric",
                "--number": "number", "--label": "label", "--no-store": "no_store",
                "--worker-pairs": "worker_pairs"}


@click.command("ab")
@click.argument("args", nargs=-1, required=True, metavar="FILES... | STMT...")
@click.option("--confidence", type=Proportion(0.5, 1, low_open=True, high_open=True),
              default=0.95, show_default=True,
              help="Of the interval: a fraction as in Python (0.95) or a percent (95%).")
@click.option("--min-effect", type=Proportion(0, 1, high_open=True), default=0.01,
              show_default=True, help="Smaller changes of the median count as no change: a "
                                      "fraction (0.01) or a percent (1%).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv", "jsonl"]),
              default="text", show_default=True)
@click.option("--fail-above", type=Proportion(0, 10, high_open=True), default=None,
              help="The verdicts' threshold (a fraction, 0.05, or a percent, 5%; it "
                   "replaces --min-effect): exit 1 when a case is slower by more, failed, "
                   "or cannot be checked (unmeasured, missing from the candidate, not "
                   "comparable).")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True,
              help="Of the bootstrap's resampling.")
@click.option("--python", "pythons", multiple=True, metavar="PY",
              help="Twice (baseline first): measure STMT in these two Python environments "
                   "at once, blocks interleaved A B B A (their interpreters: a venv's "
                   "bin/python, or a name on PATH; each needs torch).")
@click.option("--env-label", "env_labels", multiple=True, metavar="NAME",
              help="With --python, twice: the two environments' labels (the runs' env in "
                   "the store) [default: from the interpreters' paths].")
@click.option("-s", "--setup", multiple=True,
              help="With --python: setup code, run once (repeatable; lines).")
@click.option("-t", "--threads", "num_threads", type=click.IntRange(1, MAX_THREADS),
              default=1, show_default=True,
              help="With --python: torch thread count during the measurement.")
@click.option("--min-run-time", type=FiniteRange(min=0, min_open=True), default=1.0,
              show_default=True, help="With --python: seconds of blocks a side (wall time), "
                                      "in all: each worker pair times its share.")
@click.option("--rounds", type=click.IntRange(min=1), default=None,
              help="With --python: blocks a side, at least (wall time: per worker pair) "
                   "[default: 12 for wall time (6 A B B A quads), 2 for instructions].")
@click.option("--worker-pairs", type=click.IntRange(min=1), default=None,
              help="With --python, wall time: fresh pairs of worker processes, one after "
                   "the other, each timing its share of --min-run-time; a change is called "
                   "only when the median of the pairs' ratios shows it too [default: 5].")
@click.option("--metric", type=click.Choice(["wall", "instructions"]), default="wall",
              show_default=True, help="With --python: wall time, or instruction counts by "
                                      "each environment's callgrind collector.")
@click.option("--number", type=click.IntRange(min=1), default=100, show_default=True,
              help="With --python --metric instructions: runs a count.")
@click.option("--label", default=None, help="With --python: the case's label.")
@click.option("--no-store", is_flag=True,
              help="With --python: do not record the two runs in the store "
                   "(TORCHMARK_NO_STORE=1 does the same).")
@allow_env_diff_option
@db_option
def ab_cmd(args, confidence, min_effect, fmt, fail_above, seed, pythons, env_labels, setup,
           num_threads, min_run_time, rounds, worker_pairs, metric, number, label, no_store,
           allow_env_diff, db):
    """Compare a baseline with a candidate, case by case: the ratio of the median times,
    its bootstrap confidence interval, a Mann-Whitney p-value and a verdict (a case needs
    at least 5 times a side).
    Cases found on one side only, or that cannot be compared, are listed (on stderr in
    the csv and jsonl formats). With --fail-above, a baseline case that cannot be
    checked (too few samples, missing from the candidate, not comparable) also exits 1;
    two sides with no case in common are refused (exit 2), as `gate` refuses them.

    FILES: BASELINE CANDIDATE (saved measurements or `ops` results; or sides of the
    store: a run, `run:N` or N, `latest`, `commit:SHA`, `env:LABEL`), or one file whose
    measurements hold two envs (`timeit --env before --save f.json`, then `--env after`).

    With --python PY_A --python PY_B: STMT (several arguments are joined as lines) is
    measured in both environments at once, a worker process in each, blocks alternating
    A B B A (so drift hits both alike) and compared quad by quad, by 5 fresh worker
    pairs in turn, a change called only when the median pair shows it too (instruction
    counts: one pair, compared exactly); the two sides are recorded in the store as two
    runs, env-labelled."""
    source = click.get_current_context().get_parameter_source
    if fail_above is not None:  # the verdicts are the gate's: one threshold
        min_effect = fail_above
    if pythons:
        return _environments(args, pythons, env_labels, setup, num_threads, min_run_time,
                             rounds, worker_pairs, metric, number, label, no_store, db,
                             confidence, min_effect, fmt, fail_above, source)
    given = [name for name, param in _ENV_OPTIONS.items()
             if source(param) is not click.core.ParameterSource.DEFAULT]
    if given:
        raise click.UsageError(f"{', '.join(given)}: for an A/B across environments only "
                               "(--python PY_A --python PY_B STMT)")
    files = [click.Path(dir_okay=False).convert(a, None, None) for a in args]
    return _files(files, confidence, min_effect, fmt, fail_above, seed, db, allow_env_diff)


def _files(files, confidence, min_effect, fmt, fail_above, seed, db,
           allow_env_diff=False) -> int:
    """Saved files, case by case."""
    from torchmark.cli.measurement_files import is_store_ref, read_measurement_files

    if len(files) > 2:
        raise click.UsageError(f"give one or two files, got {len(files)}")
    if len(files) == 1:  # refused before the file is read
        from torchmark.ops.runner import SCHEMA as OPS_SCHEMA
        from torchmark.timing.files import first_line_schema

        if first_line_schema(files[0]) == OPS_SCHEMA:
            raise click.UsageError(f"{files[0]}: an ops results file holds one run (its "
                                   "envs are the forward and backward passes); give two "
                                   "files, baseline first")
    stored: dict = {}  # the sides of the store, as read: the histories' too
    sides = read_measurement_files(list(files), db, stored, failed=True)
    sides = _times_only(sides, files)
    if len(sides) == 1:
        sides, names = _split_by_env(sides[0], files[0])
    else:
        names = list(files)
    for side, name in zip(sides, names, strict=True):
        if not side:
            raise click.UsageError(f"{name}: holds no measurements")
    if len(files) == 2:  # a results file of one build: its measurements say so, as the
        for path, side in zip(files, sides, strict=True):  # store's do (one-build rule)
            build = None if is_store_ref(path) else _file_build(path)
            for m in side if build else ():
                m.metadata = {**(m.metadata or {}), "build": build}
    allowed = check_files(list(files), allow_env_diff) \
        if len(files) == 2 and not any(is_store_ref(f) for f in files) else []
    histories, stored_allowed = _stored_histories(files, db, allow_env_diff, stored)
    results, only_a, only_b, errors = compare_sides(sides, confidence, min_effect, seed,
                                                    histories)
    if not results and not errors:  # as `gate` refuses them: nothing could be judged
        from torchmark.core.result import Case, unpaired_why

        def cases(side) -> list[Case]:
            return [Case(id="ab", frontend="timeit", stmt=m.task_spec.stmt,
                         setup=m.task_spec.setup, label=m.task_spec.label,
                         sub_label=m.task_spec.sub_label, threads=m.task_spec.num_threads)
                    for m in side]

        raise click.UsageError(f"{names[0]} and {names[1]} hold no case in common"
                               + unpaired_why(cases(sides[0]), cases(sides[1])))
    results = _marked(results, allowed + stored_allowed)
    _print(results, only_a, only_b, errors, names, fmt, confidence, min_effect)
    if allowed + stored_allowed and fmt in ("text", "markdown"):
        from torchmark.regressions.comparability import marked

        click.echo(f"note: every verdict above is of {marked(allowed + stored_allowed)}")
    return _gate(results, only_a, errors, fail_above)


def _marked(results, found) -> list:
    """Each result's verdict reason with the mark of the environment differences
    compared anyway (--allow-env-diff), as `gate` and `compare` mark theirs."""
    if not found:
        return list(results)
    from torchmark.regressions.comparability import marked

    note = marked(found)
    return [dataclasses.replace(r, judged=dataclasses.replace(
        r.judged, reason=f"{r.judged.reason} [{note}]")) for r in results]


def _times_only(sides: list, files) -> list:
    """The sides without their memory measurements (`ab` judges times; `gate` judges
    bytes), said on stderr; a UsageError when a side holds nothing else."""
    from torchmark.timing.memory import MemoryMeasurement

    kept = [[m for m in side if not isinstance(m, MemoryMeasurement)] for side in sides]
    left = sum(len(side) - len(times) for side, times in zip(sides, kept, strict=True))
    if not left:
        return sides
    for side, times, name in zip(sides, kept, files, strict=True):
        if side and not times:
            raise click.UsageError(
                f"{name}: holds memory results (bytes), which `ab` does not judge (it "
                "judges times): `torchmark gate --baseline A --candidate B` does, from "
                "two files or the store's runs (`env:LABEL`)")
    click.echo(f"note: {left} memory result{'s' if left > 1 else ''} left out: `ab` judges "
               "times, `torchmark gate` bytes", err=True)
    return kept


def _file_build(path: str) -> str | None:
    """The build (core/provenance.py) every result of a results file ran, if one."""
    from torchmark.core.results_file import is_results_file, read_results

    if not is_results_file(path):
        return None
    builds = {r.provenance.build if r.provenance is not None else None
              for r in read_results(path)}
    return builds.pop() if len(builds) == 1 else None


def _stored_histories(files, db, allow_env_diff=False, stored=None) -> tuple[dict, list]:
    """Two sides of the store (is_store_ref): each candidate case's A/A log ratios (as
    `gate` and `compare` read them), by case id, once their environments are found
    comparable (cli/env_options.py), and the differences allowed; ({}, []) for files.
    `stored`: the sides already resolved, by name."""
    from torchmark.cli.env_options import check_environments
    from torchmark.cli.measurement_files import is_store_ref, side_ref

    if len(files) != 2 or not all(is_store_ref(f) for f in files):
        return {}, []
    from torchmark.cli.store_options import open_store
    from torchmark.regressions.aa_history import pair_histories
    from torchmark.regressions.refs import check_distinct, resolve_side

    store = open_store(db)
    base, cand = ((stored or {}).get(f) or resolve_side(side_ref(f), store) for f in files)
    check_distinct(base, cand)
    found = check_environments(base.results, cand.results, allow_env_diff,
                               f"{files[0]} and {files[1]}")
    return {case_id: ratios
            for (case_id, _), ratios in pair_histories(store, base, cand).items()}, found


def _environments(stmt, pythons, env_labels, setup, num_threads, min_run_time, rounds,
                  worker_pairs, metric, number, label, no_store, db, confidence, min_effect,
                  fmt, fail_above, source) -> int:
    """One statement in two environments, interleaved (compare/env_ab.py)."""
    from pathlib import Path

    from torchmark.compare.env_ab import EnvWorkerLost, ab_environments

    if len(pythons) != 2:
        raise click.UsageError(f"give --python exactly twice (baseline first), got "
                               f"{len(pythons)}")
    if env_labels and len(env_labels) != 2:
        raise click.UsageError(f"give --env-label twice (baseline first) or not at all, got "
                               f"{len(env_labels)}")
    files = [a for a in stmt if Path(a).is_file()]
    if files:  # `ab before.json after.json --python ...`: saved files and environments
        raise click.UsageError(f"with --python the arguments are the statement, but "
                               f"{files[0]!r} is a file; compare saved files without "
                               f"--python, or measure a statement in two environments")
    if metric == "instructions" and \
            source("min_run_time") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--min-run-time: for wall time; instruction counts take "
                               "--rounds counts of --number runs a side")
    if metric == "instructions" and worker_pairs is not None:
        raise click.UsageError("--worker-pairs: for wall time; instruction counts are "
                               "taken by one pair of workers")
    if metric == "wall" and source("number") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--number: for --metric instructions (wall-time blocks are "
                               "sized by --min-run-time)")
    code = "\n".join(stmt)
    setup_code = "\n".join(setup) or "pass"
    check_syntax(("the statement", code), ("the setup", setup_code))
    try:
        r = ab_environments(pythons[0], pythons[1], code, setup_code,
                            labels=list(env_labels) or None, metric=metric,
                            min_run_time=min_run_time, min_blocks=rounds, number=number,
                            num_threads=num_threads, label=label, confidence=confidence,
                            min_effect=min_effect, command=list(COMMAND_LINE) or None,
                            worker_pairs=worker_pairs)
    except EnvWorkerLost as e:  # its output's end, then the one-line error
        tail = e.log_tail.strip().splitlines()[-10:]
        if tail:
            click.echo("torchmark: the worker's output ended with:", err=True)
            for line in tail:
                click.echo(f"  {line}", err=True)
        raise
    _record(r, db, no_store)
    names = [side.label for side in r.sides]
    a, b = r.ab.baseline, r.ab.candidate
    runs = (f"{a.number_per_run} runs" if a.number_per_run == b.number_per_run else
            f"{a.number_per_run} / {b.number_per_run} runs")
    if r.metric == "wall":
        how = (f"{len(a.times)} blocks a side of {runs}, A B B A ...; ratio = median over "
               f"the {len(a.times) // 2} A B B A quads of their B time / A time, exact "
               f"interval")
        if len(r.pairs) > 1:
            how = (f"{len(r.pairs)} worker pairs in turn, {how}; a change the median pair "
                   "does not show is unsure")
    else:
        how = (f"{len(a.times)} instruction counts a side of {runs}, A B B A ...; ratio = "
               f"median of the paired counts' ratios, interval = their range")
    head = (f"baseline: {names[0]}; candidate: {names[1]}; {how}; changes under "
            f"{min_effect * 100:g}% count as no change")
    preamble = [f"{role} {side.describe()}"
                for role, side in zip(("A (baseline): ", "B (candidate):"), r.sides,
                                      strict=True)] + list(filter(None, [r.pairs_line()]))
    extra = {"metric": r.metric, "baseline_env": names[0], "candidate_env": names[1],
             "baseline_python": r.sides[0].python, "candidate_python": r.sides[1].python}
    _print([r.ab], [], [], [], names, fmt, confidence, min_effect, head=head,
           preamble=preamble, extra=extra)
    return _gate([r.ab], [], [], fail_above)


def _record(r, db, no_store) -> None:
    """Each environment's results as a run of its own, labelled with its env."""
    baseline_run = None
    for role, side, results in zip(("baseline", "candidate"), r.sides, r.results(),
                                   strict=True):
        tags: dict[str, Any] = {"ab": role}
        if baseline_run is not None:
            tags["ab_baseline_run"] = baseline_run
        with recorder(db, no_store, env=side.label, provenance=side.provenance,
                      **tags) as rec:
            rec.add(results)
        baseline_run = baseline_run or rec.run_id


def _print(results, only_a, only_b, errors, names, fmt, confidence, min_effect, *,
           head=None, preamble=(), extra=None) -> None:
    """The verdicts in `fmt`; what was not compared on stderr for csv and jsonl."""
    if fmt == "jsonl":
        for r in results:
            click.echo(json.dumps({**r.to_dict(), **(extra or {})}))
    elif fmt == "csv":
        from torchmark.core.neutralise import csv_cell

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["name", "baseline_median_s", "candidate_median_s", "ratio", "ci_low",
                         "ci_high", "p_value", "verdict"])
        for r in results:
            d = r.to_dict()
            writer.writerow([csv_cell(r.name), *(f"{d[k]:.6g}" if d[k] is not None else ""
                                                 for k in ("baseline_median",
                                                           "candidate_median", "ratio",
                                                           "ci_low", "ci_high", "p_value")),
                             r.verdict])
        click.echo(out.getvalue(), nl=False)
    else:
        click.echo("\n".join([*preamble, *verdict_lines(
            results, only_a, only_b, errors, names, confidence, min_effect,
            markdown_table=fmt == "markdown", head=head)]))
    if fmt in ("csv", "jsonl"):  # the machine-readable output holds compared cases only
        for line in _unmatched(only_a, only_b, errors) + _few_samples_hint(results):
            click.echo(line, err=True)


def _gate(results, only_a, errors, fail_above) -> int:
    """--fail-above: 1 when a case is slower (at that threshold), failed, or could not
    be checked (unmeasured, missing from the candidate, not comparable)."""
    if fail_above is None:
        return 0
    if not results:  # every case in common could not be compared
        click.echo("no case was compared: nothing to check --fail-above against", err=True)
        return 1
    for kind, what in (("slower", f"slower by more than {fail_above:.1%}"),
                       ("failed", "failed in the candidate"),
                       ("unmeasured", "not measured well enough for a verdict (too few "
                                      "samples or processes, or a baseline that failed)")):
        found = [r.name for r in results if r.verdict == kind]
        if found:
            click.echo(f"{len(found)} case(s) {what}: {', '.join(found)}", err=True)
    # a case the baseline has and the candidate lacks (its run failed), or one that
    # cannot be compared, cannot be checked either
    unchecked = only_a + [e.split(": ", 1)[0] for e in errors]
    if unchecked:
        click.echo(f"{len(unchecked)} case(s) of the baseline not checked against "
                   f"--fail-above (missing from the candidate, or not comparable): "
                   f"{', '.join(unchecked)}", err=True)
    from torchmark.verdicts import FAILS_A_GATE

    return 1 if unchecked or any(r.verdict in FAILS_A_GATE for r in results) else 0
