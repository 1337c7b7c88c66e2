"""Data generators: concrete argument specs -> Python values and tensors on a device.

PARAM's DefaultDataGenerator, with its gaps filled: floating tensors are uniform in
[0, 1) (or in `value_range`), integer tensors uniform in [-10, 10) (or `value_range`,
inclusive; unsigned ones from 0), bool tensors fair coin flips; floating tensors require
grad unless `requires_grad` says otherwise (PARAM's default), others never do. Scalars
take `value`, or a uniform draw from `value_range`. Draws come from a generator seeded by
the case id, so a case gets the same data whatever ran before it (resume included).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from torchmark.core.tensor_bounds import check_tensor

DTYPE_NAMES = {
    "uint8": "uint8", "int8": "int8", "int16": "int16", "int": "int32", "long": "int64",
    "float": "float32", "double": "float64", "float16": "float16", "bfloat16": "bfloat16",
    "bool": "bool",
}


def torch_dtype(name: str):
    import torch

    return getattr(torch, DTYPE_NAMES[name])


def seed_for(case_id: str) -> int:
    return int.from_bytes(hashlib.sha256(case_id.encode()).digest()[:8], "little") >> 1


class DataGenerator:
    """Builds the values of one case's arguments on `device`."""

    def __init__(self, device: str, seed: int) -> None:
        import torch

        self.device = torch.device(device)
        self.random = random.Random(seed)
        self.generator = torch.Generator(device="cpu").manual_seed(seed)

    def tensor(self, spec: dict[str, Any]):
        import torch

        dtype = torch_dtype(spec.get("dtype", "float"))
        shape = tuple(spec["shape"])
        # refused before allocating: the draw on the CPU (floats drawn in 32 or 64 bits),
        # then the tensor on its device
        check_tensor(shape, max(dtype.itemsize, 4 if dtype.is_floating_point else 1), "cpu",
                     "an input tensor")
        if self.device.type == "cuda":
            check_tensor(shape, dtype.itemsize, str(self.device), "an input tensor")
        low_high = spec.get("value_range")
        if dtype == torch.bool:
            t = torch.rand(shape, generator=self.generator) < 0.5
        elif dtype.is_floating_point:
            draw = torch.float64 if dtype == torch.float64 else torch.float32
            t = torch.rand(shape, generator=self.generator, dtype=draw)
            if low_high:  # scaled in double: max - min may not fit the dtype itself
                t = t.double() * (float(low_high[1]) - float(low_high[0])) + low_high[0]
            t = t.to(dtype)
        else:
            lo, hi = (low_high[0], low_high[1] + 1) if low_high else (-10, 10)
            if dtype == torch.uint8:
                lo = max(lo, 0)
            t = torch.randint(int(lo), int(hi), shape, generator=self.generator, dtype=dtype)
        t = t.to(self.device)
        requires_grad = spec.get("requires_grad")
        if requires_grad is None:
            requires_grad = dtype.is_floating_point
        if requires_grad:
            if not dtype.is_floating_point:
                raise ValueError(f"a {spec.get('dtype')} tensor cannot require grad")
            t.requires_grad_(True)
        return t

    def value(self, spec: dict[str, Any]) -> Any:
        import torch

        kind = spec["type"]
        if kind == "tensor":
            return self.tensor(spec)
        if kind in ("genericlist", "tuple"):
            items = [self.value(item) for item in spec["value"]]
            return items if kind == "genericlist" else tuple(items)
        if kind == "none":
            return None
        if kind == "device":
            return torch.device(spec.get("value", "cpu"))
        value = spec.get("value")
        if value is None and spec.get("value_range") is not None:
            lo, hi = spec["value_range"]
            if kind in ("int", "long"):
                return self.random.randint(int(lo), int(hi))
            return self.random.uniform(lo, hi)
        if kind in ("float", "double") and value is not None:
            return float(value)
        return value

    def arguments(self, spec: dict[str, Any] | None) -> tuple[list[Any], dict[str, Any]]:
        if spec is None:
            return [], {}
        return ([self.value(a) for a in spec.get("args", [])],
                {k: self.value(v) for k, v in spec.get("kwargs", {}).items()})
