"""FuzzedParameter and ParameterAlias: distributions, ranges, and bad input."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmark import FuzzedParameter, ParameterAlias


@settings(max_examples=100, deadline=None)
@given(lo=st.integers(-10**6, 10**6), width=st.integers(0, 10**6), seed=st.integers(0, 2**31))
def test_uniform_int_samples_in_range(lo, width, seed):
    p = FuzzedParameter("p", lo, lo + width, distribution="uniform")
    state = np.random.RandomState(seed)
    for _ in range(20):
        v = p.sample(state)
        assert isinstance(v, int) and lo <= v <= lo + width


@settings(max_examples=100, deadline=None)
@given(lo=st.floats(-1e6, 1e6), width=st.floats(0, 1e6), seed=st.integers(0, 2**31))
def test_uniform_float_samples_in_range(lo, width, seed):
    p = FuzzedParameter("p", lo, lo + width, distribution="uniform")
    state = np.random.RandomState(seed)
    for _ in range(20):
        assert lo <= p.sample(state) <= lo + width


@settings(max_examples=100, deadline=None)
@given(lo=st.integers(1, 10**6), factor=st.integers(1, 10**4), seed=st.integers(0, 2**31))
def test_loguniform_samples_in_range(lo, factor, seed):
    p = FuzzedParameter("p", lo, lo * factor, distribution="loguniform")
    state = np.random.RandomState(seed)
    for _ in range(20):
        v = p.sample(state)
        assert isinstance(v, int) and lo <= v <= lo * factor


def test_loguniform_is_uniform_in_log_space():
    p = FuzzedParameter("p", 1, 10000, distribution="loguniform")
    state = np.random.RandomState(0)
    decades = collections.Counter(len(str(p.sample(state))) for _ in range(4000))
    # four decades [1, 10), [10, 100), [100, 1000), [1000, 10000]: about 1000 each
    for digits in (1, 2, 3, 4):
        assert 850 < decades[digits] < 1150


@settings(max_examples=50, deadline=None)
@given(weights=st.lists(st.integers(1, 20), min_size=1, max_size=8), seed=st.integers(0, 2**31))
def test_every_dict_value_appears(weights, seed):
    total = sum(weights)
    dist = {f"v{i}": w / total for i, w in enumerate(weights)}
    p = FuzzedParameter("p", distribution=dist)
    state = np.random.RandomState(seed)
    seen = collections.Counter(p.sample(state) for _ in range(3000))
    assert set(seen) == set(dist)  # smallest probability is >= 1/160: all appear in 3000
    for value, prob in dist.items():
        assert abs(seen[value] / 3000 - prob) < 0.05


def test_dict_sampling_matches_numpy_choice():
    dist = {1: 0.3, 2: 0.4, 3: 0.3}
    p = FuzzedParameter("p", distribution=dist)
    a, b = np.random.RandomState(7), np.random.RandomState(7)
    ours = [p.sample(a) for _ in range(500)]
    theirs = [list(dist)[b.choice(np.arange(3), p=tuple(dist.values()))] for _ in range(500)]
    assert ours == theirs


def test_alias_is_returned_unresolved():
    alias = ParameterAlias("k")
    p = FuzzedParameter("p", distribution={alias: 1.0})
    assert p.sample(np.random.RandomState(0)) is alias
    assert p.aliases == ["k"]
    assert repr(alias) == "ParameterAlias[alias_to: k]"


@pytest.mark.parametrize("kwargs, message", [
    ({"distribution": {1: 0.5, 2: 0.5}, "minval": 0}, "dict distribution cannot be combined"),
    ({"distribution": {1: 0.5, 2: 0.4}}, "sum to 1, they sum to 0.9"),
    ({"distribution": {1: 1.5, 2: -0.5}}, "must be a number >= 0"),
    ({"distribution": {}}, "empty"),
    ({"distribution": "gaussian", "minval": 0, "maxval": 1}, "unknown distribution 'gaussian'"),
    ({"distribution": None, "minval": 0, "maxval": 1}, "unknown distribution None"),
    ({"distribution": "uniform", "minval": 0}, "needs maxval"),
    ({"distribution": "uniform", "minval": 5, "maxval": 1}, "greater than maxval"),
    ({"distribution": "loguniform", "minval": 0, "maxval": 10}, "minval > 0"),
    ({"distribution": "uniform", "minval": "a", "maxval": 1}, "finite number"),
])
def test_bad_parameters_raise_value_error_naming_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        FuzzedParameter("size_k", **kwargs)
    assert "'size_k'" in str(info.value)


def test_alias_target_must_be_a_name():
    with pytest.raises(ValueError, match="parameter name"):
        ParameterAlias(3)
