"""A/B reports: per-case instruction-count changes between two results files, each
judged by the verdict engine (exactly; a case's repeats' spread as its drift)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.plain_table import align
from torchmark.verdicts import Drift, Side, Verdict, judge


@dataclasses.dataclass(frozen=True)
class Delta:
    id: str
    a: float  # instructions per run
    b: float
    spread: float  # the larger repeat spread of the two sides
    verdict: Verdict

    @property
    def change(self) -> float:
        """(b - a) / a."""
        if self.a == self.b:
            return 0.0
        return (self.b - self.a) / self.a if self.a else float("inf")


@dataclasses.dataclass
class ABReport:
    deltas: list[Delta]  # sorted by |change|, largest first
    only_a: list[str]
    only_b: list[str]
    failed: list[tuple[str, str]]  # (id, which side failed and why)
    threshold: float
    broken: list[str] = dataclasses.field(default_factory=list)  # ok in A, failed in B

    @property
    def flagged(self) -> list[Delta]:
        """The cases that changed beyond the threshold (slower or faster)."""
        return [d for d in self.deltas if d.verdict.kind in ("slower", "faster")]

    @property
    def slower(self) -> list[Delta]:
        return [d for d in self.deltas if d.verdict.kind == "slower"]


def _by_id(records: Sequence[dict[str, Any]], side: str) -> dict[str, dict[str, Any]]:
    for r in records:
        if not isinstance(r.get("id"), str):
            raise ValueError(f"{side}: a record's id is {str(r.get('id'))[:40]}, not a str")
    return {r["id"]: r for r in records}  # a resumed file may repeat an id: the last wins


def _counts(record: dict[str, Any], side: str) -> tuple[float, float]:
    """(instructions per run, spread) of an ok record; a malformed one is an error: a
    NaN or a negative count must not pass a --fail-above gate unseen."""
    counts = record["instructions"]
    per_run = counts.get("per_run") if isinstance(counts, dict) else None
    spread = counts.get("spread") if isinstance(counts, dict) else None
    spread = 0.0 if spread is None else spread
    for name, value in (("per_run", per_run), ("spread", spread)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(float(value)) or value < 0:
            raise ValueError(f"{side}: case {brief_repr(record['id'])}: instructions {name} is "
                             f"{str(value)[:40]}, not a finite number >= 0")
    assert per_run is not None  # checked above: a finite number
    return float(per_run), float(spread)


def compare_results(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]],
                    threshold: float = 0.01, names: tuple[str, str] = ("A", "B")) -> ABReport:
    """Deltas of instructions per run for the cases both sides counted, each with its
    verdict at `threshold` (0.01: 1%). `names` name the two sides in errors about
    malformed records."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    a_map, b_map = _by_id(a, names[0]), _by_id(b, names[1])
    deltas, failed, broken = [], [], []
    for case_id in [i for i in a_map if i in b_map]:
        ra, rb = a_map[case_id], b_map[case_id]
        bad = [(side, r) for side, r in (("A", ra), ("B", rb)) if r.get("status") != "ok"
               or not r.get("instructions")]
        if bad:
            failed.append((case_id, "; ".join(f"{side}: {r.get('error') or 'no counts'}"
                                              for side, r in bad)))
            if [side for side, _ in bad] == ["B"]:
                broken.append(case_id)
            continue
        (per_a, spread_a), (per_b, spread_b) = _counts(ra, names[0]), _counts(rb, names[1])
        spread = max(spread_a, spread_b)
        drift = Drift(spread, "spreads", "the repeats' spread") if spread > 0 else None
        deltas.append(Delta(case_id, per_a, per_b, spread,
                            judge(Side((per_a,)), Side((per_b,)), metric="instructions",
                                  threshold=threshold, drift=drift)))
    deltas.sort(key=lambda d: (-abs(d.change), d.id))
    return ABReport(deltas, [i for i in a_map if i not in b_map],
                    [i for i in b_map if i not in a_map], failed, threshold, broken)


def _row(d: Delta) -> list[str]:
    return [f"{d.change:+.2%}", f"{d.a:,.0f}", f"{d.b:,.0f}", f"{d.spread:.2%}",
            d.verdict.kind, d.id]


HEADERS = ["change", "A instr/run", "B instr/run", "spread", "verdict", "case"]


def render_text(report: ABReport, limit: int | None = None) -> str:
    rows = [_row(d) for d in report.deltas[:limit]]
    lines = align(HEADERS, rows, right=[True] * 4 + [False, False])
    lines += _footer(report)
    return "\n".join(lines)


def render_markdown(report: ABReport, limit: int | None = None) -> str:
    flagged = report.flagged
    lines = [f"**Instruction counts**: {len(report.deltas)} cases compared, {len(flagged)} "
             f"changed by more than {report.threshold:.1%}.", ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "|".join(["---:"] * 4 + ["---", "---"]) + "|")
    for d in report.deltas[:limit]:
        cells = _row(d)
        cells[-1] = f"`{cells[-1]}`"
        lines.append("| " + " | ".join(cells) + " |")
    extra = _footer(report)
    if extra:
        lines += [""] + [f"- {line}" for line in extra]
    return "\n".join(lines)


def _footer(report: ABReport) -> list[str]:
    lines = []
    if report.only_a:
        lines.append(f"only in A ({len(report.only_a)}): {', '.join(report.only_a[:10])}"
                     + (" ..." if len(report.only_a) > 10 else ""))
    if report.only_b:
        lines.append(f"only in B ({len(report.only_b)}): {', '.join(report.only_b[:10])}"
                     + (" ..." if len(report.only_b) > 10 else ""))
    for case_id, why in report.failed:
        lines.append(f"not compared: {case_id}: {why.splitlines()[0] if why else ''}")
    return lines
