"""Sending a Timer's globals to the counted process (which is a different process).

Each global is written to a request folder in a form the counted process can load:
tensors and modules with torch.save, TorchScript with torch.jit.save, plain data with
pickle, modules and importable functions by name, functions defined in `__main__` by
their source. Anything else is refused with a message naming the global.
"""

from __future__ import annotations

import builtins
import enum
import inspect
import os
import pickle
import re
import sys
import textwrap
import types
import warnings
from pathlib import Path
from typing import Any

_PLAIN_BUILTINS = (type(None), bool, int, float, complex, str, bytes)


class Serialization(enum.Enum):
    """How a CopyIfCallgrind value travels (as torch's enum of the same name)."""

    PICKLE = 0
    TORCH = 1
    TORCH_JIT = 2


class CopyIfCallgrind:
    """Mark a global as safe to copy into the counted process (by pickle or torch.save).

    `setup` runs in the counted process before the value is loaded (for the imports its
    unpickling needs).
    """

    def __init__(self, value: Any, *, setup: str | None = None) -> None:
        self._value = value
        self._setup = setup

    @property
    def value(self) -> Any:
        return self._value

    @property
    def setup(self) -> str | None:
        return self._setup

    @property
    def serialization(self) -> Serialization:
        """TORCH_JIT for TorchScript, TORCH for tensors and modules, PICKLE otherwise."""
        import torch

        if isinstance(self._value, (torch.jit.ScriptFunction, torch.jit.ScriptModule)):
            return Serialization.TORCH_JIT
        if isinstance(self._value, (torch.Tensor, torch.nn.Module)):
            return Serialization.TORCH
        return Serialization.PICKLE

    @staticmethod
    def unwrap_all(globals: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, CopyIfCallgrind) else v) for k, v in globals.items()}


_MAIN_IMPORT = re.compile(r"^\s*from\s+__main__\s+import\s+([\w\s,()]+?)\s*$", re.MULTILINE)


def main_imports(setup: str) -> dict[str, Any]:
    """Objects that `setup` imports from the caller's __main__ module, by name.

    The counted process has its own __main__; sending these along lets setups written
    for an in-process Timer (`from __main__ import f`) work unchanged.
    """
    main = sys.modules.get("__main__")
    found: dict[str, Any] = {}
    for match in _MAIN_IMPORT.finditer(setup):
        for name in match.group(1).replace("(", " ").replace(")", " ").split(","):
            name = name.strip()
            if name and " " not in name and hasattr(main, name):
                found[name] = getattr(main, name)
    return found


def _is_plain_data(value: Any, depth: int = 0) -> bool:
    import torch

    if isinstance(value, (*_PLAIN_BUILTINS, torch.dtype, torch.device)):
        return True
    if depth > 20:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_plain_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_is_plain_data(k, depth + 1) and _is_plain_data(v, depth + 1)
                   for k, v in value.items())
    return False


def _import_reference(value: Any) -> tuple[str, str] | None:
    """(module, qualname) when `value` can be imported again by name."""
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<locals>" in qualname:
        return None
    target: Any = sys.modules.get(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return (module, qualname) if target is value else None


def _main_source(value: Any) -> str | None:
    """The source of a function or class defined at the top level of __main__."""
    if not isinstance(value, (types.FunctionType, type)) or value.__module__ != "__main__":
        return None
    if getattr(value, "__closure__", None) or "<locals>" in value.__qualname__ \
            or value.__name__ == "<lambda>":  # a lambda's source is its whole line
        return None
    try:
        return textwrap.dedent(inspect.getsource(value))
    except (OSError, TypeError):
        return None


def _names_read(source: str) -> list[str]:
    """Every name the code reads, at any depth (functions, class bodies, methods)."""
    seen: list[str] = []
    stack = [compile(source, "<source>", "exec")]
    while stack:
        code = stack.pop()
        for name in code.co_names:
            if name not in seen:
                seen.append(name)
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return seen


def _main_classes(value: Any) -> list[type]:
    """Classes defined in __main__ that loading `value` needs (its own, its submodules',
    and their bases), bases first."""
    import torch

    objects = list(value.modules()) if isinstance(value, torch.nn.Module) else [value]
    found: list[type] = []
    for obj in objects:
        for cls in reversed(type(obj).__mro__):
            if cls.__module__ == "__main__" and cls not in found:
                found.append(cls)
    return found


def _main_dependencies(sources: list[str], sent: set[str]) -> list[dict[str, Any]]:
    """What functions and classes sent by source read from __main__ (modules, plain data,
    other functions and classes), as load-plan entries, dependencies first; names
    already `sent` (the Timer's own globals) are left to them."""
    main = vars(sys.modules.get("__main__", types.ModuleType("__main__")))
    entries: list[dict[str, Any]] = []
    pending = [name for s in sources for name in _names_read(s)]
    while pending:
        name = pending.pop()
        if name in sent or name not in main or hasattr(builtins, name):
            continue
        sent.add(name)
        value = main[name]
        entry: dict[str, Any] = {"name": name, "setup": None}
        if isinstance(value, types.ModuleType) and value.__name__ != "__main__":
            entry.update(kind="module", module=value.__name__)
        elif _is_plain_data(value):
            entry.update(kind="pickle", data=pickle.dumps(value))
        elif (ref := _import_reference(value)) is not None:
            entry.update(kind="import", module=ref[0], qualname=ref[1])
        elif (source := _main_source(value)) is not None:
            entry.update(kind="source", source=source, function=value.__name__)
            pending += _names_read(source)
        else:
            continue  # not sendable: the code fails on it by name, as it would anyway
        entries.insert(0, entry)
    return entries


def _imported_by(source: str | None) -> list[str]:
    """Absolute module names that `source`'s import statements name (any depth)."""
    import ast

    try:
        tree = ast.parse(textwrap.dedent(source or ""))
    except SyntaxError:  # reported when the code runs
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
    return found


def modules_needed(plan: list[dict[str, Any]], setup: str) -> list[str]:
    """The modules loading `plan` and running `setup` import: the counted process loads
    them with instrumentation off when its host has not imported them yet."""
    names = _imported_by(setup)
    for entry in plan:
        names += _imported_by(entry.get("setup"))
        names += entry.get("modules", [])
        if entry["kind"] in ("module", "import"):
            names.append(entry["module"])
    return [n for n in dict.fromkeys(names) if n != "__main__"]


def _refuse(name: str, value: Any, why: str) -> ValueError:
    return ValueError(
        f"collect_callgrind: global {name!r} ({type(value).__name__}) cannot be sent to the "
        f"counted process: {why}. Create it in `setup` instead, or wrap it in "
        f"CopyIfCallgrind({name}, setup='imports it needs') to send a pickled copy")


def pack_globals(globals: dict[str, Any], folder: str | os.PathLike) -> list[dict[str, Any]]:
    """Write `globals` under `folder`; returns the load plan for `load_globals`."""
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    plan: list[dict[str, Any]] = []
    for name, value in globals.items():
        if name == "__builtins__":
            continue
        if name == "torch":
            if value is not torch:
                raise ValueError("collect_callgrind: the global 'torch' must be the torch module")
            continue
        entry: dict[str, Any] = {"name": name, "setup": None}
        explicit = isinstance(value, CopyIfCallgrind)
        if explicit:
            entry["setup"] = value.setup
            value = value.value
        path = folder / f"global_{len(plan)}"
        if isinstance(value, types.ModuleType):
            if value.__name__ == "__main__":
                raise _refuse(name, value, "the __main__ module cannot be imported elsewhere")
            entry.update(kind="module", module=value.__name__)
        elif isinstance(value, (torch.jit.ScriptFunction, torch.jit.ScriptModule)):
            with warnings.catch_warnings():  # TorchScript's deprecation notice
                warnings.simplefilter("ignore", DeprecationWarning)
                torch.jit.save(value, str(path))
            entry.update(kind="jit", path=str(path))
        elif isinstance(value, (torch.Tensor, torch.nn.Module)):
            torch.save(value, str(path))
            objects = value.modules() if isinstance(value, torch.nn.Module) else [value]
            entry.update(kind="torch", path=str(path),  # unpickling imports their classes
                         modules=sorted({type(obj).__module__ for obj in objects}))
            # a model of the caller's own class: its class (from __main__) goes first
            for cls in _main_classes(value):
                source = _main_source(cls)
                if source is None:
                    raise _refuse(name, value, f"its class {cls.__name__} is defined in "
                                               "__main__ without a source file to send")
                entry.setdefault("classes", []).append((cls.__name__, source))
        elif _is_plain_data(value):
            path.write_bytes(pickle.dumps(value))
            entry.update(kind="pickle", path=str(path))
        elif (ref := _import_reference(value)) is not None:
            entry.update(kind="import", module=ref[0], qualname=ref[1])
        elif (source := _main_source(value)) is not None:
            entry.update(kind="source", source=source, function=value.__name__)
        elif isinstance(value, types.FunctionType) and value.__name__ == "<lambda>":
            raise _refuse(name, value, "a lambda cannot be sent by its source (the source "
                                       "is its whole line); define it with def, or in setup")
        elif explicit or isinstance(value, types.BuiltinFunctionType):  # torch.add, ...
            try:
                path.write_bytes(pickle.dumps(value))
            except Exception as e:
                raise _refuse(name, value, f"it does not pickle ({e})") from None
            # unpickling imports what the value is defined in (a builtin: its module)
            modules = {getattr(value, "__module__", None), type(value).__module__}
            entry.update(kind="pickle", path=str(path),
                         modules=sorted(m for m in modules if isinstance(m, str)))
        elif callable(value):
            raise _refuse(name, value, "it is neither importable by name nor a plain function "
                                       "of __main__ with its source available")
        else:
            raise _refuse(name, value, "only tensors, modules, TorchScript, plain data "
                                       "(numbers, strings, lists, dicts, ...) and importable "
                                       "objects cross automatically")
        plan.append(entry)
    sources = [e["source"] for e in plan if e["kind"] == "source"]
    sources += [source for e in plan for _, source in e.get("classes", [])]
    sent = {e["name"] for e in plan} | {"torch"}
    sent |= {cls for e in plan for cls, _ in e.get("classes", [])}
    return _main_dependencies(sources, sent) + plan


def load_globals(plan: list[dict[str, Any]], namespace: dict[str, Any]) -> None:
    """Inverse of `pack_globals`, run in the counted process."""
    import importlib

    import torch

    for entry in plan:
        if entry.get("setup"):
            exec(textwrap.dedent(entry["setup"]), namespace)
        kind, name = entry["kind"], entry["name"]
        for cls_name, source in entry.get("classes", []):  # the caller's own classes
            namespace.setdefault("__builtins__", builtins)
            exec(compile(source, f"<class {cls_name}>", "exec"), namespace)
        if kind == "module":
            namespace[name] = importlib.import_module(entry["module"])
        elif kind == "jit":
            namespace[name] = torch.jit.load(entry["path"])
        elif kind == "torch":
            namespace[name] = torch.load(entry["path"], weights_only=False)
        elif kind == "pickle" and "data" in entry:
            namespace[name] = pickle.loads(entry["data"])
        elif kind == "pickle":
            with open(entry["path"], "rb") as f:
                namespace[name] = pickle.load(f)
        elif kind == "import":
            target: Any = importlib.import_module(entry["module"])
            for part in entry["qualname"].split("."):
                target = getattr(target, part)
            namespace[name] = target
        elif kind == "source":
            namespace.setdefault("__builtins__", builtins)
            exec(compile(entry["source"], f"<global {name}>", "exec"), namespace)
            namespace[name] = namespace[entry["function"]]
        else:
            raise ValueError(f"unknown global kind {kind!r}")
