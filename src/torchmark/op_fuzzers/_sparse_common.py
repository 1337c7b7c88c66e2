"""Parameters shared by the sparse op fuzzers."""

from __future__ import annotations

from torchmark.fuzzing.parameters import FuzzedParameter
from torchmark.op_fuzzers import _common as c


def sparse_parameters(extra_sizes: list[FuzzedParameter] | None = None) -> list:
    """dim, sparse_dim, sizes (k0..k2), optional extra sizes, density, coalesced."""
    return [
        c.dim_parameter("dim_parameter"),
        FuzzedParameter("sparse_dim", distribution={1: 0.4, 2: 0.4, 3: 0.2}, strict=True),
        *c.size_parameters([("k_any", 0.8), ("k_pow2", 0.2)]),
        *([extra_sizes] if extra_sizes else []),
        FuzzedParameter("density", distribution={0.1: 0.4, 0.05: 0.3, 0.01: 0.3}),
        FuzzedParameter("coalesced", distribution={True: 0.5, False: 0.5}),
        c.random_value(),
    ]
