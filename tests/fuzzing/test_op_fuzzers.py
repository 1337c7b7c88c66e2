"""The built-in op fuzzers: shapes, limits, sparse properties."""

from __future__ import annotations

import math

import pytest
import torch

from torchmark import FuzzedParameter, FuzzedSparseTensor, Fuzzer
from torchmark.op_fuzzers import (
    BinaryOpFuzzer,
    BinaryOpSparseFuzzer,
    SpectralOpFuzzer,
    UnaryOpFuzzer,
    UnaryOpSparseFuzzer,
)
from torchmark.op_fuzzers.spectral import REGULAR_SIZES


@pytest.mark.parametrize("cls", [BinaryOpFuzzer, UnaryOpFuzzer, SpectralOpFuzzer])
def test_dense_fuzzers_respect_limits(cls):
    for tensors, props, _ in cls(seed=1).preview(50):
        x = tensors["x"]
        assert 4 * 1024 <= x.numel() <= 32 * 1024**2
        assert 1 <= x.dim() <= 3
        assert props["x"]["numel"] == x.numel()


def test_binary_y_broadcasts_against_x():
    for tensors, _, _ in BinaryOpFuzzer(seed=2).preview(50):
        x, y = tensors["x"], tensors["y"]
        assert torch.broadcast_shapes(x.shape, y.shape) == x.shape


def test_spectral_sizes_are_regular():
    for _, _, params in SpectralOpFuzzer(seed=0).preview(30):
        for i in range(params["ndim"]):
            assert params[f"k{i}"] in REGULAR_SIZES
    with pytest.raises(ValueError, match="probability_regular"):
        SpectralOpFuzzer(seed=0, probability_regular=2)


def test_small_real_cases_are_built():
    torch.manual_seed(0)
    tensors, _, _ = next(UnaryOpFuzzer(seed=4).take(1))
    assert tensors["x"].dtype == torch.float32


@pytest.mark.parametrize("cls", [UnaryOpSparseFuzzer, BinaryOpSparseFuzzer])
def test_sparse_fuzzers(cls):
    for tensors, props, params in cls(seed=5).take(4):
        for name, t in tensors.items():
            assert t.layout == torch.sparse_coo
            p = props[name]
            sparse_dim = min(params["sparse_dim"], params["dim_parameter"])
            assert t.sparse_dim() == sparse_dim == p["sparse_dim"]
            positions = math.prod(t.shape[:sparse_dim])
            assert p["nnz"] == math.ceil(positions * params["density"])
            assert t.is_coalesced() == params["coalesced"]
            if not params["coalesced"]:
                assert t._nnz() == 2 * p["nnz"]


def test_sparse_reads_the_parameter_names_it_is_given():
    f = Fuzzer(
        parameters=[FuzzedParameter("my_density", distribution={0.25: 1.0}),
                    FuzzedParameter("my_sd", distribution={1: 1.0}),
                    FuzzedParameter("my_coal", distribution={False: 1.0})],
        tensors=[FuzzedSparseTensor("s", (8, 4), sparse_dim="my_sd", density="my_density",
                                    coalesced="my_coal")],
        seed=0)
    tensors, props, _ = next(f.take(1))
    s = tensors["s"]
    assert s.sparse_dim() == 1 and s.dense_dim() == 1
    assert props["s"]["nnz"] == 2  # ceil(8 positions * 0.25), not ceil((8 + 4) * 0.25) = 3
    assert not s.is_coalesced()


def test_sparse_with_literal_nnz_and_errors():
    f = Fuzzer([], [FuzzedSparseTensor("s", (10, 10), nnz=7)], seed=0)
    tensors, props, _ = next(f.take(1))
    assert props["s"]["nnz"] == 7 and props["s"]["density"] == pytest.approx(0.07)
    with pytest.raises(ValueError, match="density or nnz"):
        FuzzedSparseTensor("s", (4,))
    f = Fuzzer([], [FuzzedSparseTensor("s", (4,), nnz=9)], seed=0)
    with pytest.raises(ValueError, match="nnz 9"):
        next(f.take(1))
    with pytest.raises(ValueError, match="density names unknown parameter 'dd'"):
        Fuzzer([], [FuzzedSparseTensor("s", (4,), density="dd")])


def test_sparse_preview_has_the_layout_of_take():
    from torchmark.op_fuzzers import UnaryOpSparseFuzzer

    fuzzer = UnaryOpSparseFuzzer(seed=0)
    for (real, _, _), (meta, _, _) in zip(fuzzer.take(2), fuzzer.preview(2), strict=True):
        x, y = real["x"], meta["x"]
        assert y.is_sparse and y.device.type == "meta" and y.shape == x.shape
        assert (y.sparse_dim(), y.is_coalesced()) == (x.sparse_dim(), x.is_coalesced())
        if not x.is_coalesced():  # every drawn position stored twice, as in torch
            assert y._nnz() == x._nnz()
