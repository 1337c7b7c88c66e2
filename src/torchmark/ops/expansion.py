"""Range and copy expansion (PARAM's RangeConfigIterator, and more).

`__range__` names the attributes of an argument that hold ranges:

- tensor `shape`: an element `[min, max, step]` takes every value min, min+step, ... <= max;
  tensor `dtype`: a list of dtypes;
- int / long `value`: `[min, max, step]`, inclusive; float / double `value` too (beyond
  PARAM, which has no float ranges);
- bool / str / device `value`: a list of values;
- genericlist / tuple `value`: each item expanded, the results crossed.

Everything is a Cartesian product: positional arguments first (argument 0 outermost), then
kwargs (also expanded, beyond PARAM); within a shape, dimension 0 outermost. After
expansion `__copy__` entries (`{"shape": [dim, [arg, arg_dim]]}`) copy a dimension from an
earlier positional argument, in argument order. Meta keys are removed from the result.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator
from typing import Any

from torchmark.ops.schema import BenchmarkConfig, ConfigError, Spec

META = ("__range__", "__copy__", "__list__")


MAX_CASES = 1_000_000  # cases one spec, or a whole config, may have: more is a typo


def _range_length(lo, hi, step) -> int:
    """How many values `_inclusive` gives, without making them."""
    if all(isinstance(x, int) for x in (lo, hi, step)):  # step > 0 (the schema checks)
        return max(0, (hi - lo) // step + 1)  # len(range(...)) overflows past 2**63
    # max is kept when float steps land a hair beyond it (0.1 + 0.2 > 0.3)
    return max(0, math.floor((hi - lo) / step + 1e-9) + 1)


def _inclusive(lo: Any, hi: Any, step: Any, where: str = "spec") -> list:
    length = _range_length(lo, hi, step)
    _check_count(length, where)
    if all(isinstance(x, int) for x in (lo, hi, step)):
        return list(range(lo, hi + 1, step))
    # 12 significant digits: 0.30000000000000004 is 0.3, and a step of 1e-15 survives
    return [float(f"{lo + i * step:.12g}") for i in range(length)]


def _check_count(total: int, where: str) -> None:
    """Refuse, before building anything, a product of ranges too large to run."""
    if total > MAX_CASES:
        raise ConfigError("config", [(where, f"its ranges expand to {total:,} cases, more "
                                             f"than the {MAX_CASES:,} a spec may have; "
                                             "narrow them (or split the sweep)")])


def _arg_count(arg: dict[str, Any]) -> int:
    """How many versions `_expand_value` makes of one argument, counted, not made."""
    ranged = arg.get("__range__", [])
    kind = arg["type"]
    if kind == "tensor":
        count = len(arg.get("dtype", [])) if "dtype" in ranged else 1
        if "shape" in ranged:
            count *= math.prod(_range_length(*d) if isinstance(d, list) else 1
                               for d in arg["shape"])
        return count
    if kind in ("genericlist", "tuple"):
        return math.prod(_arg_count(item) for item in arg["value"])
    if "value" in ranged:
        value = arg["value"]
        return _range_length(*value) if kind in ("int", "long", "float", "double") \
            else len(value)
    return 1


def _first_version(arg: dict[str, Any]) -> dict[str, Any]:
    """The argument with every range cut to its first value: what `expand_arg` makes
    first, made alone (for checks that hold for every expansion)."""
    ranged, kind = arg.get("__range__", []), arg["type"]
    if kind == "tensor":
        shape = [d[0] if isinstance(d, list) else d for d in arg["shape"]]
        dtype = arg.get("dtype", "float")
        return {**arg, "shape": shape, "dtype": dtype[0] if "dtype" in ranged else dtype,
                "__range__": []}
    if kind in ("genericlist", "tuple"):
        return {**arg, "value": [_first_version(item) for item in arg["value"]]}
    if "value" in ranged:
        return {**arg, "value": arg["value"][0], "__range__": []}
    return arg


def _first_spec(spec: dict[str, Any]) -> dict[str, Any]:
    return {"args": [_first_version(a) for a in spec.get("args", [])],
            "kwargs": {k: _first_version(a) for k, a in spec.get("kwargs", {}).items()}}


def spec_count(spec: dict[str, Any]) -> int:
    """How many concrete {args, kwargs} `expand_spec` makes of one spec."""
    return math.prod(_arg_count(a) for a in [*spec.get("args", []),
                                              *spec.get("kwargs", {}).values()])


def _expand_value(arg: dict[str, Any], where: str = "spec") -> list[dict[str, Any]]:
    """Every concrete version of one argument (a dict as in the config)."""
    ranged = arg.get("__range__", [])
    base = {k: v for k, v in arg.items() if k not in ("__range__", "__list__")}
    kind = arg["type"]
    if kind == "tensor":
        shapes = [arg["shape"]]
        if "shape" in ranged:
            _check_count(_arg_count(arg), where)
            dims = [_inclusive(d[0], d[1], d[2], where) if isinstance(d, list) else [d]
                    for d in arg["shape"]]
            shapes = [list(s) for s in itertools.product(*dims)]
        dtypes = arg.get("dtype", "float")
        dtypes = dtypes if "dtype" in ranged else [dtypes]
        return [{**base, "shape": shape, "dtype": dtype} for shape in shapes for dtype in dtypes]
    if kind in ("genericlist", "tuple"):
        # Items with ranges of their own expand even when the list does not name "value"
        # (PARAM would pass them through unexpanded, and fail at run time).
        for item in arg["value"]:
            if item.get("__copy__"):
                raise ConfigError("config", [(where, "__copy__ works on positional tensor "
                                                     "arguments only, not inside lists")])
        _check_count(_arg_count(arg), where)
        choices = [expand_arg(item, where) for item in arg["value"]]
        return [{**base, "value": list(items)} for items in itertools.product(*choices)]
    if "value" in ranged:
        value = arg["value"]
        values = _inclusive(value[0], value[1], value[2], where) if kind in ("int", "long", "float", "double") \
            else value
        return [{**base, "value": v} for v in values]
    return [base]


def expand_arg(arg: dict[str, Any], where: str = "spec") -> list[dict[str, Any]]:
    """The concrete versions of one argument, meta keys removed except `__copy__` (applied
    by `expand_spec`, which knows the other arguments)."""
    return _expand_value(arg, where)


def _apply_copies(args: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """Apply each argument's `__copy__` in argument order; a copy reads the current shape
    of any positional argument (earlier copies included), as PARAM does."""
    out = [dict(a, shape=list(a["shape"])) if a.get("type") == "tensor" else dict(a)
           for a in args]
    for i, arg in enumerate(out):
        copies = arg.pop("__copy__", None) or []
        if copies and arg.get("type") != "tensor":
            raise ConfigError("config", [(f"{where}.args[{i}].__copy__", "__copy__ copies "
                                          "into a tensor's shape; this argument is a "
                                          f"{arg.get('type')}")])
        for copy in copies:
            dim, (src, src_dim) = copy["shape"]
            path = f"{where}.args[{i}].__copy__"
            if not 0 <= src < len(out) or out[src].get("type") != "tensor":
                raise ConfigError("config", [(path, f"copies from argument {src}, which is not "
                                                    "a tensor argument of this spec")])
            source = out[src]["shape"]
            if not (0 <= dim < len(arg["shape"]) and 0 <= src_dim < len(source)):
                raise ConfigError("config", [(path, f"dimension {dim} <- argument {src} "
                                                    f"dimension {src_dim} is out of range")])
            arg["shape"][dim] = source[src_dim]
    for i, arg in enumerate(out):
        if arg.get("type") == "tensor" and -1 in arg["shape"]:
            raise ConfigError("config", [(f"{where}.args[{i}].shape",
                                          f"{arg['shape']} still holds -1 after __copy__")])
    return out


def expand_spec(spec: dict[str, Any], where: str = "spec") -> list[dict[str, Any]]:
    """Every concrete {args, kwargs} of one spec, in PARAM's order."""
    _check_count(spec_count(spec), where)
    args = [expand_arg(a, f"{where}.args[{i}]") for i, a in enumerate(spec.get("args", []))]
    names = list(spec.get("kwargs", {}))
    for name in names:
        if spec["kwargs"][name].get("__copy__"):
            raise ConfigError("config", [(f"{where}.kwargs.{name}.__copy__", "__copy__ works "
                                          "on positional tensor arguments only")])
    kwargs = [expand_arg(spec["kwargs"][n], f"{where}.kwargs.{n}") for n in names]
    out = []
    for combo in itertools.product(*args, *kwargs):
        positional = _apply_copies(list(combo[:len(args)]), where)
        out.append({"args": positional, "kwargs": dict(zip(names, combo[len(args):],
                                                            strict=True))})
    return out


def _has_ranges(spec: dict[str, Any]) -> bool:
    text = repr(spec)
    return "__range__" in text or "__copy__" in text


def spec_variants(specs: list[dict[str, Any]] | None, where: str) -> list[tuple[str, Any]]:
    """(id, concrete spec) for each spec of a build or input list: id `i` for a plain
    spec, `i_j` for the j-th expansion of a ranged one (PARAM's ids)."""
    if not specs:
        return [("0", None)]
    out = []
    for i, spec in enumerate(specs):
        if _has_ranges(spec):
            out += [(f"{i}_{j}", v) for j, v in enumerate(expand_spec(spec, f"{where}[{i}]"))]
        else:
            out.append((str(i), expand_spec(spec, f"{where}[{i}]")[0]))
    return out


@dataclasses.dataclass(frozen=True)
class Case:
    """One concrete benchmark: operator, ids, and the expanded build and input specs."""

    op: str
    config_index: int
    build_id: str
    input_id: str
    build: dict[str, Any] | None
    input: dict[str, Any]

    @property
    def id(self) -> str:
        """`op|config|build|input`, e.g. `torch.mm|0|0|0_5`."""
        return f"{self.op}|{self.config_index}|{self.build_id}|{self.input_id}"


def _dump(spec: Spec) -> dict[str, Any]:
    return spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=False)


def _clean_dump(spec: Spec) -> dict[str, Any]:
    """The spec as config JSON: empty meta lists dropped."""
    def clean(arg: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in arg.items() if not (k in META and not v)}
        if out.get("type") in ("genericlist", "tuple"):
            out["value"] = [clean(a) for a in out["value"]]
        return out
    data = _dump(spec)
    return {"args": [clean(a) for a in data["args"]],
            "kwargs": {k: clean(v) for k, v in data["kwargs"].items()}}


def check_expansion(config: BenchmarkConfig) -> int:
    """The number of cases `config` expands to, counted without making them; a
    ConfigError if it is over MAX_CASES, or if a `__copy__` does not fit (checked on
    each spec's first expansion: ranges change a shape's values, never its length)."""
    total = 0
    for op, entry in config.ops.items():
        for index, item in enumerate(entry.config):
            where = f"{op}.config[{index}]"
            counts = []
            for part, specs in (("build", item.build), ("input", item.input)):
                dumped = [_clean_dump(s) for s in specs or []]
                spec_counts = []
                for i, spec in enumerate(dumped):
                    named = [(f"args[{j}]", a) for j, a in enumerate(spec.get("args", []))]
                    named += [(f"kwargs.{k}", a) for k, a in spec.get("kwargs", {}).items()]
                    arg_counts = [_arg_count(arg) for _, arg in named]
                    for (name, _), count in zip(named, arg_counts, strict=True):
                        _check_count(count, f"{where}.{part}[{i}].{name}")
                    spec_counts.append(math.prod(arg_counts))
                    _check_count(spec_counts[-1], f"{where}.{part}[{i}]")
                    if spec_counts[-1]:  # __copy__ errors, at load, on the first case
                        expand_spec(_first_spec(spec), f"{where}.{part}[{i}]")
                counts.append(sum(spec_counts) or 1)
            total += math.prod(counts)
            if total > MAX_CASES:
                raise ConfigError("config", [(where, f"the config reaches {total:,} cases "
                                                     f"here, more than the {MAX_CASES:,} a "
                                                     "config may have; narrow its ranges (or "
                                                     "split it)")])
    return total


def iter_cases(config: BenchmarkConfig) -> Iterator[Case]:
    """Every case of a config, in order: operator, config entry, build, input."""
    for op, entry in config.ops.items():
        for index, item in enumerate(entry.config):
            where = f"{op}.config[{index}]"
            builds = spec_variants([_clean_dump(s) for s in item.build] if item.build else None,
                                   f"{where}.build")
            inputs = spec_variants([_clean_dump(s) for s in item.input], f"{where}.input")
            for build_id, build in builds:
                for input_id, spec in inputs:
                    yield Case(op, index, build_id, input_id, build, spec)
