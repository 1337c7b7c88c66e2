"""Read callgrind output files directly (no callgrind_annotate).

Produces per-function instruction counts keyed as "file:function [object]", exclusive
(the function's own instructions) and inclusive (plus everything it called).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re

from torchmark.callgrind.function_counts import FunctionCounts

_NAME = re.compile(r"^\((\d+)\)(?:\s(.*))?$")


@dataclasses.dataclass(frozen=True)
class ParsedProfile:
    exclusive: FunctionCounts
    inclusive: FunctionCounts
    total: int


class CallgrindFormatError(ValueError):
    pass


class _Names:
    """Callgrind's name compression: "(id) name" defines, "(id)" refers."""

    def __init__(self) -> None:
        self._by_id: dict[str, str] = {}

    def resolve(self, text: str) -> str:
        m = _NAME.match(text)
        if m is None:
            return text
        ident, name = m.groups()
        if name is not None:
            self._by_id[ident] = name
            return name
        try:
            return self._by_id[ident]
        except KeyError:
            raise CallgrindFormatError(f"name id ({ident}) used before it was defined") from None


def _first_cost(fields: list[str], n_positions: int) -> int:
    costs = fields[n_positions:]
    if not costs:
        return 0
    value = costs[0]
    return int(value, 16) if value.startswith("0x") else int(value)


def parse_callgrind_text(text: str) -> ParsedProfile:
    """Exclusive and inclusive counts of the first event (Ir) in one callgrind dump."""
    files, functions, objects = _Names(), _Names(), _Names()
    n_positions = 1
    obj = file = fn = ""
    inline_file: str | None = None
    exclusive: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    pending_call = False
    summary: int | None = None
    saw_events = False

    def key() -> str:
        where = inline_file if inline_file is not None else file
        return f"{where}:{fn}" + (f" [{obj}]" if obj else "")

    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        first = line[0]
        if first.isdigit() or first in "+-*" or line.startswith("0x"):
            fields = line.split()
            cost = _first_cost(fields, n_positions)
            if pending_call:
                inclusive[key()] += cost
                pending_call = False
            elif cost:
                k = key()
                exclusive[k] += cost
                inclusive[k] += cost
            continue
        name, _, value = line.partition("=")
        if not _:
            head, _, rest = line.partition(":")
            if head == "positions":
                n_positions = len(rest.split())
            elif head == "events":
                saw_events = True
            elif head in ("summary", "totals") and rest.split():
                summary = int(rest.split()[0])
            continue
        if name == "ob":
            obj = objects.resolve(value)
        elif name == "fl":
            file, inline_file = files.resolve(value), None
        elif name in ("fi", "fe"):
            inline_file = files.resolve(value)
        elif name == "fn":
            fn, inline_file = functions.resolve(value), None
        elif name in ("cob",):
            objects.resolve(value)
        elif name in ("cfi", "cfl"):
            files.resolve(value)
        elif name == "cfn":
            functions.resolve(value)
        elif name == "calls":
            pending_call = True
    if not saw_events:
        raise CallgrindFormatError("not a callgrind output file (no 'events:' line)")
    total = sum(exclusive.values())
    if summary is not None and summary != total:
        raise CallgrindFormatError(
            f"self costs add up to {total} but the file's summary says {summary}")
    # As torch's reading of callgrind_annotate: inclusive rows that hold the whole dump
    # (the frames the counted region runs inside: the eval loop, exec, the toggle's
    # call) say nothing about the statement and are left out.
    inclusive = collections.Counter({k: v for k, v in inclusive.items() if v != total})
    return ParsedProfile(FunctionCounts._from_dict(exclusive, inclusive=False),
                         FunctionCounts._from_dict(inclusive, inclusive=True), total)


def parse_callgrind_file(path: str | os.PathLike) -> ParsedProfile:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        return parse_callgrind_text(text)
    except CallgrindFormatError as e:
        raise CallgrindFormatError(f"{path}: {e}") from None
