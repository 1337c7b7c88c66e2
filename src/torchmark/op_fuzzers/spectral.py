"""SpectralOpFuzzer: inputs for FFTs, with sizes that factor into 2, 3 and 5."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.op_fuzzers import _common as c

__all__ = ["REGULAR_SIZES", "SpectralOpFuzzer", "power_range"]

MIN_DIM_SIZE = 16
MAX_DIM_SIZE = 16 * 1024


def power_range(upper_bound: int, base: int) -> Iterator[int]:
    """1, base, base^2, ... up to `upper_bound`."""
    return (base**i for i in range(int(math.log(upper_bound, base)) + 1))


def _regular_sizes() -> list[int]:
    """Sizes 2^i 3^j 5^k in (MIN_DIM_SIZE, MAX_DIM_SIZE]: the fast cases of FFT libraries."""
    sizes = []
    for i in power_range(MAX_DIM_SIZE, 2):
        for j in power_range(MAX_DIM_SIZE // i, 3):
            for k in power_range(MAX_DIM_SIZE // (i * j), 5):
                if i * j * k > MIN_DIM_SIZE:
                    sizes.append(i * j * k)
    return sorted(sizes)


REGULAR_SIZES = _regular_sizes()


class SpectralOpFuzzer(Fuzzer):
    """x of 1 to 3 dims (`ndim`), sizes regular (2^i 3^j 5^k) with `probability_regular`,
    else log-uniform in [16, 16K]; sometimes strided, 75% contiguous."""

    def __init__(self, *, seed: int | None, dtype: torch.dtype = torch.float64,
                 cuda: bool = False, probability_regular: float = 1.0) -> None:
        if not 0 <= probability_regular <= 1:
            raise ValueError(
                f"SpectralOpFuzzer: probability_regular must lie in [0, 1], got "
                f"{probability_regular!r}")
        super().__init__(
            parameters=[
                c.dim_parameter("ndim"),
                *c.size_parameters(
                    [("k_regular", probability_regular), ("k_any", 1 - probability_regular)],
                    any_bounds=(MIN_DIM_SIZE, MAX_DIM_SIZE), regular_sizes=tuple(REGULAR_SIZES),
                    regular_family="k_regular"),
                c.step_parameters(""),
            ],
            tensors=[c.dense_input("x", ("k0", "k1", "k2"), "", "ndim", dtype, cuda)],
            seed=seed,
        )
