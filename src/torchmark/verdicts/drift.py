"""How far two runs of the same code differ on a machine (the drift a verdict allows
for), estimated from what is at hand, best first:

- `from_history`: the case's own A/A history, the ratios of consecutive runs of one
  build on one machine (what `torchmark calibrate` adds to the store): the drift is the
  bound that `confidence` of such ratios stay within (a t quantile of their root mean
  square on the log scale, so a handful of pairs gives a wider bound than many);
- `from_processes`: runs timed over several fresh processes, whose comparison is already
  by the processes' medians: SEQUENTIAL_SPREADS times the median process's own spread,
  each side;
- `from_spreads`: SEQUENTIAL_SPREADS times the sum of the two runs' spreads (IQR /
  median): on a 2-core machine with a busy core, two runs of one statement a moment
  apart differed by 2 to 75% while each run's IQR was 1 to 70% of its median.

Both take SEQUENTIAL_SPREADS at 95% and scale it with the normal quantile at a higher
confidence (a case judged among many: verdicts/family.py).

Paired samples (interleaved blocks) and exact counts have no drift of their own:
`NONE_PAIRED`, `NONE_EXACT`."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

SEQUENTIAL_SPREADS = 3.0
MIN_HISTORY_PAIRS = 3  # A/A pairs of runs the history needs before it is believed
FEW_HISTORY_PAIRS = 8  # under this many, the drift says its bound is wide for want of them
SOURCES = ("history", "processes", "spreads", "paired", "exact", "given")


@dataclasses.dataclass(frozen=True)
class Drift:
    """The relative change two runs of the same code may show (0.05: 5% either way) and
    where the figure comes from (`source`, one of SOURCES; `detail` for people)."""

    value: float
    source: str
    detail: str = ""
    pairs: int | None = None  # of an A/A history: the pairs of runs it was read from

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"Drift: source must be one of {', '.join(SOURCES)}, got "
                             f"{self.source!r}")
        if not self.value >= 0:  # nan too
            raise ValueError(f"Drift: value must be a number >= 0, got {self.value!r}")

    def describe(self) -> str:
        """"±4.2% (A/A history: 6 pairs of runs)", "none (paired blocks)"."""
        if self.value == 0:
            return f"none ({self.detail or self.source})"
        return f"±{self.value:.1%} ({self.detail or self.source})"


NONE_PAIRED = Drift(0.0, "paired", "paired blocks, interleaved")
NONE_EXACT = Drift(0.0, "exact", "exact counts")


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (Cornish-Fisher expansion around the normal's: within 0.1%
    of the exact value from 3 degrees of freedom up), without scipy."""
    z = statistics.NormalDist().inv_cdf(p)
    terms = ((z ** 3 + z) / 4,
             (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(g / df ** (k + 1) for k, g in enumerate(terms))


def from_history(log_ratios: Sequence[float], confidence: float = 0.95,
                 detail: str = "") -> Drift | None:
    """The drift that A/A pairs of runs show: `log_ratios` are log(later / earlier) of
    consecutive runs of one build; None with fewer than MIN_HISTORY_PAIRS."""
    values = [x for x in log_ratios if math.isfinite(x)]
    if len(values) < MIN_HISTORY_PAIRS:
        return None
    rms = math.sqrt(math.fsum(x * x for x in values) / len(values))
    bound = t_quantile((1 + confidence) / 2, len(values)) * rms
    few = "; few: a wide bound, which more rounds (`torchmark calibrate`) narrow" \
        if len(values) < FEW_HISTORY_PAIRS else ""
    return Drift(math.expm1(min(bound, 700.0)), "history",
                 detail or f"A/A history: {len(values)} pairs of runs of one build{few}",
                 len(values))


def at_least_estimate(given: Drift | None, estimate: Drift) -> Drift:
    """The drift a verdict allows for: the caller's (`given`), else the sides' own
    `estimate`; an A/A history of fewer than FEW_HISTORY_PAIRS pairs is no narrower
    than the estimate (a few runs in a quiet spell would otherwise let the next busy
    one through: an A/A pair +11.4% apart read `slower` over a history of 5 pairs)."""
    if given is None:
        return estimate
    if given.source == "history" and given.pairs is not None \
            and given.pairs < FEW_HISTORY_PAIRS and estimate.value > given.value:
        return dataclasses.replace(estimate, detail=(
            f"{estimate.detail or estimate.source}, wider than the A/A history's "
            f"±{given.value:.1%} from {given.pairs} pairs of runs"))
    return given


def _factor(confidence: float) -> float:
    """SEQUENTIAL_SPREADS at 95%, scaled with the normal quantile at other confidences
    (a case of ten judged at 99.5% gets 1.5 times as wide a drift)."""
    normal = statistics.NormalDist()
    return SEQUENTIAL_SPREADS * normal.inv_cdf((1 + confidence) / 2) / normal.inv_cdf(0.975)


def from_spreads(baseline: Sequence[float], candidate: Sequence[float],
                 confidence: float = 0.95) -> Drift:
    """SEQUENTIAL_SPREADS times the sum of the two runs' spreads (IQR / median), at 95%
    (wider at a higher `confidence`)."""
    return from_spread_values(_spread(baseline), _spread(candidate), confidence,
                              "the two runs' spreads")


def from_spread_values(baseline: float, candidate: float, confidence: float = 0.95,
                       what: str = "the two runs' stated spreads") -> Drift:
    """from_spreads for two runs whose spreads (IQR / median) are known but not their
    samples (the statistics another tool's file stated)."""
    factor = _factor(confidence)
    return Drift(factor * (baseline + candidate), "spreads", f"{factor:.3g} x {what}")


def from_processes(baseline_spreads: Sequence[float], candidate_spreads: Sequence[float],
                   confidence: float = 0.95) -> Drift:
    """SEQUENTIAL_SPREADS times the median process's own spread (IQR / median), each
    side summed, at 95% (wider at a higher `confidence`): the lottery that sets a
    process's speed is already in the comparison by processes. Without the spreads
    (files from before they were kept), none beyond that."""
    if not (baseline_spreads and candidate_spreads):
        return Drift(0.0, "processes", "the processes' medians as replicates")
    factor = _factor(confidence)
    spread = sum(statistics.median(s) for s in (baseline_spreads, candidate_spreads))
    return Drift(factor * spread, "processes", f"{factor:.3g} x the median process's spread")


def _spread(samples: Sequence[float]) -> float:
    """IQR / median of samples (inf for a median of 0)."""
    values = sorted(samples)
    if len(values) < 2:
        return 0.0
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (q3 - q1) / median if median > 0 else math.inf
