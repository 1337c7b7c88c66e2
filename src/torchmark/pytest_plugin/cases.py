"""A test as a torchmark case: its id from the test's file in its project and its name in
the file, its parameters, its thread count and device (never from the benchmarked code,
so a history follows the test through changes to it; never from the pytest-xdist worker
that ran it; never from pytest's rootdir, which moves with the command line); its table
(`label`: the marker's group, else the test's file) and row (`sub_label`: the test's
name in the file, with its parameter ids)."""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchmark.core.result import Case, case_id

_MAX_TEXT = 200  # characters of a described value
# what marks a project's root folder (the nearest one up from a test file)
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "pytest.ini",
                   ".pytest.ini", "tox.ini")


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


@functools.cache
def project_root(folder: Path) -> Path:
    """The nearest folder from `folder` up that holds one of PROJECT_MARKERS (a checkout,
    a package's or pytest's configuration); `folder` itself where none does."""
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return candidate
    return folder


def location_of(item: Any) -> tuple[str, str]:
    """The test's file, relative to its project's root (`project_root`), and its name in
    the file (`TestCls::test_x[params]`). pytest's node id holds the file relative to the
    rootdir, which pytest picks from the paths on each command line (and `--rootdir`):
    the same test reads `tests/bench/test_x.py::test_x` from one invocation and
    `test_x.py::test_x` from another. Where the rootdir is the project's root (a pytest
    ini file or pyproject.toml there), the two are the node id."""
    nodepath, _, name = item.nodeid.partition("::")
    path = getattr(item, "path", None)
    if path is None:
        return nodepath, name
    path = Path(path).resolve()
    return path.relative_to(project_root(path.parent)).as_posix(), name


def case_of(item: Any, *, stmt: str, setup: str = "", group: str | None = None,
              threads: int = 1, device: str = "cpu") -> Case:
    """The case a benchmark in test `item` measures (see the module docstring)."""
    path, name = location_of(item)
    params = params_of(item)
    test = f"{path}::{name}" if name else path
    return Case(id=case_id("pytest", test=test, params=params, threads=threads,
                           device=device),
                frontend="pytest", stmt=stmt, setup=setup, label=group or path,
                sub_label=name or path, threads=threads, device=device, params=params)
