"""UnaryOpSparseFuzzer: sparse COO tensors x for unary sparse ops."""

from __future__ import annotations

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.fuzzing.sparse import FuzzedSparseTensor
from torchmark.op_fuzzers import _common as c
from torchmark.op_fuzzers._sparse_common import sparse_parameters

__all__ = ["UnaryOpSparseFuzzer"]


def sparse_tensor(name: str, size: tuple[str, ...], dtype: torch.dtype,
                  cuda: bool) -> FuzzedSparseTensor:
    return FuzzedSparseTensor(
        name=name, size=size, dim_parameter="dim_parameter", sparse_dim="sparse_dim",
        density="density", coalesced="coalesced", min_elements=c.MIN_ELEMENTS,
        max_elements=c.MAX_ELEMENTS, dtype=dtype, cuda=cuda,
    )


class UnaryOpSparseFuzzer(Fuzzer):
    """x of 1 to 3 dims, 1 to 3 of them sparse, density 1% to 10%, coalesced or not."""

    def __init__(self, seed: int | None, dtype: torch.dtype | None = None,
                 cuda: bool = False) -> None:
        dtype = torch.float32 if dtype is None else dtype
        super().__init__(
            parameters=sparse_parameters(),
            tensors=[sparse_tensor("x", ("k0", "k1", "k2"), dtype, cuda)],
            seed=seed,
        )
