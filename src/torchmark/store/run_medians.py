"""A run's stored medians as arrays: what ranks a comparison of two runs' cases before any
is judged, read from the results table's `median` column (no samples), and kept packed in
one row of the run_medians table once the run is finished (schema.run_medians), so that
a comparison reads two rows, not two runs' results.

A packed row is used while the run is as it was when it was packed: its start, its
`result_writes` (the number of writes that added or removed its results) and its
`results_changed` (when the last one did, to the microsecond: a run deleted and made
again under the id SQLite gives again, at the same start, counts its writes from 0
again), all in the run's row and set by each write in its own transaction
(Store.count_result_write). Otherwise the run's results are read."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Collection, MutableMapping
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from torchmark.store import schema
from torchmark.store.driver_sql import driver_rows

Key = tuple[str, str]  # (case id, metric)
Version = tuple[int, str, int, str | None]  # (run id, start, result writes, last change)


@dataclasses.dataclass(frozen=True, eq=False)
class RunMedians:
    """`keys[i]`'s median is `medians[i]` (NaN for a failed result or one without
    samples), in the order the run's results were stored."""

    keys: list[Key]
    medians: np.ndarray

    @functools.cached_property
    def index(self) -> dict[Key, int]:
        """key -> its position."""
        return {key: i for i, key in enumerate(self.keys)}

    def as_dict(self) -> dict[Key, float | None]:
        """key -> median (None where there is none)."""
        return {key: None if math.isnan(value) else value
                for key, value in zip(self.keys, self.medians.tolist(), strict=True)}

    def only(self, cases: Collection[str]) -> RunMedians:
        """The medians of these case ids alone."""
        kept = [i for i, (case_id, _) in enumerate(self.keys) if case_id in cases]
        return RunMedians([self.keys[i] for i in kept], self.medians[kept])

    def aligned(self, other: RunMedians) -> tuple[list[Key], np.ndarray, np.ndarray]:
        """The keys both runs hold (in this run's order) with this run's and `other`'s
        medians of them. Two runs of one suite store their cases in one order: then the
        keys are compared once, not looked up one by one."""
        if self.keys is other.keys or self.keys == other.keys:
            return self.keys, self.medians, other.medians
        where = other.index
        mine = [i for i, key in enumerate(self.keys) if key in where]
        keys = [self.keys[i] for i in mine]
        return keys, self.medians[mine], other.medians[[where[key] for key in keys]]


@functools.cache
def _version_query() -> sa.Select:
    """version's statement, built once (every comparison and run page asks it); its
    parameter is `run_id`."""
    r = schema.runs
    return sa.select(r.c.started, r.c.result_writes, r.c.results_changed) \
        .where(r.c.id == sa.bindparam("run_id", type_=sa.Integer))


def version(conn: sa.Connection, run_id: int) -> Version | None:
    """The run as it is now (module docstring); None when the store holds no such run."""
    row = conn.execute(_version_query(), {"run_id": run_id}).first()
    return None if row is None else (run_id, row[0], row[1], row[2])


@dataclasses.dataclass(frozen=True)
class Read:
    """A run's medians as read from its results, and what its packed row keeps of them."""

    medians: RunMedians
    results: int  # how many results it held
    last_result: int | None  # the largest result id, and its time recorded
    last_recorded: str | None


def from_results(conn: sa.Connection, run_id: int) -> Read:
    """The run's medians read from its results (a key's last result where it has
    several). Read the run's version before (a write between the two makes the version
    older than what was read: read again next time, never the other way)."""
    res = schema.results
    rows = driver_rows(conn, sa.select(
        res.c.case_id, res.c.metric,
        sa.case((res.c.failure.is_(None), res.c.median), else_=None),
        res.c.id, res.c.recorded).where(res.c.run_id == run_id).order_by(res.c.id))
    # a key held twice (a failed case measured again in a resumed run): its last result
    latest = {(case_id, metric): value for case_id, metric, value, _, _ in rows}
    medians = RunMedians(list(latest), np.array(list(latest.values()), dtype=np.float64))
    last = rows[-1] if rows else (None,) * 5
    return Read(medians, len(rows), last[3], last[4])


def from_packed(conn: sa.Connection, now: Version,
                key_lists: MutableMapping[str, list[Key]]) -> RunMedians | None:
    """The run's packed medians when they are of its version `now`; None otherwise (or
    when the row is not as torchmark writes it). `key_lists`: the lists of keys read
    before, by digest (a suite's runs share one), added to."""
    m, k = schema.run_medians, schema.median_keys
    run_id, started, writes, changed = now
    row = conn.execute(sa.select(m.c.key_digest, m.c.medians).where(
        m.c.run_id == run_id, m.c.started == started, m.c.result_writes == writes,
        m.c.results_changed.is_not_distinct_from(changed))).first()
    if row is None:
        return None
    keys = key_lists.get(row.key_digest)
    if keys is None:
        keys = _keys_of(conn.execute(sa.select(k.c.key_list)
                                     .where(k.c.digest == row.key_digest)).scalar())
        if keys is None:
            return None
        key_lists[row.key_digest] = keys
    data = row.medians
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) != 8 * len(keys):
        return None
    return RunMedians(keys, np.frombuffer(data, dtype="<f8"))


def write_packed(conn: sa.Connection, read: Read, now: Version) -> None:
    """Keep the medians `read` (of the run's version `now`) packed, within the caller's
    transaction; a row kept before for the run is replaced."""
    m, k = schema.run_medians, schema.median_keys
    run_id, started, writes, changed = now
    medians = read.medians
    blob = json.dumps(medians.keys, separators=(",", ":")).encode()
    digest = hashlib.sha256(blob).hexdigest()
    insert: Any = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert
    if conn.execute(sa.select(k.c.digest).where(k.c.digest == digest)).first() is None:
        conn.execute(insert(k).values(digest=digest, key_list=blob)
                     .on_conflict_do_nothing())
    values = {"started": started, "result_writes": writes, "results_changed": changed,
              "results": read.results,
              "last_result": read.last_result, "last_recorded": read.last_recorded,
              "key_digest": digest, "medians": medians.medians.astype("<f8").tobytes()}
    conn.execute(insert(m).values(run_id=run_id, **values)
                 .on_conflict_do_update(index_elements=[m.c.run_id], set_=values))


def _keys_of(blob: Any) -> list[Key] | None:
    """A median_keys row's keys; None unless it is a JSON list of distinct [case id,
    metric] pairs."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        return None
    try:
        items = json.loads(bytes(blob))
    except (ValueError, RecursionError):
        return None
    if not isinstance(items, list) or not all(
            isinstance(item, list) and len(item) == 2
            and all(isinstance(part, str) for part in item) for item in items):
        return None
    keys = [(case_id, metric) for case_id, metric in items]
    return keys if len(set(keys)) == len(keys) else None
