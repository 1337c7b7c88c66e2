"""The operator policy: which names from a file (an op config, a trace) may become a
Python callable, decided from what the object *is* (where it is defined, what kind of
callable it is), not from a list of bad names.

Allowed, and nothing else:
- `torch.<f>`: a native tensor operator (a binding of torch._C._VariableFunctions), or a
  tensor function defined in torch's tensor-function modules (`torch.functional`, ...);
- `torch.nn.functional.<f>`, `torch.linalg.<f>`, `torch.fft.<f>`, `torch.special.<f>`:
  functions defined in that namespace or its C bindings (or native tensor operators);
- `torch.Tensor.<m>`: a method of torch's tensor class (its C methods, or those defined
  in torch._tensor);
- `torch.nn.<Class>`: an nn.Module subclass defined in torch.nn.modules;
- `aten::<op>[.<overload>]`: an operator of the ATen dispatcher (TorchScript-only
  builtins such as aten::save, aten::manual_seed are not).
Every one of these, where it maps to an ATen op, must also be free of side effects: no
argument naming a file, no Storage in or out, and none of SIDE_EFFECT_OPS (the
hand-picked rest). Private and dunder names are never operators.

Arguments that switch a safety check off are refused by their value, found from the
ops' own schemas rather than listed: a bool argument named `unsafe` given True
(segment_reduce's skips its bounds checks and read out of bounds, or crashed the process
of a run), and one named `check_*`, `*_check` or `validate*` given False
(`safety_refusal`); Python-level switches the schemas do not show are in
PYTHON_SAFETY_SWITCHES.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from torchmark.core.errors import PolicyError

FUNCTION_NAMESPACES = ("torch", "torch.nn.functional", "torch.linalg", "torch.fft",
                       "torch.special")
# modules of torch that define tensor functions only (no I/O, no process-wide state)
TENSOR_FUNCTION_MODULES = {
    "torch": ("torch.functional", "torch._lowrank", "torch._lobpcg", "torch._linalg_utils"),
    "torch.nn.functional": ("torch.nn.functional", "torch._C._nn"),
    "torch.linalg": ("torch.linalg", "torch._C._linalg"),
    "torch.fft": ("torch.fft", "torch._C._fft"),
    "torch.special": ("torch.special", "torch._C._special"),
}
# aten op-name prefixes of each namespace's C bindings (torch.linalg.inv is aten::linalg_inv)
_ATEN_PREFIX = {"torch": "", "torch.nn.functional": "", "torch.linalg": "linalg_",
                "torch.fft": "fft_", "torch.special": "special_", "torch.Tensor": ""}

# Side effects a schema does not show: the hand-picked rest, in one place.
SIDE_EFFECT_OPS = {
    "from_file": "reads (and with shared=True writes) a file",
    "save": "writes a file",
    "_print": "writes to the terminal",
    "warn": "writes to the terminal",
    "_cufft_set_plan_cache_max_size": "changes a process-wide cuFFT setting",
    "_cufft_clear_plan_cache": "changes a process-wide cuFFT setting",
    "_assert_async": "a failing assert poisons the CUDA context of the whole run",
    "_functional_assert_async": "a failing assert poisons the CUDA context of the whole run",
    "share_memory_": "creates shared-memory files",
    "_share_memory_": "creates shared-memory files",
    "untyped_storage": "returns the tensor's Storage",
    "storage": "returns the tensor's Storage",
    "register_hook": "registers a callable run by autograd",
    "register_post_accumulate_grad_hook": "registers a callable run by autograd",
}
FILE_ARGUMENT_NAMES = frozenset({"filename", "file", "path", "fname", "f"})
# a bool argument that turns a check off: its name, and the value that does (the schemas
# say which ops have one: `safety_switches`)
_UNSAFE_WHEN_TRUE = re.compile(r"^unsafe$")
_UNSAFE_WHEN_FALSE = re.compile(r"^(check(_\w+)?|\w+_check|validate(_\w+)?)$")
# switches of Python bindings that no ATen schema shows (sparse constructors)
PYTHON_SAFETY_SWITCHES = {"check_invariants": False, "validate_args": False}

# Private aten ops (`aten::_name`) may skip the checks their public forms make:
# `_reshape_alias` takes any sizes and strides (a 4-line config read far past a 1-element
# tensor and crashed the process), `_index_put_impl_(unsafe=True)` skips index bounds.
# A config never names one; a replay runs only these, which check what they are given
# and are what traces record (softmax backward, dtype conversion, attention...).
REPLAY_PRIVATE_OPS = frozenset({
    "_log_softmax", "_log_softmax_backward_data", "_softmax", "_softmax_backward_data",
    "_to_copy", "_unsafe_view", "_local_scalar_dense", "_conj", "_conj_physical",
    "_neg_view", "_embedding_bag", "_embedding_bag_forward_only", "_embedding_bag_backward",
    "_embedding_bag_dense_backward", "_embedding_bag_per_sample_weights_backward",
    "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d",
    "_convolution", "_batch_norm_impl_index", "_batch_norm_impl_index_backward",
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "_fused_dropout", "_masked_scale",
    "_scaled_dot_product_attention_math", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "_fused_adam_",
    "_fused_adamw_", "_fused_sgd_", "_pdist_forward", "_pdist_backward", "_cdist_forward",
    "_cdist_backward", "_euclidean_dist", "_weight_norm_interface",
    "_weight_norm_interface_backward", "_addmm_activation", "_amp_update_scale_",
    "_amp_foreach_non_finite_check_and_unscale_", "_fused_moving_avg_obs_fq_helper",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "_pack_padded_sequence",
})
PRIVATE_PREFIXES_OK = ("_foreach_",)  # lists of tensors, each checked as its public op


def private_refusal(op_name: str, allowed: frozenset[str] = frozenset()) -> str | None:
    """Why a private aten op (`_name`) may not run, unless `allowed` lists it."""
    if not op_name.startswith("_") or op_name in allowed or \
            (allowed and op_name.startswith(PRIVATE_PREFIXES_OK)):
        return None
    return ("a private aten op, which may skip the argument checks of its public form "
            "(e.g. _reshape_alias takes any strides)")


def schema_side_effect(schema: Any) -> str | None:
    """Why an op with this FunctionSchema has a side effect, from the schema alone; None
    when it shows none."""
    for argument in schema.arguments:
        kind = str(argument.type)
        if "Storage" in kind:
            return f"it takes a Storage ({argument.name})"
        if "str" in kind and argument.name in FILE_ARGUMENT_NAMES:
            return f"its {argument.name!r} argument names a file"
    if any("Storage" in str(r.type) for r in schema.returns):
        return "it returns a Storage"
    return None


@functools.cache
def _dispatcher_ops() -> frozenset[str] | None:
    """Every `aten::name[.overload]` of the ATen dispatcher; None where torch cannot list
    them (the check is then skipped)."""
    import torch

    lister = getattr(torch._C, "_dispatch_get_all_op_names", None)
    return frozenset(n for n in lister() if n.startswith("aten::")) if lister else None


def aten_refusal(op_name: str, overload: str | None = None, *,
                 dispatched_only: bool = True,
                 private_ok: frozenset[str] = frozenset()) -> str | None:
    """Why `aten::op_name[.overload]` must not run from a file ("side effect: ..." or "a
    TorchScript builtin"), or None. Without an overload, every overload the dispatcher
    has counts (the packet picks one by the arguments). `dispatched_only=False` for a C
    binding of torch (torch.Tensor.cpu), judged on its side effects alone. A private op
    is refused unless `private_ok` lists it (replay's REPLAY_PRIVATE_OPS)."""
    import torch

    if op_name in SIDE_EFFECT_OPS:
        return f"side effect: {SIDE_EFFECT_OPS[op_name]}"
    private = private_refusal(op_name, private_ok)
    if private:
        return private
    try:
        packet = getattr(torch.ops.aten, op_name)
    except (AttributeError, RuntimeError):
        return None  # not an op: whoever resolves it says it is unknown
    registered = _dispatcher_ops()
    names = [overload or "default"] if overload is not None else packet.overloads()
    dispatched = 0
    for name in names:
        full = f"aten::{op_name}" + ("" if name == "default" else f".{name}")
        if registered is not None and full not in registered:
            continue  # a TorchScript-only overload (aten::add.str): not a tensor op
        try:
            op = getattr(packet, name)
        except AttributeError:
            continue
        dispatched += 1
        reason = schema_side_effect(op._schema)
        if reason:
            return f"side effect: {reason}"
    if not dispatched and dispatched_only:
        return "a TorchScript builtin, not an operator of the ATen dispatcher"
    return None


def check_aten(op_name: str, overload: str | None = None, *, label: str | None = None,
               dispatched_only: bool = True) -> None:
    """PolicyError when aten_refusal refuses `aten::op_name[.overload]`."""
    reason = aten_refusal(op_name, overload, dispatched_only=dispatched_only)
    if reason:
        label = label or f"aten::{op_name}" + (f".{overload}" if overload else "")
        raise PolicyError(f"operator {label!r} refused: {reason}")


def _refuse(name: str, reason: str) -> PolicyError:
    return PolicyError(f"operator {name!r} refused: {reason}")


def _defined_in(target: Any) -> str:
    return str(getattr(target, "__module__", None) or type(target).__module__)


def _what_it_is(target: Any) -> str:
    if inspect.ismodule(target):
        return "a module, not an operator"
    if inspect.isclass(target):
        return f"a class (defined in {_defined_in(target)}), not an operator"
    if not callable(target):
        return f"not callable (a {type(target).__name__})"
    return f"defined in {_defined_in(target)}, outside torch's tensor operators"


def _split(name: str) -> tuple[str, str]:
    """(namespace, attribute) of a dotted name; PolicyError for any other shape."""
    parts = name.split(".")
    if parts[0] != "torch" or len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise LookupError(f"unknown operator {name!r}: expected torch.<name>, "
                          "aten::<op>[.<overload>] or a name registered with register_op "
                          "(in a module given with --plugin)")
    if any(p.startswith("_") for p in parts[1:]):
        raise _refuse(name, "private and dunder names are not operators")
    for namespace in ("torch.nn.functional", "torch.linalg", "torch.fft", "torch.special",
                      "torch.Tensor", "torch.nn"):
        if name.startswith(namespace + ".") and len(parts) == namespace.count(".") + 2:
            return namespace, parts[-1]
    if len(parts) == 2:
        return "torch", parts[1]
    raise _refuse(name, f"{'.'.join(parts[:2])} is not an operator namespace (operators are "
                  f"{', '.join(n + '.<f>' for n in FUNCTION_NAMESPACES)}, torch.Tensor.<m>, "
                  "torch.nn.<Module> and aten::<op>)")


def _namespace_object(namespace: str) -> Any:
    import importlib

    import torch

    return torch.Tensor if namespace == "torch.Tensor" else importlib.import_module(namespace)


def _is_native_binding(namespace: str, attr: str, target: Any) -> bool:
    """A C binding of an ATen op: torch._C._VariableFunctions, or a method of TensorBase."""
    import torch

    if namespace == "torch.Tensor":
        return getattr(target, "__objclass__", None) is torch._C.TensorBase
    return getattr(torch._C._VariableFunctions, attr, None) is target


def resolve(name: str) -> tuple[str, Any]:
    """("function" | "module", the object) for a name a file gives; PolicyError when the
    policy refuses it, LookupError when torch has no such name."""
    import torch

    namespace, attr = _split(name)
    holder = _namespace_object(namespace)
    try:
        target = getattr(holder, attr)
    except AttributeError:
        raise LookupError(f"unknown operator {name!r}: {namespace} has no attribute "
                          f"{attr!r}") from None
    if namespace == "torch.nn":
        if inspect.isclass(target) and issubclass(target, torch.nn.Module):
            if not _defined_in(target).startswith("torch.nn.modules."):
                raise _refuse(name, f"the module class is defined in {_defined_in(target)}, "
                              "outside torch.nn.modules")
            return "module", target
        raise _refuse(name, _what_it_is(target) if not inspect.isclass(target) else
                      f"a class (defined in {_defined_in(target)}) but not an nn.Module")
    if inspect.isclass(target) and issubclass(target, torch.nn.Module):
        raise _refuse(name, f"an nn.Module class: name it torch.nn.{attr}")
    if not callable(target) or inspect.isclass(target) or inspect.ismodule(target):
        raise _refuse(name, _what_it_is(target))
    if _is_native_binding(namespace, attr, target):
        check_aten(_ATEN_PREFIX[namespace] + attr, label=name, dispatched_only=False)
        return "function", target
    if attr in SIDE_EFFECT_OPS:
        raise _refuse(name, f"side effect: {SIDE_EFFECT_OPS[attr]}")
    defined = _defined_in(target)
    python_function = inspect.isfunction(target) or inspect.isbuiltin(target)
    if namespace == "torch.Tensor":
        if inspect.isfunction(target) and defined == "torch._tensor":
            return "function", target
    elif python_function and defined in TENSOR_FUNCTION_MODULES[namespace]:
        if inspect.isbuiltin(target):
            check_aten(_ATEN_PREFIX[namespace] + attr, label=name, dispatched_only=False)
        return "function", target
    elif namespace != "torch" and _is_native_binding("torch", attr, target):
        check_aten(attr, label=name, dispatched_only=False)  # F.conv2d is torch.conv2d
        return "function", target
    raise _refuse(name, _what_it_is(target))


def switch_value(name: str) -> bool | None:
    """The value of a bool argument named `name` that turns a safety check off (True
    for `unsafe`, False for `check_*`, `*_check`, `validate*`), or None."""
    if _UNSAFE_WHEN_TRUE.match(name):
        return True
    if _UNSAFE_WHEN_FALSE.match(name) or name in PYTHON_SAFETY_SWITCHES:
        return False
    return None


@functools.cache
def safety_switches(aten_name: str) -> tuple[tuple[str, int | None, bool], ...]:
    """The safety switches of every overload of `aten::aten_name`: (argument name, its
    position where it may be given positionally, the value that turns the check off)."""
    import torch

    try:
        packet = getattr(torch.ops.aten, aten_name)
    except (AttributeError, RuntimeError):
        return ()
    out = []
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        for position, argument in enumerate(schema.arguments):
            value = switch_value(argument.name)
            if value is not None and str(argument.type) in ("bool", "Optional[bool]"):
                out.append((argument.name, None if argument.kwarg_only else position, value))
    return tuple(dict.fromkeys(out))


def aten_name_of(name: str) -> str | None:
    """The ATen op a config's operator name calls (`torch.linalg.inv` ->
    `linalg_inv`, `aten::segment_reduce.default` -> `segment_reduce`), or None."""
    if name.startswith("aten::"):
        return name[len("aten::"):].partition(".")[0]
    try:
        namespace, attr = _split(name)
    except (LookupError, PolicyError):
        return None
    return _ATEN_PREFIX[namespace] + attr if namespace in _ATEN_PREFIX else None


def safety_refusal(name: str, args: Any, kwargs: Any) -> str | None:
    """Why calling operator `name` with these arguments must not happen: an argument
    that turns one of its safety checks off (see the module docstring), given by name or
    by position; None when none does."""
    aten = aten_name_of(name)
    switches = safety_switches(aten) if aten else ()
    given = dict(kwargs or {})
    for key, value in given.items():  # Python-level switches the schemas do not show
        if key in PYTHON_SAFETY_SWITCHES and PYTHON_SAFETY_SWITCHES[key] is value:
            return f"{key}={value} turns a safety check off"
    for argument, position, unsafe in switches:
        value = given.get(argument)
        if value is None and position is not None and position < len(args or ()):
            value = args[position]
        if isinstance(value, bool) and value is unsafe:
            return f"{argument}={value} turns a safety check off"
    return None
