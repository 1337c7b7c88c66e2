"""A/B comparison of two Measurements: is the candidate faster, slower, or no different?

`ab_test(baseline, candidate)` hands the per-run times of two measurements of the same
task to the verdict engine (torchmark.verdicts), which decides: the ratio of their
medians (candidate / baseline: 0.8 means the candidate takes 20% less time) with a
percentile-bootstrap interval and a Mann-Whitney p-value; paired samples (`measure_ab`'s
interleaved blocks) by their per-pair ratios (the median ratio, its exact
distribution-free interval, the sign test); two runs over several fresh processes each
(`measure_in_processes`, `timeit --processes`) by their per-process medians
(Hodges-Lehmann's ratio, its exact interval, the exact U test). Unpaired runs were
measured one after the other, so the interval is widened by the drift between two runs
of the same code (three times the runs' spreads unless the caller knows better): a
change within it is "unsure", never "faster" or "slower". Instruction counts have no
sampling noise: `counts_test` compares them exactly. The verdict is one of faster,
slower, same, unsure, unmeasured (too few samples for an interval) or failed.

`pair_measurements` lines up two lists of measurements (two files, or the two envs of
one file) by what they measure, for `torchmark ab`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.result import Stated
from torchmark.core.stats import select_unit
from torchmark.timing.measurement import MAX_PROCESSES, Measurement
from torchmark.verdicts import Drift, Side, Verdict, judge


@dataclasses.dataclass(frozen=True)
class ABResult:
    """The outcome of `ab_test`: the two measurements and the engine's Verdict (its
    ratio, interval, drift and reason), with how the samples were taken."""

    name: str
    baseline: Measurement
    candidate: Measurement
    judged: Verdict
    paired: bool = False  # ratios of paired samples (measure_ab), not of two medians
    # paired samples taken A B, B A, A B, ...: the unit is the quad of two pairs (A B B A),
    # whose ratio (sum of B / sum of A) cancels an effect of the order within a pair
    abba: bool = False
    # "wall" (times in seconds), or "instructions": counts a run, compared exactly
    metric: str = "wall"
    # the ratios of independent replicates whose samples were pooled (the worker pairs of
    # an A/B across environments): a direction is called only when their median moved by
    # the threshold that way too, else "unsure"
    replicate_ratios: tuple[float, ...] = ()
    # unpaired runs over several fresh processes each (measure_in_processes): compared
    # by their per-process medians, these many a side (0, 0: by the samples)
    processes: tuple[int, int] = (0, 0)

    @property
    def verdict(self) -> str:
        """faster, slower, same, unsure, unmeasured or failed (torchmark.verdicts)."""
        return self.judged.kind

    @property
    def ratio(self) -> float:
        return self.judged.ratio

    @property
    def ci_low(self) -> float:
        return self.judged.low

    @property
    def ci_high(self) -> float:
        return self.judged.high

    @property
    def confidence(self) -> float:
        return self.judged.confidence

    @property
    def p_value(self) -> float:
        return self.judged.p_value

    @property
    def min_effect(self) -> float:
        return self.judged.threshold

    @property
    def exact(self) -> bool:
        """Deterministic samples (instruction counts): no sampling error to test."""
        return self.metric == "instructions"

    @property
    def change(self) -> float:
        """The relative change of the median: -0.2 is 20% less time."""
        return self.judged.change

    @property
    def drift_margin(self) -> float:
        """The drift between two runs of the same code the verdict allowed for (0 for
        paired samples and exact counts)."""
        return self.judged.drift.value

    @property
    def replicate_median(self) -> float:
        """The median of `replicate_ratios` (nan without replicates)."""
        import numpy as np

        return float(np.median(self.replicate_ratios)) if self.replicate_ratios else math.nan

    def describe_verdict(self) -> str:
        """The verdict with its size and, when it is not a direction, why: "faster by
        21.3%", "same (+0.4%)", "unsure (+3.1% [-6.0%, +12.9%] with drift ...)"."""
        verdict = self.verdict
        if verdict in ("faster", "slower"):
            return f"{verdict} by {abs(self.change):.1%}"
        if verdict == "same":
            return f"same ({self.change:+.1%})"
        return f"{verdict} ({self.judged.reason})"

    def brief_verdict(self) -> str:
        """describe_verdict for a table's cell: an "unsure" with its change and the
        interval that decided ("unsure (+3.1% [-6.0%, +12.9%])"), its reason given once
        in the table's notes."""
        if self.verdict == "unsure" and self.replicate_ratios:
            return (f"unsure ({self.change:+.1%}; median of replicates "
                    f"{self.replicate_median - 1:+.1%})")
        if self.verdict == "unsure":
            return f"unsure ({self.change:+.1%} {self.judged.interval()})"
        if self.verdict in ("unmeasured", "failed"):
            return self.verdict + (f" ({self.change:+.1%})" if math.isfinite(self.ratio)
                                   else "")
        return self.describe_verdict()

    def to_dict(self) -> dict:
        """A JSON-ready summary (medians in seconds, or instructions a run for exact counts;
        no interval or no p-value: None)."""
        measured = [failure_of(m) is None for m in (self.baseline, self.candidate)]
        return {
            "name": self.name,
            "baseline_median": self.baseline.median if measured[0] else None,
            "candidate_median": self.candidate.median if measured[1] else None,
            "baseline_samples": len(self.baseline.times) if measured[0] else 0,
            "candidate_samples": len(self.candidate.times) if measured[1] else 0,
            **self.judged.to_dict(),
            "min_effect": self.min_effect, "paired": self.paired, "abba": self.abba,
            "metric": self.metric, "replicate_ratios": list(self.replicate_ratios),
            "processes": list(self.processes),
        }

    def estimate(self) -> str:
        """The ratio, its interval, the p-value and the verdict, on one line."""
        if self.exact:
            return (f"{self.ratio:.4f} [{self.ci_low:.4f}, {self.ci_high:.4f}] (their range), "
                    f"exact: {self.describe_verdict()}")
        if math.isnan(self.ci_low):
            return f"{self.ratio:.3f}, no interval: {self.describe_verdict()}"
        return (f"{self.ratio:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}] "
                f"({self.confidence:.0%} CI), p = {self.p_value:.2g}: "
                f"{self.describe_verdict()}")

    def __str__(self) -> str:
        if self.exact:
            return (f"{self.name}: candidate / baseline = median ratio of "
                    f"{len(self.baseline.times)} paired instruction counts {self.estimate()} "
                    f"(baseline median {self.baseline.median:.6g} instructions a run)")
        unit, scale = select_unit(min(self.baseline.median, self.candidate.median))
        if self.paired:  # the figures shown are the ratio the verdict is about
            units = (f"{len(self.baseline.times) // 2} ABBA quads" if self.abba else
                     f"{len(self.baseline.times)} paired blocks")
            return (f"{self.name}: candidate / baseline = median ratio of "
                    f"{units} {self.estimate()} "
                    f"(baseline median {self.baseline.median / scale:.4g} {unit})")
        what = (f"ratio of the {self.processes[0]} and {self.processes[1]} processes' "
                "medians" if self.processes[0] else "ratio")
        return (f"{self.name}: {self.baseline.median / scale:.4g} {unit} -> "
                f"{self.candidate.median / scale:.4g} {unit}, {what} {self.estimate()}")


def _coerced(baseline: object, candidate: object, caller: str) -> list[Measurement]:
    """Both sides as torchmark Measurements (torch.utils.benchmark's taken, as Compare
    takes them), each holding times that are finite and not negative."""
    sides = []
    for role, m in (("baseline", baseline), ("candidate", candidate)):
        try:
            m = Measurement.coerce(m)
        except TypeError as e:
            raise TypeError(f"{caller}: {role}: {e}") from None
        if not m.raw_times:
            raise ValueError(f"{caller}: the {role} measurement holds no times")
        if not all(math.isfinite(t) and t >= 0 for t in m.raw_times):
            raise ValueError(f"{caller}: the {role} measurement holds a negative, NaN or "
                             "infinite time")
        sides.append(m)
    return sides


def failure_of(m: Any) -> str | None:
    """Why a case failed, for a placeholder of a failed result (failure_placeholder)."""
    metadata = getattr(m, "metadata", None)  # a MemoryMeasurement in `compare` has none
    failure = metadata.get("failure") if isinstance(metadata, dict) else None
    return failure if isinstance(failure, str) else None


def measurement_side(m: Measurement, alike: bool = True) -> Side:
    """The engine's view of `m`; its build (one-build rule) only where `alike` (_alike)."""
    if failure_of(m) is not None:
        return Side(failure=failure_of(m))
    build = (m.metadata or {}).get("build") if alike and isinstance(m.metadata, dict) \
        else None
    return Side(m.times, tuple(m.process_medians), tuple(m.process_spreads or ()),
                stated=stated_of(m), build=build if isinstance(build, str) else None)


def stated_of(m: Measurement) -> Stated | None:
    """The statistics another tool's file stated for a stored result `m` holds only one
    value of (its metadata carries them: Store.measurements_of); None for a measurement
    with times of its own, or statistics that are not whole."""
    if len(m.raw_times) > 1 or not isinstance(m.metadata, dict):
        return None
    try:
        return Stated.from_extra(m.metadata)
    except ValueError:
        return None


def _checked(baseline: object, candidate: object, *, paired: bool = False,
             caller: str = "ab_test") -> list[Measurement]:
    """Both sides as Measurements fit for a ratio (else a ValueError saying why)."""
    baseline, candidate = _coerced(baseline, candidate, caller)
    if baseline.median <= 0:
        raise ValueError(f"{caller}: the baseline's median time is zero; a ratio to it has "
                         "no meaning")
    if paired and len(baseline.times) != len(candidate.times):
        raise ValueError(f"{caller}: paired samples need as many baseline as candidate "
                         f"times, got {len(baseline.times)} and {len(candidate.times)}")
    if paired and min(baseline.times) <= 0:
        raise ValueError(f"{caller}: a baseline time is zero; a ratio to it has no meaning")
    return [baseline, candidate]


def _by_processes(baseline: Measurement, candidate: Measurement) -> tuple[int, int]:
    """The processes a side each, when both ran over several (compared by them)."""
    counts = (len(baseline.process_medians), len(candidate.process_medians))
    return counts if min(counts) >= 2 else (0, 0)


def ab_test(baseline: Measurement, candidate: Measurement, *, confidence: float = 0.95,
            min_effect: float = 0.01, resamples: int = 2000, seed: int = 0,
            name: str | None = None, paired: bool = False, abba: bool = False,
            drift: Drift | None = None,
            replicate_ratios: Sequence[float] = ()) -> ABResult:
    """Compare `candidate` against `baseline` (see the module docstring).

    `confidence`: of the interval, in (0, 1). `min_effect`: the smallest relative change
    of the median that counts as faster or slower (0.01 = 1%): the engine's threshold.
    `resamples` and `seed`: of the bootstrap (unpaired only). `name`: defaults to the
    baseline's title.
    `paired`: the i-th times of both sides were taken together (as `measure_ab` takes
    them), so the ratio is the median of the per-pair ratios, with an exact interval from
    their order statistics and the sign test's p-value: a slow spell of the machine that
    hits both sides of a pair cancels out.
    `abba` (with `paired`): the pairs were taken A B, B A, A B, ... (as `measure_ab` and
    `ab_environments` take them), and the unit is the quad of pairs 2q and 2q + 1: its
    ratio, the sum of its two candidate times over the sum of its two baseline times,
    cancels an effect of the order within a pair (the block that runs second faster,
    say), which per-pair ratios turn into two modes around the true ratio. A trailing
    odd pair is left out.
    `drift`: between two runs of the same code on this machine, when known (a case's
    A/A history in the store); else the engine estimates it from the two sides.
    `replicate_ratios`: the ratios of independent replicates pooled into these samples.
    Many cases of two runs at once: `ab_all`.
    """
    _check_options(confidence, min_effect, resamples)
    if abba and not paired:
        raise ValueError("ab_test: abba=True is a way of pairing: give paired=True too")
    baseline, candidate = _checked(baseline, candidate, paired=paired)
    verdict = judge(measurement_side(baseline), measurement_side(candidate), metric="wall",
                    threshold=float(min_effect), confidence=confidence, drift=drift,
                    paired=paired, abba=abba, replicate_ratios=tuple(replicate_ratios),
                    seed=seed, resamples=resamples)
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, judged=verdict, paired=paired, abba=abba,
                    replicate_ratios=tuple(replicate_ratios),
                    processes=(0, 0) if paired else _by_processes(baseline, candidate))


def ab_all(pairs: Sequence[tuple[str, Measurement, Measurement]], *,
           confidence: float = 0.95, min_effect: float = 0.01, seed: int = 0,
           histories: Mapping[str, Sequence[float]] | None = None
           ) -> tuple[list[ABResult], list[str]]:
    """Many cases of two runs (name, baseline, candidate), judged together as the gate
    judges them (verdicts/family.py: each at the family-wise confidence, the runs'
    common shift, each case's A/A history from `histories`, name -> log ratios): the
    results, and a line for each pair that could not be compared."""
    from torchmark.verdicts.family import Pair, judge_all

    _check_options(confidence, min_effect, 2000)
    checked: list[tuple[str, Measurement, Measurement]] = []
    errors = []
    for name, a, b in pairs:
        try:
            if failure_of(a) is None and failure_of(b) is None:
                a, b = _checked(a, b)
            checked.append((name, a, b))
        except ValueError as e:  # one case that cannot be compared does not stop the rest
            errors.append(f"{name}: {str(e).removeprefix('ab_test: ')}")
    verdicts = judge_all([Pair(name, measurement_side(a), measurement_side(b, alike=_alike(a, b)))
                          for name, a, b in checked],
                         threshold=float(min_effect), confidence=confidence,
                         histories=histories, seed=seed)
    return [ABResult(name=name, baseline=a, candidate=b, judged=verdicts[name],
                     processes=_by_processes(a, b)) for name, a, b in checked], errors


def _alike(a: Measurement, b: Measurement) -> bool:
    """Whether two paired measurements ran the same task, whatever tags their sides (env,
    description): the statement, setup, label, sub-label and thread count (what a
    build does not record, so sides told apart by one of them are no runs of one
    build)."""
    return all(getattr(a.task_spec, name) == getattr(b.task_spec, name)
               for name in ("stmt", "setup", "label", "sub_label", "num_threads"))


def _check_options(confidence: float, min_effect: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"ab_test: confidence must be in (0, 1), got {brief_repr(confidence)}")
    if not (isinstance(min_effect, (int, float)) and 0 <= min_effect < 10):
        raise ValueError(f"ab_test: min_effect must be in [0, 10), got {brief_repr(min_effect)}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"ab_test: resamples must be an int >= 100, got {brief_repr(resamples)}")


def counts_test(baseline: Measurement, candidate: Measurement, *, min_effect: float = 0.01,
                name: str | None = None) -> ABResult:
    """Compare instruction counts exactly: Measurements whose `times` are counts a run,
    count i of both sides taken at the same place of their collectors' request sequences
    (a collector's counts of one statement can differ from one request to the next by a
    few per cent, the same way in both environments), so compared as pairs. The ratio is
    the median of the per-pair ratios, the interval their range: "faster" / "slower" when
    the whole range lies below / above 1 and the ratio moved by `min_effect` or more,
    "same" when the range lies within it; no p-value (there is no sampling to test)."""
    sides = []
    for role, m in (("baseline", baseline), ("candidate", candidate)):
        m = Measurement.coerce(m)
        if not m.raw_times or not all(math.isfinite(t) and t > 0 for t in m.raw_times):
            raise ValueError(f"counts_test: the {role} holds no counts, or a count that is "
                             "not positive")
        sides.append(m)
    baseline, candidate = sides
    if len(baseline.times) != len(candidate.times):
        raise ValueError(f"counts_test: pairs need as many baseline as candidate counts, got "
                         f"{len(baseline.times)} and {len(candidate.times)}")
    if not (isinstance(min_effect, (int, float)) and 0 <= min_effect < 10):
        raise ValueError(f"counts_test: min_effect must be in [0, 10), got "
                         f"{brief_repr(min_effect)}")
    verdict = judge(measurement_side(baseline), measurement_side(candidate), metric="instructions",
                    threshold=float(min_effect), confidence=0.95, paired=True)
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, judged=verdict, paired=True, metric="instructions")


# -- pairing two lists of measurements -------------------------------------------------
# What a case is: every TaskSpec field. The first of these that holds one value on each
# side, different between the sides, names the side instead (env="before" / "after", an
# ops file's name as description, two labels); at most one field is taken as that tag.
_KEY_FIELDS = ("label", "sub_label", "stmt", "setup", "global_setup", "description", "env",
               "num_threads")
_TAG_PREFERENCE = ("env", "description", "label", "sub_label", "num_threads")


def _fields(m: Measurement) -> dict:
    spec = m.task_spec
    fields = {name: getattr(spec, name) for name in _KEY_FIELDS}
    for name in ("label", "sub_label", "description", "env", "global_setup"):
        fields[name] = fields[name] or None  # "" and None are the same: nothing given
    if (fields["setup"] or "").strip() in ("", "pass"):  # no setup, however it was written
        fields["setup"] = None
    return fields


def _side_tag(fields_a: list[dict], fields_b: list[dict]) -> str | None:
    if not fields_a or not fields_b:
        return None
    for name in _TAG_PREFERENCE:
        values_a, values_b = {f[name] for f in fields_a}, {f[name] for f in fields_b}
        if len(values_a) == 1 and len(values_b) == 1 and values_a != values_b:
            return name
    return None


def pair_measurements(
    baseline: Sequence[Measurement], candidate: Sequence[Measurement],
) -> tuple[list[tuple[str, Measurement, Measurement]], list[str], list[str]]:
    """Pair each baseline task with the candidate task that measures the same thing.

    Tasks match on every TaskSpec field (label, sub_label, stmt, setup, description, env,
    thread count) except the one that names the side: the first of env, description,
    label, sub_label and thread count that holds a single value on each side, different
    between them. Replicates of one task on one side are pooled (per-run times).
    Returns (name, baseline, candidate) triples in the baseline's order, and the names
    of the tasks found on only one side. Names are unique: where two tasks would read
    alike, their setups (or a number) tell them apart.
    """
    baseline = [Measurement.coerce(m) for m in baseline]  # torch's too
    candidate = [Measurement.coerce(m) for m in candidate]
    fields_a = [_fields(m) for m in baseline]
    fields_b = [_fields(m) for m in candidate]
    tag = _side_tag(fields_a, fields_b)
    # an ops file that predates recording its thread count (ops/as_measurements.py)
    # pairs its cases whatever the other side's count
    unknown_threads = any(isinstance(m.metadata, dict) and m.metadata.get("threads_unknown")
                          for m in [*baseline, *candidate])
    key_fields = [name for name in _KEY_FIELDS if name != tag
                  and not (unknown_threads and name == "num_threads")]
    varied_threads = len({f["num_threads"] for f in fields_a + fields_b}) > 1

    def groups(measurements, fields) -> dict[tuple, list[Measurement]]:
        out: dict[tuple, list[Measurement]] = {}
        for m, f in zip(measurements, fields, strict=True):
            out.setdefault(tuple(f[k] for k in key_fields), []).append(m)
        return out

    side_a, side_b = groups(baseline, fields_a), groups(candidate, fields_b)
    names = _names([*side_a, *(k for k in side_b if k not in side_a)], key_fields,
                   varied_threads)

    def pooled(group: list[Measurement]) -> Measurement:
        # a failure's placeholder (failure_of) holds no time: left out where the case
        # was measured too, else the one placeholder of the case
        measured = [m for m in group if failure_of(m) is None]
        group = measured or group[:1]
        if len(group) == 1:
            return group[0]
        metadata: dict[str, object] | None = None
        if all(m.process_medians and m.process_spreads for m in group) and sum(
                len(m.process_medians) for m in group) <= MAX_PROCESSES:  # runs over
            # processes: their processes, all of them (ab_test compares by those)
            metadata = {"processes": {
                "count": sum(len(m.process_medians) for m in group),
                "medians": [x for m in group for x in m.process_medians],
                "spreads": [x for m in group for x in m.process_spreads]}}
        builds = {(m.metadata or {}).get("build") if isinstance(m.metadata, dict) else None
                  for m in group}
        if len(builds) == 1 and None not in builds:  # replicates of one build stay so
            metadata = {**(metadata or {}), "build": builds.pop()}
        return Measurement(1, [t for m in group for t in m.times], group[0].task_spec,
                           metadata)

    pairs = [(names[k], pooled(g), pooled(side_b[k])) for k, g in side_a.items() if k in side_b]
    only_a = [names[k] for k in side_a if k not in side_b]
    only_b = [names[k] for k in side_b if k not in side_a]
    return pairs, only_a, only_b


def _names(keys: list[tuple], key_fields: list[str], varied_threads: bool) -> dict[tuple, str]:
    """A one-line, unique name per case key: label / row / description / env / threads."""
    def one_line(text: object) -> str:
        return " ".join(str(text).split())  # a multi-line statement stays on one line

    names = {}
    for key in keys:
        f = dict(zip(key_fields, key, strict=True))
        row = f.get("sub_label") or f.get("stmt")
        parts = [one_line(v) for v in (f.get("label"), row, f.get("description"), f.get("env"))
                 if v not in (None, "")]
        if varied_threads and "num_threads" in f:
            parts.append(f"{f['num_threads']} thread{'s' if f['num_threads'] > 1 else ''}")
        names[key] = " / ".join(dict.fromkeys(parts)) or one_line(f.get("stmt") or "(case)")
    seen: dict[str, list[tuple]] = {}
    for key, name in names.items():
        seen.setdefault(name, []).append(key)
    for name, same in seen.items():
        if len(same) < 2:
            continue
        # tell them apart by what differs: the statement, else the setup, else a number
        for field in ("stmt", "setup", None):
            values = [dict(zip(key_fields, k, strict=True)).get(field) if field else None
                      for k in same]
            if field is None or len(set(values)) == len(values):
                break
        for i, key in enumerate(same):
            names[key] = (f"{name} [{field}: {one_line(values[i])}]" if field
                          else f"{name} #{i + 1}")
    return names
