"""Rebuilding an operator's arguments from what the trace recorded.

Tensors get the recorded dtype, shape, strides and storage offset, on the replay device,
with random values: floating ones uniform in [0, 1), integer ones in a safe range (index
arguments within the bounds of the tensor they index, where the operator is known),
booleans fair coin flips. Tensors that shared a storage in the trace share one in the
replay (views stay views). A tensor an earlier replayed operator produced is taken from
that operator's output, so data flows as it did in the program.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.tensor_bounds import check_dims, check_tensor
from torchmark.replay.trace import Node

TENSOR_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16",
    "c10::BFloat16": "bfloat16", "long int": "int64", "int": "int32", "short int": "int16",
    "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
}
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 9: "complex64", 10: "complex128", 11: "bool",
                15: "bfloat16"}
MEMORY_FORMATS = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last",
                  3: "channels_last_3d"}
SAFE_INT_HIGH = 2  # integer tensors with no known bound hold 0 or 1
OFFSETS = -(1 << 62)  # a bound below this marks bag offsets: OFFSETS - (number of indices)


class Unsupported(Exception):
    """An argument the replay cannot rebuild (the op is skipped with this reason)."""


def tensor_dtype(type_name: str):
    import torch

    inner = type_name[len("Tensor("):-1]
    name = TENSOR_DTYPES.get(inner)
    if name is None:
        raise Unsupported(f"tensor element type {brief_repr(inner)}")
    return getattr(torch, name)


def _is_tensor_value(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 6 and isinstance(value[0], int) \
        and isinstance(value[5], str)


def _is_plain_tensor(type_name: str) -> bool:
    return type_name.startswith("Tensor(") and not type_name.startswith("Tensor(nullptr")


def _split_list_types(type_name: str) -> list[str]:
    inner = type_name[len("GenericList["):-1]
    out, depth, current = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
            continue
        depth += ch in "[("
        depth -= ch in "])"
        current += ch
    return out + ([current] if current else [])


_DIM_INDEXED = {"index_select": 2, "gather": 2, "scatter": 2, "scatter_add": 2,
                "scatter_": 2, "scatter_add_": 2, "index_add": 2, "index_add_": 2,
                "index_copy": 2, "index_copy_": 2, "index_fill": 2, "index_fill_": 2}


def _numel(shape: list) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def index_bounds(op: str, node: Node) -> dict[tuple[int, int | None], int]:
    """{(argument, list item or None): exclusive upper bound} for index tensors of `op`
    (a bare aten name such as `index_select`) that the schema makes known."""
    shapes, values = node.inputs["shapes"], node.inputs["values"]
    out: dict[tuple[int, int | None], int] = {}
    try:
        if op in ("embedding", "embedding_bag", "_embedding_bag"):
            out[(1, None)] = shapes[0][0]
            if op != "embedding" and len(shapes) > 2:  # offsets: 0, then non-decreasing
                out[(2, None)] = OFFSETS - max(_numel(shapes[1]), 1)
        elif op in _DIM_INDEXED:
            dim = values[1] % len(shapes[0]) if shapes[0] else 0
            out[(_DIM_INDEXED[op], None)] = shapes[0][dim] if shapes[0] else 1
        elif op == "take":
            out[(1, None)] = max(_numel(shapes[0]), 1)
        elif op in ("index", "_index_put_impl_", "index_put", "index_put_"):
            for i, shape in enumerate(shapes[0]):
                out[(1, i)] = shape
        elif op in ("nll_loss", "nll_loss_forward", "nll_loss2d_forward", "cross_entropy_loss",
                    "nll_loss_nd"):
            self_shape = shapes[0]
            out[(1, None)] = self_shape[1] if len(self_shape) > 1 else self_shape[0]
        elif op in ("nll_loss_backward", "nll_loss2d_backward"):
            self_shape = shapes[1]
            out[(2, None)] = self_shape[1] if len(self_shape) > 1 else self_shape[0]
    except (IndexError, TypeError, ZeroDivisionError):
        pass
    return out


class TensorFactory:
    """Creates the external input tensors of a replay, sharing storages as recorded."""

    def __init__(self, device, seed: int = 0) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        self.storages: dict[tuple[int, str], Any] = {}
        self.initial: dict[tuple[int, str], Any] = {}  # first contents, while needed
        self.extent: dict[tuple[int, str], int] = {}
        self.bounds: dict[tuple[int, str], int] = {}

    def plan(self, value: list, shape: list, stride: list, type_name: str,
             bound: int | None) -> None:
        """Note a use of a storage, so its shared buffer is made big enough; a LimitError
        for a shape of too many dimensions or a storage larger than the device's memory
        (refused before anything is allocated)."""
        check_dims(shape, "a tensor of the trace")
        dtype = tensor_dtype(type_name)
        key = (value[1], str(dtype))
        offset = value[2] if isinstance(value[2], int) else 0
        last = offset + sum((s - 1) * st for s, st in zip(shape, stride, strict=False) if s > 0)
        self.extent[key] = max(self.extent.get(key, 0), last + 1 if _numel(shape) else offset)
        check_tensor([self.extent[key]], dtype.itemsize, str(self.device),
                     "a storage of the trace")
        if bound is not None:
            self.bounds[key] = min(self.bounds.get(key, bound), bound)

    def _storage(self, key: tuple[int, str], dtype) -> Any:
        if key not in self.storages:
            torch = self.torch
            size = max(self.extent.get(key, 1), 1)
            if dtype == torch.bool:
                base = torch.rand(size, generator=self.generator) < 0.5
            elif dtype.is_floating_point or dtype.is_complex:
                base = torch.rand(size, generator=self.generator).to(dtype)
            elif self.bounds.get(key, 0) <= OFFSETS:  # 0, then evenly spaced up to the count
                count = OFFSETS - self.bounds[key]
                base = (torch.arange(size) * (count // size)).to(dtype)
            else:
                high = max(self.bounds.get(key, SAFE_INT_HIGH), 1)
                base = torch.randint(0, high, (size,), generator=self.generator, dtype=dtype)
            self.storages[key] = base.to(self.device)
            self.initial[key] = self.storages[key].clone()
        return self.storages[key]

    def keep_changed_snapshots(self) -> None:
        """After a dry run: keep the first contents only of storages that ops wrote to."""
        torch = self.torch
        for key in list(self.initial):
            if torch.equal(self.initial[key], self.storages[key]):
                del self.initial[key]

    def restore(self) -> None:
        for key, first in self.initial.items():
            self.storages[key].copy_(first)

    def tensor(self, value: list, shape: list, stride: list, type_name: str) -> Any:
        dtype = tensor_dtype(type_name)
        check_dims(shape, "a tensor of the trace")
        if len(stride) != len(shape):
            stride = list(self.torch.empty(shape, device="meta").stride()) if shape else []
        key = (value[1], str(dtype))
        self.plan(value, shape, stride, type_name, None)  # unplanned uses grow the storage
        if key in self.storages and self.storages[key].numel() < self.extent[key]:
            del self.storages[key]  # too small for this view: a bigger one, unshared
        base = self._storage(key, dtype)
        offset = value[2] if isinstance(value[2], int) else 0
        return base.as_strided(shape, stride, offset)


def walk_tensors(node: Node, op: str, visit: Callable[..., None]) -> None:
    """Call visit(value, shape, stride, type, bound) for every recorded input tensor."""
    bounds = index_bounds(op, node)
    io = node.inputs
    for i, (value, shape, stride, type_name) in enumerate(zip(
            io["values"], io["shapes"], io["strides"] + [[]] * len(io["values"]),
            io["types"], strict=False)):
        if _is_plain_tensor(type_name) and _is_tensor_value(value):
            visit(value, shape, stride, type_name, bounds.get((i, None)))
        elif type_name.startswith("GenericList[") and isinstance(value, list):
            types = _split_list_types(type_name)
            for j, item in enumerate(value):
                item_type = types[j] if j < len(types) else ""
                if _is_plain_tensor(item_type) and _is_tensor_value(item):
                    visit(item, shape[j] if j < len(shape) else [],
                          stride[j] if isinstance(stride, list) and j < len(stride) else [],
                          item_type, bounds.get((i, j)))


_SCHEMA_HEAD = re.compile(r"^aten::(?P<name>\w+)(?:\.(?P<overload>\w+))?\(")


def schema_name(node: Node) -> tuple[str, str | None]:
    """(op, overload) from the node's op_schema (or its name when no schema was kept)."""
    found = _SCHEMA_HEAD.match(node.schema)
    if found:
        return found.group("name"), found.group("overload")
    return node.name[len("aten::"):], None
