"""FuzzedParameter and ParameterAlias: the scalar inputs of a Fuzzer.

Sampling consumes a `numpy.random.RandomState` exactly as torch.utils.benchmark's fuzzer
does (one draw per sample), so a seed gives the same values in both.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

DISTRIBUTIONS = ("loguniform", "uniform")
_NORMALIZATION_TOLERANCE = 1e-5


class ParameterAlias:
    """A value that takes the value of another parameter (`alias_to`) once sampled.

    Used as a key of a dict distribution, it lets e.g. a size sometimes equal another
    size (broadcasting-free) and sometimes be 1 (broadcasting).
    """

    def __init__(self, alias_to: str) -> None:
        if not isinstance(alias_to, str):
            raise ValueError(f"ParameterAlias: alias_to must be a parameter name, got {alias_to!r}")
        self.alias_to = alias_to

    def __repr__(self) -> str:
        return f"ParameterAlias[alias_to: {self.alias_to}]"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


class FuzzedParameter:
    """A named scalar drawn from "uniform", "loguniform" or a `{value: probability}` dict.

    - "uniform": integers in [minval, maxval] when both bounds are ints, else floats.
    - "loguniform": uniform in log2 space between the bounds, truncated to an int.
    - dict: each key with its probability (the probabilities must sum to 1); keys may be
      `ParameterAlias`es. `minval` / `maxval` must not be given.

    A `strict` parameter is drawn once per case and kept while the other parameters are
    redrawn to satisfy constraints, so rejections do not skew its distribution.
    """

    def __init__(
        self,
        name: str,
        minval: int | float | None = None,
        maxval: int | float | None = None,
        distribution: str | dict[Any, float] | None = None,
        strict: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"FuzzedParameter: name must be a non-empty str, got {name!r}")
        self._name = name
        self._minval = minval
        self._maxval = maxval
        self._distribution = distribution
        self.strict = strict
        self._choices: list[Any] = []
        self._cdf: list[float] = []
        self._check()

    @property
    def name(self) -> str:
        return self._name

    @property
    def distribution(self) -> str | dict[Any, float] | None:
        return self._distribution

    @property
    def aliases(self) -> list[str]:
        """Names this parameter can alias to (from a dict distribution)."""
        return [c.alias_to for c in self._choices if isinstance(c, ParameterAlias)]

    def _error(self, problem: str) -> ValueError:
        return ValueError(f"FuzzedParameter {self._name!r}: {problem}")

    def _check(self) -> None:
        dist = self._distribution
        if isinstance(dist, dict):
            if self._minval is not None or self._maxval is not None:
                raise self._error("a dict distribution cannot be combined with minval/maxval")
            if not dist:
                raise self._error("the dict distribution is empty")
            probabilities = list(dist.values())
            for value, p in dist.items():
                if not _is_number(p) or not math.isfinite(p) or p < 0:
                    raise self._error(f"probability of {value!r} must be a number >= 0, got {p!r}")
            total = math.fsum(probabilities)
            if abs(total - 1) > _NORMALIZATION_TOLERANCE:
                raise self._error(f"probabilities must sum to 1, they sum to {total:g}")
            # Same cumulative distribution numpy's RandomState.choice builds.
            cdf = np.asarray(probabilities, dtype=np.float64).cumsum()
            cdf /= cdf[-1]
            self._choices = list(dist.keys())
            self._cdf = cdf.tolist()
            return
        if dist not in DISTRIBUTIONS:
            raise self._error(
                f"unknown distribution {dist!r}; expected 'uniform', 'loguniform' or a dict "
                "{value: probability}"
            )
        for bound in ("minval", "maxval"):
            value = getattr(self, f"_{bound}")
            if value is None:
                raise self._error(f"the {dist!r} distribution needs {bound}")
            if not _is_number(value) or not math.isfinite(value):
                raise self._error(f"{bound} must be a finite number, got {value!r}")
        low, high = self._bounds()
        if low > high:
            raise self._error(f"minval {low} is greater than maxval {high}")
        if dist == "loguniform":
            if low <= 0:
                raise self._error(f"loguniform needs minval > 0, got {low}")
            self._log_bounds = (np.log2(low), np.log2(high))

    def _bounds(self) -> tuple[float, float]:
        """(minval, maxval) of a uniform or loguniform parameter (both checked set)."""
        assert self._minval is not None and self._maxval is not None
        return self._minval, self._maxval

    def sample(self, state: np.random.RandomState) -> Any:
        """One value (a ParameterAlias is returned as is; the Fuzzer resolves it)."""
        dist = self._distribution
        if dist == "loguniform":
            low, high = self._log_bounds
            output = int(2 ** state.uniform(low=low, high=high))
            minval, maxval = self._bounds()
            return min(max(output, minval), maxval)
        if dist == "uniform":
            minval, maxval = self._bounds()
            if isinstance(minval, int) and isinstance(maxval, int):
                return int(state.randint(low=minval, high=maxval + 1))
            return state.uniform(low=minval, high=maxval)
        index = bisect.bisect_right(self._cdf, state.random_sample())
        return self._choices[min(index, len(self._choices) - 1)]

    def __repr__(self) -> str:
        if isinstance(self._distribution, dict):
            return f"FuzzedParameter({self._name!r}, distribution={self._distribution!r})"
        return (f"FuzzedParameter({self._name!r}, {self._minval!r}, {self._maxval!r}, "
                f"distribution={self._distribution!r})")
