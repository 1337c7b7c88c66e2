"""FuzzedSparseTensor: sparse COO tensors with fuzzed shape, sparsity and coalescing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from torchmark.fuzzing.tensors import FuzzedTensor, prod, random_values


class FuzzedSparseTensor(FuzzedTensor):
    """Specification of a generated sparse COO tensor.

    `sparse_dim`, `nnz`, `density` and `coalesced` each take a parameter name (read from
    the case's parameters) or a literal value. The number of stored indices is `nnz` when
    given, else ceil(density x the number of positions in the sparse dimensions), so
    `density` is the fraction of non-zero elements. `sparse_dim` defaults to all
    dimensions, `coalesced` to True.
    """

    def __init__(
        self,
        name: str,
        size: tuple[str | int, ...],
        min_elements: int | None = None,
        max_elements: int | None = None,
        dim_parameter: str | None = None,
        sparse_dim: str | int | None = None,
        nnz: str | int | None = None,
        density: str | float | None = None,
        coalesced: str | bool | None = None,
        dtype: torch.dtype = torch.float32,
        cuda: bool = False,
    ) -> None:
        super().__init__(name=name, size=size, min_elements=min_elements,
                         max_elements=max_elements, dim_parameter=dim_parameter, dtype=dtype,
                         cuda=cuda)
        if nnz is None and density is None:
            raise self._error("give density or nnz (a parameter name or a value)")
        self._sparse_dim = sparse_dim
        self._nnz = nnz
        self._density = density
        self._coalesced = coalesced

    def referenced_parameters(self) -> dict[str, str]:
        refs = super().referenced_parameters()
        for what in ("sparse_dim", "nnz", "density", "coalesced"):
            value = getattr(self, f"_{what}")
            if isinstance(value, str):
                refs.setdefault(value, what)
        return refs

    @staticmethod
    def _value(spec: Any, params: dict[str, Any], default: Any = None) -> Any:
        if spec is None:
            return default
        return params[spec] if isinstance(spec, str) else spec

    @staticmethod
    def sparse_tensor_constructor(size, dtype, sparse_dim, nnz, is_coalesced) -> torch.Tensor:
        """A random COO tensor with `nnz` random indices in the first `sparse_dim` dims.

        Uncoalesced tensors repeat every index twice (same pattern, twice the values).
        """
        size = list(size)
        value_size = [nnz, *size[sparse_dim:]]
        values = random_values(value_size, dtype)
        indices = torch.rand(sparse_dim, nnz, device="cpu")
        indices.mul_(torch.tensor(size[:sparse_dim]).unsqueeze(1).to(indices))
        indices = indices.to(torch.long)
        if not is_coalesced:
            more = torch.randn_like(values) if values.is_floating_point() or \
                values.is_complex() else random_values(value_size, dtype)
            values = torch.cat([values, more], 0)
            indices = torch.cat([indices, indices], 1)
        tensor = torch.sparse_coo_tensor(indices, values, torch.Size(size),
                                         check_invariants=False)
        return tensor.coalesce() if is_coalesced else tensor

    def _make_tensor(self, params: dict[str, Any], state: np.random.RandomState,
                     meta: bool = False):
        size, _, _ = self._get_size_and_steps(params)
        sparse_dim = min(int(self._value(self._sparse_dim, params, len(size))), len(size))
        positions = prod(size[:sparse_dim])
        if self._nnz is not None:
            nnz = int(self._value(self._nnz, params))
            density = nnz / positions if positions else 0.0
        else:
            density = float(self._value(self._density, params))
            nnz = math.ceil(positions * density)
        if not 0 <= nnz <= positions:
            raise self._error(
                f"nnz {nnz} must lie between 0 and the {positions} positions of the sparse dims")
        is_coalesced = bool(self._value(self._coalesced, params, True))
        if meta:  # the layout and stored count of take()'s tensor; nothing is allocated
            stored = nnz if is_coalesced else 2 * nnz
            tensor = torch.sparse_coo_tensor(
                torch.empty(sparse_dim, stored, dtype=torch.long, device="meta"),
                torch.empty([stored, *size[sparse_dim:]], dtype=self._dtype, device="meta"),
                torch.Size(size), check_invariants=False)._coalesced_(is_coalesced)
        else:
            tensor = self.sparse_tensor_constructor(size, self._dtype, sparse_dim, nnz,
                                                    is_coalesced)
            if self._cuda:
                tensor = tensor.cuda()
        properties = {
            "numel": prod(size),
            "shape": torch.Size(size),
            "is_coalesced": is_coalesced,
            "density": density,
            "sparsity": 1.0 - density,
            "sparse_dim": sparse_dim,
            "dense_dim": len(size) - sparse_dim,
            "is_hybrid": sparse_dim < len(size),
            "dtype": str(self._dtype),
            "nnz": nnz,
        }
        return tensor, properties
