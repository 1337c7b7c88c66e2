"""Change-point detection on seeded series: steps found where they are, noise and
outliers left alone, metric-aware noise, raw-sample weighting, false-discovery-rate
selection and A/A calibration."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from torchmark.core.errors import UsageError
from torchmark.regressions import ChangePoint, Thresholds, calibrate, detect, select_fdr


def series(n: int, noise: float, *, seed: int, steps: dict[int, float] | None = None,
           level: float = 1e-3) -> np.ndarray:
    """n values around `level` with relative normal `noise`, times 1 + step from each
    index of `steps` on."""
    rng = np.random.default_rng(seed)
    values = level * (1 + noise * rng.standard_normal(n))
    for index, step in (steps or {}).items():
        values[index:] *= 1 + step
    return values


def test_clear_step_found_at_its_index_with_its_ratio():
    values = series(60, 0.01, seed=1, steps={30: 0.10})
    [change] = detect(values)
    assert change.index == 30
    assert change.before == pytest.approx(np.median(values[:30]))
    assert change.after == pytest.approx(np.median(values[30:]))
    assert change.ratio == pytest.approx(change.after / change.before)
    assert change.ratio == pytest.approx(1.10, abs=0.01)
    assert 1.08 < change.low < 1.10 < change.high < 1.12
    assert change.p_value < 1e-9
    assert change.direction() == "regression"
    assert change.direction(higher_is_worse=False) == "improvement"


def test_steps_up_and_down_found_in_order():
    values = series(120, 0.01, seed=2, steps={40: -0.2, 80: 0.05})
    found = detect(values)
    assert [c.index for c in found] == [40, 80]
    assert found[0].ratio == pytest.approx(0.8, abs=0.01)
    assert found[0].direction() == "improvement"
    assert found[1].ratio == pytest.approx(1.05, abs=0.01)


@pytest.mark.parametrize("seed", range(20))
def test_no_change_on_pure_noise(seed):
    rng = np.random.default_rng(100 + seed)
    assert detect(series(200, 0.03, seed=seed)) == []
    assert detect(1e-3 * np.exp(0.02 * rng.standard_t(3, 300))) == []


def test_a_single_outlier_is_no_change():
    for where in (1, 25, 48):
        values = series(50, 0.01, seed=3)
        values[where] *= 1.5
        assert detect(values) == []
        assert detect(values, alpha=0.5, min_effect=0.0) == []


def test_a_first_point_outlier_is_no_change():
    values = series(40, 0.01, seed=4)
    values[0] *= 2.0
    assert detect(values) == []
    values[0] /= 4.0
    assert detect(values) == []
    stepped = series(60, 0.01, seed=4, steps={30: 0.1})
    stepped[0] *= 2.0
    assert [c.index for c in detect(stepped)] == [30]


def test_a_half_percent_step_in_instruction_counts_is_a_change():
    counts = series(80, 0.0002, seed=5, steps={50: 0.005}, level=2e6)
    [change] = detect(counts, metric="instructions")
    assert change.index == 50
    assert change.ratio == pytest.approx(1.005, abs=0.0005)
    exact = np.repeat([1_000_000.0, 1_005_000.0], [30, 10])
    [change] = detect(exact, metric="instructions")
    assert (change.index, change.ratio) == (30, pytest.approx(1.005))
    # the same step read as a wall time is below the 1% a time needs
    assert detect(counts, metric="wall") == []


@pytest.mark.parametrize("seed", range(10))
def test_a_half_percent_step_in_three_percent_wall_noise_is_not_claimed(seed):
    assert detect(series(200, 0.03, seed=seed, steps={100: 0.005})) == []


def test_a_run_with_widely_spread_samples_weighs_less():
    rng = np.random.default_rng(6)
    values = series(40, 0.005, seed=6, steps={30: 0.04})
    tight = [tuple(v * (1 + 0.005 * rng.standard_normal(20))) for v in values]
    assert [c.index for c in detect(values)] == [30]
    assert [c.index for c in detect(values, samples=tight)] == [30]
    # the ten runs after the step spread 30% around their medians: too little evidence
    wide = [*tight[:30], *(tuple(v * np.exp(0.3 * rng.standard_normal(20)))
                           for v in values[30:])]
    assert detect(values, samples=wide) == []
    # a run without samples takes the others' typical spread
    assert [c.index for c in detect(values, samples=[*tight[:-1], ()])] == [30]


def change(p: float) -> ChangePoint:
    return ChangePoint(index=10, before=1.0, after=1.1, ratio=1.1, p_value=p, low=1.05,
                       high=1.15)


def test_fdr_keeps_the_changes_benjamini_hochberg_keeps():
    found = [[change(1e-6)], [change(0.02)], [], [change(0.04)]]
    # four hypotheses: 1e-6 <= 0.0125, 0.02 <= 0.025, 0.04 > 0.0375
    assert select_fdr(found, q=0.05) == [[change(1e-6)], [change(0.02)], [], []]
    assert select_fdr(found, q=0.2) == found
    # a thousand more series checked without finding anything: only the strongest stays
    many = found + [[] for _ in range(1000)]
    assert select_fdr(many, q=0.05)[:4] == [[change(1e-6)], [], [], []]
    keyed = {"a": [change(0.03)], "b": [change(0.001), change(0.5)]}
    assert select_fdr(keyed, q=0.05) == {"a": [change(0.03)], "b": [change(0.001)]}
    assert select_fdr([[], []]) == [[], []]
    with pytest.raises(UsageError, match="q"):
        select_fdr(found, q=0)


def hopping(n: int, noise: float, hop: float, seed: int) -> np.ndarray:
    """A/A series: one build, normal noise, and a machine that now and then runs `hop`
    slower for a while (a level the same build takes, no change of the code)."""
    rng = np.random.default_rng(seed)
    values = 1e-3 * (1 + noise * rng.standard_normal(n))
    for start in rng.choice(n - 20, 2, replace=False):
        values[start:start + 15] *= 1 + hop
    return values


def test_calibration_raises_thresholds_for_noisier_series():
    quiet = [series(100, 0.005, seed=s) for s in range(10)]
    noisy = [series(100, 0.03, seed=s) for s in range(10)]
    hops = [hopping(100, 0.005, 0.03, seed=s) for s in range(10)]
    calm, loud, jumpy = calibrate(quiet), calibrate(noisy), calibrate(hops)
    default = Thresholds.for_metric("wall")
    assert calm.min_effect == default.min_effect
    assert calm.noise_floor == pytest.approx(0.005, rel=0.3)
    assert loud.noise_floor == pytest.approx(0.03, rel=0.3)
    assert loud.noise_floor > calm.noise_floor
    # the machine's 3% levels are false alarms: calibrated, a change needs more than them
    assert jumpy.min_effect > 0.03
    suspect = hopping(100, 0.005, 0.03, seed=99)
    assert detect(suspect) != []
    assert detect(suspect, thresholds=jumpy) == []
    assert [c.index for c in detect(series(100, 0.005, seed=7, steps={50: 0.08}),
                                    thresholds=jumpy)] == [50]


def test_calibrated_noise_floor_applies_to_a_series_that_looks_quieter():
    quiet_now = series(12, 0.001, seed=8, steps={6: 0.02})
    assert [c.index for c in detect(quiet_now)] == [6]
    loud = calibrate([series(100, 0.03, seed=s) for s in range(5)])
    assert detect(quiet_now, thresholds=loud) == []


def test_short_series_and_bad_input():
    assert detect([]) == []
    assert detect([1.0, 2.0, 1.0, 2.0, 1.0]) == []
    with pytest.raises(UsageError, match="values"):
        detect([1.0, -1.0] * 10)
    with pytest.raises(UsageError, match="values"):
        detect([1.0, float("nan")] * 10)
    with pytest.raises(UsageError, match="samples"):
        detect([1.0] * 10, samples=[[1.0]] * 9)
    with pytest.raises(UsageError, match="alpha"):
        detect([1.0] * 10, alpha=0)
    with pytest.raises(UsageError, match="aa_series"):
        calibrate([[1.0, 2.0]])


def test_importing_the_package_loads_no_numerics():
    code = ("import sys, torchmark.regressions; "
            "print(sorted(m for m in ('numpy', 'scipy', 'ruptures') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_p_values_allow_for_the_choice_of_the_split():
    from torchmark.regressions.noise import prepare
    from torchmark.regressions.significance import split_test

    small = 0
    for seed in range(100):
        prep = prepare(series(100, 0.02, seed=seed), None, 1e-3)
        best = min(split_test(prep, 0, cut, 100, 4).p_value for cut in range(4, 97))
        small += best <= 0.05
    assert small <= 8  # the best of 93 splits of pure noise: p <= 0.05 in 5% of series


def test_samples_that_are_not_positive_are_left_out():
    from torchmark.regressions.noise import run_errors

    good = [(1.0, 1.1, 0.9, 1.05)] * 3
    errors = run_errors([*good, (0.0, -1.0, float("nan"), 1.0, 1.1, 0.9, 1.05)], 4)
    assert np.isfinite(errors).all()
    assert errors[3] == pytest.approx(errors[0])  # the same four usable samples
    assert run_errors([(1.0,), (), (2.0, 2.0)], 3).tolist() == [0.0, 0.0, 0.0]


def test_the_ratio_interval_covers_the_true_ratio_95_percent_of_the_time():
    rng = np.random.default_rng(9)
    covered = found = 0
    for _ in range(300):
        n = int(rng.integers(30, 200))
        cut = int(rng.integers(10, n - 10))
        values = 1e-3 * (1 + 0.01 * rng.standard_normal(n))
        values[cut:] *= 1.08
        changes = detect(values)
        if [c.index for c in changes] == [cut]:
            found += 1
            covered += changes[0].low < 1.08 < changes[0].high
    assert found >= 290
    assert 0.91 <= covered / found <= 0.99
