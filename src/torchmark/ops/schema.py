"""The operator-config schema (PARAM's JSON format), validated with pydantic.

    {op_name: {build_iterator?, input_iterator?, build_data_generator?,
               input_data_generator?, config: [{build?: [spec], input: [spec]}]}}
    spec = {args: [arg], kwargs: {name: arg}}

Every problem is reported with its JSON path (`torch.mm.config[0].input[0].args[1].shape`)
and a one-line reason, before anything runs. Config text is data: nothing is evaluated.
"""

from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from torchmark.core.bounded_input import brief_repr
from torchmark.core.errors import LimitError, UsageError
from torchmark.core.tensor_bounds import MAX_DIMS, check_tensor

DTYPES = ("uint8", "int8", "int16", "int", "long", "float", "double", "float16", "bfloat16",
          "bool")
DATA_GENERATORS = ("PyTorch:DefaultDataGenerator", "PyTorch::DefaultDataGenerator")
ITERATORS = ("DefaultConfigIterator", "RangeConfigIterator", "DummyConfigIterator")
RANGEABLE = {"tensor": ("shape", "dtype"), "int": ("value",), "long": ("value",),
             "float": ("value",), "double": ("value",), "bool": ("value",), "str": ("value",),
             "device": ("value",), "genericlist": ("value",), "tuple": ("value",), "none": ()}
ARG_TYPES = tuple(RANGEABLE)


class ConfigError(UsageError):
    """A config failed validation; `problems` holds (path, reason) pairs."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source, self.problems = source, problems
        lines = [f"{source}: {path}: {reason}" if path else f"{source}: {reason}"
                 for path, reason in problems]
        super().__init__("\n".join(lines))


def _fail(reason: str) -> PydanticCustomError:
    return PydanticCustomError("torchmark", reason)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite(x: float) -> bool:
    """Finite, and (an int) within a float's range: math.isfinite raises beyond it."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _check_range_triplet(v: Any, what: str, number=_is_int) -> None:
    if not (isinstance(v, list) and len(v) == 3 and all(number(x) for x in v)):
        raise _fail(f"a {what} range must be [min, max, step], got {brief_repr(v)}")
    if not all(_finite(x) for x in v):
        raise _fail(f"the {what} range {brief_repr(v)} must hold finite numbers (within a float's range)")
    lo, hi, step = v
    try:
        count = (hi - lo) / step if step > 0 else 0.0
    except OverflowError:
        count = math.inf
    if not _finite(count):
        raise _fail(f"the {what} range {brief_repr(v)} spans more values than can be counted")
    if hi < lo:
        raise _fail(f"the {what} range {brief_repr(v)} is reversed (max < min)")
    if step <= 0:
        raise _fail(f"the {what} range {brief_repr(v)} needs a positive step")


class _Arg(BaseModel):
    # validate_default: a default `value` / `dtype` must still fit a __range__ naming it
    model_config = ConfigDict(extra="ignore", populate_by_name=True, strict=False,
                              validate_default=True)

    range_attrs: list[str] = Field(default_factory=list, alias="__range__")
    copies: list[Any] = Field(default_factory=list, alias="__copy__")
    list_attrs: Any = Field(default=None, alias="__list__")  # PARAM declares it; no effect

    @model_validator(mode="before")
    @classmethod
    def _no_misspelled_keys(cls, data: Any) -> Any:
        """Keys this argument type does not know are ignored (PARAM configs may carry
        their own), unless they are meta keys (`__x__`) or look like a misspelled known
        key: those would silently drop a range or a setting."""
        if not isinstance(data, dict):
            return data
        known: set[str] = set()
        for name, field in cls.model_fields.items():
            known.update(n for n in (name, field.alias) if n)
        for key in data:
            if not isinstance(key, str) or key in known:
                continue
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
            if close:
                raise _fail(f"unknown key {brief_repr(key)}: did you mean {brief_repr(close[0])}?")
            if key.startswith("__") and key.endswith("__"):
                raise _fail(f"unknown key {brief_repr(key)} (meta keys are __range__, __copy__, "
                            "__list__)")
        return data

    @field_validator("copies")
    @classmethod
    def _copies(cls, v: list) -> list:
        for item in v:
            ok = (isinstance(item, dict) and len(item) == 1 and "shape" in item
                  and isinstance(item["shape"], list) and len(item["shape"]) == 2
                  and _is_int(item["shape"][0]) and isinstance(item["shape"][1], list)
                  and len(item["shape"][1]) == 2 and all(_is_int(x) for x in item["shape"][1]))
            if not ok:
                raise _fail(f"each __copy__ entry must be {{\"shape\": [dim, [arg, dim]]}}, "
                            f"got {brief_repr(item)}")
        return v

    @model_validator(mode="after")
    def _range_attrs_fit_the_type(self):
        _check_range_attrs(getattr(self, "type", "none"), self.range_attrs)
        return self


def _check_range_attrs(kind: str, attrs: list[str]) -> None:
    allowed = RANGEABLE[kind]
    for attr in attrs:
        if attr not in allowed:
            raise _fail(f"__range__ lists {brief_repr(attr)}, but a {kind} argument can only range over "
                        f"{', '.join(allowed) or 'nothing'}")


class TensorArg(_Arg):
    type: Literal["tensor"]
    shape: list[Any]
    dtype: Any = "float"
    requires_grad: Annotated[bool | None, Field(strict=True)] = None  # not "yes" or 1
    value_range: list[Any] | None = None

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: list, info) -> list:
        attrs = info.data.get("range_attrs", [])
        _check_range_attrs("tensor", attrs)
        copies = info.data.get("copies", [])
        if len(v) > MAX_DIMS:  # before looking at each: a million of them is no shape
            raise _fail(f"a tensor of {len(v)} dimensions (at most {MAX_DIMS})")
        for dim in v:
            if isinstance(dim, list):
                if "shape" not in attrs:
                    raise _fail(f"shape element {brief_repr(dim)} is a range, but 'shape' is not in "
                                "__range__")
                _check_range_triplet(dim, "shape")
                if dim[0] < 1:
                    raise _fail(f"the shape range {brief_repr(dim)} must start at 1 or more")
            elif _is_int(dim) and (dim > 0 or (dim == -1 and copies)):
                continue
            else:
                raise _fail(f"shape must be a list of positive ints, got {brief_repr(v)}"
                            + (" (-1 is a placeholder for __copy__ only)" if dim == -1 else ""))
        if "shape" in attrs and not any(isinstance(dim, list) for dim in v):
            raise _fail(f"'shape' is in __range__, but no element of {brief_repr(v)} is a range "
                        "([min, max, step]); drop it from __range__ or give one")
        return v

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: Any, info) -> Any:
        ranged = "dtype" in info.data.get("range_attrs", [])
        if ranged and (not isinstance(v, list) or not v):
            raise _fail(f"with 'dtype' in __range__, dtype must be a non-empty list, got {brief_repr(v)}")
        values = v if ranged else [v]
        for d in values:
            if d not in DTYPES:
                raise _fail(f"unknown dtype {brief_repr(d)}; expected one of {', '.join(DTYPES)}")
        return v

    @field_validator("value_range")
    @classmethod
    def _value_range(cls, v: Any) -> Any:
        return _check_value_range(v)

    @model_validator(mode="after")
    def _fits_dtype(self):
        ranged = "dtype" in self.range_attrs and isinstance(self.dtype, list)
        for dtype in self.dtype if ranged else [self.dtype]:
            _check_tensor_dtype(dtype, self.requires_grad, self.value_range)
            if all(_is_int(d) for d in self.shape):  # ranged shapes: checked per case
                try:
                    check_tensor(self.shape, ITEMSIZE[dtype], "cpu", "the tensor")
                except LimitError as e:
                    raise _fail(str(e)) from None
        return self


ITEMSIZE = {"uint8": 1, "int8": 1, "int16": 2, "int": 4, "long": 8, "float": 4, "double": 8,
            "float16": 2, "bfloat16": 2, "bool": 1}

# what each dtype can hold: integer bounds, or the largest finite float
# (long stops one short: torch.randint's exclusive top, max + 1, would not fit in int64)
_INT_BOUNDS = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-2**15, 2**15 - 1),
               "int": (-2**31, 2**31 - 1), "long": (-2**63, 2**63 - 2)}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float": 3.4028234663852886e38, "double": 1.7976931348623157e308}


def _check_tensor_dtype(dtype: str, requires_grad: bool | None,
                        value_range: list[Any] | None) -> None:
    """A tensor's requires_grad and value_range must suit its dtype (else it would fail
    at run time, or silently wrap around or overflow to inf)."""
    if requires_grad and dtype not in _FLOAT_MAX:
        raise _fail(f"requires_grad needs a floating-point dtype; a {dtype} tensor cannot "
                    "require grad")
    if value_range is None:
        return
    if dtype == "bool":
        raise _fail("value_range does not apply to bool tensors (they are coin flips)")
    if dtype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[dtype]
        if not all(float(x).is_integer() for x in value_range):
            raise _fail(f"value_range {brief_repr(value_range)} of a {dtype} tensor must hold integers")
        if not lo <= value_range[0] <= value_range[1] <= hi:
            raise _fail(f"value_range {brief_repr(value_range)} does not fit {dtype} ([{lo}, {hi}])")
    elif max(abs(x) for x in value_range) > _FLOAT_MAX[dtype]:
        raise _fail(f"value_range {brief_repr(value_range)} exceeds the largest {dtype} "
                    f"({_FLOAT_MAX[dtype]:g}): the values would be inf")


def _check_value_range(v: Any) -> Any:
    if v is None:
        return v
    if not (isinstance(v, list) and len(v) == 2 and all(_is_number(x) for x in v)):
        raise _fail(f"value_range must be [min, max], got {brief_repr(v)}")
    if not all(_finite(x) for x in v):
        raise _fail(f"value_range {brief_repr(v)} must hold finite numbers (within a float's range)")
    if v[0] > v[1]:
        raise _fail(f"value_range {brief_repr(v)} is reversed (min > max)")
    return v


class _ScalarArg(_Arg):
    value_range: list[Any] | None = None

    @field_validator("value_range")
    @classmethod
    def _value_range(cls, v: Any) -> Any:
        return _check_value_range(v)

    @model_validator(mode="after")
    def _has_value(self):
        if getattr(self, "value", None) is None and self.value_range is None:
            raise _fail(f"a {getattr(self, 'type', 'number')} argument needs a value or a "
                        "value_range")
        return self


def _numeric(kind: str, check, what: str):
    """The `value` validator of a numeric argument: a number, or with 'value' in
    __range__ a [min, max, step] triplet."""
    def validate(cls, v: Any, info) -> Any:
        attrs = info.data.get("range_attrs", [])
        _check_range_attrs(kind, attrs)
        if "value" in attrs:
            _check_range_triplet(v, "value", check)
        elif v is not None and not check(v):
            raise _fail(f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} value must be {what}, "
                        f"got {brief_repr(v)}")
        return v
    return validate


class IntArg(_ScalarArg):
    type: Literal["int", "long"]
    value: Any = None
    _value = field_validator("value")(classmethod(_numeric("int", _is_int, "an integer")))  # type: ignore[var-annotated]

    @model_validator(mode="after")
    def _integral_range(self):
        if self.value_range is not None and \
                not all(float(x).is_integer() for x in self.value_range):
            raise _fail(f"value_range {brief_repr(self.value_range)} of an {self.type} argument must "
                        "hold integers")
        return self


class FloatArg(_ScalarArg):
    type: Literal["float", "double"]
    value: Any = None
    _value = field_validator("value")(classmethod(_numeric("float", _is_number, "a number")))  # type: ignore[var-annotated]


def _listable(kind: str, check, what: str):
    def validate(cls, v: Any, info) -> Any:
        attrs = info.data.get("range_attrs", [])
        _check_range_attrs(kind, attrs)
        values = v if "value" in attrs else [v]
        if "value" in attrs and (not isinstance(v, list) or not v):
            raise _fail(f"with 'value' in __range__, value must be a non-empty list, got {brief_repr(v)}")
        for item in values:
            if not check(item):
                raise _fail(f"a {kind} value must be {what}, got {brief_repr(item)}")
        return v
    return validate


class BoolArg(_Arg):
    type: Literal["bool"]
    value: Any = False
    _value = field_validator("value")(classmethod(_listable("bool", lambda x: isinstance(  # type: ignore[var-annotated]
        x, bool), "true or false")))


class StrArg(_Arg):
    type: Literal["str"]
    value: Any = ""
    _value = field_validator("value")(classmethod(_listable("str", lambda x: isinstance(  # type: ignore[var-annotated]
        x, str), "a string")))


def _device_ok(x: Any) -> bool:
    if not isinstance(x, str):
        return False
    kind, _, index = x.partition(":")
    return kind in ("cpu", "cuda", "meta", "mps", "xpu") and (not index or index.isdigit())


class DeviceArg(_Arg):
    type: Literal["device"]
    value: Any = "cpu"
    _value = field_validator("value")(classmethod(_listable("device", _device_ok,  # type: ignore[var-annotated]
                                                            "a device such as 'cpu' or 'cuda:0'")))


class NoneArg(_Arg):
    type: Literal["none"]
    value: None = None


class ListArg(_Arg):
    type: Literal["genericlist", "tuple"]
    value: list[Arg]

    @field_validator("value")
    @classmethod
    def _value(cls, v: list, info) -> list:
        _check_range_attrs("genericlist", info.data.get("range_attrs", []))
        return v


Arg = Annotated[TensorArg | IntArg | FloatArg | BoolArg | StrArg | DeviceArg | NoneArg |
                ListArg, Field(discriminator="type")]
ListArg.model_rebuild()


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: list[Arg] = Field(default_factory=list)
    kwargs: dict[str, Arg] = Field(default_factory=dict)


class ConfigEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    build: list[Spec] | None = None
    input: list[Spec]

    @field_validator("input")
    @classmethod
    def _input(cls, v: list) -> list:
        if not v:
            raise _fail("input must list at least one spec")
        return v


class OpEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    build_iterator: str | None = None
    input_iterator: str | None = None
    build_data_generator: str | None = None
    input_data_generator: str | None = None
    config: list[ConfigEntry]

    @field_validator("build_iterator", "input_iterator")
    @classmethod
    def _iterator(cls, v: str | None) -> str | None:
        if v is not None and v not in ITERATORS:
            raise _fail(f"unknown iterator {brief_repr(v)}; expected one of {', '.join(ITERATORS)}")
        return v

    @field_validator("build_data_generator", "input_data_generator")
    @classmethod
    def _generator(cls, v: str | None) -> str | None:
        if v is not None and v not in DATA_GENERATORS:
            raise _fail(f"unknown data generator {brief_repr(v)}; expected {DATA_GENERATORS[0]}")
        return v

    @field_validator("config")
    @classmethod
    def _config(cls, v: list) -> list:
        if not v:
            raise _fail("config must list at least one entry")
        return v


class BenchmarkConfig(RootModel[dict[str, OpEntry]]):
    """A whole config file: operator name -> its entry."""

    @property
    def ops(self) -> dict[str, OpEntry]:
        return self.root


_TAGS = set(ARG_TYPES)


def format_path(loc: tuple) -> str:
    """('torch.mm', 'config', 0, 'input', 0, 'args', 1, 'tensor', 'shape') ->
    'torch.mm.config[0].input[0].args[1].shape' (union tags dropped)."""
    out = ""
    previous: Any = None
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _TAGS and (isinstance(previous, int) or
                                (i >= 2 and loc[i - 2] == "kwargs")):
            previous = part
            continue  # the discriminated union's branch name
        elif part == "range_attrs":
            out += ".__range__"
        elif part == "copies":
            out += ".__copy__"
        else:
            out += ("." if out else "") + str(part)
        previous = part
    return out


def _reason(error: Any) -> str:
    kind, message = error["type"], error["msg"]
    if kind == "missing":
        return "required, but missing"
    if kind == "union_tag_invalid":
        tag = error.get("ctx", {}).get("tag")
        return f"unknown type {brief_repr(tag)}; expected one of {', '.join(ARG_TYPES)}"
    if kind == "union_tag_not_found":
        return f"every argument needs a 'type' (one of {', '.join(ARG_TYPES)})"
    if kind == "extra_forbidden":
        return "unknown key"
    return message


def validate_config(data: Any, source: str = "config") -> BenchmarkConfig:
    """The validated config, or ConfigError listing every problem with its path."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(source, [("", "a config must be a non-empty JSON object of "
                                         "{operator name: entry}")])
    try:
        return BenchmarkConfig.model_validate(data)
    except ValidationError as e:
        problems = [(format_path(err["loc"]), _reason(err)) for err in e.errors()]
        raise ConfigError(source, problems) from None
