import math

import numpy as np

from torchmark.store.run_medians import RunMedians
from torchmark.verdicts.family import ratio_of, ratios_of, shifts_of, shifts_of_arrays


def test_two_runs_are_aligned_by_key_whatever_their_order():
    a = RunMedians([("c0", "wall"), ("c1", "wall"), ("c2", "wall")], np.array([1.0, 2.0, 3.0]))
    b = RunMedians([("c2", "wall"), ("c9", "wall"), ("c0", "wall")], np.array([6.0, 9.0, 2.0]))
    keys, base, cand = a.aligned(b)
    assert keys == [("c0", "wall"), ("c2", "wall")]
    assert base.tolist() == [1.0, 3.0] and cand.tolist() == [2.0, 6.0]
    same = RunMedians(list(a.keys), np.array([4.0, 5.0, 6.0]))
    keys, base, cand = a.aligned(same)
    assert keys == a.keys and cand.tolist() == [4.0, 5.0, 6.0]
    assert a.only({"c1"}).as_dict() == {("c1", "wall"): 2.0}
    assert RunMedians([("c", "wall")], np.array([math.nan])).as_dict() == {("c", "wall"): None}


def test_the_array_ratios_and_shifts_are_the_per_case_ones():
    rng = np.random.default_rng(0)
    base = np.concatenate([rng.lognormal(size=40), [0.0, -1.0, math.inf, math.nan, 2.0]])
    cand = np.concatenate([rng.lognormal(size=40), [1.0, 1.0, 1.0, 1.0, math.nan]])
    one_by_one = [ratio_of(None if math.isnan(x) else x, None if math.isnan(y) else y)
                  for x, y in zip(base.tolist(), cand.tolist(), strict=True)]
    arrays = ratios_of(base, cand)
    assert [None if math.isnan(r) else r for r in arrays.tolist()] == one_by_one
    metrics = ["wall", "device", "instructions"] * 15
    assert shifts_of_arrays(metrics, arrays) == shifts_of(zip(metrics, one_by_one, strict=True))
    assert set(shifts_of_arrays(metrics, arrays)) == {"wall", "device"}  # counts: no shift
