"""Benchmarks kept beside the tests, measured by torchmark's pytest plugin.

    pytest                                   # measure, record in the store, show tables
    pytest --torchmark-disable               # a plain test run: each body once, untimed
    pytest --torchmark-baseline=latest --torchmark-fail-slower=5%   # a CI gate
"""

import pytest
import torch


def matmul(a, b):
    return a @ b


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [32, 128])
def test_matmul(torchmark, n, dtype):
    a = torch.randn(n, n, dtype=dtype)
    out = torchmark(matmul, a, a)  # measured; returns what matmul returned
    assert out.shape == (n, n)


@pytest.mark.torchmark(group="reductions", num_threads=2)
def test_softmax(torchmark):
    torchmark.timeit("torch.softmax(x, dim=-1)", setup="x = torch.randn(64, 256)")


@pytest.mark.torchmark(group="reductions")
def test_sum_whole_test():
    # no fixture: the whole test is the benchmark
    assert torch.ones(1024).sum().item() == 1024


def test_sort_fresh_input(torchmark):
    # pedantic: a fresh (untimed) input each round, since sort's input matters
    def fresh():
        return (torch.randn(4096),), {}

    out = torchmark.pedantic(torch.sort, setup=fresh, rounds=20, warmup_rounds=2)
    assert out.values.shape == (4096,)
