"""Same seed, same cases: torchmark's Fuzzer against torch.utils.benchmark's."""

from __future__ import annotations

import pytest
import torch

import torchmark
from torchmark.fuzzing.catalog import example_fuzzer


def torch_example_fuzzer(seed):
    from torch.utils import benchmark as tb

    return tb.Fuzzer(
        parameters=[tb.FuzzedParameter("k0", minval=1, maxval=10000, distribution="loguniform"),
                    tb.FuzzedParameter("k1", minval=1, maxval=10000, distribution="loguniform")],
        tensors=[tb.FuzzedTensor("x", size=("k0", "k1"), min_elements=128,
                                 max_elements=10000000, probability_contiguous=0.6)],
        seed=seed)


@pytest.mark.parametrize("seed", range(10))
def test_tutorial_fuzzer_identical_to_torch(seed):
    ours, theirs = example_fuzzer(seed), torch_example_fuzzer(seed)
    # each take() seeds the global torch generator: draw one run completely, then the other
    ours_cases, theirs_cases = list(ours.take(10)), list(theirs.take(10))
    for (t1, p1, q1), (t2, p2, q2) in zip(ours_cases, theirs_cases, strict=True):
        assert q1 == q2
        assert torch.equal(t1["x"], t2["x"]) and t1["x"].stride() == t2["x"].stride()
        a, b = p1["x"], p2["x"]
        assert (a["numel"], a["steps"], a["is_contiguous"], a["dtype"]) == (
            b["numel"], b["steps"], b["is_contiguous"], b["dtype"])
        assert list(a["order"]) == list(b["order"])
    assert ours.rejection_rate == theirs.rejection_rate


def test_tutorial_builtin_rows():
    """The recipe's BinaryOpFuzzer(seed=0) rows (which torch 2.13 cannot produce)."""
    rows = [(p["k0"], p["k1"], tp["x"]["is_contiguous"])
            for _, tp, p in torchmark.op_fuzzers.binary.BinaryOpFuzzer(seed=0).preview(9)]
    assert rows == [(64, 473, False), (16384, 12642115, False), (8192, 892, True),
                    (512, 64, False), (493, 27, False), (118, 32, False), (16, 495, False),
                    (488, 62374, True), (240372, 69, True)]


def test_torch_binary_op_fuzzer_is_broken_and_ours_works():
    from torch.utils.benchmark.op_fuzzers.binary import BinaryOpFuzzer as TorchBinary

    with pytest.raises(AssertionError, match="not normalized"):
        TorchBinary(seed=0)
    tensors, _, _ = next(torchmark.op_fuzzers.BinaryOpFuzzer(seed=0).take(1))
    assert set(tensors) == {"x", "y"}
