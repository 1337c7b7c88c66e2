"""The typed verdict on one case's two sides: what was decided, on which figures, and
why, in one line."""

from __future__ import annotations

import dataclasses
import math

from torchmark.verdicts.drift import Drift

# the kinds, in the order a summary lists them
VERDICTS = ("slower", "failed", "unmeasured", "unsure", "faster", "same")
FAILS_A_GATE = ("slower", "failed", "unmeasured")  # unmeasured: unless allowed


@dataclasses.dataclass(frozen=True)
class Verdict:
    """`kind`: one of VERDICTS. `ratio` is candidate / baseline; `low`..`high` its
    interval from the samples alone (at `confidence`; the ratio itself for exact
    counts), `lower`..`upper` that interval widened by `drift`, which decides.
    `threshold`: the smallest relative change that counts. `p_value`: of the test
    beside the interval (nan where there is none). `method`: how the ratio was formed;
    `reason`: the decision in one line; `shift`: the common change of the runs compared,
    which widened the interval as drift does."""

    kind: str
    ratio: float
    low: float
    high: float
    lower: float
    upper: float
    drift: Drift
    threshold: float
    confidence: float
    method: str
    reason: str
    p_value: float = math.nan
    shift: float = 0.0  # the common change (log) of the runs compared, part of the drift

    def __post_init__(self) -> None:
        if self.kind not in VERDICTS:
            raise ValueError(f"Verdict: kind must be one of {', '.join(VERDICTS)}, got "
                             f"{self.kind!r}")

    @property
    def change(self) -> float:
        """The relative change: -0.2 is 20% less (time, instructions, bytes)."""
        return self.ratio - 1.0

    @property
    def measured(self) -> bool:
        """Whether a ratio with an interval was formed (not unmeasured, not failed)."""
        return self.kind not in ("unmeasured", "failed")

    def interval(self) -> str:
        """The interval that decided, as relative changes: "[+1.2%, +9.8%]"; "-" when
        no ratio was formed."""
        return f"[{_pct(self.lower)}, {_pct(self.upper)}]" if self.measured else "-"

    def to_dict(self) -> dict[str, object]:
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {"verdict": self.kind, "ratio": finite(self.ratio), "ci_low": finite(self.low),
                "ci_high": finite(self.high), "lower": finite(self.lower),
                "upper": finite(self.upper), "drift": finite(self.drift.value),
                "drift_source": self.drift.source, "threshold": self.threshold,
                "confidence": self.confidence, "p_value": finite(self.p_value),
                "shift": self.shift, "method": self.method, "reason": self.reason}


def _pct(ratio: float) -> str:
    """A ratio as a relative change: 1.05 -> "+5.0%"."""
    if math.isnan(ratio):
        return "?"
    return "+inf" if ratio == math.inf else f"{ratio - 1:+.1%}"


@dataclasses.dataclass(frozen=True)
class CaseVerdict:
    """One case's verdict with what a table shows beside it: the case's id and title,
    the metric and its unit, and the two sides' medians (in the unit; nan for a side
    without samples), or their means where `means` (a side holds only the statistics
    another tool's file stated: the verdict compares means then)."""

    case_id: str
    title: str
    metric: str
    unit: str
    baseline: float
    candidate: float
    verdict: Verdict
    means: bool = False

    @property
    def kind(self) -> str:
        return self.verdict.kind
