"""The suite's results file (JSON lines): a header per run, a line per finished case, a
footer when a run ends (see torchmark.core.jsonl)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.jsonl import (
    JsonlWriter,
    iter_lines,
    refuse_other_options,
    refuse_other_torch,
    system_info,
)
from torchmark.core.results_lock import ResultsLock

SCHEMA = "torchmark.suite.results"
VERSION = 1


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every case record of a results file, in order (a resumed file may hold an id
    twice; callers building a dict keep the last)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    records, saw_header = [], False
    for record in iter_lines(path):
        if record.get("type") == "header":
            if record.get("schema") != SCHEMA:
                raise ValueError(f"{path} is not a torchmark suite results file "
                                 f"(schema {brief_repr(record.get('schema'))})")
            saw_header = True
        elif record.get("type") == "case" and "id" in record:
            records.append(record)
    if not saw_header and not records:
        raise ValueError(f"{path} holds no torchmark suite results")
    return records


# what a case's figures depend on: a resumed file must not mix two settings of these
MEASUREMENT_OPTIONS = ("number", "repeats", "min_run_time", "wall", "instructions")


def finished_ids(path: str | os.PathLike, options: dict[str, Any] | None = None,
                 timer_args: dict[str, dict[str, Any]] | None = None) -> set[str]:
    """Ids of the cases a results file holds as done, for --resume: those whose last
    record is "ok" (failed ones, often a lost worker or a timeout, run again). With
    `options`, a file made with other measurement options or another torch is refused.
    With `timer_args` (id -> the case's TimerArgs as a dict now), a case whose recorded
    code differs from its code now is not done: its definition changed since, and it runs
    again (its new record supersedes the old one)."""
    if not Path(path).exists():
        return set()
    if options is not None:
        for record in iter_lines(path):
            if record.get("type") == "header":
                refuse_other_options(path, record.get("options") or {}, options,
                                     MEASUREMENT_OPTIONS)
                refuse_other_torch(path, record)
    last = {r["id"]: r for r in read_records(path)}
    return {case_id for case_id, record in last.items() if record.get("status") == "ok"
            and (timer_args is None or case_id not in timer_args
                 or record.get("timer_args") == timer_args[case_id])}


class ResultsWriter(JsonlWriter):
    """The suite's writer: its header names the schema, the options and the machine."""

    def __init__(self, path: str | os.PathLike, options: dict[str, Any], resume: bool,
                 lock: ResultsLock | None = None) -> None:
        super().__init__(path, {"type": "header", "schema": SCHEMA, "version": VERSION,
                                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                "options": options, "system": system_info()}, resume, lock)

    def close(self, footer: dict[str, Any] | None = None) -> None:
        super().close({"type": "footer", **footer} if footer is not None else None)
