"""Operators by name: torch functions and Tensor methods (`torch.add`,
`torch.nn.functional.relu`, `torch.Tensor.add_`), nn modules built from the "build" spec
(`torch.nn.Conv2d`), `aten::` ops by schema name (`aten::add.Tensor`), and user operators
registered with `register_op` (from a `--plugin MODULE` or a `torchmark.ops` entry point).
Names from a config pass the operator policy (core/operator_policy.py); nothing is
evaluated."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from torchmark.core import operator_policy
from torchmark.core.errors import USER_CODE_FAILURES, error_line
from torchmark.core.user_modules import import_user_module

_USER_OPS: dict[str, Operator] = {}
_ENTRY_POINTS_LOADED = False


@dataclasses.dataclass(frozen=True)
class Operator:
    """A resolved operator. `kind` is "function" (called with the inputs), "module" (an
    nn.Module class: built from the build spec, then called) or "builder" (a user
    callable that returns the function to time)."""

    name: str
    kind: str
    target: Any

    def build(self, args: list[Any], kwargs: dict[str, Any], device: str) -> Callable:
        if self.kind == "function":
            if args or kwargs:
                raise ValueError(f"{self.name} is a function: it takes no build arguments")
            return self.target
        if self.kind == "module":
            return self.target(*args, **kwargs).to(device)
        return self.target(*args, **kwargs)


def register_op(name: str, fn: Callable | None = None, *,
                builder: Callable[..., Callable] | None = None) -> None:
    """Make `name` available to configs: `fn` is called with each case's inputs, or
    `builder(*build_args, **build_kwargs)` returns the callable to time."""
    if not isinstance(name, str) or not name:
        raise ValueError("register_op: name must be a non-empty str")
    if (fn is None) == (builder is None):
        raise ValueError(f"register_op({name!r}): give exactly one of fn and builder")
    _USER_OPS[name] = Operator(name, "function" if fn is not None else "builder",
                               fn if fn is not None else builder)


def load_plugin(module: str) -> int:
    """Import a module that registers operators (`--plugin MODULE`, or a path to a .py
    file; the current folder is searched too, as `python -m` would). Returns how many
    operators it registered."""
    before = dict(_USER_OPS)
    try:
        if module.endswith(".py") or "/" in module:
            _import_file(module)
        else:
            import_user_module(module)
    except ImportError as e:
        raise ValueError(f"--plugin {module}: cannot import it ({e})") from None
    except USER_CODE_FAILURES as e:  # the plugin's own code failed: one line, naming it
        raise ValueError(f"--plugin {module}: importing it raised {error_line(e)}") from None
    return sum(before.get(name) is not op for name, op in _USER_OPS.items())


def _import_file(path: str) -> None:
    """Import a plugin given as a file path, as a module named after the file."""
    import importlib.util
    import sys
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise ImportError(f"no such file {path!r}; give a module name (mymodule) or the "
                          "path of a .py file")
    # a name of its own: a plugin file called copy.py must not replace the copy module
    name = f"torchmark_plugin_{abs(hash(str(file.resolve())))}_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise


def _load_entry_points() -> None:
    """Operators from installed packages: entry points in group `torchmark.ops`, each a
    callable taking `register_op`, or a {name: function} mapping."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib import metadata

    for entry in metadata.entry_points(group="torchmark.ops"):
        value = entry.load()
        if isinstance(value, dict):
            for name, fn in value.items():
                register_op(name, fn)
        else:
            value(register_op)


def _resolve_torch(name: str) -> Operator:
    kind, target = operator_policy.resolve(name)
    return Operator(name, kind, target)


def _resolve_aten(name: str) -> Operator:
    import torch

    op_name, _, overload = name[len("aten::"):].partition(".")
    if not op_name.isidentifier() or (overload and not overload.isidentifier()):
        raise LookupError(f"unknown operator {name!r}: expected aten::<op>[.<overload>]")
    try:
        packet = getattr(torch.ops.aten, op_name)
    except (AttributeError, RuntimeError):
        raise LookupError(f"unknown operator {name!r}: aten has no op {op_name!r}") from None
    if overload and overload not in packet.overloads():
        raise LookupError(f"unknown operator {name!r}: aten::{op_name} has no overload "
                          f"{overload!r} (it has {', '.join(packet.overloads())})")
    operator_policy.check_aten(op_name, overload or None, label=name)
    # without an overload, the packet picks the one that matches the arguments
    return Operator(name, "function", getattr(packet, overload) if overload else packet)


def resolve(name: str) -> Operator:
    """The operator a config names: a registered user operator, or what the operator
    policy allows (core/operator_policy.py); LookupError saying why it is unknown,
    PolicyError why it is refused."""
    _load_entry_points()
    if name in _USER_OPS:
        return _USER_OPS[name]
    if name.startswith("aten::"):
        return _resolve_aten(name)
    return _resolve_torch(name)
