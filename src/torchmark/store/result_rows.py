"""A Result as the rows the store keeps: its results row (summary statistics, samples
packed as little-endian float64 bytes, the content key an import deduplicates by) and
its case's row. A results row holds plain values only (JSON columns as JSON text), for
the driver's executemany (store/bulk_insert.py); built in an import's worker processes too, so this
module needs neither SQLAlchemy nor numpy."""

from __future__ import annotations

import functools
import hashlib
import json
import struct
from collections.abc import Sequence
from typing import Any

from torchmark.core.result import (
    STATED,
    Case,
    Result,
    Stated,
    plain,
    quartiles,
    summary_values,
)

# a results row but its run and the time it was recorded, in this order
RESULT_VALUES = ("case_id", "metric", "unit", "env", "number_per_run", "n", "median",
                 "mean", "iqr", "min", "max", "samples", "content_key", "warnings",
                 "failure", "failure_tail", "extra", "q1", "q3")
KEY_AT = RESULT_VALUES.index("content_key")


def pack(samples: Sequence[float]) -> bytes:
    """Samples as little-endian float64 bytes."""
    return _packer(len(samples)).pack(*samples)


@functools.lru_cache(maxsize=256)
def _packer(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}d")


def content_key(case_id: str, metric: str, samples: bytes) -> str:
    """What identifies a result's content: its case, metric and packed samples."""
    return hashlib.sha256(f"{case_id}\0{metric}\0".encode() + samples).hexdigest()[:32]


def result_values(r: Result) -> tuple[Any, ...]:
    """The RESULT_VALUES of a result's row. A result of another tool's stated statistics
    (no raw samples) has them as its summary: their n, mean and IQR, its median the one
    value it holds, no min or max (the file gave none)."""
    samples = pack(r.samples)
    failure = r.failure
    summary: tuple[Any, ...] = summary_values(r.samples) if r.samples else (None,) * 5
    n = len(r.samples)
    stated = Stated.of(r) if STATED in r.extra and r.samples else None
    if stated is not None:
        n, summary = stated.n, (summary[0], stated.mean, stated.iqr, None, None)
    return (r.case.id, r.metric, r.unit, r.case.env, r.number_per_run, n, *summary,
            samples, content_key(r.case.id, r.metric, samples),
            json.dumps(list(r.warnings)) if r.warnings else "[]",
            failure.error if failure else None, failure.output_tail if failure else None,
            json.dumps(plain(r.extra)) if r.extra else "{}",
            *(quartiles(r.samples) or (None, None)))


def case_row(c: Case) -> dict[str, Any]:
    """A case's row (its params as plain JSON values: cases go in through SQLAlchemy,
    few and each once)."""
    return {"id": c.id, "frontend": c.frontend, "stmt": c.stmt, "setup": c.setup,
            "label": c.label, "sub_label": c.sub_label, "description": c.description,
            "threads": c.threads, "device": c.device, "params": plain(c.params)}
