"""UnaryOpFuzzer: single tensors x for elementwise unary ops."""

from __future__ import annotations

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.op_fuzzers import _common as c

__all__ = ["UnaryOpFuzzer"]


class UnaryOpFuzzer(Fuzzer):
    """x of 1 to 3 dims, 4K to 32M elements, sizes log-uniform or powers of two,
    sometimes strided, 75% contiguous."""

    def __init__(self, seed: int | None, dtype: torch.dtype = torch.float32,
                 cuda: bool = False) -> None:
        super().__init__(
            parameters=[
                c.dim_parameter("dim"),
                *c.size_parameters([("k_any", 0.8), ("k_pow2", 0.2)]),
                c.step_parameters("x_"),
                c.random_value(),
            ],
            tensors=[c.dense_input("x", ("k0", "k1", "k2"), "x_", "dim", dtype, cuda)],
            seed=seed,
        )
