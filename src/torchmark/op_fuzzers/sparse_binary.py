"""BinaryOpSparseFuzzer: pairs of same-shaped sparse COO tensors (x, y)."""

from __future__ import annotations

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.fuzzing.parameters import FuzzedParameter, ParameterAlias
from torchmark.op_fuzzers._sparse_common import sparse_parameters
from torchmark.op_fuzzers.sparse_unary import sparse_tensor

__all__ = ["BinaryOpSparseFuzzer"]


class BinaryOpSparseFuzzer(Fuzzer):
    """x and y of one shape (1 to 3 dims, 1 to 3 sparse), density 1% to 10%."""

    def __init__(self, seed: int | None, dtype: torch.dtype = torch.float32,
                 cuda: bool = False) -> None:
        y_sizes = [FuzzedParameter(f"y_k{i}", distribution={ParameterAlias(f"k{i}"): 1.0},
                                   strict=True) for i in range(3)]
        super().__init__(
            parameters=sparse_parameters(y_sizes),
            tensors=[sparse_tensor("x", ("k0", "k1", "k2"), dtype, cuda),
                     sparse_tensor("y", ("y_k0", "y_k1", "y_k2"), dtype, cuda)],
            seed=seed,
        )
