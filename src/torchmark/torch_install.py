"""The installed torch, read without importing it: its version and its folder."""

from __future__ import annotations

from importlib import metadata, util


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
