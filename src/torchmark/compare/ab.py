"""A/B comparison of two Measurements: is the candidate faster, slower, or no different?

`ab_test(baseline, candidate)` compares the per-run times of two measurements of the
same task. The estimate is the ratio of their medians (candidate / baseline: 0.8 means
the candidate takes 20% less time); its confidence interval comes from a percentile
bootstrap (each side resampled with replacement, independently, with a fixed seed so
the same inputs give the same interval). A Mann-Whitney U test gives a p-value for "one
side tends to take longer". The verdict is "faster" or "slower" only when the interval
excludes 1 and the change is at least `min_effect`; otherwise "no significant change".

Both assume the samples of each side are independent draws: true for blocked_autorange's
blocks on a quiet machine, not for a run that drifted (a machine that warmed up, a
thermal limit). Interleave A and B runs, or repeat them, when drift is a concern.

`pair_measurements` lines up two lists of measurements (two files, or the two envs of
one file) by what they measure, for `torchmark ab`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from torchmark.timing.measurement import Measurement
from torchmark.timing.stats import select_unit

MIN_SAMPLES = 3  # fewer samples on either side: no interval, verdict "too few samples"
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

    @property
    def change(self) -> float:
        """The relative change of the median: -0.2 is 20% less time."""
        return self.ratio - 1.0

    @property
    def verdict(self) -> str:
        """"faster", "slower", "no significant change", or "too few samples"."""
        if min(len(self.baseline.times), len(self.candidate.times)) < MIN_SAMPLES:
            return "too few samples"
        if self.ci_high < 1.0 and self.change <= -self.min_effect:
            return "faster"
        if self.ci_low > 1.0 and self.change >= self.min_effect:
            return "slower"
        return "no significant change"

    def describe_verdict(self) -> str:
        """The verdict with its size: "faster by 21.3%", "no significant change (+0.4%)"."""
        verdict = self.verdict
        if verdict in ("faster", "slower"):
            return f"{verdict} by {abs(self.change):.1%}"
        if verdict == "no significant change" and math.isfinite(self.change):
            return f"no significant change ({self.change:+.1%})"
        return verdict

    def to_dict(self) -> dict:
        """A JSON-ready summary (medians in seconds; no interval: None)."""
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "name": self.name, "baseline_median": self.baseline.median,
            "candidate_median": self.candidate.median,
            "baseline_samples": len(self.baseline.times),
            "candidate_samples": len(self.candidate.times),
            "ratio": finite(self.ratio), "ci_low": finite(self.ci_low),
            "ci_high": finite(self.ci_high),
            "confidence": self.confidence, "p_value": self.p_value,
            "min_effect": self.min_effect, "paired": self.paired, "verdict": self.verdict,
        }

    def __str__(self) -> str:
        unit, scale = select_unit(min(self.baseline.median, self.candidate.median))
        return (f"{self.name}: {self.baseline.median / scale:.4g} {unit} -> "
                f"{self.candidate.median / scale:.4g} {unit}, ratio {self.ratio:.3f} "
                f"[{self.ci_low:.3f}, {self.ci_high:.3f}] ({self.confidence:.0%} CI), "
                f"p = {self.p_value:.2g}: {self.describe_verdict()}")


def ab_test(baseline: Measurement, candidate: Measurement, *, confidence: float = 0.95,
            min_effect: float = 0.01, resamples: int = 2000, seed: int = 0,
            name: str | None = None, paired: bool = False) -> ABResult:
    """Compare `candidate` against `baseline` (see the module's docstring).

    `confidence`: of the bootstrap interval, in (0, 1). `min_effect`: the smallest
    relative change of the median that counts as faster or slower (0.01 = 1%).
    `resamples`: bootstrap resamples. `name`: defaults to the baseline's title.
    `paired`: the i-th times of both sides were taken together (as `measure_ab` takes
    them), so the ratio is the median of the per-pair ratios, its interval resamples
    pairs, and the p-value is a Wilcoxon signed-rank test's: a slow spell of the machine
    that hits both sides of a pair cancels out.
    """
    for role, m in (("baseline", baseline), ("candidate", candidate)):
        if not isinstance(m, Measurement):
            raise TypeError(f"ab_test: {role} must be a Measurement, got {type(m).__name__}")
        if not m.raw_times:
            raise ValueError(f"ab_test: the {role} measurement holds no times")
    if not 0 < confidence < 1:
        raise ValueError(f"ab_test: confidence must be in (0, 1), got {confidence!r}")
    if not (isinstance(min_effect, (int, float)) and 0 <= min_effect < 1):
        raise ValueError(f"ab_test: min_effect must be in [0, 1), got {min_effect!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"ab_test: resamples must be an int >= 100, got {resamples!r}")
    if baseline.median <= 0:
        raise ValueError("ab_test: the baseline's median time is zero; a ratio to it has "
                         "no meaning")
    a = np.asarray(baseline.times, dtype=np.float64)
    b = np.asarray(candidate.times, dtype=np.float64)
    if paired:
        return _paired(a, b, baseline, candidate, confidence, float(min_effect), resamples,
                       seed, name)
    ratio = candidate.median / baseline.median
    if min(len(a), len(b)) < MIN_SAMPLES:
        low = high = math.nan
    else:
        rng = np.random.default_rng(seed)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = _bootstrap_medians(b, resamples, rng) / _bootstrap_medians(a, resamples, rng)
        ratios = ratios[~np.isnan(ratios)]
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(ratios, [tail, 1 - tail]))
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, ratio=ratio, ci_low=low, ci_high=high,
                    confidence=confidence, p_value=mann_whitney_p(a, b),
                    min_effect=float(min_effect))


def _paired(a: np.ndarray, b: np.ndarray, baseline: Measurement, candidate: Measurement,
            confidence: float, min_effect: float, resamples: int, seed: int,
            name: str | None) -> ABResult:
    """ab_test of paired samples: the median of b[i] / a[i], pairs resampled."""
    if len(a) != len(b):
        raise ValueError(f"ab_test: paired samples need as many baseline as candidate "
                         f"times, got {len(a)} and {len(b)}")
    if not (a > 0).all():
        raise ValueError("ab_test: a baseline time is zero; a ratio to it has no meaning")
    ratios = b / a
    low = high = math.nan
    if len(ratios) >= MIN_SAMPLES:
        medians = _bootstrap_medians(ratios, resamples, np.random.default_rng(seed))
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(medians, [tail, 1 - tail]))
    return ABResult(name=name if name is not None else baseline.title, baseline=baseline,
                    candidate=candidate, ratio=float(np.median(ratios)), ci_low=low,
                    ci_high=high, confidence=confidence,
                    p_value=wilcoxon_signed_rank_p(np.log(ratios)), min_effect=min_effect,
                    paired=True)


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


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie and
    continuity corrections); 1.0 when there is nothing to tell apart."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
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


def wilcoxon_signed_rank_p(differences: Sequence[float]) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test that `differences` are
    centred on zero (zeros dropped; normal approximation with tie and continuity
    corrections); 1.0 when there is nothing to test."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 1.0
    ranks, tie_sizes = _average_ranks(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    mean = n * (n + 1) / 4
    variance = n * (n + 1) * (2 * n + 1) / 24 - float((tie_sizes ** 3 - tie_sizes).sum()) / 48
    if variance <= 0:
        return 1.0
    z = max(abs(w_plus - mean) - 0.5, 0.0) / math.sqrt(variance)
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
_KEY_FIELDS = ("label", "row", "description", "env", "num_threads")


def _fields(m: Measurement) -> dict:
    spec = m.task_spec
    return {"label": spec.label, "row": m.as_row_name, "description": spec.description,
            "env": spec.env, "num_threads": spec.num_threads}


def pair_measurements(
    baseline: Sequence[Measurement], candidate: Sequence[Measurement],
) -> tuple[list[tuple[str, Measurement, Measurement]], list[str], list[str]]:
    """Pair each baseline task with the candidate task that measures the same thing.

    Tasks match on label, row (sub_label, else stmt), description, env and thread
    count, except for a field that names the side: one that holds a single value on
    each side and differs between them (env="before" / env="after", or an ops file's
    name as description). Replicates of one task on one side are pooled.
    Returns (name, baseline, candidate) triples in the baseline's order, and the names
    of the tasks found on only one side.
    """
    fields_a = [_fields(m) for m in baseline]
    fields_b = [_fields(m) for m in candidate]
    side_tags = {
        name for name in _KEY_FIELDS
        if len({f[name] for f in fields_a}) == 1 and len({f[name] for f in fields_b}) == 1
        and fields_a[0][name] != fields_b[0][name]
    } if fields_a and fields_b else set()
    key_fields = [name for name in _KEY_FIELDS if name not in side_tags]
    varied_threads = len({f["num_threads"] for f in fields_a + fields_b}) > 1

    def name_of(f: dict) -> str:
        parts = [str(f[k]) for k in ("label", "row", "description", "env")
                 if k in key_fields and f[k] not in (None, "")]
        if varied_threads and "num_threads" in key_fields:
            parts.append(f"{f['num_threads']} thread{'s' if f['num_threads'] > 1 else ''}")
        return " / ".join(dict.fromkeys(parts))  # a label equal to its row appears once

    def pooled(measurements, fields) -> dict[tuple, tuple[str, Measurement]]:
        groups: dict[tuple, tuple[str, list[Measurement]]] = {}
        for m, f in zip(measurements, fields, strict=True):
            key = tuple(f[k] for k in key_fields)
            groups.setdefault(key, (name_of(f), []))[1].append(m)
        return {key: (name, group[0] if len(group) == 1 else Measurement(
                    1, [t for m in group for t in m.times], group[0].task_spec))
                for key, (name, group) in groups.items()}

    side_a, side_b = pooled(baseline, fields_a), pooled(candidate, fields_b)
    pairs = [(name, m, side_b[key][1]) for key, (name, m) in side_a.items() if key in side_b]
    only_a = [name for key, (name, _) in side_a.items() if key not in side_b]
    only_b = [name for key, (name, _) in side_b.items() if key not in side_a]
    return pairs, only_a, only_b
