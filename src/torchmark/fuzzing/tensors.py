"""FuzzedTensor: a tensor whose shape, strides and layout come from fuzzed parameters."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


def dtype_size(dtype: torch.dtype) -> int:
    """Bytes per element of `dtype` (a complex element is both its parts: torch's fuzzer
    counts one, so half the memory a complex tensor takes)."""
    return int(dtype.itemsize)


def random_values(size: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """Random values as torch's fuzzers draw them: uniform [0, 1) for floating and
    complex dtypes, ints in [1, 127) else; bools (where torch's draw fails) 0 or 1."""
    if dtype.is_floating_point or dtype.is_complex:
        return torch.rand(size=size, dtype=dtype, device="cpu")
    if dtype == torch.bool:
        return torch.randint(0, 2, size=size, device="cpu").bool()
    return torch.randint(1, 127, size=size, dtype=dtype, device="cpu")


def prod(values: Sequence[int], base: int = 1) -> int:
    """Product in Python ints (numpy's int64 product can overflow into a negative size)."""
    return functools.reduce(lambda x, y: int(x) * int(y), values, base)


def _roll(values: tuple, shift: int) -> tuple:
    if not values:
        return values
    shift %= len(values)
    return values[len(values) - shift:] + values[: len(values) - shift]


class FuzzedTensor:
    """Specification of a generated dense tensor.

    Args:
        name: key of the tensor in the generated dict.
        size: ints and parameter names, one per dimension.
        steps: like `size`; a larger tensor is allocated and sliced with these steps,
            which makes the result strided.
        probability_contiguous: chance that the memory layout is left contiguous;
            otherwise the dimensions are laid out in a random (non-identity) order.
        min_elements, max_elements: bounds on the element count; parameters outside
            them are redrawn.
        max_allocation_bytes: bound on the bytes allocated before slicing.
        dim_parameter: parameter giving the number of dimensions (size and steps are
            truncated, or padded with 1s, to it).
        roll_parameter: parameter giving a rotation of the dimensions: size and steps
            are rolled by that many places (as `numpy.roll`), so one spec can put,
            for example, a broadcast dimension first or last.
        dtype, cuda: element type, and whether the tensor lives on the GPU.
        tensor_constructor: `f(size=..., dtype=..., **params)` building the unsliced
            tensor instead of `torch.rand` / `torch.randint(1, 127)`.
    """

    def __init__(
        self,
        name: str,
        size: tuple[str | int, ...],
        steps: tuple[str | int, ...] | None = None,
        probability_contiguous: float = 0.5,
        min_elements: int | None = None,
        max_elements: int | None = None,
        max_allocation_bytes: int | None = None,
        dim_parameter: str | None = None,
        roll_parameter: str | None = None,
        dtype: torch.dtype = torch.float32,
        cuda: bool = False,
        tensor_constructor: Callable[..., torch.Tensor] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"FuzzedTensor: name must be a non-empty str, got {name!r}")
        self._name = name
        self._size = self._check_dims("size", size)
        self._steps = None if steps is None else self._check_dims("steps", steps)
        if not 0 <= probability_contiguous <= 1:
            raise self._error(
                f"probability_contiguous must lie in [0, 1], got {probability_contiguous!r}")
        bounds = {"min_elements": min_elements, "max_elements": max_elements,
                  "max_allocation_bytes": max_allocation_bytes}
        for bound, value in bounds.items():  # torch takes any number here (1e6 too)
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, numbers.Real) or not value >= 0):
                raise self._error(f"{bound} must be a non-negative number, got {value!r}")
        if min_elements is not None and max_elements is not None and min_elements > max_elements:
            raise self._error(f"min_elements {min_elements} exceeds max_elements {max_elements}")
        if not isinstance(dtype, torch.dtype):
            raise self._error(f"dtype must be a torch.dtype, got {dtype!r}")
        if tensor_constructor is not None and not callable(tensor_constructor):
            raise self._error("tensor_constructor must be callable")
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._roll_parameter = roll_parameter
        self._dtype = dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor

    def _error(self, problem: str) -> ValueError:
        return ValueError(f"FuzzedTensor {self._name!r}: {problem}")

    def _check_dims(self, what: str, values: Any) -> tuple:
        if isinstance(values, (str, numbers.Integral)) or not isinstance(values, Sequence):
            raise self._error(f"{what} must be a tuple of ints and parameter names, got {values!r}")
        least = 1 if what == "steps" else 0
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (str, numbers.Integral)):
                raise self._error(f"{what} entries must be ints or parameter names, got {v!r}")
            if not isinstance(v, str) and v < least:
                raise self._error(f"{what} entries must be >= {least}, got {v!r}")
        return tuple(v if isinstance(v, str) else int(v) for v in values)

    def _drawn(self, params: dict[str, Any], what: str, value: Any, least: int) -> int:
        """A size, step or dim: an int >= `least`, or an error naming where it came from."""
        if isinstance(value, str):
            name, value = value, params.get(value, value)
            where = f"{what} parameter {name!r}"
        else:
            where = what
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
                or value < least:
            raise self._error(f"{where} must be an int >= {least}, got {value!r}")
        return int(value)

    @property
    def name(self) -> str:
        return self._name

    def referenced_parameters(self) -> dict[str, str]:
        """Parameter names this spec reads, each with where it is read."""
        refs: dict[str, str] = {}
        for what, values in (("size", self._size), ("steps", self._steps or ())):
            for v in values:
                if isinstance(v, str):
                    refs.setdefault(v, what)
        for what in ("dim_parameter", "roll_parameter"):
            value = getattr(self, f"_{what}")
            if value is not None:
                refs.setdefault(value, what)
        return refs

    @staticmethod
    def default_tensor_constructor(size, dtype, **kwargs) -> torch.Tensor:
        return random_values(size, dtype)

    def _get_size_and_steps(self, params: dict[str, Any]) -> tuple[tuple, tuple, tuple]:
        """(size, steps, allocation size) with parameters filled in."""
        dim = len(self._size) if self._dim_parameter is None else \
            self._drawn(params, "dim", self._dim_parameter, 0)

        def resolve(what: str, values: tuple, least: int) -> tuple:
            values = tuple(self._drawn(params, what, v, least) for v in values[:dim])
            return values + (1,) * (dim - len(values))

        size, steps = resolve("size", self._size, 0), resolve("steps", self._steps or (), 1)
        if self._roll_parameter is not None:
            shift = int(params[self._roll_parameter])
            size, steps = _roll(size, shift), _roll(steps, shift)
        allocation = tuple(s * t for s, t in zip(size, steps, strict=True))
        return size, steps, allocation

    def satisfies_constraints(self, params: dict[str, Any]) -> bool:
        size, _, allocation = self._get_size_and_steps(params)
        numel = prod(size)
        if numel < 0:
            raise self._error(f"size {size} has a negative element count")
        allocation_bytes = prod(allocation, base=dtype_size(self._dtype))
        if self._max_elements is not None and numel > self._max_elements:
            return False
        if self._min_elements is not None and numel < self._min_elements:
            return False
        return not (self._max_allocation_bytes is not None
                    and allocation_bytes > self._max_allocation_bytes)

    def _make_tensor(self, params: dict[str, Any], state: np.random.RandomState,
                     meta: bool = False):
        """The tensor and its properties (numel, order, steps, is_contiguous, dtype).

        With `meta`, the tensor lives on the meta device (shape and strides, no memory);
        the same random draws are consumed, so the layout is the one a real run gets.
        """
        size, steps, allocation = self._get_size_and_steps(params)
        if meta:
            raw = torch.empty(allocation, dtype=self._dtype, device="meta")
        else:
            constructor = self._tensor_constructor or self.default_tensor_constructor
            raw = constructor(size=allocation, dtype=self._dtype, **params)
            if self._cuda:
                raw = raw.cuda()

        dim = len(size)
        order = np.arange(dim)
        if state.rand() > self._probability_contiguous:
            while dim > 1 and np.all(order == np.arange(dim)):
                order = state.permutation(raw.dim())
            raw = raw.permute(tuple(order)).contiguous()
            raw = raw.permute(tuple(np.argsort(order)))

        tensor = raw[tuple(slice(0, n * step, step) for n, step in zip(size, steps, strict=True))]
        properties = {
            "numel": int(tensor.numel()),
            "order": order,
            "steps": steps,
            "is_contiguous": tensor.is_contiguous(),
            "dtype": str(self._dtype),
        }
        return tensor, properties
