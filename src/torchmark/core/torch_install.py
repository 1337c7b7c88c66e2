"""The installed torch, read without importing it: its version and its folder."""

from __future__ import annotations

from importlib import metadata, util
from pathlib import Path


def torch_version() -> str | None:
    """torch's distribution version (e.g. "2.13.0+cpu"); None when it is not installed."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def torch_folder() -> str | None:
    """The folder of the `torch` package that `import torch` would load; None when absent."""
    spec = util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(list(spec.submodule_search_locations)[0])


def torch_callgrind_header_dir() -> Path | None:
    """The folder of the callgrind.h that torch ships (with its benchmark utilities), for
    machines whose valgrind package has no headers; None when torch has none."""
    folder = torch_folder()
    if folder is None:
        return None
    candidate = Path(folder) / "utils" / "benchmark" / "utils" / "valgrind_wrapper"
    return candidate if (candidate / "callgrind.h").exists() else None
