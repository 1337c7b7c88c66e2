"""UnaryOpFuzzer: single tensors x for elementwise unary ops."""

from __future__ import annotations

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.fuzzing.tensors import FuzzedTensor
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
            tensors=[
                FuzzedTensor(
                    name="x", size=("k0", "k1", "k2"),
                    steps=("x_step_0", "x_step_1", "x_step_2"), probability_contiguous=0.75,
                    min_elements=c.MIN_ELEMENTS, max_elements=c.MAX_ELEMENTS,
                    max_allocation_bytes=c.MAX_ALLOCATION_BYTES, dim_parameter="dim",
                    dtype=dtype, cuda=cuda,
                ),
            ],
            seed=seed,
        )
