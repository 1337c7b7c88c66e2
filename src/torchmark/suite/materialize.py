"""materialize: nested dicts of definitions -> the flat list of concrete cases."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from torchmark.suite.grouped import GroupedBenchmark
from torchmark.suite.scripted import ScriptedModel
from torchmark.suite.timer_args import AutoLabels, TimerArgs


class _CaseFields(NamedTuple):
    label: tuple[str, ...]
    auto_labels: AutoLabels
    timer_args: TimerArgs


class Case(_CaseFields):
    """One concrete benchmark: its labels, derived labels, and Timer arguments.

    A named tuple `(label, auto_labels, timer_args)`, so code written for PyTorch's
    `benchmarks/instruction_counts` runs unchanged
    (`for label, autolabels, timer_args in materialize(...)`). `scripted`, the
    TorchScript model the case's setup loads (None for most cases), is an attribute
    outside the tuple. Immutable, like the tuple itself.
    """

    scripted: ScriptedModel | None = None

    def __new__(cls, label: tuple[str, ...], auto_labels: AutoLabels, timer_args: TimerArgs,
                scripted: ScriptedModel | None = None) -> Case:
        self = super().__new__(cls, label, auto_labels, timer_args)
        self.__dict__["scripted"] = scripted
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Case is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Case is immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (*self, self.scripted))

    def __repr__(self) -> str:
        text = super().__repr__()
        return text if self.scripted is None else f"{text[:-1]}, scripted={self.scripted!r})"

    @classmethod
    def _make(cls, iterable: Any) -> Case:  # type: ignore[override]  # scripted comes too
        return cls(*iterable)

    def _replace(self, **changes: Any) -> Case:
        """A copy with some of `label`, `auto_labels`, `timer_args`, `scripted` changed."""
        scripted = changes.pop("scripted", self.scripted)
        return type(self)(*super()._replace(**changes), scripted=scripted)

    @property
    def id(self) -> str:
        """`Pointwise/Math/add/x + 1 [py eager fwd t1]`: unique within a suite."""
        return f"{'/'.join(self.label)} [{self.auto_labels.short}]"

    def prepare(self) -> None:
        """Create what the case loads at setup (its TorchScript model, if any)."""
        if self.scripted is not None:
            self.scripted.ensure()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": list(self.label),
                "auto_labels": self.auto_labels.to_dict(),
                "timer_args": self.timer_args.to_dict()}


def _key_parts(key: Any, path: tuple[str, ...]) -> tuple[str, ...]:
    parts = key if isinstance(key, tuple) else (key,)
    for part in parts:
        if not isinstance(part, str) or not part.strip():
            raise ValueError(f"materialize: label {part!r} under {'/'.join(path) or 'the top'} "
                             "must be a non-empty str")
    return tuple(p.strip() for p in parts)


def materialize(definitions: Mapping | GroupedBenchmark | TimerArgs) -> list[Case]:
    """Flatten `{label: definition or {label: ...}}` into Cases, in definition order.

    Each Case unpacks as `(label, auto_labels, timer_args)`, as the tuples of torch's
    `benchmarks/instruction_counts/core/expand.py` `materialize` (which returns a tuple
    of them; this returns a list).

    A definition is a GroupedBenchmark (GroupedStmts / GroupedModules / a value of
    GroupedVariants) or a TimerArgs; keys may be strings or tuples of strings. Two cases
    with the same id are an error naming it.
    """
    cases: list[Case] = []
    seen: dict[str, tuple[str, ...]] = {}

    def add(case: Case) -> None:
        if case.id in seen:
            raise ValueError(f"materialize: duplicate case {case.id!r}")
        seen[case.id] = case.label
        cases.append(case)

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, Mapping):
            if not value:
                raise ValueError(f"materialize: {'/'.join(path) or 'the top level'} is empty")
            for key, child in value.items():
                walk(child, path + _key_parts(key, path))
        elif isinstance(value, GroupedBenchmark):
            for derived in value.cases():
                add(Case(path, derived.auto_labels, derived.timer_args, derived.scripted))
        elif isinstance(value, TimerArgs):
            add(Case(path, AutoLabels("explicit", "explicit", value.language,
                                      value.num_threads), value))
        else:
            raise ValueError(f"materialize: {'/'.join(path) or 'the top level'} is a "
                             f"{type(value).__name__}; expected a dict, GroupedStmts, "
                             "GroupedModules, GroupedVariants or TimerArgs")

    walk(definitions, ())
    return cases


def select(cases: list[Case], pattern: str | None = None, subset: int | None = None) -> list[Case]:
    """Cases whose id matches `pattern` (a case-insensitive regular expression), then
    `subset` of them spread evenly over the list."""
    if pattern:
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except re.error as e:
            raise ValueError(f"--filter {pattern!r} is not a valid regular expression: {e}") \
                from None
        cases = [c for c in cases if regex.search(c.id)]
    if subset is not None:
        if isinstance(subset, bool) or not isinstance(subset, int) or subset < 1:
            raise ValueError(f"--subset must be a positive int, got {subset!r}")
        if subset < len(cases):
            step = len(cases) / subset
            cases = [cases[int(i * step)] for i in range(subset)]
    return cases
