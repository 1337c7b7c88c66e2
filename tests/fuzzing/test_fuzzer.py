"""Fuzzer: reproducibility, constraints, layouts, previews and errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmark import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias
from torchmark.fuzzing.catalog import example_fuzzer


def shapes_and_params(fuzzer, n):
    return [({k: (tuple(v.shape), v.stride()) for k, v in t.items()}, p)
            for t, _, p in fuzzer.take(n)]


def test_same_seed_same_cases_other_seeds_differ():
    a = list(example_fuzzer(5).take(5))
    b = list(example_fuzzer(5).take(5))
    for (ta, _, qa), (tb, _, qb) in zip(a, b, strict=True):
        assert qa == qb and torch.equal(ta["x"], tb["x"])
    c = shapes_and_params(example_fuzzer(6), 5)
    assert c != shapes_and_params(example_fuzzer(5), 5)


def test_take_restarts_from_the_seed():
    f = example_fuzzer(1)
    assert shapes_and_params(f, 3) == shapes_and_params(f, 3)


def test_tutorial_first_case():
    tensors, properties, params = next(example_fuzzer(0).take(1))
    assert params == {"k0": 725, "k1": 257}
    x = tensors["x"]
    assert x.shape == (725, 257)
    assert [round(v, 4) for v in x[0, :3].tolist()] == [0.7821, 0.0536, 0.9888]
    assert properties["x"]["is_contiguous"] and properties["x"]["numel"] == 186325
    assert list(properties["x"]["order"]) == [0, 1] and properties["x"]["steps"] == (1, 1)


def test_constraints_are_honoured():
    f = Fuzzer(
        parameters=[FuzzedParameter("a", 1, 100, distribution="uniform"),
                    FuzzedParameter("b", 1, 100, distribution="uniform")],
        tensors=[],
        constraints=[lambda p: p["a"] < p["b"]],
        seed=0,
    )
    cases = [p for _, _, p in f.take(200)]
    assert all(p["a"] < p["b"] for p in cases)
    assert 0.3 < f.rejection_rate < 0.7


def test_element_limits_are_honoured():
    f = Fuzzer(parameters=[FuzzedParameter("n", 1, 1000, distribution="uniform")],
               tensors=[FuzzedTensor("x", ("n", 4), min_elements=400, max_elements=2000)], seed=3)
    for tensors, _, _ in f.take(100):
        assert 400 <= tensors["x"].numel() <= 2000


def test_contiguous_fraction_close_to_probability():
    f = Fuzzer(parameters=[FuzzedParameter("n", 2, 8, distribution="uniform")],
               tensors=[FuzzedTensor("x", ("n", "n", 3), probability_contiguous=0.3)], seed=11)
    flags = [props["x"]["is_contiguous"] for _, props, _ in f.preview(1000)]
    assert abs(sum(flags) / 1000 - 0.3) < 0.05


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_preview_matches_take(seed):
    f = Fuzzer(
        parameters=[FuzzedParameter("a", 1, 64, distribution="loguniform"),
                    FuzzedParameter("s", distribution={1: 0.5, 2: 0.5})],
        tensors=[FuzzedTensor("x", ("a", "a", 2), steps=("s", 1, "s"))], seed=seed)
    assert shapes_and_params(f, 3) == [
        ({k: (tuple(v.shape), v.stride()) for k, v in t.items()}, p) for t, _, p in f.preview(3)]


def test_steps_make_strided_views():
    f = Fuzzer(parameters=[], tensors=[FuzzedTensor("x", (4, 8), steps=(1, 4),
                                                    probability_contiguous=1.0)], seed=0)
    x = next(f.take(1))[0]["x"]
    assert x.shape == (4, 8) and x.stride() == (32, 4)


def test_dim_parameter_truncates_and_pads():
    f = Fuzzer(parameters=[FuzzedParameter("d", distribution={1: 0.5, 4: 0.5})],
               tensors=[FuzzedTensor("x", (3, 5), dim_parameter="d")], seed=0)
    shapes = {tuple(t["x"].shape) for t, _, _ in f.take(30)}
    assert shapes == {(3,), (3, 5, 1, 1)}


def test_roll_parameter_rotates_dimensions():
    f = Fuzzer(parameters=[FuzzedParameter("r", distribution={0: 0.5, 1: 0.5})],
               tensors=[FuzzedTensor("x", (2, 3, 7), roll_parameter="r")], seed=0)
    seen = {(p["r"], tuple(t["x"].shape)) for t, _, p in f.take(40)}
    assert seen == {(0, (2, 3, 7)), (1, (7, 2, 3))}


def test_aliases_resolve_in_chains():
    f = Fuzzer(parameters=[FuzzedParameter("a", 5, 50, distribution="uniform"),
                           FuzzedParameter("b", distribution={ParameterAlias("a"): 1.0}),
                           FuzzedParameter("c", distribution={ParameterAlias("b"): 1.0})],
               tensors=[], seed=0)
    for _, _, p in f.take(10):
        assert p["a"] == p["b"] == p["c"]


def test_strict_parameters_keep_their_draw_during_rejections():
    f = Fuzzer(parameters=[FuzzedParameter("dim", distribution={1: 0.5, 3: 0.5}, strict=True),
                           FuzzedParameter("n", 1, 100, distribution="uniform")],
               tensors=[FuzzedTensor("x", ("n", "n", "n"), dim_parameter="dim",
                                     max_elements=1000)], seed=0)
    dims = [p["dim"] for _, _, p in f.take(400)]
    # without strict, rejections of large 3-d cases would push dim=1 far above 50%
    assert 0.4 < dims.count(1) / 400 < 0.6


def test_integer_dtype_and_custom_constructor():
    f = Fuzzer(parameters=[], tensors=[FuzzedTensor("i", (16,), dtype=torch.int32)], seed=0)
    t = next(f.take(1))[0]["i"]
    assert t.dtype == torch.int32 and int(t.min()) >= 1 and int(t.max()) < 127
    made = []

    def zeros(size, dtype, **params):
        made.append(params)
        return torch.zeros(size, dtype=dtype)

    f = Fuzzer(parameters=[FuzzedParameter("n", 2, 4, distribution="uniform")],
               tensors=[FuzzedTensor("z", ("n",), tensor_constructor=zeros)], seed=0)
    z = next(f.take(1))[0]["z"]
    assert not z.any() and "n" in made[0]


@pytest.mark.parametrize("build, message", [
    (lambda: Fuzzer([FuzzedParameter("a", distribution={ParameterAlias("b"): 1.0}),
                     FuzzedParameter("b", distribution={ParameterAlias("a"): 1.0})], []),
     "ParameterAlias cycle: a -> b -> a"),
    (lambda: Fuzzer([FuzzedParameter("a", distribution={ParameterAlias("zz"): 1.0})], []),
     "'a' aliases unknown parameter 'zz'"),
    (lambda: Fuzzer([FuzzedParameter("k", 1, 2, distribution="uniform")],
                    [FuzzedTensor("x", ("k", "m"))]),
     "tensor 'x' size names unknown parameter 'm'"),
    (lambda: Fuzzer([], [FuzzedTensor("x", (2,), dim_parameter="d")]),
     "dim_parameter names unknown parameter 'd'"),
    (lambda: Fuzzer([FuzzedParameter("x", 1, 2, distribution="uniform")],
                    [FuzzedTensor("x", (2,))]), "both a parameter and a tensor: x"),
    (lambda: Fuzzer([FuzzedParameter("a", 1, 2, distribution="uniform")] * 2, []),
     "duplicate parameter name"),
    (lambda: Fuzzer(["a"], []), "parameters\\[0\\]"),
    (lambda: Fuzzer([], [], constraints=[3]), "not callable"),
    (lambda: Fuzzer([], [], seed=-1), "seed"),
    (lambda: FuzzedTensor("x", (2,), probability_contiguous=1.5), "probability_contiguous"),
    (lambda: FuzzedTensor("x", 5), "size must be a tuple"),
    (lambda: FuzzedTensor("x", (2, 2.5)), "entries must be ints"),
    (lambda: FuzzedTensor("x", (2,), min_elements=10, max_elements=5), "exceeds max_elements"),
])
def test_bad_definitions(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_constraints_rejecting_everything():
    f = Fuzzer([FuzzedParameter("a", 1, 10, distribution="uniform")], [],
               constraints=[lambda p: p["a"] > 100], seed=0)
    with pytest.raises(ValueError, match=r"no valid parameters in 1000 draws .*constraint 0"):
        next(f.take(1))


def test_size_limits_rejecting_everything():
    f = Fuzzer([FuzzedParameter("a", 1, 10, distribution="uniform")],
               [FuzzedTensor("x", ("a",), min_elements=100)], seed=0)
    with pytest.raises(ValueError, match="tensor 'x' size limits: 1000"):
        next(f.take(1))


def test_take_rejects_bad_n():
    with pytest.raises(ValueError, match="non-negative int"):
        example_fuzzer(0).take(-1)


def test_bool_and_complex_tensors_build_dense_and_sparse():
    # torch's own draws fail for these: randint(1, 127) on bool, randint on complex sparse
    from torchmark.fuzzing.sparse import FuzzedSparseTensor

    dense = Fuzzer([], [FuzzedTensor("b", size=(8,), dtype=torch.bool)], seed=0)
    (tensors, _, _), = dense.take(1)
    assert tensors["b"].dtype == torch.bool and set(tensors["b"].tolist()) <= {False, True}
    for dtype, coalesced in ((torch.complex64, True), (torch.int32, False)):
        sparse = Fuzzer([], [FuzzedSparseTensor("s", size=(6, 6), sparse_dim=1, nnz=3,
                                                coalesced=coalesced, dtype=dtype)], seed=0)
        (tensors, _, _), = sparse.take(1)
        assert tensors["s"].dtype == dtype and tensors["s"].is_sparse


def test_a_complex_element_counts_both_its_parts_against_the_allocation_limit():
    fits = FuzzedTensor("x", size=(100,), dtype=torch.complex128, max_allocation_bytes=1600)
    too_big = FuzzedTensor("x", size=(101,), dtype=torch.complex128, max_allocation_bytes=1600)
    assert fits.satisfies_constraints({}) and not too_big.satisfies_constraints({})


@pytest.mark.parametrize("spec, params, message", [
    (dict(size=(-2, 3)), {}, "size entries must be >= 0, got -2"),
    (dict(size=(4,), steps=(0,)), {}, "steps entries must be >= 1, got 0"),
    (dict(size=("n", 3)), {"n": -1}, "size parameter 'n' must be an int >= 0, got -1"),
    (dict(size=("n",)), {"n": 2.5}, "size parameter 'n' must be an int >= 0, got 2.5"),
    (dict(size=(4,), steps=("s",)), {"s": 0}, "steps parameter 's' must be an int >= 1"),
    (dict(size=(4, 4), dim_parameter="d"), {"d": -1}, "dim parameter 'd' must be an int >= 0"),
])
def test_sizes_steps_and_dims_are_checked_and_named(spec, params, message):
    with pytest.raises(ValueError, match="FuzzedTensor 'x': " + message.replace(".", r"\.")):
        FuzzedTensor("x", **spec).satisfies_constraints(params)
