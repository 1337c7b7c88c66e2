"""Grouped definitions: one definition, many derived cases.

`GroupedStmts` benchmarks a statement (Python, C++ or both); `GroupedModules` an
`nn.Module` built by model setup. With a `signature` (`f(x, w) -> y`) torchmark also
derives the TorchScript variants (the statement or model scripted once, saved, and loaded
by the Python and the C++ cases) and the autograd variants (`y.backward()` appended),
for each thread count.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import re
import textwrap
from collections.abc import Iterable

from torchmark.suite.scripted import ScriptedModel
from torchmark.suite.signature import Signature, parse_signature
from torchmark.suite.timer_args import AutoLabels, TimerArgs

JIT_WARMUP_CALLS = 3


def clean(code: str | None) -> str:
    """Dedented code without surrounding blank lines ('' for None)."""
    if code is None:
        return ""
    if not isinstance(code, str):
        raise ValueError(f"expected code as a str, got {type(code).__name__}")
    return textwrap.dedent(code).strip("\n").rstrip()


@dataclasses.dataclass(frozen=True)
class GroupedSetup:
    """Setup shared by the cases of a definition: Python, C++, and C++ global setup
    (code outside the C++ function: includes, helpers; torchmark passes it on)."""

    py_setup: str = ""
    cpp_setup: str = ""
    global_setup: str = ""

    def __post_init__(self) -> None:
        for name in ("py_setup", "cpp_setup", "global_setup"):
            object.__setattr__(self, name, clean(getattr(self, name)))
        if self.py_setup:
            _python_syntax("GroupedSetup", "py_setup", self.py_setup)
        _cpp_function_body("GroupedSetup", "", self.cpp_setup)


def _cpp_function_body(owner: str, cpp_stmt: str, cpp_setup: str) -> None:
    """C++ statements and setup run inside a function: an `#include` there is refused
    when the definition is made (it belongs in global_setup)."""
    from torchmark.cpp.snippet_source import check_function_body_code

    try:
        check_function_body_code(cpp_stmt, cpp_setup)
    except ValueError as e:
        raise ValueError(f"{owner}: {e}") from None


def _thread_counts(owner: str, num_threads) -> tuple[int, ...]:
    try:
        values = (num_threads,) if isinstance(num_threads, int) else tuple(num_threads)
    except TypeError:  # neither an int nor an iterable (e.g. 2.0)
        values = (num_threads,)
    if not values or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                         for n in values):
        raise ValueError(f"{owner}: num_threads must be a positive int or a non-empty tuple "
                         f"of them, got {num_threads!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{owner}: num_threads lists a count twice: {num_threads!r}")
    return values


def _python_syntax(owner: str, field: str, code: str) -> ast.Module:
    """The code's syntax tree; a ValueError naming the field and its own line if the code
    is not valid Python (found here, not when the case runs generated code)."""
    try:
        return ast.parse(code)
    except SyntaxError as e:
        raise ValueError(f"{owner}: {field} is not valid Python: {e.msg} (line {e.lineno}: "
                         f"{(e.text or '').strip()!r})") from None


def _python_assigns(owner: str, field: str, code: str, name: str) -> None:
    tree = _python_syntax(owner, field, code)
    if name not in _bound_names(tree):
        raise ValueError(f"{owner}: {field} never assigns {name!r} (named by the signature "
                         f"or required by {owner})")


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code binds: assigned, defined (def, class) or imported (`as` too)."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


def _script_sees_only_its_arguments(owner: str, code: str, signature: Signature) -> None:
    """A TorchScript model made from a statement sees its arguments, the names the
    statement assigns, torch and builtins: anything else (a setup variable) would
    only fail when the model is scripted, far from the definition."""
    tree = ast.parse(code)
    known = {*signature.args, "torch", *dir(builtins)}
    known |= _bound_names(tree)
    unknown = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Load)} - known)
    if unknown:
        raise ValueError(f"{owner}: py_stmt uses {', '.join(map(repr, unknown))}, which the "
                         f"signature does not pass in: with torchscript=True the statement "
                         f"becomes a model's forward({signature.arg_list}), which sees only "
                         "its arguments and torch")


_CPP_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _cpp_mentions(owner: str, field: str, code: str, name: str) -> None:
    if not re.search(rf"\b{re.escape(name)}\b", _CPP_COMMENT.sub(" ", code)):
        raise ValueError(f"{owner}: {field} never defines {name!r}")


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p.strip())


@dataclasses.dataclass(frozen=True)
class DerivedCase:
    """One case a definition yields (before materialize gives it its label)."""

    auto_labels: AutoLabels
    timer_args: TimerArgs
    scripted: ScriptedModel | None = None


@dataclasses.dataclass(frozen=True)
class GroupedBenchmark:
    """A definition and the rules that derive its cases; build it with `GroupedStmts`,
    `GroupedModules` or `GroupedVariants`."""

    kind: str  # "stmts" or "modules"
    py_fwd_stmt: str
    cpp_fwd_stmt: str
    setup: GroupedSetup
    signature: Signature | None
    torchscript: bool
    autograd: bool
    num_threads: tuple[int, ...]
    py_model_setup: str = ""
    cpp_model_setup: str = ""

    # -- constructors -----------------------------------------------------------------
    @classmethod
    def from_stmts(cls, py_stmt: str | None = None, cpp_stmt: str | None = None,
                   setup: GroupedSetup | None = None, signature: str | None = None,
                   torchscript: bool = False, autograd: bool = False,
                   num_threads: int | Iterable[int] = 1) -> GroupedBenchmark:
        owner = "GroupedStmts"
        py_stmt, cpp_stmt = clean(py_stmt), clean(cpp_stmt)
        setup = _check_setup(owner, setup)
        if not py_stmt and not cpp_stmt:
            raise ValueError(f"{owner}: give py_stmt, cpp_stmt or both")
        if py_stmt:
            _python_syntax(owner, "py_stmt", py_stmt)
        _cpp_function_body(owner, cpp_stmt, "")
        parsed = parse_signature(signature) if signature is not None else None
        _check_modes(owner, parsed, torchscript, autograd)
        _check_cpp_side(owner, setup, bool(cpp_stmt), torchscript)
        if torchscript and not py_stmt:
            raise ValueError(f"{owner}: torchscript=True needs py_stmt (the model is scripted "
                             "from the Python statement)")
        if parsed is not None:
            if py_stmt:
                if parsed.output is not None:
                    _python_assigns(owner, "py_stmt", py_stmt, parsed.output)
                if torchscript:
                    _script_sees_only_its_arguments(owner, py_stmt, parsed)
            if cpp_stmt and parsed.output is not None:
                _cpp_mentions(owner, "cpp_stmt", cpp_stmt, parsed.output)
        return cls("stmts", py_stmt, cpp_stmt, setup, parsed, bool(torchscript),
                   bool(autograd), _thread_counts(owner, num_threads))

    @classmethod
    def from_modules(cls, py_model_setup: str | None = None,
                     cpp_model_setup: str | None = None, setup: GroupedSetup | None = None,
                     signature: str | None = None, torchscript: bool = False,
                     autograd: bool = False,
                     num_threads: int | Iterable[int] = 1) -> GroupedBenchmark:
        owner = "GroupedModules"
        py_model, cpp_model = clean(py_model_setup), clean(cpp_model_setup)
        setup = _check_setup(owner, setup)
        if not py_model and not cpp_model:
            raise ValueError(f"{owner}: give py_model_setup, cpp_model_setup or both")
        if signature is None:
            raise ValueError(f"{owner}: a signature is required (e.g. 'f(x) -> y')")
        parsed = parse_signature(signature)
        _check_modes(owner, parsed, torchscript, autograd)
        _check_cpp_side(owner, setup, bool(cpp_model), torchscript)
        if torchscript and not py_model:
            raise ValueError(f"{owner}: torchscript=True needs py_model_setup (the model is "
                             "scripted in Python)")
        if py_model:
            _python_assigns(owner, "py_model_setup", py_model, "model")
        if cpp_model:
            _cpp_mentions(owner, "cpp_model_setup", cpp_model, "model")
        args, out = parsed.arg_list, parsed.output
        py_call, cpp_call = f"model({args})", f"model->forward({args});"
        if out is not None:
            py_call, cpp_call = f"{out} = {py_call}", f"auto {out} = {cpp_call}"
        return cls("modules", py_call if py_model else "", cpp_call if cpp_model else "",
                   setup, parsed, bool(torchscript), bool(autograd),
                   _thread_counts(owner, num_threads), py_model, cpp_model)

    # -- derivation ---------------------------------------------------------------------
    def runtimes(self, language: str) -> tuple[str, ...]:
        """Eager where the language has a statement; TorchScript (the model scripted from
        Python) in Python, and in C++ too where the definition has any C++ (a C++ setup
        alone is enough: the C++ case loads the saved model)."""
        if language == "python":
            eager = bool(self.py_fwd_stmt)
            jit = self.torchscript
        else:
            eager = bool(self.cpp_fwd_stmt)
            jit = self.torchscript and bool(self.cpp_fwd_stmt or self.setup.cpp_setup)
        return (("eager",) if eager else ()) + (("jit",) if jit else ())

    @property
    def autograd_modes(self) -> tuple[str, ...]:
        return ("forward", "forward+backward") if self.autograd else ("forward",)

    def scripted_model(self) -> ScriptedModel | None:
        if not self.torchscript:
            return None
        assert self.signature is not None
        if self.kind == "stmts":
            return ScriptedModel("stmts", "", self.py_fwd_stmt, self.signature)
        return ScriptedModel("modules", self.setup.py_setup, self.py_model_setup,
                             self.signature)

    def cases(self) -> list[DerivedCase]:
        """Every case: language x runtime x autograd x thread count."""
        out = []
        scripted = self.scripted_model()
        for language in ("python", "cpp"):
            for runtime in self.runtimes(language):
                for autograd in self.autograd_modes:
                    for threads in self.num_threads:
                        labels = AutoLabels(runtime, autograd, language, threads)
                        model = scripted if runtime == "jit" else None
                        out.append(DerivedCase(labels, self._timer_args(labels, model), model))
        return out

    def _timer_args(self, labels: AutoLabels, model: ScriptedModel | None) -> TimerArgs:
        backward = labels.autograd == "forward+backward"
        out = self.signature.output if self.signature else ""
        if labels.language == "python":
            setup = _join(self.setup.py_setup, self.py_model_setup)
            stmt = self.py_fwd_stmt
            if model is not None:
                assert self.signature is not None  # a model comes with its signature
                stmt = f"jit_model({self.signature.arg_list})"
                stmt = f"{out} = {stmt}" if out else stmt
                warm = _join(stmt, f"{out}.backward()" if backward else "")
                setup = _join(self.setup.py_setup, f"jit_model = torch.jit.load({str(model.path)!r})",
                              f"for _ in range({JIT_WARMUP_CALLS}):  # let TorchScript specialize",
                              textwrap.indent(warm, "    "))
            if backward:
                stmt = _join(stmt, f"{out}.backward()")
            return TimerArgs(stmt, setup or "pass", "", labels.num_threads, "python")

        global_setup = self.setup.global_setup
        setup = _join(self.setup.cpp_setup, self.cpp_model_setup)
        stmt = self.cpp_fwd_stmt
        if model is not None:
            assert self.signature is not None
            inputs = ", ".join(self.signature.args)
            call = "jit_model.forward(jit_inputs)"  # a tensor only where backward needs one
            stmt = _join(f"std::vector<torch::jit::IValue> jit_inputs{{{inputs}}};",
                         f"auto {out} = {call}{'.toTensor()' if backward else ''};" if out
                         else f"{call};")
            warm = _join(stmt, f"{out}.backward();" if backward else "")
            global_setup = _join("#include <torch/script.h>", global_setup)
            setup = _join(self.setup.cpp_setup,
                          f"auto jit_model = torch::jit::load({json.dumps(str(model.path))});",
                          f"for (int i = 0; i < {JIT_WARMUP_CALLS}; ++i) {{",
                          textwrap.indent(warm, "  "), "}")
        if backward:
            stmt = _join(stmt, f"{out}.backward();")
        return TimerArgs(stmt, setup, global_setup, labels.num_threads, "cpp")


def _check_setup(owner: str, setup) -> GroupedSetup:
    if setup is None:
        return GroupedSetup()
    if not isinstance(setup, GroupedSetup):
        raise ValueError(f"{owner}: setup must be a GroupedSetup, got {type(setup).__name__}")
    return setup


def _check_cpp_side(owner: str, setup: GroupedSetup, has_cpp: bool, torchscript: bool) -> None:
    """global_setup needs a C++ case to reach: a C++ statement or model, or a C++ setup
    with torchscript=True (its C++ case loads the scripted model)."""
    if setup.global_setup and not (has_cpp or (torchscript and setup.cpp_setup)):
        raise ValueError(f"{owner}: setup.global_setup is C++ code, but the definition has "
                         "no C++ side")


def _check_modes(owner: str, signature: Signature | None, torchscript, autograd) -> None:
    for name, value in (("torchscript", torchscript), ("autograd", autograd)):
        if not isinstance(value, bool):
            raise ValueError(f"{owner}: {name} must be True or False, got {value!r}")
    if torchscript and signature is None:
        raise ValueError(f"{owner}: torchscript=True needs a signature (e.g. 'f(x) -> y')")
    if autograd and (signature is None or signature.output is None):
        raise ValueError(f"{owner}: autograd=True needs a signature naming the output (the "
                         "backward pass starts from it), not '-> None'")


GroupedStmts = GroupedBenchmark.from_stmts
GroupedModules = GroupedBenchmark.from_modules
