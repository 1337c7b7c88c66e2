"""A/B comparison of two Measurements: is the candidate faster, slower, or no different?

`ab_test(baseline, candidate)` compares the per-run times of two measurements of the
same task. The estimate is the ratio of their medians (candidate / baseline: 0.8 means
the candidate takes 20% less time); its confidence interval comes from a percentile
bootstrap (each side resampled with replacement, independently, with a fixed seed so
the same inputs give the same interval). A Mann-Whitney U test gives a p-value for "one
side tends to take longer". Paired samples (`measure_ab`'s interleaved blocks) are
judged by their per-pair ratios instead: the median ratio, its exact distribution-free
interval (order statistics of the ratios, as the sign test gives it) and the sign test's
p-value. The verdict is "faster" or "slower" only when the interval excludes 1, the
p-value is under 1 - confidence, and the change is at least `min_effect`; otherwise "no
significant change". With too few samples for an interval at that confidence (under 5
a side; under 6 pairs at 95%) the verdict is "too few samples". Instruction counts have
no sampling noise: `counts_test` compares them exactly (the median of the per-pair ratios,
the range of the per-pair ratios as its interval, no p-value). Two runs taken over
several fresh processes each (`measure_in_processes`, `timeit --processes`) are judged by
their per-process medians, since a process's speed is drawn at its start: the ratio is
Hodges-Lehmann's over the processes, its interval distribution-free, the p-value the
exact Mann-Whitney U test's (compare/replicates.py); "too few processes" when they
cannot give an interval at that confidence (4 and 4 can at 95%).

Both assume the samples of each side are independent draws: true for blocked_autorange's
blocks on a quiet machine, not for a run that drifted (a machine that warmed up, a
thermal limit). Interleave A and B runs, or repeat them, when drift is a concern.

`pair_measurements` lines up two lists of measurements (two files, or the two envs of
one file) by what they measure, for `torchmark ab`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from torchmark.compare.replicates import exact_u_p, ratio_interval
from torchmark.core.bounded_input import brief_repr
from torchmark.core.stats import select_unit
from torchmark.timing.measurement import MAX_PROCESSES, Measurement

MIN_SAMPLES = 5  # fewer samples on a side (unpaired): no interval, "too few samples"
# Two measurements taken one after the other (unpaired) share no control of drift: their
# change is called only when it exceeds this many times the sum of the two runs' spreads
# (IQR / median): on a 2-core machine with a busy core, two runs of one statement a
# moment apart differed by 2 to 75% while each run's IQR was 1 to 70% of its median.
SEQUENTIAL_SPREADS = 3.0
_BOOTSTRAP_CELLS = 4_000_000  # resampled values held in memory at once


@dataclasses.dataclass(frozen=True)
class ABResult:
    """The outcome of `ab_test`: the median ratio, its interval, a p-value, a verdict."""

    name: str
    baseline: Measurement
    candidate: Measurement
    ratio: float  # candidate median / baseline median
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    min_effect: float
    paired: bool = False  # ratios of paired samples (measure_ab), not of two medians
    # paired samples taken A B, B A, A B, ...: the unit is the quad of two pairs (A B B A),
    # whose ratio (sum of B / sum of A) cancels an effect of the order within a pair
    abba: bool = False
    # "wall" (times in seconds), or "instructions": counts a run, compared exactly
    # (counts_test: the interval is the range of the ratios, there is no p-value)
    metric: str = "wall"
    # the ratios of independent replicates whose samples were pooled (the worker pairs of
    # an A/B across environments): a direction is called only when their median moved by
    # min_effect that way too, else "unsure"
    replicate_ratios: tuple[float, ...] = ()
    # unpaired runs over several fresh processes each (measure_in_processes): compared
    # by their per-process medians, these many a side (0, 0: by the samples)
    processes: tuple[int, int] = (0, 0)

    @property
    def exact(self) -> bool:
        """Deterministic samples (instruction counts): no sampling error to test."""
        return self.metric == "instructions"

    @property
    def change(self) -> float:
        """The relative change of the median: -0.2 is 20% less time."""
        return self.ratio - 1.0

    @property
    def drift_margin(self) -> float:
        """The smallest change an unpaired (sequential) comparison calls: drift between
        the two runs is not controlled, so a change must be far beyond their spread
        (SEQUENTIAL_SPREADS times the sum of their IQR / median; for runs over
        processes, of the median process's own). 0 for paired samples, whose pairs were
        taken side by side, and for exact counts."""
        if self.paired or self.exact:
            return 0.0
        spreads = [m.process_spreads for m in (self.baseline, self.candidate)]
        if self.processes[0] and all(spreads):  # within each process: the lottery that
            # sets a process's speed is the test's own business
            return SEQUENTIAL_SPREADS * sum(float(np.median(s)) for s in spreads)
        spread = sum(m.iqr / m.median if m.median > 0 else math.inf
                     for m in (self.baseline, self.candidate))
        return SEQUENTIAL_SPREADS * spread

    @property
    def replicate_median(self) -> float:
        """The median of `replicate_ratios` (nan without replicates)."""
        return float(np.median(self.replicate_ratios)) if self.replicate_ratios else math.nan

    @property
    def verdict(self) -> str:
        """"faster", "slower", "no significant change", "unsure" (a significant change
        within what drift between two unpaired runs could cause, or one that the median
        replicate does not show), "too few samples", or, for runs compared by their
        processes, "too few processes"."""
        if math.isnan(self.ci_low) or math.isnan(self.ci_high):
            return "too few processes" if self.processes[0] else "too few samples"
        significant = self.exact or self.p_value < 1 - self.confidence
        direction = None
        if significant and self.ci_high < 1.0 and self.change <= -self.min_effect:
            direction = "faster"
        if significant and self.ci_low > 1.0 and self.change >= self.min_effect:
            direction = "slower"
        if direction is None:
            return "no significant change"
        # replicates come with paired results only (env A/B), whose drift margin is 0, so
        # an "unsure" of a result with replicates is always theirs
        if self.replicate_ratios and not self._replicates_agree(direction):
            return "unsure"
        # in log space: a 2x slowdown and a 2x speedup are the same distance from 1
        beyond = abs(math.log(self.ratio)) >= math.log1p(self.drift_margin)
        return direction if beyond else "unsure"

    def _replicates_agree(self, direction: str) -> bool:
        change = self.replicate_median - 1.0
        return change <= -self.min_effect if direction == "faster" else \
            change >= self.min_effect

    def describe_verdict(self) -> str:
        """The verdict with its size, the same quantity as the ratio shown beside it:
        "faster by 21.3%", "no significant change (+0.4%)", "unsure (+3.1%, under the
        drift margin ...)"."""
        verdict = self.verdict
        if verdict in ("faster", "slower"):
            return f"{verdict} by {abs(self.change):.1%}"
        if verdict == "no significant change" and math.isfinite(self.change):
            return f"no significant change ({self.change:+.1%})"
        if verdict == "unsure" and self.replicate_ratios:
            return (f"unsure ({self.change:+.1%} over all samples, but the median of "
                    f"{len(self.replicate_ratios)} replicates moved "
                    f"{self.replicate_median - 1:+.1%}: processes of one environment differ "
                    "in speed from one start to the next; measure with more worker pairs)")
        if verdict == "unsure":
            return (f"unsure ({self._under_drift()}: the two were measured one after the "
                    "other, and drift between them is not controlled; interleave them with "
                    "measure_ab or timeit --vs)")
        return verdict

    def _under_drift(self) -> str:
        return f"{self.change:+.1%}, under the drift margin of {self.drift_margin:.0%}"

    def brief_verdict(self) -> str:
        """describe_verdict for a table's cell: an "unsure" without its explanation,
        which the table's notes give once ("unsure (+3.1%, under the drift margin of
        9%)")."""
        if self.verdict == "unsure" and self.replicate_ratios:
            return (f"unsure ({self.change:+.1%}; median of replicates "
                    f"{self.replicate_median - 1:+.1%})")
        if self.verdict == "unsure":
            return f"unsure ({self._under_drift()})"
        return self.describe_verdict()

    def to_dict(self) -> dict:
        """A JSON-ready summary (medians in seconds, or instructions a run for exact counts;
        no interval or no p-value: None)."""
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "name": self.name, "baseline_median": self.baseline.median,
            "candidate_median": self.candidate.median,
            "baseline_samples": len(self.baseline.times),
            "candidate_samples": len(self.candidate.times),
            "ratio": finite(self.ratio), "ci_low": finite(self.ci_low),
            "ci_high": finite(self.ci_high),
            "confidence": self.confidence, "p_value": finite(self.p_value),
            "min_effect": self.min_effect, "paired": self.paired, "abba": self.abba,
            "metric": self.metric, "replicate_ratios": list(self.replicate_ratios),
            "processes": list(self.processes), "verdict": self.verdict,
        }

    def estimate(self) -> str:
        """The ratio, its interval, the p-value and the verdict, on one line."""
        if self.exact:
            return (f"{self.ratio:.4f} [{self.ci_low:.4f}, {self.ci_high:.4f}] (their range), "
                    f"exact: {self.describe_verdict()}")
        interval = ("no interval" if math.isnan(self.ci_low) else
                    f"[{self.ci_low:.3f}, {self.ci_high:.3f}] ({self.confidence:.0%} CI)")
        return f"{self.ratio:.3f} {interval}, p = {self.p_value:.2g}: {self.describe_verdict()}"

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


def ab_test(baseline: Measurement, candidate: Measurement, *, confidence: float = 0.95,
            min_effect: float = 0.01, resamples: int = 2000, seed: int = 0,
            name: str | None = None, paired: bool = False, abba: bool = False) -> ABResult:
    """Compare `candidate` against `baseline` (see the module's docstring).

    `confidence`: of the bootstrap interval, in (0, 1). `min_effect`: the smallest
    relative change of the median that counts as faster or slower (0.01 = 1%).
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
    """
    sides = []
    for role, m in (("baseline", baseline), ("candidate", candidate)):
        try:  # torch.utils.benchmark's Measurements are taken, as Compare takes them
            m = Measurement.coerce(m)
        except TypeError as e:
            raise TypeError(f"ab_test: {role}: {e}") from None
        sides.append(m)
        if not m.raw_times:
            raise ValueError(f"ab_test: the {role} measurement holds no times")
        if not all(math.isfinite(t) and t >= 0 for t in m.raw_times):
            raise ValueError(f"ab_test: the {role} measurement holds a negative, NaN or "
                             "infinite time")
    baseline, candidate = sides
    if not 0 < confidence < 1:
        raise ValueError(f"ab_test: confidence must be in (0, 1), got {brief_repr(confidence)}")
    if not (isinstance(min_effect, (int, float)) and 0 <= min_effect < 1):
        raise ValueError(f"ab_test: min_effect must be in [0, 1), got {brief_repr(min_effect)}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"ab_test: resamples must be an int >= 100, got {brief_repr(resamples)}")
    if baseline.median <= 0:
        raise ValueError("ab_test: the baseline's median time is zero; a ratio to it has "
                         "no meaning")
    a = np.asarray(baseline.times, dtype=np.float64)
    b = np.asarray(candidate.times, dtype=np.float64)
    if abba and not paired:
        raise ValueError("ab_test: abba=True is a way of pairing: give paired=True too")
    if paired:
        return _paired(a, b, baseline, candidate, confidence, float(min_effect), name, abba)
    if len(baseline.process_medians) >= 2 and len(candidate.process_medians) >= 2:
        return _processes(baseline, candidate, confidence, float(min_effect), name)
    ratio = candidate.median / baseline.median
    low, high = median_ratio_interval(a, b, confidence, resamples=resamples, seed=seed)
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, ratio=ratio, ci_low=low, ci_high=high,
                    confidence=confidence, p_value=mann_whitney_p(a, b),
                    min_effect=float(min_effect))


def counts_test(baseline: Measurement, candidate: Measurement, *, min_effect: float = 0.01,
                name: str | None = None) -> ABResult:
    """Compare instruction counts exactly: Measurements whose `times` are counts a run,
    count i of both sides taken at the same place of their collectors' request sequences
    (a collector's counts of one statement can differ from one request to the next by a
    few per cent, the same way in both environments), so compared as pairs. The ratio is
    the median of the per-pair ratios, the interval their range: "faster" / "slower" when
    the whole range lies below / above 1 and the ratio moved by `min_effect` or more,
    else "no significant change"; no p-value (there is no sampling to test)."""
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
    if not (isinstance(min_effect, (int, float)) and 0 <= min_effect < 1):
        raise ValueError(f"counts_test: min_effect must be in [0, 1), got "
                         f"{brief_repr(min_effect)}")
    ratios = sorted(b / a for a, b in zip(baseline.times, candidate.times, strict=True))
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, ratio=float(np.median(ratios)), ci_low=ratios[0],
                    ci_high=ratios[-1], confidence=1.0, p_value=math.nan,
                    min_effect=float(min_effect), paired=True, metric="instructions")


def median_ratio_interval(baseline: Sequence[float] | np.ndarray,
                          candidate: Sequence[float] | np.ndarray, confidence: float = 0.95,
                          *, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The percentile-bootstrap interval of median(candidate) / median(baseline), each
    side resampled independently with a fixed seed; (nan, nan) with under MIN_SAMPLES
    samples on a side."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if min(len(a), len(b)) < MIN_SAMPLES:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _bootstrap_medians(b, resamples, rng) / _bootstrap_medians(a, resamples, rng)
    ratios = ratios[~np.isnan(ratios)]
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def _paired(a: np.ndarray, b: np.ndarray, baseline: Measurement, candidate: Measurement,
            confidence: float, min_effect: float, name: str | None,
            abba: bool = False) -> ABResult:
    """ab_test of paired samples: the median of b[i] / a[i] (of the quads' sums with
    `abba`), its order-statistic interval and the sign test."""
    if len(a) != len(b):
        raise ValueError(f"ab_test: paired samples need as many baseline as candidate "
                         f"times, got {len(a)} and {len(b)}")
    if not (a > 0).all():
        raise ValueError("ab_test: a baseline time is zero; a ratio to it has no meaning")
    if abba:  # pairs 2q and 2q + 1 (A B, then B A) summed side by side
        quads = len(a) // 2
        a = a[:2 * quads:2] + a[1:2 * quads:2]
        b = b[:2 * quads:2] + b[1:2 * quads:2]
    ratios = np.sort(b / a)
    low, high = median_interval(ratios, confidence)
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, ratio=float(np.median(ratios)), ci_low=low,
                    ci_high=high, confidence=confidence,
                    p_value=sign_test_p(int((ratios > 1).sum()), int((ratios < 1).sum())),
                    min_effect=min_effect, paired=True, abba=abba)


def _processes(baseline: Measurement, candidate: Measurement, confidence: float,
               min_effect: float, name: str | None) -> ABResult:
    """ab_test of two runs over several processes each: their per-process medians as
    replicates (compare/replicates.py), on logs: the ratio is Hodges-Lehmann's, the
    interval distribution-free, the p-value the exact Mann-Whitney U test's."""
    a, b = baseline.process_medians, candidate.process_medians
    ratio, low, high = ratio_interval(a, b, confidence)
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, ratio=ratio, ci_low=low, ci_high=high,
                    confidence=confidence, p_value=exact_u_p(a, b),  # ranks: logs or not
                    min_effect=min_effect, processes=(len(a), len(b)))


def _binomial_half_cdf(n: int) -> Iterator[float]:
    """P(X <= 0), P(X <= 1), ... for X ~ Binomial(n, 1/2), computed in log space."""
    total, log_scale = 0.0, math.lgamma(n + 1) + n * math.log(0.5)
    for k in range(n + 1):
        total += math.exp(log_scale - math.lgamma(k + 1) - math.lgamma(n - k + 1))
        yield min(total, 1.0)


def median_interval(sorted_values: Sequence[float] | np.ndarray,
                    confidence: float) -> tuple[float, float]:
    """The distribution-free interval for a median: the k-th smallest and k-th largest
    values, k the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. Its
    coverage is at least `confidence` whatever the distribution; (nan, nan) when n is
    too small for any (at 95%: under 6 values)."""
    n, tail = len(sorted_values), (1 - confidence) / 2
    k = 0
    for below, cdf in enumerate(_binomial_half_cdf(n)):
        if cdf > tail or below >= n // 2:
            break
        k = below + 1  # P(X <= below) <= tail: the (below+1)-th value is a bound
    if k == 0:
        return math.nan, math.nan
    return float(sorted_values[k - 1]), float(sorted_values[n - k])


def sign_test_p(above: int, below: int) -> float:
    """Two-sided p-value of the exact sign test: `above` of `above + below` values (ties
    left out) lie above the hypothesised median."""
    n = above + below
    if n == 0:
        return 1.0
    tail = next(itertools.islice(_binomial_half_cdf(n), min(above, below), None))
    return min(1.0, 2 * tail)


def _bootstrap_medians(times: np.ndarray, resamples: int,
                       rng: np.random.Generator) -> np.ndarray:
    """The medians of `resamples` resamples (with replacement) of `times`."""
    out = np.empty(resamples)
    chunk = max(1, _BOOTSTRAP_CELLS // len(times))
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        picks = rng.integers(0, len(times), size=(rows, len(times)))
        out[start:start + rows] = np.median(times[picks], axis=1)
    return out


def mann_whitney_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie and
    continuity corrections); 1.0 when there is nothing to tell apart."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    ranks, tie_sizes = _average_ranks(np.concatenate([a, b]))
    u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    n = n1 + n2
    tie_term = float((tie_sizes ** 3 - tie_sizes).sum()) / (n * (n - 1)) if n > 1 else 0.0
    variance = n1 * n2 / 12 * ((n + 1) - tie_term)
    if variance <= 0:
        return 1.0
    z = max(abs(u - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks, tied values sharing their average rank; and the size of each tie
    group."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    average = starts + (sizes + 1) / 2  # the mean of ranks start+1 .. start+size
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average, sizes)
    return ranks, sizes.astype(np.float64)


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
        if len(group) == 1:
            return group[0]
        metadata = None
        if all(m.process_medians and m.process_spreads for m in group) and sum(
                len(m.process_medians) for m in group) <= MAX_PROCESSES:  # runs over
            # processes: their processes, all of them (ab_test compares by those)
            metadata = {"processes": {
                "count": sum(len(m.process_medians) for m in group),
                "medians": [x for m in group for x in m.process_medians],
                "spreads": [x for m in group for x in m.process_spreads]}}
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
