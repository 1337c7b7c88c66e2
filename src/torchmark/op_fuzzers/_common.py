"""Parameter building blocks shared by the built-in op fuzzers."""

from __future__ import annotations

import torch

from torchmark.fuzzing.parameters import FuzzedParameter, ParameterAlias
from torchmark.fuzzing.tensors import FuzzedTensor

MIN_DIM_SIZE = 16
MAX_DIM_SIZE = 16 * 1024**2
POW_TWO_SIZES = tuple(2**i for i in range(4, 25))  # 16 .. 16M
STEP_DISTRIBUTION = {1: 0.8, 2: 0.06, 4: 0.06, 8: 0.04, 16: 0.04}
DIM_DISTRIBUTION = {1: 0.3, 2: 0.4, 3: 0.3}
MIN_ELEMENTS = 4 * 1024
MAX_ELEMENTS = 32 * 1024**2
MAX_ALLOCATION_BYTES = 2 * 1024**3


def dim_parameter(name: str) -> FuzzedParameter:
    """Number of dimensions, 1 to 3 (drawn once per case)."""
    return FuzzedParameter(name, distribution=dict(DIM_DISTRIBUTION), strict=True)


def uniform_choice(name: str, values: tuple) -> FuzzedParameter:
    return FuzzedParameter(name, distribution={v: 1.0 / len(values) for v in values})


def size_parameters(
    families: list[tuple[str, float]],
    any_bounds: tuple[int, int] = (MIN_DIM_SIZE, MAX_DIM_SIZE),
    regular_sizes: tuple[int, ...] = POW_TWO_SIZES,
    regular_family: str = "k_pow2",
) -> list[list[FuzzedParameter]]:
    """Three sizes k0..k2, each an alias to a log-uniform size ("k_any_i") or a
    "regular" size (by default a power of two), with the probabilities in `families`
    (in that order, which fixes the sampling order)."""
    any_sizes = [FuzzedParameter(f"k_any_{i}", *any_bounds, distribution="loguniform")
                 for i in range(3)]
    regular = [uniform_choice(f"{regular_family}_{i}", regular_sizes) for i in range(3)]
    chosen = [
        FuzzedParameter(
            f"k{i}",
            distribution={ParameterAlias(f"{family}_{i}"): p for family, p in families},
            strict=True,
        )
        for i in range(3)
    ]
    return [any_sizes, regular, chosen]


def step_parameters(*prefixes: str) -> list[FuzzedParameter]:
    """Slicing steps `{prefix}step_i` (1 most of the time) for i in 0..2."""
    return [FuzzedParameter(f"{prefix}step_{i}", distribution=dict(STEP_DISTRIBUTION))
            for i in range(3) for prefix in prefixes]


def dense_input(name: str, size: tuple[str, ...], step_prefix: str, dim_parameter: str,
                dtype: torch.dtype, cuda: bool, limit_elements: bool = True) -> FuzzedTensor:
    """A 1 to 3 dim tensor sized by `size`, sliced by `{step_prefix}step_i`, 75%
    contiguous, within the shared element (when `limit_elements`) and byte limits."""
    return FuzzedTensor(
        name=name, size=size, steps=tuple(f"{step_prefix}step_{i}" for i in range(3)),
        probability_contiguous=0.75,
        min_elements=MIN_ELEMENTS if limit_elements else None,
        max_elements=MAX_ELEMENTS if limit_elements else None,
        max_allocation_bytes=MAX_ALLOCATION_BYTES, dim_parameter=dim_parameter,
        dtype=dtype, cuda=cuda,
    )


def random_value() -> FuzzedParameter:
    return FuzzedParameter("random_value", minval=0, maxval=2**32 - 1, distribution="uniform")
