"""The suite's results file (JSON lines): a header per run, the Results of each finished
case (its wall time, its instruction counts, or its failure: core.result, one a line,
written together), a footer when a run ends (see torchmark.core.jsonl).

A case's record (the dict the runner makes) becomes Results with `record_results` and is
rebuilt from them with `results_record`: its samples are the Results' samples, the rest
of it rides in each Result's `extra["record"]`. Files written before (version 1: one
`case` line a record) still read."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
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
from torchmark.core.provenance import Provenance
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import Case, Failure, Result
from torchmark.core.results_lock import ResultsLock

SCHEMA = "torchmark.suite.results"
VERSION = 2  # 1: a "case" line a record; 2: a record's Results


def record_results(record: Mapping[str, Any], *,
                   provenance: Provenance | None = None) -> list[Result]:
    """A suite case record as Results: its wall time and its instruction counts, and its
    failure when it failed (a case that failed counting its instructions keeps its wall
    time). Each carries the record's other fields (status, labels, timer arguments,
    attempts, summaries) in `extra["record"]` and how many Results the record made in
    `extra["parts"]`, so that `results_record` gives the record back; a record measured
    on another node carries that node's provenance."""
    args = record.get("timer_args") or {}
    labels = record.get("label") or []
    auto = record.get("auto_labels") or {}
    # the variant a grouped definition derived: "python eager forward"
    variant = " ".join(str(auto[k]) for k in ("language", "runtime", "autograd")
                       if isinstance(auto, Mapping) and auto.get(k)) or None
    case = Case(id=str(record["id"]), frontend="suite", stmt=str(args.get("stmt", "")),
                setup=str(args.get("setup", "")), label=" / ".join(map(str, labels)) or None,
                description=variant,
                threads=int(args.get("num_threads") or 1),
                params={"auto_labels": record.get("auto_labels") or {},
                        "language": args.get("language", "python")})
    if provenance is None and isinstance(record.get("provenance"), Mapping):
        provenance = Provenance.from_dict(record["provenance"])  # measured on another node
    rest = {k: v for k, v in record.items() if k not in ("wall", "instructions")}
    made: list[tuple[str, tuple[float, ...], int, dict[str, Any], Failure | None]] = []
    wall = record.get("wall")
    if isinstance(wall, Mapping) and wall.get("times"):
        made.append(("wall", tuple(wall["times"]), int(wall.get("number_per_run") or 1),
                     {"wall": {k: v for k, v in wall.items() if k != "times"}}, None))
    counts = record.get("instructions")
    if isinstance(counts, Mapping) and counts.get("repeats"):
        number = int(counts.get("number") or 1)
        made.append(("instructions", tuple(int(t) / number for t in counts["repeats"]),
                     number, {"instructions": {k: v for k, v in counts.items()
                                               if k != "repeats"}}, None))
    if not made or record.get("status", "ok") != "ok":
        # a case with a wall time failed counting its instructions (the stage after it)
        failure = Failure(str(record.get("error") or record.get("status")))
        made.append(("instructions" if made else "wall", (), 1, {}, failure))
    return [Result(case=case, metric=metric, samples=samples, number_per_run=number,
                   failure=failure, provenance=provenance,
                   extra={"record": {**rest, **summary}, "parts": len(made),
                          "status": record.get("status")})
            for metric, samples, number, summary, failure in made]


def results_record(results: Sequence[Result]) -> dict[str, Any]:
    """The case record `record_results` made these Results of."""
    record: dict[str, Any] = {}
    for r in results:
        record.update(r.extra.get("record") or {})
        if r.failure is not None:
            continue
        if r.metric == "wall":
            record["wall"] = {**record.get("wall", {}), "times": list(r.samples)}
        elif r.metric == "instructions":
            record["instructions"] = {**record.get("instructions", {}), "repeats": [
                round(s * r.number_per_run) for s in r.samples]}
    return record


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every case record of a results file, in order (a resumed file may hold an id
    twice; callers building a dict keep the last). A record whose Results a killed run
    left incomplete is not one."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    records: list[dict[str, Any]] = []
    saw_header = False
    group: list[Result] = []
    for line in iter_lines(path):
        if line.get("type") == "header":
            if line.get("schema") != SCHEMA:
                raise ValueError(f"{path} is not a torchmark suite results file "
                                 f"(schema {brief_repr(line.get('schema'))})")
            saw_header, group = True, []
        elif line.get("type") == "case" and "id" in line:
            records.append(line)  # version 1
        elif line.get("schema") == RESULT_SCHEMA:
            result = Result.from_dict(line)
            if group and group[0].case.id != result.case.id:
                group = []
            group.append(result)
            if len(group) == result.extra.get("parts"):
                records.append(results_record(group))
                group = []
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

    def write(self, record: dict[str, Any]) -> None:
        """A case record as its Results (written together); other lines as they are."""
        if record.get("type") == "case":
            self.write_many([r.to_dict() for r in record_results(record)])
        else:
            super().write(record)

    def close(self, footer: dict[str, Any] | None = None) -> None:
        super().close({"type": "footer", **footer} if footer is not None else None)
