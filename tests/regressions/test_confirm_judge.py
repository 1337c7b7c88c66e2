"""regressions --confirm's judgement of fresh samples against the last good and the first
bad run (regressions/confirm.py judge)."""

from __future__ import annotations

import numpy as np

from torchmark.regressions.confirm import judge


def _level(median: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + 0.01 * rng.standard_normal(40)))


def test_fresh_samples_side_with_the_run_they_measure_like():
    good, bad = _level(1.0, 1), _level(1.5, 2)
    assert judge(_level(1.5, 3), good, bad, "wall")[0] == "confirmed"
    assert judge(_level(1.0, 4), good, bad, "wall")[0] == "not-confirmed"


def test_a_change_still_there_is_never_not_confirmed_for_an_outlying_first_bad_run():
    """The first bad run an outlier (2.2 x the last good), the new level 1.28 x: still
    slower than the last good run beyond the drift, so the change is there; it read
    not-confirmed for being nearer the last good run than the first bad one."""
    verdict, why = judge(_level(1.28, 5), _level(1.0, 6), _level(2.2, 7), "wall")
    assert verdict == "unsure", why
    assert "against the last good run: slower" in why
