"""The one comparison engine: two sides of a case and a threshold in, a Verdict out.

How the ratio (candidate / baseline) and its interval are formed depends on the sides:

- exact metrics (instruction counts, bytes): the ratio of the medians (paired counts:
  the median of the per-pair ratios, their range as the interval); no sampling error;
- paired samples (interleaved blocks, `measure_ab`): the median of the per-pair ratios
  (of A B B A quads' sums with `abba`), its distribution-free interval, the sign test;
- runs over several processes each: Hodges-Lehmann's ratio of the processes' medians,
  its exact interval, the exact Mann-Whitney test (verdicts/replicates.py);
- a side that holds only the statistics another tool's file stated (no raw samples:
  core/result.py Stated): the ratio of the means, Welch's interval on the log scale
  (delta method, the smaller side's degrees of freedom), each side's n, mean and
  deviation; unmeasured when a side states no deviation or fewer than
  MIN_STATED_SAMPLES samples;
- otherwise one run a side: the ratio of the medians, its percentile-bootstrap
  interval (fixed seed), the Mann-Whitney test.

The interval is then widened by the drift between two runs of the same code (on the log
scale; a drift from the A/A history, which holds the sampling error of a run's median
already, reaches as far as the larger of the two; the others are added in quadrature),
given by the caller (the case's A/A history) or estimated from the sides
(verdicts/drift.py; a history of few pairs no narrower than that estimate), and by the common shift of the runs compared, when the caller
gives one (verdicts/family.py). With L the log ratio, T = log(1 +
threshold) and [lo, hi] the widened interval's logs:

- slower: lo > 0 (and the test's p under 1 - confidence) and L >= T; faster: the mirror;
- same: the widened interval lies within [-T, T];
- unsure: anything else (a change within the drift, or an interval too wide to tell),
  and a direction that the median of independent replicates (`replicate_ratios`) does
  not show by the threshold too;
- unmeasured: no interval could be formed (too few samples, pairs or processes; a
  baseline that failed, holds no samples or has a median of zero);
- failed: the candidate failed.

Since lo > 0 needs L beyond the drift, a change smaller than what two runs of the same
code differ by is never slower or faster.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

import numpy as np

from torchmark.core.result import EXACT_METRICS, Stated
from torchmark.verdicts import drift as drifts
from torchmark.verdicts.drift import Drift
from torchmark.verdicts.intervals import (
    MIN_SAMPLES,
    mann_whitney_p,
    median_interval,
    median_ratio_interval,
    sign_test_p,
    sorted_median,
)
from torchmark.verdicts.replicates import MAX_REPLICATES, exact_u_p, ratio_interval
from torchmark.verdicts.verdict import Verdict

DEFAULT_THRESHOLD = 0.05  # the gate's and the pytest plugin's
MIN_STATED_SAMPLES = 3  # a side of stated statistics: samples behind them, at least
_EPS = 1e-12


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a case: its samples (per run, in the metric's unit), the medians
    and spreads (IQR / median) of the processes it was timed in when it ran over
    several, the statistics a file stated where it kept no raw samples (then `samples`
    is only their median or mean), or why it failed."""

    samples: Sequence[float] = ()
    process_medians: Sequence[float] = ()
    process_spreads: Sequence[float] = ()
    failure: str | None = None
    stated: Stated | None = None
    build: str | None = None  # the run's code and place (core/provenance.py build)


def judge(baseline: Side, candidate: Side, *, metric: str = "wall",
          threshold: float = DEFAULT_THRESHOLD, confidence: float = 0.95,
          drift: Drift | None = None, paired: bool = False, abba: bool = False,
          replicate_ratios: Sequence[float] = (), seed: int = 0,
          resamples: int = 2000, shift: float = 0.0) -> Verdict:
    """The verdict on `candidate` against `baseline` (see the module docstring).
    `threshold`: the smallest relative change that counts (0.05: 5%). `drift`: between
    two runs of the same code, when the caller knows it (else estimated from the sides).
    `paired`: the i-th samples of both sides were taken together; `abba`: the pairs
    were taken A B, B A, ... (the unit is then the quad of two pairs). `shift`: the
    common change (a log ratio) of the runs this case was compared in, as a whole
    (verdicts/family.py): a disturbed run moves every case, and that much is drift.
    Two sides of one build (Side.build) are two runs of the same code: what differs
    between them in a noisy metric is what two such runs differ by, so no direction is
    said ("unsure"); exact counts do not differ between runs of the same code, so a
    change in them is one (of something the build does not record)."""
    verdict = _judge(baseline, candidate, metric=metric, threshold=threshold,
                     confidence=confidence, drift=drift, paired=paired, abba=abba,
                     replicate_ratios=replicate_ratios, seed=seed, resamples=resamples,
                     shift=shift)
    if verdict.kind in ("slower", "faster") and metric not in EXACT_METRICS \
            and baseline.build is not None and baseline.build == candidate.build:
        shown = verdict.reason.rpartition(": ")[0]
        return dataclasses.replace(verdict, kind="unsure", reason=(
            f"{shown}: {ONE_BUILD}"))
    return verdict


ONE_BUILD = ("both sides are runs of one build (the same clean commit, torch, Python, "
             "machine and env label), so this is how far two runs of the same code differ "
             "here, not a change of the code (runs of code that differs in what torchmark "
             "does not record: give them env labels of their own)")


def _judge(baseline: Side, candidate: Side, *, metric: str, threshold: float,
           confidence: float, drift: Drift | None, paired: bool, abba: bool,
           replicate_ratios: Sequence[float], seed: int, resamples: int,
           shift: float) -> Verdict:
    """judge, leaving the sides' builds aside."""
    if not (isinstance(threshold, (int, float)) and 0 <= threshold < 10):
        raise ValueError(f"threshold must be a number in [0, 10), got {threshold!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if abba and not paired:
        raise ValueError("abba=True is a way of pairing: give paired=True too")
    settings = dict(threshold=float(threshold), confidence=confidence)
    # a side of stated statistics (another tool's summary) is no exact count
    exact = metric in EXACT_METRICS and baseline.stated is None and candidate.stated is None
    default_drift = drifts.NONE_EXACT if exact else drifts.NONE_PAIRED
    problem = _unusable(baseline, candidate)
    if problem is not None and exact and _all_zero(baseline) and _all_zero(candidate):
        # nothing counted on either side (an empty statement's allocations): no change
        return Verdict("same", 1.0, 1.0, 1.0, 1.0, 1.0, drift or default_drift,
                       float(threshold), confidence, "exact: nothing on either side",
                       "0 on both sides: no change", math.nan)
    if problem is not None and exact and _usable_but_zero(baseline, candidate):
        # bytes where there were none (or none left): exact, so a change of any size
        grew = _all_zero(baseline)
        ratio = math.inf if grew else 0.0
        return Verdict("slower" if grew else "faster", ratio, ratio, ratio, ratio, ratio,
                       drift or default_drift, float(threshold), confidence,
                       "exact: from or to nothing",
                       f"exact: {statistics.median(baseline.samples):,.0f} -> "
                       f"{statistics.median(candidate.samples):,.0f}, "
                       f"{'from' if grew else 'to'} nothing", math.nan)
    if problem is not None:
        kind, reason = problem
        return _no_ratio(kind, reason, drift or default_drift, **settings)
    a = np.asarray(baseline.samples, dtype=np.float64)
    b = np.asarray(candidate.samples, dtype=np.float64)
    if paired and len(a) != len(b):
        raise ValueError(f"paired samples need as many baseline as candidate samples, got "
                         f"{len(a)} and {len(b)}")
    p_value = math.nan
    if exact:
        method = "exact: median of the paired ratios" if paired else \
            "exact: ratio of the medians"
        if paired:
            ratios = np.sort(b / a)
            ratio, low, high = float(np.median(ratios)), float(ratios[0]), float(ratios[-1])
        else:
            ratio = float(np.median(b) / np.median(a))
            low = high = ratio
        drift = drift or drifts.NONE_EXACT
    elif paired:
        if abba:  # pairs 2q and 2q + 1 (A B, then B A) summed side by side
            quads = len(a) // 2
            a = a[:2 * quads:2] + a[1:2 * quads:2]
            b = b[:2 * quads:2] + b[1:2 * quads:2]
        ratios = np.sort(b / a)
        ratio = float(np.median(ratios))
        low, high = median_interval(ratios, confidence)
        p_value = sign_test_p(int((ratios > 1).sum()), int((ratios < 1).sum()))
        method = f"median of {len(ratios)} {'A B B A quads' if abba else 'paired blocks'}'" \
                 " ratios"
        drift = drift or drifts.NONE_PAIRED
        if math.isnan(low):
            return _no_ratio("unmeasured", f"too few {'quads' if abba else 'pairs'} for "
                             f"an interval at {confidence * 100:.4g}% ({len(ratios)})",
                             drift, ratio, **settings)
    elif all(2 <= len(side.process_medians) <= MAX_REPLICATES
             for side in (baseline, candidate)):
        pa, pb = baseline.process_medians, candidate.process_medians
        ratio, low, high = ratio_interval(pa, pb, confidence)
        p_value = exact_u_p(pa, pb)
        method = f"Hodges-Lehmann ratio of {len(pa)} and {len(pb)} processes' medians"
        drift = drifts.at_least_estimate(drift, drifts.from_processes(
            baseline.process_spreads, candidate.process_spreads, confidence))
        if math.isnan(low):
            return _no_ratio("unmeasured", f"too few processes for an interval at "
                             f"{confidence * 100:.4g}% ({len(pa)} and {len(pb)}; 4 and 4 "
                             "give one at 95%)", drift, ratio, **settings)
    elif baseline.stated is not None or candidate.stated is not None:
        sa, sb = _stated(baseline), _stated(candidate)
        ratio = sb.mean / sa.mean if sa.mean > 0 else math.nan
        spread_a, spread_b = sa.spread, sb.spread
        drift = drifts.at_least_estimate(drift, drifts.from_spread_values(
            spread_a, spread_b, confidence)
            if spread_a is not None and spread_b is not None else drifts.NONE_PAIRED)
        if sa.stdev is None or sb.stdev is None or min(sa.n, sb.n) < MIN_STATED_SAMPLES \
                or not sa.mean > 0 or not sb.mean > 0:
            return _no_ratio("unmeasured", "summary statistics without raw samples need "
                             f"n >= {MIN_STATED_SAMPLES} and a standard deviation a side "
                             f"(n = {sa.n} and {sb.n})", drift, ratio, **settings)
        low, high = _welch_interval(sa, sb, confidence)
        method = f"ratio of the means of stated statistics (no raw samples; n = {sa.n} " \
                 f"and {sb.n}), Welch interval"
    else:
        drift = drifts.at_least_estimate(drift, drifts.from_spreads(
            baseline.samples, candidate.samples, confidence))
        ratio = float(sorted_median(np.sort(b)) / sorted_median(np.sort(a)))
        if min(len(a), len(b)) < MIN_SAMPLES:
            return _no_ratio("unmeasured", f"too few samples for an interval ({len(a)} and "
                             f"{len(b)}; {MIN_SAMPLES} a side needed)", drift, ratio,
                             **settings)
        low, high = median_ratio_interval(a, b, confidence, resamples=resamples, seed=seed)
        p_value = mann_whitney_p(a, b)
        method = "ratio of the medians, bootstrap interval"
    return _decide(ratio, low, high, p_value, drift, method, exact, replicate_ratios,
                   shift, **settings)


def shown_values(baseline: Side, candidate: Side) -> tuple[float, float, bool]:
    """The two values a table shows beside a verdict, and whether they are means: the
    means where a side holds only stated statistics (the verdict's ratio is of them),
    else the medians; NaN for a side without samples."""
    means = baseline.stated is not None or candidate.stated is not None

    def value(side: Side) -> float:
        if side.failure is not None or not side.samples:
            return math.nan
        return _stated(side).mean if means else statistics.median(side.samples)

    return value(baseline), value(candidate), means


def _stated(side: Side) -> Stated:
    """A side's statistics: those it states, or those of its raw samples."""
    if side.stated is not None:
        return side.stated
    values = [float(x) for x in side.samples]
    return Stated(len(values), statistics.fmean(values),
                  statistics.stdev(values) if len(values) > 1 else None,
                  statistics.median(values))


def _welch_interval(a: Stated, b: Stated, confidence: float) -> tuple[float, float]:
    """The interval of mean(b) / mean(a) at `confidence`: log ratio +- t * its standard
    error (each mean's relative error, sd / mean / sqrt(n), by the delta method), t at
    the smaller side's n - 1 degrees of freedom (at most as many as Welch's)."""
    assert a.stdev is not None and b.stdev is not None
    se = math.hypot(a.stdev / a.mean / math.sqrt(a.n), b.stdev / b.mean / math.sqrt(b.n))
    t = drifts.t_quantile((1 + confidence) / 2, min(a.n, b.n) - 1)
    log_ratio = math.log(b.mean / a.mean)
    return _exp(log_ratio - t * se), _exp(log_ratio + t * se)


def _unusable(baseline: Side, candidate: Side) -> tuple[str, str] | None:
    """(kind, reason) when the sides cannot give a ratio; None when they can."""
    if candidate.failure is not None:
        return "failed", f"the candidate failed: {candidate.failure}"
    if baseline.failure is not None:
        return "unmeasured", f"the baseline failed: {baseline.failure}"
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if len(side.samples) == 0:
            return "unmeasured", f"the {role} holds no samples"
        bad = [s for s in side.samples if not (math.isfinite(s) and s >= 0)]
        if bad:
            return "unmeasured", f"the {role} holds a sample that is negative or not " \
                                 f"finite ({bad[0]!r})"
    if statistics.median(baseline.samples) <= 0:
        return "unmeasured", "the baseline's median is zero: a ratio to it has no meaning"
    if statistics.median(candidate.samples) <= 0:
        return "unmeasured", "the candidate's median is zero: no ratio can be formed"
    return None


def _usable_but_zero(baseline: Side, candidate: Side) -> bool:
    """Whether the sides are whole, non-negative and finite, and exactly one of them
    counted nothing (all its samples zero)."""
    whole = all(side.failure is None and len(side.samples) > 0 and
                all(math.isfinite(s) and s >= 0 for s in side.samples)
                for side in (baseline, candidate))
    return whole and _all_zero(baseline) != _all_zero(candidate)


def _all_zero(side: Side) -> bool:
    return side.failure is None and len(side.samples) > 0 and \
        all(s == 0 for s in side.samples)


def _no_ratio(kind: str, reason: str, drift: Drift, ratio: float = math.nan, *,
              threshold: float, confidence: float) -> Verdict:
    """A verdict without an interval; `ratio`: the point estimate, where there is one."""
    nan = math.nan
    return Verdict(kind, ratio, nan, nan, nan, nan, drift, threshold, confidence, "none",
                   reason)


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _exp(x: float) -> float:
    return math.inf if x > 709 else math.exp(x)


def _decide(ratio: float, low: float, high: float, p_value: float, drift: Drift,
            method: str, exact: bool, replicate_ratios: Sequence[float], shift: float, *,
            threshold: float, confidence: float) -> Verdict:
    """The kind from the widened interval (see the module docstring). A drift from the
    A/A history already holds the sampling error of a run's median, so the interval
    reaches as far as the larger of the two; the other drifts are estimates of the
    between-run part alone, added to the sampling error in quadrature."""
    log_ratio = _log(ratio)
    d = math.hypot(math.log1p(drift.value), shift)
    t = math.log1p(threshold)
    combine = max if drift.source == "history" else math.hypot
    lo = log_ratio - combine(log_ratio - _log(low), d)
    hi = log_ratio + combine(_log(high) - log_ratio, d)
    significant = exact or math.isnan(p_value) or p_value < 1 - confidence
    shown = f"{ratio - 1:+.1%} [{_pct(lo)}, {_pct(hi)}]"
    within = f"drift {drift.describe()}" if drift.value > 0 else \
        f"no drift ({drift.detail or drift.source})"
    if shift:
        within += f" and the runs' common shift of {math.expm1(shift):+.1%}"
    if significant and lo > 0 and log_ratio >= t - _EPS:
        kind, why = "slower", f"beyond no change and the threshold of {threshold:.1%}"
    elif significant and hi < 0 and log_ratio <= -t + _EPS:
        kind, why = "faster", f"beyond no change and the threshold of {threshold:.1%}"
    elif lo >= -t - _EPS and hi <= t + _EPS:
        kind, why = "same", f"within ±{threshold:.1%}"
    else:
        kind, why = "unsure", _unsure_why(log_ratio, low, high, lo, hi, t, d, p_value,
                                          significant, threshold, 1 - confidence)
    if kind in ("slower", "faster") and replicate_ratios:
        middle = float(np.median(replicate_ratios))
        if not (middle - 1 >= threshold if kind == "slower" else 1 - middle >= threshold):
            kind, why = "unsure", (f"the median of {len(replicate_ratios)} replicates moved "
                                   f"{middle - 1:+.1%} only: processes of one environment "
                                   "differ in speed from one start to the next")
    return Verdict(kind, ratio, low, high, _exp(lo), _exp(hi), drift, threshold, confidence,
                   method, f"{shown} with {within}: {why}", p_value, shift)


def _unsure_why(log_ratio: float, low: float, high: float, lo: float, hi: float, t: float,
                d: float, p_value: float, significant: bool, threshold: float,
                alpha: float) -> str:
    """Why neither a direction nor `same` could be said, in a few words (`alpha`: the
    p-value a change must be under, the cases judged together sharing 5%)."""
    beyond_sampling = _log(low) > 0 or _log(high) < 0
    if beyond_sampling and abs(log_ratio) <= d:
        return "a change within what two runs of the same code differ by"
    if beyond_sampling and not (lo > 0 or hi < 0):
        return "the drift between runs reaches back to no change"
    if not significant:
        return f"not significant (p = {p_value:.2g}, not under {alpha:.2g})"
    if abs(log_ratio) < t:
        return f"the interval reaches beyond ±{threshold:.1%}"
    return "the interval includes no change"


def _pct(log_value: float) -> str:
    """A log ratio as a relative change: log(1.05) -> "+5.0%"."""
    if math.isnan(log_value):
        return "?"
    return "+inf" if log_value > 709 else f"{_exp(log_value) - 1:+.1%}"
