"""Work done by well-known operators, for GB/s and TFLOP/s in reports."""

from __future__ import annotations

from typing import Any

_MATMUL = {"mm", "matmul", "bmm", "addmm", "baddbmm", "addbmm", "linear"}
_ELEMENTWISE = {"add", "sub", "mul", "div", "add_", "sub_", "mul_", "div_", "relu", "relu_",
                "sigmoid", "tanh", "gelu", "exp", "log", "neg", "abs", "sqrt", "silu",
                "softmax", "where", "maximum", "minimum", "pow"}
_COPIES = {"clone", "copy_", "contiguous"}  # bytes moved, no arithmetic
# in-place ops that overwrite `self` without reading it
_OVERWRITES = {"copy_", "fill_", "zero_", "uniform_", "normal_", "random_", "bernoulli_",
               "exponential_"}


def changes_inputs(op: str) -> bool:
    """Whether an operator changes what its inputs hold for the next call: in-place
    ones (a trailing `_`), except those that overwrite `self` whatever it held."""
    name = base_name(op)
    return name.endswith("_") and name not in _OVERWRITES


def base_name(op: str) -> str:
    """`torch.nn.functional.relu` / `torch.Tensor.add_` / `aten::mm.default` -> `relu` /
    `add_` / `mm`."""
    if op.startswith("aten::"):
        return op[len("aten::"):].split(".")[0]
    return op.rsplit(".", 1)[-1]


def tensors_in(values: Any) -> list:
    """The tensors in `values` (nested lists, tuples and dict values)."""
    import torch

    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        return [t for v in values for t in tensors_in(v)]
    return []


def _bytes(tensors: list) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def work(op: str, args: list[Any], kwargs: dict[str, Any], output: Any,
         built: Any = None) -> dict[str, int]:
    """{"flops": ..., "bytes": ...} where the operator is known; {} otherwise. `built` is
    the module a build spec made (its parameters count as bytes read)."""
    name = base_name(op)
    positional, outputs = tensors_in(args), tensors_in(output)
    inputs = positional + tensors_in(kwargs)
    if not outputs:
        return {}
    # tensors only written (out=, the self of copy_ / fill_ ...) are counted once, as output
    written = [t for t in tensors_in(kwargs.get("out"))  # an out= that is also an input
               if not any(t is a for a in positional)]  # is read too
    if name in _OVERWRITES and args:
        written += tensors_in(args[0])
    reads = [t for i, t in enumerate(inputs) if not any(t is w for w in written)
             and not any(t is u for u in inputs[:i])]  # a tensor passed twice is read once
    moved = _bytes(reads) + _bytes(outputs)
    out = outputs[0]
    if name == "Linear" and hasattr(built, "in_features"):
        moved += sum(p.numel() * p.element_size() for p in built.parameters())
        return {"flops": int(2 * out.numel() * built.in_features), "bytes": int(moved)}
    if name in _MATMUL:
        mats = [t for t in positional if t.dim() >= 2]
        if len(mats) < 2:
            return {}
        a, b = mats[-2], mats[-1]
        if name == "linear":  # weight is (out, in)
            k = a.shape[-1]
        else:
            k = a.shape[-1] if a.shape[-1] == b.shape[-2] else a.shape[-2]
        flops = 2 * out.numel() * k
        if a.dim() == 3 and out.dim() == 2:  # addbmm: the batch is summed away
            flops *= a.shape[0]
        if name in ("addmm", "baddbmm", "addbmm"):
            flops += out.numel()
        return {"flops": int(flops), "bytes": int(moved)}
    if name in _ELEMENTWISE:
        return {"flops": int(out.numel()), "bytes": int(moved)}
    if name in _COPIES:
        return {"flops": 0, "bytes": int(moved)}
    return {}
