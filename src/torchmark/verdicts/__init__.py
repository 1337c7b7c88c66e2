"""The one comparison engine: two sides of a case -> a typed verdict (faster, slower,
same, unsure, unmeasured, failed) with its ratio, interval, drift and reason in one
line. `ab`, `compare`, the gate, the pytest plugin's baseline check, `timeit --vs` and
`regressions --confirm` all decide through `judge`; nothing else says faster or slower.
It sits on core/ and numpy only."""

from torchmark.verdicts.drift import Drift
from torchmark.verdicts.engine import DEFAULT_THRESHOLD, EXACT_METRICS, Side, judge
from torchmark.verdicts.verdict import FAILS_A_GATE, VERDICTS, CaseVerdict, Verdict

__all__ = ["DEFAULT_THRESHOLD", "EXACT_METRICS", "FAILS_A_GATE", "VERDICTS", "CaseVerdict",
           "Drift", "Side", "Verdict", "judge"]
