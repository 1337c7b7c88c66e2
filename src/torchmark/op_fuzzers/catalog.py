"""Fuzzers by name, for the command line: the built-in op fuzzers, the tutorial's
example, or any `module:attribute` that is a Fuzzer, a Fuzzer class, or a factory."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.errors import USER_CODE_FAILURES, PolicyError, error_line
from torchmark.core.user_modules import import_user_module
from torchmark.fuzzing.catalog import example_fuzzer
from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.op_fuzzers.binary import BinaryOpFuzzer
from torchmark.op_fuzzers.sparse_binary import BinaryOpSparseFuzzer
from torchmark.op_fuzzers.sparse_unary import UnaryOpSparseFuzzer
from torchmark.op_fuzzers.spectral import SpectralOpFuzzer
from torchmark.op_fuzzers.unary import UnaryOpFuzzer


def _builtin() -> dict[str, Callable[[int | None], Fuzzer]]:
    return {
        "example": example_fuzzer,
        "binary": lambda seed: BinaryOpFuzzer(seed=seed),
        "unary": lambda seed: UnaryOpFuzzer(seed=seed),
        "spectral": lambda seed: SpectralOpFuzzer(seed=seed),
        "sparse_unary": lambda seed: UnaryOpSparseFuzzer(seed=seed),
        "sparse_binary": lambda seed: BinaryOpSparseFuzzer(seed=seed),
    }


BUILTIN_NAMES = ("example", "binary", "unary", "spectral", "sparse_unary", "sparse_binary")
# torch.utils.benchmark's class names for the built-in op fuzzers
TORCH_CLASS_NAMES = {"BinaryOpFuzzer": "binary", "UnaryOpFuzzer": "unary",
                     "SpectralOpFuzzer": "spectral", "UnaryOpSparseFuzzer": "sparse_unary",
                     "BinaryOpSparseFuzzer": "sparse_binary"}


def make_fuzzer(name: str, seed: int | None) -> Fuzzer:
    """A built-in fuzzer by name (or torch's class name for it), or `module:attribute`
    naming a Fuzzer (used as is), a Fuzzer subclass, or a function of `seed` defined in
    that module (called with `seed=`). Nothing else is called: not a builtin, not a class
    of another kind, not a function the module only imported, not one without a `seed`
    parameter (`subprocess:run`), not a private name."""
    builtin = _builtin()
    name = TORCH_CLASS_NAMES.get(name, name)
    if name in builtin:
        return builtin[name](seed)
    if ":" not in name:
        raise ValueError(
            f"unknown fuzzer {brief_repr(name)}; expected one of {', '.join(BUILTIN_NAMES)}, "
            f"{', '.join(TORCH_CLASS_NAMES)}, or module:attribute")
    module_name, _, attr = name.partition(":")
    if any(part.startswith("_") or not part.isidentifier() for part in attr.split(".")):
        raise PolicyError(f"fuzzer {brief_repr(name)}: {brief_repr(attr)} is not a public "
                          "attribute name")
    try:
        module = import_user_module(module_name)
        target: Any = module
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load fuzzer {brief_repr(name)}: {e}") from None
    except USER_CODE_FAILURES as e:  # the module's own code failed: one line, naming it
        raise ValueError(f"cannot load fuzzer {brief_repr(name)}: importing {module_name} "
                         f"raised {error_line(e)}") from None
    if isinstance(target, Fuzzer):
        return target
    is_fuzzer_class = inspect.isclass(target) and issubclass(target, Fuzzer)
    function = inspect.isfunction(target)
    if not is_fuzzer_class:
        what = f"a {type(target).__name__}"
        if function and target.__module__ != module.__name__:
            what = f"a function defined in {target.__module__}"
        elif function and "seed" not in inspect.signature(target).parameters:
            what = "a function without a `seed` parameter"
        elif function:
            what = ""
        if what:
            raise PolicyError(f"fuzzer {brief_repr(name)} refused: it is {what}, not a "
                              f"Fuzzer, a Fuzzer class, or a function of seed defined in "
                              f"{module_name}")
    try:
        fuzzer = target(seed=seed)
    except USER_CODE_FAILURES as e:
        raise ValueError(f"fuzzer {brief_repr(name)}: calling it with seed={seed!r} raised "
                         f"{error_line(e)}") from None
    if isinstance(fuzzer, Fuzzer):
        return fuzzer
    raise ValueError(f"{brief_repr(name)} returned a {type(fuzzer).__name__}, not a Fuzzer")
