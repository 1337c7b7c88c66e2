"""BinaryOpFuzzer: pairs of tensors (x, y) for elementwise binary ops, with broadcasting."""

from __future__ import annotations

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.fuzzing.parameters import FuzzedParameter, ParameterAlias
from torchmark.op_fuzzers import _common as c

__all__ = ["BinaryOpFuzzer"]


class BinaryOpFuzzer(Fuzzer):
    """x of 1 to 3 dims (4K to 32M elements, sizes log-uniform or powers of two, sometimes
    strided, 75% contiguous); y of the same rank whose sizes are x's or 1 (broadcast).

    y is sliced with x's steps (as in torch); the y_step parameters are drawn but unused,
    which keeps the random stream, and so every seed's cases, identical to torch's."""

    def __init__(self, seed: int | None, dtype: torch.dtype = torch.float32,
                 cuda: bool = False) -> None:
        y_sizes = [
            FuzzedParameter(f"y_k{i}", distribution={ParameterAlias(f"k{i}"): 0.8, 1: 0.2},
                            strict=True)
            for i in range(3)
        ]
        super().__init__(
            parameters=[
                c.dim_parameter("dim"),
                *c.size_parameters([("k_any", 0.8), ("k_pow2", 0.2)]),
                y_sizes,
                c.step_parameters("x_", "y_"),
                c.random_value(),
            ],
            tensors=[
                c.dense_input("x", ("k0", "k1", "k2"), "x_", "dim", dtype, cuda),
                c.dense_input("y", ("y_k0", "y_k1", "y_k2"), "x_", "dim", dtype, cuda,
                              limit_elements=False),
            ],
            seed=seed,
        )
