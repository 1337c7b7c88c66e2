"""The terminal summary: a table a group (the marker's group, else the test's file) and
metric. Times in torchmark's Compare layout (a row a test, one column, or the baseline's
and this run's side by side), each case's change against the baseline and its verdict
under it; instruction counts in a plain table; failed benchmarks listed with their
error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchmark.core.result import Result, told_apart

_COLUMN = {"wall": "wall time", "device": "device time"}


def _measurement(result: Result, column: str, row: str) -> Any:
    """A time Result as a Measurement in the Compare table of its group, in `row`."""
    from torchmark.core.task_spec import TaskSpec
    from torchmark.timing.measurement import Measurement

    case = result.case
    spec = TaskSpec(stmt=case.stmt, setup="pass", label=_title(case.label, result.metric),
                    sub_label=row, description=column, num_threads=case.threads)
    n = result.number_per_run
    return Measurement(n, [s * n for s in result.samples], spec)


def _title(group: str | None, metric: str) -> str:
    """The group's name; the metric after it when it is not wall time."""
    group = group or "tests"
    return group if metric == "wall" else \
        f"{group} ({metric}{' time' if metric == 'device' else ''})"


def summary_lines(results: Sequence[Result], baseline: Sequence[Result] | None,
                  gate_report: Any, baseline_ref: str | None) -> list[str]:
    """The summary's lines (see the module docstring)."""
    from torchmark.compare.verdict_table import cells, format_value, reasons
    from torchmark.core.plain_table import align

    groups: dict[tuple[str | None, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.case.label, r.metric), []).append(r)
    base = {(r.case.id, r.metric): r for r in baseline or () if r.ok}
    rows_by_case = {(row.case_id, row.metric): row for row in gate_report.rows} \
        if gate_report is not None else {}
    lines: list[str] = []
    for (group, metric), members in groups.items():
        measured = [r for r in members if r.ok]
        # a row a test: two of one name (in two files, one group) told apart by case id
        row = told_apart({r.case.id: r.case.sub_label or r.case.title for r in members})
        if metric in _COLUMN and measured:
            from torchmark.compare.compare import Compare

            column = "this run" if baseline is not None else _COLUMN[metric]
            measurements = [_measurement(r, column, row[r.case.id]) for r in measured]
            if baseline is not None:
                measurements = [_measurement(base[(r.case.id, r.metric)], "baseline",
                                             row[r.case.id])
                                for r in measured if (r.case.id, r.metric) in base] + \
                    measurements
            lines += Compare(measurements).render(color=False).rstrip("\n").splitlines()
        elif measured:
            lines.append(f"[ {_title(group, metric)} ]")
            header = ["case", "per run"] + (["baseline"] if baseline is not None else [])
            rows = []
            for r in measured:
                summary = r.summary
                line = [row[r.case.id],
                        format_value(summary.median if summary else float("nan"), r.unit)]
                if baseline is not None:
                    other = base.get((r.case.id, r.metric))
                    line.append(format_value(other.summary.median, other.unit)
                                if other is not None and other.summary else "-")
                rows.append(line)
            lines += align(header, rows, [False] + [True] * (len(header) - 1), rule=True)
            lines.append(f"Counts are in {members[0].unit} a run.")
        judged = [(row[r.case.id], verdict) for r in members
                  if (verdict := rows_by_case.get((r.case.id, r.metric)))]
        if judged:
            lines.append(f"against the baseline {baseline_ref}:")
            lines += ["  " + line for line in align(
                ["case", "change", "interval", "drift", "verdict"],
                [[name, *cells(verdict)[4:]] for name, verdict in judged],
                [False, True, False, False, False], rule=True)]
            lines += ["  " + line for line in reasons(verdict for _, verdict in judged)]
        for r in members:
            if r.failure is not None:
                lines.append(f"failed: {r.case.title}: {r.failure.error}")
        lines.append("")
    if gate_report is not None and not gate_report.rows:
        lines.append(f"torchmark: the baseline {baseline_ref} holds none of these cases")
    if gate_report is not None and gate_report.only_baseline:
        lines.append(f"torchmark: in the baseline {baseline_ref}, not measured in this "
                     f"session (their tests ran without a result): "
                     f"{', '.join(gate_report.only_baseline)}")
    return [line.rstrip() for line in lines]
