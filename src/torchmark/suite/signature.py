"""Parsing `f(x, w) -> y`: the inputs a grouped definition takes and the output it makes."""

from __future__ import annotations

import dataclasses
import keyword
import re

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_SIGNATURE = re.compile(r"^\s*[A-Za-z_]\w*\s*\(\s*(?P<args>[^()]*?)\s*\)\s*->\s*(?P<out>.*?)\s*$")


@dataclasses.dataclass(frozen=True)
class Signature:
    args: tuple[str, ...]
    output: str | None  # None: `-> None`, a statement whose result is not kept

    @property
    def arg_list(self) -> str:
        return ", ".join(self.args)


def parse_signature(text: str) -> Signature:
    """`"f(x, w) -> y"` -> Signature(("x", "w"), "y"). Spacing is free; exactly one output
    (or `None`: nothing is returned, as for an in-place statement) and distinct identifier
    arguments are required."""
    if not isinstance(text, str):
        raise ValueError(f"signature must be a str like 'f(x, w) -> y', got {type(text).__name__}")
    match = _SIGNATURE.match(text)
    if match is None:
        raise ValueError(f"signature {text!r} is not of the form 'f(x, w) -> y'")
    raw_args = match.group("args")
    args = tuple(a.strip() for a in raw_args.split(",")) if raw_args.strip() else ()
    for arg in args:
        if not re.fullmatch(_IDENT, arg) or keyword.iskeyword(arg):
            raise ValueError(f"signature {text!r}: argument {arg!r} is not an identifier")
        if arg == "self":  # the scripted model's forward(self, ...) takes it already
            raise ValueError(f"signature {text!r}: 'self' cannot be an argument name")
    if len(set(args)) != len(args):
        raise ValueError(f"signature {text!r}: an argument appears twice")
    out = match.group("out")
    if "," in out or (out.startswith("(") and out.endswith(")")):
        raise ValueError(f"signature {text!r}: exactly one output is supported, got {out!r}")
    if out == "None":
        return Signature(args, None)
    if not re.fullmatch(_IDENT, out) or keyword.iskeyword(out):
        raise ValueError(f"signature {text!r}: the output {out!r} is not an identifier")
    if out in args:
        raise ValueError(f"signature {text!r}: the output {out!r} is also an argument")
    return Signature(args, out)
