"""Candidate change points: PELT over a least-squares cost (ruptures' KernelCPD with
the linear kernel, in C), on a series scaled to unit noise."""

from __future__ import annotations

import math

import numpy as np

from torchmark.core.errors import ToolMissingError
from torchmark.regressions.thresholds import MIN_SEGMENT


def candidates(y: np.ndarray, scale: float, penalty: float,
               min_size: int = MIN_SEGMENT) -> list[int]:
    """The first index of each new level that PELT finds in `y` (noise `scale`), paying
    `penalty * log(n)` for each change."""
    n = len(y)
    if n < 2 * min_size:
        return []
    try:
        import ruptures
    except ImportError as e:
        raise ToolMissingError("change-point detection needs ruptures: "
                               "pip install 'torchmark[regressions]'") from e

    scaled = ((y - np.median(y)) / scale).reshape(-1, 1)
    found = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(scaled).predict(
        pen=penalty * math.log(n))
    return [int(i) for i in found[:-1]]

