"""Fuzzer: draws parameter sets that satisfy every constraint, and builds tensors from them.

The random stream is consumed in torch.utils.benchmark's order (a torch seed drawn first,
then, per case, each parameter in order, redraws on rejection, then per tensor the layout
draws), so one seed yields the same cases in both.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch

from torchmark.fuzzing.parameters import FuzzedParameter, ParameterAlias
from torchmark.fuzzing.tensors import FuzzedTensor

MAX_ATTEMPTS = 1000

Case = tuple[dict[str, torch.Tensor], dict[str, dict[str, Any]], dict[str, Any]]


def _unpack(values: Iterable[Any], cls: type, what: str) -> tuple:
    if isinstance(values, cls):
        values = [values]
    out = []
    for i, item in enumerate(values):
        group = [item] if isinstance(item, cls) else item
        try:
            group = list(group)
        except TypeError:
            raise ValueError(f"Fuzzer: {what}[{i}] is a {type(item).__name__}, "
                             f"expected a {cls.__name__} or a list of them") from None
        for g in group:
            if not isinstance(g, cls):
                raise ValueError(f"Fuzzer: {what}[{i}] holds a {type(g).__name__}, "
                                 f"expected {cls.__name__}")
        out.extend(group)
    return tuple(out)


def _find_alias_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle in the alias graph as a list of names (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in graph:
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def _case_count(method: str, n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"Fuzzer.{method}: n must be a non-negative int, got {n!r}")
    return int(n)


def _constraint_name(index: int, fn: Callable) -> str:
    return f"constraint {index} ({getattr(fn, '__name__', type(fn).__name__)})"


class Fuzzer:
    """Random benchmark inputs: parameters from their distributions, tensors built from them.

    Args:
        parameters: FuzzedParameters (nested lists are flattened one level).
        tensors: FuzzedTensors (likewise).
        constraints: callables taking the dict of parameters; a set for which any
            returns False is redrawn.
        seed: seed of the numpy RandomState; also seeds torch for the tensor values.
            A random seed is chosen (and kept in `.seed`) when None.
    """

    def __init__(
        self,
        parameters: list[FuzzedParameter | list[FuzzedParameter]],
        tensors: list[FuzzedTensor | list[FuzzedTensor]],
        constraints: list[Callable[..., bool]] | None = None,
        seed: int | None = None,
    ) -> None:
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2**32 - 1, dtype=np.int64))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not (
                0 <= seed < 2**32):
            raise ValueError(f"Fuzzer: seed must be an int in [0, 2**32), got {seed!r}")
        self._seed = int(seed)
        self._parameters = _unpack(parameters, FuzzedParameter, "parameters")
        self._tensors = _unpack(tensors, FuzzedTensor, "tensors")
        self._constraints = tuple(constraints or ())
        for i, fn in enumerate(self._constraints):
            if not callable(fn):
                raise ValueError(f"Fuzzer: constraints[{i}] is not callable: {fn!r}")
        self._check_names()
        self._rejections = 0
        self._total_generated = 0

    def _check_names(self) -> None:
        counts = collections.Counter(p.name for p in self._parameters)
        dupes = sorted(n for n, c in counts.items() if c > 1)
        if dupes:
            raise ValueError(f"Fuzzer: duplicate parameter name(s): {', '.join(dupes)}")
        counts = collections.Counter(t.name for t in self._tensors)
        dupes = sorted(n for n, c in counts.items() if c > 1)
        if dupes:
            raise ValueError(f"Fuzzer: duplicate tensor name(s): {', '.join(dupes)}")
        names = set(counts) & {p.name for p in self._parameters}
        if names:
            raise ValueError(
                f"Fuzzer: name(s) used for both a parameter and a tensor: {', '.join(sorted(names))}")
        known = {p.name for p in self._parameters}
        graph = {}
        for p in self._parameters:
            for target in p.aliases:
                if target not in known:
                    raise ValueError(
                        f"Fuzzer: parameter {p.name!r} aliases unknown parameter {target!r}")
            graph[p.name] = p.aliases
        cycle = _find_alias_cycle(graph)
        if cycle:
            raise ValueError(f"Fuzzer: ParameterAlias cycle: {' -> '.join(cycle)}")
        for t in self._tensors:
            for name, where in t.referenced_parameters().items():
                if name not in known:
                    raise ValueError(
                        f"Fuzzer: tensor {t.name!r} {where} names unknown parameter {name!r} "
                        f"(known: {', '.join(sorted(known)) or 'none'})")

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def parameters(self) -> tuple[FuzzedParameter, ...]:
        return self._parameters

    @property
    def tensors(self) -> tuple[FuzzedTensor, ...]:
        return self._tensors

    def take(self, n: int) -> Iterator[Case]:
        """Yield `n` cases `(tensors, tensor_properties, params)`, reproducibly from the seed."""
        return self._cases(_case_count("take", n))

    def preview(self, n: int) -> Iterator[Case]:
        """Like `take`, but the tensors are on the meta device: the same shapes, strides,
        properties and parameters as `take(n)` gives, without allocating or filling any
        memory (and without reseeding torch). A custom `tensor_constructor` is not called:
        its tensors are taken to be contiguous, as the default constructor's are."""
        return self._cases(_case_count("preview", n), meta=True)

    def _cases(self, n: int, meta: bool = False) -> Iterator[Case]:
        state = np.random.RandomState(self._seed)
        torch_seed = state.randint(low=0, high=2**63, dtype=np.int64)
        if not meta:
            torch.manual_seed(torch_seed)
        for _ in range(n):
            params = self._generate(state)
            tensors, properties = {}, {}
            for t in self._tensors:
                tensors[t.name], properties[t.name] = t._make_tensor(params, state, meta=meta)
            yield tensors, properties, params

    @property
    def rejection_rate(self) -> float:
        """Share of drawn parameter sets that were rejected (0.0 before any draw)."""
        if not self._total_generated:
            return 0.0
        return self._rejections / self._total_generated

    def _generate(self, state: np.random.RandomState) -> dict[str, Any]:
        strict: dict[str, Any] = {}
        reasons: collections.Counter[str] = collections.Counter()
        for _ in range(MAX_ATTEMPTS):
            candidate: dict[str, Any] = {}
            for p in self._parameters:
                if p.strict:
                    if p.name not in strict:
                        strict[p.name] = p.sample(state)
                    candidate[p.name] = strict[p.name]
                else:
                    candidate[p.name] = p.sample(state)
            candidate = self._resolve_aliases(candidate)
            self._total_generated += 1
            reason = self._rejection(candidate)
            if reason is None:
                return candidate
            self._rejections += 1
            reasons[reason] += 1
        summary = ", ".join(f"{why}: {count}" for why, count in reasons.most_common())
        raise ValueError(
            f"Fuzzer: no valid parameters in {MAX_ATTEMPTS} draws (rejected by {summary}); "
            "loosen the constraints or the tensor size limits")

    def _rejection(self, params: dict[str, Any]) -> str | None:
        for i, fn in enumerate(self._constraints):
            if not fn(params):
                return _constraint_name(i, fn)
        for t in self._tensors:
            if not t.satisfies_constraints(params):
                return f"tensor {t.name!r} size limits"
        return None

    @staticmethod
    def _resolve_aliases(params: dict[str, Any]) -> dict[str, Any]:
        params = dict(params)
        pending = sum(isinstance(v, ParameterAlias) for v in params.values())
        while pending:
            for k, v in params.items():
                if isinstance(v, ParameterAlias):
                    params[k] = params[v.alias_to]
            still = sum(isinstance(v, ParameterAlias) for v in params.values())
            if still == pending:  # unreachable after the static cycle check; kept as a guard
                raise ValueError(f"Fuzzer: ParameterAlias cycle among {params}")
            pending = still
        return params

