"""Confirmation before alarm: re-measure a suspect case on this machine and tell whether
it still measures at the new level or back at the old one.

The build before the change is usually gone, so the case is re-run as it is now and its
fresh samples are set against the stored raw samples of the last good and the first bad
run by the verdict engine (as `ab` and the gate compare two runs): confirmed when the
fresh samples moved the change's way from the last good run and sit with the first bad
one (the same as it, or much nearer it than the last good one in log space), not
confirmed when they sit with the last good one, unsure otherwise (a run of too few
samples, or drift too wide to tell). Cases are re-measured from what
the store keeps of them: `timeit` statements and C++ snippets (wall time) and callgrind
cases (instruction counts); other front-ends cannot be re-run from the store alone.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any

from torchmark.regressions.history import Change

RERUNNABLE = ("timeit", "cpp", "callgrind")


@dataclasses.dataclass(frozen=True)
class Confirmation:
    change: Change
    verdict: str  # confirmed, not-confirmed, unsure, cannot re-run
    now: float  # the fresh median (nan when not re-run)
    note: str


def _timer(case: Any) -> Any:
    from torchmark.core.task_spec import Language
    from torchmark.timing.timer_class import Timer

    return Timer(case.stmt, case.setup or "pass",
                 global_setup=str(case.params.get("global_setup", "")),
                 num_threads=case.threads,
                 language=Language.CPP if case.frontend == "cpp" else Language.PYTHON)


def remeasure(case: Any, metric: str, min_run_time: float = 1.0) -> list[float]:
    """Fresh samples of a stored case: per-run times (s), or instructions a run."""
    return list(remeasured(case, metric, min_run_time).samples)


def remeasured(case: Any, metric: str, min_run_time: float = 1.0) -> Any:
    """A stored case measured again here, as a Result of the same case (its id kept):
    wall time by blocked_autorange, or instructions a run over 3 callgrind repeats of
    100 runs (as `torchmark callgrind` stores them: not denoised)."""
    from torchmark.core.result import Result

    timer = _timer(case)
    if metric == "instructions":
        stats = timer.collect_callgrind(number=100, repeats=3)
        return Result(case=case, metric="instructions",
                      samples=tuple(s.counts() / s.number_per_run for s in stats),
                      number_per_run=stats[0].number_per_run)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Result(case=case, metric="wall", samples=tuple(m.times),
                  number_per_run=int(m.number_per_run))


def judge(now: Sequence[float], good: Sequence[float], bad: Sequence[float],
          metric: str) -> tuple[str, str]:
    """Whether fresh samples side with the first bad run (confirmed) or the last good one
    (not-confirmed); with why. The verdict engine sets the fresh samples against each
    run, the smallest change that counts a quarter of the step (in log space): the same
    as the last good run is not-confirmed; moved the change's way from it beyond the
    drift, and the same as the first bad run or much nearer it, confirmed; else
    unsure."""
    from torchmark.verdicts import Side
    from torchmark.verdicts import judge as verdict_of

    level = statistics.median(now)
    before, after = statistics.median(good), statistics.median(bad)
    step = abs(math.log(after / before))
    threshold = math.expm1(step / 4)
    vs_good = verdict_of(Side(good), Side(now), metric=metric, threshold=threshold)
    vs_bad = verdict_of(Side(bad), Side(now), metric=metric, threshold=threshold)
    way = "slower" if after > before else "faster"
    text = (f"now {level:.6g}, last good {before:.6g}, first bad {after:.6g}; now against "
            f"the last good run: {vs_good.kind} ({vs_good.reason}); against the first bad "
            f"run: {vs_bad.kind}")
    near_good, near_bad = abs(math.log(level / before)), abs(math.log(level / after))
    if vs_good.kind == "same":
        return "not-confirmed", text
    if vs_good.kind == way and (vs_bad.kind == "same" or near_bad < near_good / 2):
        return "confirmed", text
    back = "faster" if way == "slower" else "slower"
    # back from the first bad run, nearer the last good: not-confirmed, unless still
    # moved the change's way from the last good run (a first bad run above its new
    # level: the change is there, smaller)
    if vs_bad.kind == back and near_good < near_bad / 2 and vs_good.kind != way:
        return "not-confirmed", text
    return "unsure", text


def confirm(change: Change, store: Any, *, min_run_time: float = 1.0) -> Confirmation:
    """Re-measure `change`'s case and judge it (see the module docstring); the verdict is
    stored as the change's mark (confirmed / not-confirmed)."""
    records = {r.case.id: r for r in store.result_records(run=change.first_bad.run_id,
                                                          case=change.series.case_id,
                                                          metric=change.series.metric)}
    record = records.get(change.series.case_id)
    if record is None or record.case.frontend not in RERUNNABLE:
        frontend = record.case.frontend if record else "unknown"
        return Confirmation(change, "cannot re-run", math.nan,
                            f"a {frontend} case is not re-run from the store (only "
                            f"{', '.join(RERUNNABLE)})")
    good = [r.samples for r in store.result_records(run=change.last_good.run_id,
                                                     case=change.series.case_id,
                                                     metric=change.series.metric)]
    try:
        now = remeasure(record.case, change.series.metric, min_run_time)
    except Exception as e:  # one case that cannot run now does not stop the others
        from torchmark.core.errors import error_line

        return Confirmation(change, "cannot re-run", math.nan, error_line(e))
    verdict, note = judge(now, good[0] if good and good[0] else (change.point.before,),
                          record.samples or (change.point.after,), change.series.metric)
    if verdict in ("confirmed", "not-confirmed"):
        store.mark_change(case_id=change.series.case_id, metric=change.series.metric,
                          first_bad_run=change.first_bad.run_id, mark=verdict,
                          note=f"re-measured: {note}", machine=change.series.machine,
                          env=change.series.env, by="torchmark regressions --confirm")
    return Confirmation(change, verdict, statistics.median(now), note)
