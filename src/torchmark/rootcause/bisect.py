"""Bisection of a regression over a git history: the first commit between a good and a
bad one at which a case got slower (or more instructions), with the change it made.

The two ends are measured first, and must differ by at least `min_step`; the level a
commit is judged against is then the geometric middle of the two:

- instruction counts (exact): one count a commit; bad when it is at least halfway (on
  the log scale) from the good count to the bad one, as the engine's exact verdict with
  that threshold says;
- wall time: the commit is timed interleaved with the good end and with the bad end
  (`ab_environments`), each with half the ends' change as the threshold; bad when the
  engine calls it slower than the good end while the bad end is not slower than it,
  good when the bad end is slower than it while it is not slower than the good end (a
  wrong call needs a `slower` verdict on code that did not change, which the engine's
  drift guards against); anything else is unsure, measured once more with twice the
  budget, and left out when it stays unsure. After `max_unsure` such commits the search
  stops: the answer is then a range of commits, never a guess.

A commit that does not build or run the case is skipped, as `git bisect skip`."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchmark.core.errors import MeasurementError, UsageError
from torchmark.rootcause import probes
from torchmark.rootcause.git_history import Commit, Worktrees, commits_between, resolve
from torchmark.rootcause.probes import CaseCode, CommitUnusable
from torchmark.rootcause.search import Judgement, SearchOutcome, bisect_indexes
from torchmark.verdicts.engine import Side, judge
from torchmark.verdicts.verdict import Verdict

METRICS = ("instructions", "wall")


@dataclasses.dataclass(frozen=True)
class BisectOptions:
    metric: str = "instructions"
    number: int = 100  # runs a count
    min_run_time: float = 2.0  # seconds a side of each wall-time comparison
    worker_pairs: int = 5
    max_unsure: int = 2  # wall time: unsure commits before the search stops at a range
    min_step: float = 0.002  # the smallest change of the ends worth bisecting
    build: str | None = None
    import_subdir: str | None = None


@dataclasses.dataclass(frozen=True)
class Trial:
    """One commit judged: how, on what figure, and why. `value`: its instruction count a
    run, or its time's ratio to the good end; `verdicts`: the engine's (wall time: vs
    the good end, then vs the bad end)."""

    index: int
    commit: Commit
    judgement: Judgement | str  # "good", "bad", "skip", "unsure"
    reason: str
    measurements: int
    value: float = math.nan
    verdicts: tuple[Verdict, ...] = ()


@dataclasses.dataclass(frozen=True)
class BisectResult:
    commits: tuple[Commit, ...]
    outcome: SearchOutcome
    trials: tuple[Trial, ...]  # the ends first, then in the order judged
    ends: Verdict  # the bad end against the good one
    metric: str
    seconds: float

    @property
    def measurements(self) -> int:
        return sum(t.measurements for t in self.trials)

    @property
    def first_bad(self) -> Commit:
        return self.commits[self.outcome.first_bad]

    def trial(self, index: int) -> Trial | None:
        return next((t for t in self.trials if t.index == index), None)

    def change(self) -> Verdict:
        """The change at the first bad commit: its count against the last good commit's
        (counts), or the bad commit's time against the good end (wall time)."""
        first = self.trial(self.outcome.first_bad)
        if self.metric == "instructions":
            last = self.trial(self.outcome.last_good)
            assert first is not None and last is not None
            return judge(Side([last.value]), Side([first.value]), metric="instructions",
                         threshold=0.0)
        if first is not None and first.verdicts:
            return first.verdicts[0]
        return self.ends


Progress = Callable[[str], None]
Record = Callable[[Commit, str, Sequence[Any]], None]


def bisect(repo: Path, good_ref: str, bad_ref: str, case: CaseCode,
           options: BisectOptions = BisectOptions(), *, progress: Progress | None = None,
           record: Record | None = None) -> BisectResult:
    """Bisect `case` between `good_ref` and `bad_ref` of `repo` (see the module
    docstring). `progress(line)` is told each step; `record(commit, role, results)`
    gets each commit's Results as they are measured (role: good, bad or probe)."""
    if options.metric not in METRICS:
        raise UsageError(f"bisect: metric must be one of {', '.join(METRICS)}, got "
                         f"{options.metric!r}")
    if case.pytest_node is not None and options.metric != "instructions":
        raise UsageError("a pytest benchmark is bisected by its instruction counts "
                         "(--metric instructions): its wall time cannot be interleaved "
                         "with the other commits'")
    started = time.perf_counter()
    good, bad = resolve(repo, good_ref, "--good"), resolve(repo, bad_ref, "--bad")
    commits = commits_between(repo, good, bad)
    say = progress or (lambda line: None)
    with Worktrees(repo) as trees:
        judge_commit = (_CountJudge if options.metric == "instructions" else _WallJudge)(
            commits, trees, case, options, say, record)
        between = len(commits) - 2
        say(f"{between} commit{'' if between == 1 else 's'} between {commits[0].short} (good) and "
            f"{commits[-1].short} (bad); measuring the two ends")
        ends = judge_commit.measure_ends()

        def step(left: int, index: int) -> None:
            say(f"{left} commit{'' if left == 1 else 's'} left; trying {commits[index].describe()}")

        outcome = bisect_indexes(len(commits), judge_commit, step,
                                 max_unsure=options.max_unsure)
    return BisectResult(tuple(commits), outcome, tuple(judge_commit.trials), ends,
                        options.metric, time.perf_counter() - started)


class _Judge:
    """What both metrics share: worktrees, builds, trials, records."""

    def __init__(self, commits: Sequence[Commit], trees: Worktrees, case: CaseCode,
                 options: BisectOptions, say: Progress, record: Record | None) -> None:
        self.commits, self.trees, self.case, self.options = commits, trees, case, options
        self.say, self.record = say, record
        self.trials: list[Trial] = []
        self._roots: dict[int, Path] = {}

    def root(self, index: int) -> Path:
        """The commit's import folder, built first when a build command is given."""
        if index not in self._roots:
            tree = self.trees.get(self.commits[index].sha)
            if self.options.build:
                self.say(f"building {self.commits[index].short}")
                probes.build(tree, self.options.build)
            self._roots[index] = probes.import_root(tree, self.options.import_subdir)
        return self._roots[index]

    def _record(self, index: int, role: str, results: Sequence[Any]) -> None:
        """Record the commit's results, each noting the repository's folder its code was
        imported from (`src`), so that `explain` can say how to measure it again."""
        if self.record is None:
            return
        tree = self.trees.get(self.commits[index].sha).resolve()
        folder = self.root(index).resolve().relative_to(tree).as_posix()
        self.record(self.commits[index], role,
                    [dataclasses.replace(r, extra={**r.extra, "import_path": folder})
                     for r in results])

    def _end_failed(self, index: int, error: Exception) -> UsageError:
        role = "good" if index == 0 else "bad"
        return UsageError(f"the {role} commit {self.commits[index].short} cannot be "
                          f"measured: {error}")

    def _skip(self, index: int, error: Exception) -> Judgement:
        self.trials.append(Trial(index, self.commits[index], "skip", str(error), 0))
        self.say(f"skipped {self.commits[index].short}: {error}")
        return "skip"


class _CountJudge(_Judge):
    def measure_ends(self) -> Verdict:
        self.counts: dict[int, float] = {}
        for index, role in ((0, "good"), (len(self.commits) - 1, "bad")):
            try:
                count = self._count(index, role)
            except CommitUnusable as e:
                raise self._end_failed(index, e) from None
            self.trials.append(Trial(index, self.commits[index], role, f"the {role} end", 1,
                                     count))
        good, bad = self.counts[0], self.counts[len(self.commits) - 1]
        ends = judge(Side([good]), Side([bad]), metric="instructions",
                     threshold=self.options.min_step)
        if ends.kind != "slower":
            raise NoRegression(f"the bad commit counts {bad:,.0f} instructions a run "
                               f"against the good one's {good:,.0f} ({bad / good - 1:+.3%}):"
                               f" no increase of {self.options.min_step:.2%} or more to "
                               "bisect", ends)
        self.middle = math.sqrt(bad / good) - 1  # the threshold that halves the step
        return ends

    def _count(self, index: int, role: str) -> float:
        """The commit's count a run, recorded (with the per-function counts of a
        statement's count)."""
        commit = self.commits[index]
        if self.case.pytest_node is not None:
            result = probes.count_pytest(self.case.pytest_node, self.trees.get(commit.sha),
                                         self.root(index), self.options.number)
            count = float(statistics.median(result.samples))
        else:
            from torchmark.callgrind.results import stats_to_result

            stats = probes.count_instructions(self.case, self.root(index),
                                              self.trees.get(commit.sha),
                                              self.options.number)
            count = stats.counts() / stats.number_per_run
            result = stats_to_result(stats, functions=True)
        self.counts[index] = count
        self._record(index, role, [result])
        return count

    def __call__(self, index: int) -> Judgement:
        try:
            count = self._count(index, "probe")
        except (CommitUnusable, UsageError) as e:
            return self._skip(index, e)
        verdict = judge(Side([self.counts[0]]), Side([count]), metric="instructions",
                        threshold=self.middle)
        kind: Judgement = "bad" if verdict.kind == "slower" else "good"
        reason = (f"{count:,.0f} instructions a run ({count / self.counts[0] - 1:+.3%} on "
                  f"the good end; bad from {self.middle:+.3%})")
        self.trials.append(Trial(index, self.commits[index], kind, reason, 1, count,
                                 (verdict,)))
        self.say(f"{self.commits[index].short} is {kind}: {reason}")
        return kind


class _WallJudge(_Judge):
    def measure_ends(self) -> Verdict:
        last = len(self.commits) - 1
        for index in (0, last):
            try:
                self.root(index)
            except CommitUnusable as e:
                raise self._end_failed(index, e) from None
        ends = None
        compared = 0
        for budget in (1, 2):
            try:
                ab = self._time(0, last, self.options.min_step, budget, "the two ends")
            except CommitUnusable as e:
                raise UsageError(f"the two ends cannot be measured: {e}") from None
            compared += 1
            ends = ab.ab.judged
            good_results, bad_results = ab.results()
            self._record(0, "good", good_results)
            self._record(last, "bad", bad_results)
            if ends.kind != "unsure":
                break
        assert ends is not None
        if ends.kind != "slower":
            raise NoRegression(f"the bad commit is not slower than the good one by "
                               f"{self.options.min_step:.1%} or more: {ends.kind}, "
                               f"{ends.change:+.2%} {ends.interval()} ({ends.reason})", ends)
        self.middle = math.sqrt(ends.ratio) - 1
        self.trials.append(Trial(0, self.commits[0], "good", "the good end", compared, 1.0))
        self.trials.append(Trial(last, self.commits[last], "bad", "the bad end", 0,
                                 ends.ratio, (ends,)))
        return ends

    def _time(self, a: int, b: int, threshold: float, budget: int, what: str) -> Any:
        self.say(f"timing {what} interleaved ({budget * self.options.min_run_time:g} s a "
                 f"side, {self.options.worker_pairs} worker pairs)")
        return probes.time_against(
            self.case, (self.root(a), self.root(b)),
            (self.commits[a].short, self.commits[b].short),
            min_run_time=budget * self.options.min_run_time,
            worker_pairs=self.options.worker_pairs, threshold=threshold)

    def __call__(self, index: int) -> Judgement:
        last = len(self.commits) - 1
        try:
            self.root(index)
        except CommitUnusable as e:
            return self._skip(index, e)
        kind: Judgement = "unsure"
        measurements = 0
        verdicts: tuple[Verdict, ...] = ()
        for budget in (1, 2):
            try:
                vs_good = self._time(0, index, self.middle, budget,
                                     f"{self.commits[index].short} against the good end")
                vs_bad = self._time(index, last, self.middle, budget,
                                    f"{self.commits[index].short} against the bad end")
            except CommitUnusable as e:
                return self._skip(index, e)
            measurements += 2
            self._record(index, "probe", vs_good.results()[1])
            a, b = vs_good.ab.judged, vs_bad.ab.judged  # b: the bad end against this one
            verdicts = (a, b)
            if a.kind == "slower" and b.kind != "slower":
                kind = "bad"
            elif b.kind == "slower" and a.kind != "slower":
                kind = "good"
            if kind != "unsure":
                break
        reason = (f"{verdicts[0].change:+.2%} {verdicts[0].interval()} on the good end "
                  f"({verdicts[0].kind}), bad end {verdicts[1].change:+.2%} "
                  f"{verdicts[1].interval()} on it ({verdicts[1].kind}); bad from "
                  f"{self.middle:+.2%}")
        self.trials.append(Trial(index, self.commits[index], kind, reason, measurements,
                                 verdicts[0].ratio, verdicts))
        self.say(f"{self.commits[index].short} is {kind}: {reason}")
        return kind


class NoRegression(MeasurementError):
    """The bad end is not measurably worse than the good end: nothing to bisect.
    `ends`: the engine's verdict on the two."""

    def __init__(self, message: str, ends: Verdict) -> None:
        super().__init__(message)
        self.ends = ends
