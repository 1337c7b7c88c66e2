"""Explanations of a time change from what the stored results hold, no re-measuring:

- a kernel-time case: the kernels of a call on each side (the names kernel time keeps
  in the result's metadata, shortened), added, removed and changed, each one's seconds
  a call and its share of the change;
- an ops sweep or a replay: its ops ranked by how much their time a call changed, each
  with its shapes (the case title) and the verdict engine's verdict, as the gate's.

Each explanation carries the commands that made its two sides (their provenance), to
re-run at each side's commit."""

from __future__ import annotations

import dataclasses
import math
import shlex
from collections.abc import Mapping, Sequence

from torchmark.compare.verdict_table import format_value
from torchmark.core.result import Result
from torchmark.regressions.gate import GateRow, gate
from torchmark.rootcause.function_diff import short_cpp

OP_FRONTENDS = ("ops", "replay")


@dataclasses.dataclass(frozen=True)
class KernelDelta:
    """One kernel name on both sides: launches and seconds a call (0 where a side did
    not run it)."""

    name: str
    launches: tuple[float, float]
    before: float
    after: float

    @property
    def change(self) -> float:
        return self.after - self.before

    @property
    def status(self) -> str:
        if not self.launches[0]:
            return "added"
        if not self.launches[1]:
            return "removed"
        return "changed" if self.change else "same"


@dataclasses.dataclass(frozen=True)
class KernelExplanation:
    row: GateRow  # the case's verdict on its kernel time
    kernels: tuple[KernelDelta, ...]  # the largest change first
    commands: tuple[str, str]

    @property
    def change(self) -> float:
        """Seconds a call: the kernels' sums, after minus before."""
        return math.fsum(k.change for k in self.kernels)

    def share(self, kernel: KernelDelta) -> float:
        """The part of the change `kernel` carries (nan when the kernels' sum did not
        move)."""
        return kernel.change / self.change if self.change else math.nan


@dataclasses.dataclass(frozen=True)
class OpsExplanation:
    frontend: str  # "ops" or "replay"
    rows: tuple[GateRow, ...]  # the largest change of the median a call first
    commands: tuple[str, str]


def stored_kernels(result: Result) -> dict[str, tuple[float, float]] | None:
    """A kernel-time result's kernels: shortened name -> (launches a call, seconds a
    call); None when it holds no usable list (another metric, or a malformed one)."""
    metadata = result.extra.get("metadata")
    kernels = metadata.get("kernels") if isinstance(metadata, Mapping) else None
    if result.metric != "kernel" or not isinstance(kernels, list) or not kernels:
        return None
    out: dict[str, tuple[float, float]] = {}
    for entry in kernels:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            return None
        launches, seconds = entry.get("per_call"), entry.get("seconds")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                   and math.isfinite(x) and x >= 0 for x in (launches, seconds)):
            return None
        name = kernel_name(entry["name"])
        had = out.get(name, (0.0, 0.0))
        out[name] = (had[0] + float(launches), had[1] + float(seconds))  # type: ignore[arg-type]
    return out


def kernel_name(name: str) -> str:
    """A demangled kernel name shortened for a table (no return type, no parameter
    list, no anonymous namespaces)."""
    return short_cpp(name.strip().removeprefix("void ")).removesuffix("(…)").removesuffix("()")


def explain_kernels(row: GateRow, before: Result, after: Result) -> KernelExplanation | None:
    """The kernels of a kernel-time case on both sides, or None when a side has none
    stored."""
    old, new = stored_kernels(before), stored_kernels(after)
    if old is None or new is None:
        return None
    deltas = [KernelDelta(name, (old.get(name, (0.0, 0.0))[0], new.get(name, (0.0, 0.0))[0]),
                          old.get(name, (0.0, 0.0))[1], new.get(name, (0.0, 0.0))[1])
              for name in {**old, **new}]
    deltas.sort(key=lambda k: (-abs(k.change), k.name))
    return KernelExplanation(row, tuple(deltas), commands_of(before, after))


def explain_times(before: Sequence[Result], after: Sequence[Result], *,
                  threshold: float = 0.05, pattern_ids: set[str] | None = None
                  ) -> tuple[list[KernelExplanation], list[OpsExplanation]]:
    """The kernel-time cases on both sides with kernels stored, and the ops and replays
    on both sides (one explanation a front-end), judged as the gate judges them at
    `threshold`. `pattern_ids`: only these case ids (None: all)."""
    def chosen(results: Sequence[Result]) -> list[Result]:
        return [r for r in results if r.metric != "instructions"
                and (pattern_ids is None or r.case.id in pattern_ids)]

    old, new = chosen(before), chosen(after)
    if not old or not new:
        return [], []
    report = gate(old, new, max_slowdown=threshold, allow_unmeasured=True)
    a = {(r.case.id, r.metric): r for r in old}
    b = {(r.case.id, r.metric): r for r in new}
    kernels = [found for row in report.rows if row.metric == "kernel"
               and (found := explain_kernels(row, a[row.case_id, "kernel"],
                                             b[row.case_id, "kernel"])) is not None]
    ops = []
    for frontend in OP_FRONTENDS:
        rows = [row for row in report.rows if a[row.case_id, row.metric].case.frontend
                == frontend]
        if rows:
            rows.sort(key=lambda r: (-_moved(r), r.title))
            first = next(a[r.case_id, r.metric] for r in rows)
            last = next(b[r.case_id, r.metric] for r in rows)
            ops.append(OpsExplanation(frontend, tuple(rows), commands_of(first, last)))
    return kernels, ops


def _moved(row: GateRow) -> float:
    change = abs(row.candidate - row.baseline)
    return change if math.isfinite(change) else -1.0


def commands_of(before: Result, after: Result) -> tuple[str, str]:
    """How each side was measured: `at commit SHA: COMMAND` from its provenance."""
    def one(result: Result) -> str:
        p = result.provenance
        if p is None:
            return "(no provenance stored)"
        where = f"at commit {p.git_commit[:12]}{'+' if p.git_dirty else ''}" \
            if p.git_commit else "(commit not recorded)"
        return f"{where}: {shlex.join(p.command) if p.command else '(command not recorded)'}"

    return one(before), one(after)


def _seconds(value: float) -> str:
    return format_value(value, "s") if value else "0 s"


def _signed(value: float) -> str:
    return ("-" if value < 0 else "+") + _seconds(abs(value))


def kernel_lines(e: KernelExplanation, top: int = 15) -> list[str]:
    """A kernel explanation as text."""
    v = e.row.verdict
    out = [f"case: {e.row.title}",
           f"kernel time a call: {_seconds(e.row.baseline)} -> {_seconds(e.row.candidate)}: "
           f"{v.kind} ({v.reason})",
           f"kernels of a call (seconds a call: before -> after (change, share of the "
           f"kernels' change of {_signed(e.change)})):"]
    for k in e.kernels[:top]:
        share = e.share(k)
        sides = [_seconds(t) if n else "-" for t, n in zip((k.before, k.after), k.launches,
                                                            strict=True)]
        out.append(f"  {k.status:<8} {sides[0]:>10} -> {sides[1]:>10}  ({_signed(k.change)}"
                   f"{f', {share:.0%}' if math.isfinite(share) else ''})  {k.name}")
    if len(e.kernels) > top:
        out.append(f"  ... {len(e.kernels) - top} more kernel name(s)")
    out += [f"reproduce (before) {e.commands[0]}", f"reproduce (after)  {e.commands[1]}"]
    return out


def ops_lines(e: OpsExplanation, top: int = 15) -> list[str]:
    """An ops explanation as text."""
    counts = ", ".join(f"{n} {kind}" for kind in ("slower", "faster", "unsure", "same",
                                                  "unmeasured", "failed")
                       if (n := sum(r.kind == kind for r in e.rows)))
    what = "replayed ops" if e.frontend == "replay" else "ops"
    metrics = sorted({r.metric for r in e.rows})
    quantity = "time" if all(r.unit == "s" for r in e.rows) else "/".join(metrics)
    out = [f"{what} whose {quantity} a call changed most ({len(e.rows)} on both sides: "
           f"{counts}):"]
    for r in e.rows[:top]:
        values = [format_value(v, r.unit) for v in (r.baseline, r.candidate)]
        change = r.candidate - r.baseline
        moved = ("-" if change < 0 else "+") + format_value(abs(change), r.unit)
        label = f"{r.title} [{r.metric}]" if len(metrics) > 1 else r.title
        out.append(f"  {values[0]:>10} -> {values[1]:>10}  ({moved}, {r.kind})  {label}")
    out += [f"reproduce (before) {e.commands[0]}", f"reproduce (after)  {e.commands[1]}"]
    return out
