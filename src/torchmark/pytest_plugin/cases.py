"""A test as a torchmark case: its id from the test's node id, its parameters, its thread
count and device (never from the benchmarked code, so a history follows the test through
changes to it, and never from the pytest-xdist worker that ran it); its table (`label`:
the marker's group, else the test's file) and row (`sub_label`: the test's name in the
file, with its parameter ids)."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

from torchmark.core.result import Case, case_id

_MAX_TEXT = 200  # characters of a described value


def describe(value: Any) -> Any:
    """A parameter's value as plain JSON that is the same in every process: numbers,
    strings, lists and mappings as they are; torch's dtypes, devices and sizes by their
    text; a tensor (anything with a shape and a dtype) by its type, shape and dtype; any
    other object by its type name (never its repr, which may hold an address)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value[:_MAX_TEXT]
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): describe(v) for k, v in value.items()}
    if type(value).__module__.split(".")[0] == "torch" and \
            type(value).__name__ in ("dtype", "device", "layout", "memory_format"):
        return str(value)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__}({list(shape)}, {dtype})"
    return f"<{type(value).__name__}>"


def params_of(item: Any) -> dict[str, Any]:
    """A parametrized test's parameters (described), in their order; {} for other tests."""
    callspec = getattr(item, "callspec", None)
    return {name: describe(v) for name, v in callspec.params.items()} if callspec else {}


def case_of(item: Any, *, stmt: str, setup: str = "", group: str | None = None,
              threads: int = 1, device: str = "cpu") -> Case:
    """The case a benchmark in test `item` measures (see the module docstring)."""
    path, _, name = item.nodeid.partition("::")
    params = params_of(item)
    return Case(id=case_id("pytest", test=item.nodeid, params=params, threads=threads,
                           device=device),
                frontend="pytest", stmt=stmt, setup=setup, label=group or path,
                sub_label=name or path, threads=threads, device=device, params=params)
