"""The verdict engine: each kind, the drift that widens every interval (and where it
comes from), and the promise that a change smaller than the drift is never a direction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from torchmark.verdicts import Drift, Side, judge
from torchmark.verdicts.drift import from_history, from_spreads, t_quantile


def lognormal(median: float, sigma: float, n: int, seed: int) -> list[float]:
    return list(median * np.exp(np.random.default_rng(seed).normal(0, sigma, n)))


def test_each_kind_with_its_reason():
    base = Side(lognormal(1e-5, 0.01, 40, 1))
    slower = judge(base, Side(lognormal(1.3e-5, 0.01, 40, 2)), threshold=0.05)
    assert slower.kind == "slower" and slower.lower > 1.05 ** 0 and slower.ratio > 1.25
    assert "beyond no change and the threshold of 5.0%" in slower.reason
    assert judge(Side(lognormal(1.3e-5, 0.01, 40, 2)), base).kind == "faster"
    same = judge(base, Side(lognormal(1e-5, 0.01, 40, 3)), threshold=0.2)
    assert same.kind == "same" and "within ±20.0%" in same.reason
    few = judge(base, Side([7e-5] * 3))
    assert few.kind == "unmeasured" and few.ratio == pytest.approx(7, rel=0.01)
    assert few.reason == "too few samples for an interval (40 and 3; 5 a side needed)"
    failed = judge(base, Side(failure="RuntimeError: boom"))
    assert failed.kind == "failed" and failed.reason == "the candidate failed: RuntimeError: boom"
    assert judge(Side(failure="x"), base).kind == "unmeasured"
    assert judge(Side([0.0] * 10), base).kind == "unmeasured"
    assert judge(base, Side([-1.0] * 10)).kind == "unmeasured"


def test_a_change_within_the_drift_is_unsure_never_a_direction():
    """Tight runs 4% apart: slower with no drift; unsure once two runs of the same code
    are known to differ by 10%."""
    a, b = Side(lognormal(1e-5, 0.002, 40, 4)), Side(lognormal(1.04e-5, 0.002, 40, 5))
    assert judge(a, b, threshold=0.03).kind == "slower"
    drifted = judge(a, b, threshold=0.03, drift=Drift(0.10, "history", "6 A/A pairs"))
    assert drifted.kind == "unsure" and drifted.lower < 1 < drifted.upper
    assert "within what two runs of the same code differ by" in drifted.reason
    assert "drift ±10.0% (6 A/A pairs)" in drifted.reason
    # the promise, over many drifts and changes: never a direction within the drift
    rng = np.random.default_rng(6)
    for _ in range(200):
        d, change = rng.uniform(0, 0.3), rng.uniform(-0.3, 0.3)
        v = judge(a, Side(lognormal(1e-5 * (1 + change), 0.002, 40, 7)), threshold=0.0,
                  drift=Drift(d, "given"))
        if v.kind in ("slower", "faster"):
            assert abs(math.log(v.ratio)) > math.log1p(d)


def test_exact_counts_have_no_sampling_error():
    up = judge(Side([1_000_000.0]), Side([1_008_000.0]), metric="instructions",
               threshold=0.005)
    assert up.kind == "slower" and up.low == up.high == pytest.approx(1.008)
    assert judge(Side([1e6]), Side([1.004e6]), metric="instructions",
                 threshold=0.005).kind == "same"
    zero = judge(Side([0.0]), Side([0.0]), metric="memory")
    assert zero.kind == "same" and zero.ratio == 1.0


def test_runs_over_processes_are_compared_by_their_medians():
    base = Side(lognormal(1e-5, 0.05, 50, 8), [1.0e-5, 1.05e-5, 1.1e-5, 1.15e-5, 1.2e-5],
                [0.01] * 5)
    cand = Side(lognormal(1.3e-5, 0.05, 50, 9), [1.3e-5, 1.36e-5, 1.43e-5, 1.5e-5, 1.56e-5],
                [0.01] * 5)
    v = judge(base, cand, threshold=0.05)
    assert v.kind == "slower" and v.method.startswith("Hodges-Lehmann ratio of 5 and 5")
    assert v.drift.source == "processes" and v.drift.value == pytest.approx(0.06)
    few = judge(Side(base.samples, [1.0, 1.1, 1.2]), Side(cand.samples, [1.3, 1.4, 1.5]))
    assert few.kind == "unmeasured" and "too few processes" in few.reason


def test_the_drift_from_history_and_from_spreads():
    assert from_history([0.01, -0.02]) is None  # too few pairs to believe
    wide = from_history([0.01, -0.02, 0.015])
    many = from_history([0.01, -0.02, 0.015] * 10)
    assert wide is not None and many is not None and wide.value > many.value > 0
    assert wide.source == "history" and "3 pairs" in wide.detail
    rms = math.sqrt((0.01 ** 2 + 0.02 ** 2 + 0.015 ** 2) / 3)
    assert many.value == pytest.approx(math.expm1(t_quantile(0.975, 30) * rms))
    spreads = from_spreads([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    assert spreads.value == pytest.approx(3 * 2 * (2 / 3)) and spreads.source == "spreads"


def test_a_history_of_few_pairs_is_no_narrower_than_the_sides_spreads():
    """Five A/A pairs taken in a quiet spell (about 0.3% apart) against two runs whose
    samples spread by about 4% (IQR / median) and differ by 11%, as a run on a busy
    machine does: the history alone would call that `slower`; the sides' drift keeps
    it `unsure`. A history of many pairs is believed as it is."""
    a, b = Side(lognormal(1e-5, 0.03, 200, 1)), Side(lognormal(1.11e-5, 0.03, 200, 2))
    quiet = [0.003, -0.002, 0.004, -0.003, 0.002]
    few = judge(a, b, threshold=0.03, drift=from_history(quiet))
    assert few.kind == "unsure" and few.drift.source == "spreads"
    assert "wider than the A/A history's" in few.drift.detail and "5 pairs" in \
        few.drift.detail
    many = judge(a, b, threshold=0.03, drift=from_history(quiet * 4))
    assert many.kind == "slower" and many.drift.source == "history"
    # a history wider than the spreads stays the history
    loud = judge(a, b, threshold=0.03, drift=from_history([0.2, -0.3, 0.25]))
    assert loud.kind == "unsure" and loud.drift.source == "history"


@pytest.mark.parametrize("df, expected", [(3, 3.182446), (5, 2.570582), (10, 2.228139),
                                          (30, 2.042272), (200, 1.971896)])
def test_t_quantiles_match_the_reference(df, expected):
    # scipy.stats.t.ppf(0.975, df)
    assert t_quantile(0.975, df) == pytest.approx(expected, rel=2e-3)


def test_same_sides_same_verdict_whoever_asks(tmp_path):
    """ab_test, the gate's compare_case and the engine agree on the same two sides."""
    from torchmark.compare.ab import ab_test
    from torchmark.core.result import Case, Result
    from torchmark.core.task_spec import TaskSpec
    from torchmark.regressions.gate import compare_case
    from torchmark.timing.measurement import Measurement

    case = Case(id="timeit:x", frontend="timeit", stmt="f()")
    for seed in range(20):
        a, b = lognormal(1e-5, 0.03, 30, seed), lognormal(1.06e-5, 0.03, 30, 100 + seed)
        engine = judge(Side(a), Side(b), threshold=0.03)
        ab = ab_test(Measurement(1, a, TaskSpec("f()", "pass")), Measurement(1, b, TaskSpec("f()", "pass")),
                     min_effect=0.03)
        gated = compare_case(Result(case=case, metric="wall", samples=tuple(a)),
                             Result(case=case, metric="wall", samples=tuple(b)), 0.03)
        assert engine.kind == ab.verdict == gated.kind, seed
        assert engine.reason == ab.judged.reason == gated.verdict.reason


def test_many_cases_at_once_family_wise_and_the_runs_common_shift():
    """Ten cases of two runs: each judged at 99.5% so the ten hold at 95%; a candidate
    run 30% slower as a whole is a disturbed run (its shift is drift), while one case
    that moved apart from the other nine still reads slower."""
    from torchmark.verdicts.family import Pair, common_shifts, each_confidence, judge_all

    assert each_confidence(0.95, 10) == pytest.approx(0.995)
    base = [Side(lognormal(1e-5, 0.01, 30, i)) for i in range(10)]
    shifted = [Side(lognormal(1.3e-5, 0.01, 30, 50 + i)) for i in range(10)]
    pairs = [Pair(i, b, c) for i, (b, c) in enumerate(zip(base, shifted, strict=True))]
    assert common_shifts(pairs)["wall"] == pytest.approx(math.log(1.3), abs=0.01)
    verdicts = judge_all(pairs, threshold=0.03)
    assert {v.kind for v in verdicts.values()} == {"unsure"}
    assert verdicts[0].confidence == pytest.approx(0.995)
    assert "the runs' common shift of +30" in verdicts[0].reason
    alone = [Side(lognormal(1e-5, 0.01, 30, 70 + i)) for i in range(9)] + \
        [Side(lognormal(1.5e-5, 0.01, 30, 79))]
    pairs = [Pair(i, b, c) for i, (b, c) in enumerate(zip(base, alone, strict=True))]
    verdicts = judge_all(pairs, threshold=0.03)
    assert verdicts[9].kind == "slower" and verdicts[0].kind != "slower"
    # the same ten cases one at a time, each at 95%: the same ratios, narrower intervals
    single = judge(base[9], alone[9], threshold=0.03)
    assert single.confidence == 0.95 and single.upper - single.lower < \
        verdicts[9].upper - verdicts[9].lower
    # exact counts have no common shift: a change to every case is a change
    counted = [Pair(i, Side([1e6]), Side([1.1e6]), "instructions") for i in range(6)]
    assert common_shifts(counted) == {} and \
        {v.kind for v in judge_all(counted, threshold=0.05).values()} == {"slower"}


def test_the_fast_quantiles_median_and_u_test_equal_numpy_s_and_the_rank_form():
    """linear_quantiles is np.quantile, sorted_median np.median, and the U test's count
    form (no ties) gives the p-value the rank form gives: bit for bit."""
    from torchmark.verdicts.intervals import (
        average_ranks,
        linear_quantiles,
        mann_whitney_p,
        sorted_median,
    )

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 7, 10, 31, 200, 2000):
        values = rng.lognormal(0, 0.3, n)
        qs = (0.0, 0.0125, 0.025, 0.5, 0.975, 0.9875, 1.0)
        assert linear_quantiles(values, qs) == [float(x) for x in np.quantile(values, qs)]
        assert sorted_median(np.sort(values)) == np.median(values)
    for n1, n2 in ((5, 5), (10, 30), (31, 7), (100, 100)):
        a, b = rng.lognormal(0, 0.1, n1), rng.lognormal(0.02, 0.1, n2)
        ranks, _ = average_ranks(np.concatenate([a, b]))
        u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
        variance = n1 * n2 / 12 * (n1 + n2 + 1)
        z = max(abs(u - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
        assert mann_whitney_p(a, b) == min(1.0, math.erfc(z / math.sqrt(2)))
