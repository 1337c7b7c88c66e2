"""FunctionCount and FunctionCounts: per-function instruction counts and their algebra."""

from __future__ import annotations

import collections
import dataclasses
import operator
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

DEFAULT_LINEWIDTH = 80


class FunctionCount(NamedTuple):
    count: int  # type: ignore[assignment]  # torch's field name, over tuple.count
    function: str


def _linewidth() -> int:
    try:
        import torch

        return int(torch._tensor_str.PRINT_OPTS.linewidth)
    except Exception:  # torch missing or its print options moved
        return DEFAULT_LINEWIDTH


NOISY_FUNCTIONS = ("dictobject.c:lookdict_unicode", "dictobject.c:unicodekeys_lookup_unicode")


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class FunctionCounts:
    """A sorted tuple of (count, "file:function") pairs with helpers to compare profiles.

    Supports iteration, `len`, indexing and slicing (a slice is a FunctionCounts),
    `+` and `-` (matched by function name), `*` by a number, `transform` (rename
    functions; colliding names are summed), `filter`, `sum` and `denoise`.
    """

    _data: tuple[FunctionCount, ...]
    inclusive: bool
    truncate_rows: bool = True
    _linewidth: int | None = None  # for hermetic tests; else torch's print linewidth

    def __iter__(self) -> Iterator[FunctionCount]:
        yield from self._data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, item: Any) -> FunctionCount | FunctionCounts:
        data = self._data[item]
        if isinstance(data, tuple) and not isinstance(data, FunctionCount):
            return FunctionCounts(data, self.inclusive, truncate_rows=False,
                                  _linewidth=self._linewidth)
        return data

    def __repr__(self) -> str:
        count_len = max((len(str(c)) + int(c < 0) for c, _ in self), default=0)
        fn_len = max((self._linewidth or _linewidth()) - count_len - 4, 40)
        lines = []
        for c, fn in self:
            if len(fn) > fn_len:
                left = (fn_len - 5) // 2
                fn = fn[:left] + " ... " + fn[-(fn_len - left - 5):]
            lines.append(f"  {c:>{count_len}}  {fn}")
        if self.truncate_rows and len(lines) > 18:
            lines = lines[:9] + ["...".rjust(count_len + 2)] + lines[-9:]
        if not self.inclusive:
            lines.extend(["", f"Total: {self.sum()}"])
        return "\n".join([object.__repr__(self), *lines])

    def __add__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, lambda c: c)

    def __sub__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, operator.neg)

    def __mul__(self, other: int | float) -> FunctionCounts:
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        return self._from_dict({fn: int(c * other) for c, fn in self._data}, self.inclusive)

    __rmul__ = __mul__

    def transform(self, map_fn: Callable[[str], str]) -> FunctionCounts:
        """Rename every function with `map_fn`; counts of names that collide are summed."""
        counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        for c, fn in self._data:
            counts[map_fn(fn)] += c
        return self._from_dict(counts, self.inclusive)

    def filter(self, filter_fn: Callable[[str], bool]) -> FunctionCounts:
        """Keep the functions whose name satisfies `filter_fn`."""
        return FunctionCounts(tuple(i for i in self if filter_fn(i.function)), self.inclusive)

    def sum(self) -> int:
        return sum(c for c, _ in self)

    def denoise(self) -> FunctionCounts:
        """Drop CPython's unicode dict lookups, whose counts jitter from run to run (with
        string hashing): `lookdict_unicode` up to Python 3.10, `unicodekeys_lookup_unicode`
        from 3.11 on (torch filters only the first)."""
        return self.filter(lambda fn: not any(name in fn for name in NOISY_FUNCTIONS))

    def _merge(self, other: FunctionCounts, sign: Callable[[int], int]) -> FunctionCounts:
        if not isinstance(other, FunctionCounts):
            return NotImplemented
        if self.inclusive != other.inclusive:
            raise ValueError("cannot combine inclusive and exclusive counts")
        counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        for c, fn in self:
            counts[fn] += c
        for c, fn in other:
            counts[fn] += sign(c)
        return self._from_dict(counts, self.inclusive)

    @staticmethod
    def _from_dict(counts: dict[str, int], inclusive: bool) -> FunctionCounts:
        flat = (FunctionCount(c, fn) for fn, c in counts.items() if c)
        return FunctionCounts(tuple(sorted(flat, reverse=True)), inclusive)

    # -- serialization ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"inclusive": self.inclusive, "counts": [[c, fn] for c, fn in self._data]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FunctionCounts:
        try:
            pairs = tuple(FunctionCount(int(c), str(fn)) for c, fn in data["counts"])
            if any(abs(p.count) > 2**63 for p in pairs):  # beyond what callgrind counts
                raise ValueError("a count is beyond 2**63")
            return cls(pairs, bool(data["inclusive"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a FunctionCounts object ({e})") from None
