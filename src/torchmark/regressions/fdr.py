"""False-discovery-rate control across many series (Benjamini-Hochberg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar, overload

from torchmark.core.errors import UsageError
from torchmark.regressions.changepoint import ChangePoint

K = TypeVar("K")


@overload
def select_fdr(changes_per_series: Mapping[K, Sequence[ChangePoint]],
               q: float = ...) -> dict[K, list[ChangePoint]]: ...
@overload
def select_fdr(changes_per_series: Sequence[Sequence[ChangePoint]],
               q: float = ...) -> list[list[ChangePoint]]: ...


def select_fdr(changes_per_series: Mapping[K, Sequence[ChangePoint]] |
               Sequence[Sequence[ChangePoint]], q: float = 0.05
               ) -> dict[K, list[ChangePoint]] | list[list[ChangePoint]]:
    """The changes that Benjamini-Hochberg keeps at false discovery rate `q` over the
    p-values of every series' changes, in the shape given (a list or a mapping of
    lists). Pass every series checked, those without change too: each counts as one
    hypothesis at least, so the candidates `detect` dropped (p-value above its alpha)
    still count. An alpha below q only makes the selection more conservative."""
    if not 0 < q <= 1:
        raise UsageError(f"q: expected a rate in (0, 1], got {q!r}")
    groups = (list(changes_per_series.values()) if isinstance(changes_per_series, Mapping)
              else list(changes_per_series))
    tests = sum(max(1, len(group)) for group in groups)
    p_values = sorted(c.p_value for group in groups for c in group)
    cutoff = -1.0
    for rank, p in enumerate(p_values, start=1):
        if p <= q * rank / tests:
            cutoff = p
    kept = [[c for c in group if c.p_value <= cutoff] for group in groups]
    if isinstance(changes_per_series, Mapping):
        return dict(zip(changes_per_series, kept, strict=True))
    return kept
