"""Lazy re-exports for the modules that mirror torch.utils.benchmark's paths."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(namespace: dict[str, Any], names: Iterable[str], *,
                 elsewhere: Mapping[str, str] | None = None,
                 not_mirrored: Mapping[str, str] | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's `__getattr__` and `__dir__` that load each name on first use.

    `names` come from torchmark's top level (`torchmark.<name>`, itself lazy), so the
    objects are torchmark's own; `elsewhere` maps further names to the torchmark module
    that defines them; `not_mirrored` maps names of torch's module that torchmark leaves
    out to a hint, given in the AttributeError. A loaded name is cached in `namespace`.
    """
    module = namespace["__name__"]
    top = tuple(names)
    more = dict(elsewhere or {})
    hints = dict(not_mirrored or {})

    def __getattr__(name: str) -> Any:
        if name in top:
            value = getattr(importlib.import_module("torchmark"), name)
        elif name in more:
            value = getattr(importlib.import_module(more[name]), name)
        else:
            hint = f": {hints[name]} (docs/compat.md)" if name in hints else ""
            raise AttributeError(f"module {module!r} has no attribute {name!r}{hint}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*top, *more})

    return __getattr__, __dir__


def lazy_submodules(namespace: dict[str, Any], submodules: Iterable[str]
                    ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` that import the named submodules on first
    attribute access (`torchmark.utils.common` after `import torchmark.utils`)."""
    package = namespace["__name__"]
    children = tuple(submodules)

    def __getattr__(name: str) -> Any:
        if name in children:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(children)

    return __getattr__, __dir__
