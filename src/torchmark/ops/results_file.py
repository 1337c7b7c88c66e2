"""The ops (and replay) results file: JSON lines, a header per run, the Results of each
finished case (one a timed pass, forward or backward, or one carrying its failure:
core.result, written together), a footer when a run ends (see torchmark.core.jsonl).

A case's record (the dict the runner or the replay makes) becomes Results with
`record_results` and is rebuilt from them with `results_record`: the passes' times are
the Results' samples, the rest of the record rides in each Result's `extra["record"]`.
Files written before (version 1: one `record` line a case) still read."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torchmark.core.jsonl import JsonlWriter, iter_lines
from torchmark.core.provenance import Provenance
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import Case, Failure, Result

SCHEMA = "torchmark.ops.results"
VERSION = 2  # 1: a "record" line a case; 2: a case's Results
PHASES = ("forward", "backward")


def workload_digest(record: Mapping[str, Any], device: str, threads: int,
                    exec_mode: str = "discrete") -> str:
    """12 hex digits of what a record measured (its op, its config: shapes, dtypes,
    values; the device, threads and an exec mode other than discrete, which measures
    something else), so that the same position in two configs (case 0 of a 512x512 sweep
    and of a 64x64 one) are two cases in the store, not one."""
    workload = {"op": record.get("op"), "config": record.get("config") or {},
                "device": device, "threads": threads}
    if exec_mode != "discrete":
        workload["exec_mode"] = exec_mode
    what = json.dumps(workload, sort_keys=True, default=str)
    return hashlib.sha256(what.encode()).hexdigest()[:12]


TITLE_CHARS = 160  # a case's shapes in its title, at most (configs may come from others)


def case_labels(record: Mapping[str, Any], exec_mode: str) -> tuple[str, str]:
    """The sub-label (its inputs: shapes and dtypes) and description (the exec mode) that
    name an ops or replay case for people: torch.mm: 128x64 float, 64x32 float
    [discrete]."""
    from torchmark.ops.report import describe_config

    config = record.get("config")
    try:
        inputs = describe_config(dict(config)) if isinstance(config, Mapping) else ""
    except (KeyError, TypeError, AttributeError):  # a config of another shape
        inputs = ""
    inputs = " ".join(inputs.split())
    if len(inputs) > TITLE_CHARS:
        inputs = inputs[:TITLE_CHARS - 3] + "..."
    return inputs or str(record.get("id", "")), exec_mode


def case_place(case_id: str) -> str:
    """The record id (the case's place in its config) of a case id record_results made:
    `ID@DIGEST#forward` -> `ID`."""
    return case_id.split("#")[0].split("@")[0]


def record_results(record: Mapping[str, Any], header: Mapping[str, Any] | None = None, *,
                   provenance: Provenance | None = None) -> list[Result]:
    """An ops (or replay) record as Results: one a timed pass (forward, backward), or one
    carrying the failure. The case id is the record's own (op|config|build|input, or a
    replayed node's name|id), then `@` and its workload_digest, then `#forward` /
    `#backward` for a pass. `header` (the file's) says the device, threads and whether it
    was a replay; a record measured on another node carries that node's provenance."""
    header = header or {}
    options = header.get("run_options") or {}
    frontend = "replay" if header.get("source") == "replay" else "ops"
    device = str(options.get("device") or "cpu")
    threads = int(options.get("threads") or header.get("threads") or 1)
    config = record.get("config") or {}
    exec_mode = str(options.get("exec_mode") or "discrete")
    inputs, mode = case_labels(record, exec_mode)
    case = Case(id=f"{record['id']}@{workload_digest(record, device, threads, exec_mode)}",
                frontend=frontend, stmt=str(record.get("op", "")),
                label=str(record.get("op", "")) or None, sub_label=inputs,
                description=mode, threads=threads, device=device,
                params={"config": config, "exec_mode": exec_mode} if config else
                {"exec_mode": exec_mode})
    # CUDA runs time events, or with --metric kernel their kernels (docs/gpu.md)
    metric = "kernel" if options.get("metric") == "kernel" else \
        "device" if device.startswith("cuda") else "wall"
    counted = options.get("metric") == "memory"  # bytes: two exact Results a pass
    if provenance is None and isinstance(record.get("provenance"), Mapping):
        provenance = Provenance.from_dict(record["provenance"])
    rest = copy.deepcopy(dict(record))
    metrics = record.get("metrics") or {}
    # (the pass's case, metric, samples, runs a sample, warnings, extra) a Result
    made: list[tuple[Case, str, tuple[float, ...], int, tuple[str, ...], dict[str, Any]]] = []
    for phase in PHASES:
        data = metrics.get(phase) if isinstance(metrics, Mapping) else None
        if counted and isinstance(data, Mapping) and isinstance(data.get("bytes"), Mapping):
            made += _byte_results(case, phase, mode, data["bytes"])
            continue
        if not isinstance(data, Mapping) or not data.get("times"):
            continue
        rest["metrics"][phase].pop("times")
        note = data.get("note")
        extra = {"phase": phase, **{k: data[k] for k in ("memory", "iterations")
                                    if k in data}}
        if "work" in metrics:
            extra["work"] = metrics["work"]
        times = tuple(data["times"])
        iterations = data.get("iterations")
        # continuous mode keeps one mean over all its calls: that sample covers them all
        number = int(iterations) if len(times) == 1 and isinstance(iterations, int) \
            and iterations > 1 else 1
        made.append((_pass_case(case, phase, mode), metric, times, number,
                     (note,) if note else (), extra))
    # a pass that failed (or never ran: the record failed) is a failed result of the
    # pass's own case, as a measured one would be: so it pairs with its measured runs
    status = record.get("status")
    error = record.get("error") or (None if made else f"no timed pass ({status})")
    timed = {c.id for c, *_ in made}
    failed = [(_pass_case(case, phase, mode), m)
              for phase in (PHASES if options.get("backward") else PHASES[:1])
              for m in (("memory", "allocated") if counted else (metric,))
              if error and f"{case.id}#{phase}" not in timed]
    parts = len(made) + len(failed)
    return [Result(case=c, metric=m, samples=times, number_per_run=number,
                   warnings=warnings, provenance=provenance,
                   extra={**extra, "record": rest, "parts": parts})
            for c, m, times, number, warnings, extra in made] + \
        [Result(case=c, metric=m, failure=Failure(str(error)), provenance=provenance,
                extra={"status": status, "record": rest, "parts": parts})
         for c, m in failed]


def _pass_case(case: Case, phase: str, mode: str) -> Case:
    """The case of one pass (forward, backward) of a record's case."""
    return Case(**{**case.__dict__, "id": f"{case.id}#{phase}",
                   "description": f"{phase}, {mode}"})


def _byte_results(case: Case, phase: str, mode: str, columns: Mapping[str, Any]) -> list:
    """--metric memory: a pass's two exact Results (memory: peak bytes a call; allocated:
    bytes allocated a call), as record_results' (case, metric, samples, runs a sample,
    warnings, extra) of the pass's case."""
    passed = _pass_case(case, phase, mode)
    made = []
    for metric, field in (("memory", "peak"), ("allocated", "allocated")):
        values = columns.get(field)
        if isinstance(values, list) and values and all(
                isinstance(v, int) and not isinstance(v, bool) for v in values):
            made.append((passed, metric, tuple(float(v) for v in values), 1, (),
                         {"phase": phase, "allocations": columns.get("allocations")}))
    return made


def results_record(results: Sequence[Result]) -> dict[str, Any]:
    """The record `record_results` made these Results of."""
    record: dict[str, Any] = copy.deepcopy(dict(results[0].extra.get("record") or {}))
    for r in results:
        phase = r.extra.get("phase")
        if r.failure is None and phase in PHASES:
            record["metrics"][phase]["times"] = list(r.samples)
    return record


def read_file(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A results file's first header and its records, in order (a resumed file may hold
    an id twice: callers building a dict keep the last). A record whose Results a killed
    run left incomplete is not one; version-1 `record` lines are read as they are."""
    header: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    group: list[Result] = []
    for line in iter_lines(path):
        if line.get("type") == "header":
            header, group = header or line, []
        elif line.get("type") == "record":
            records.append(line)
        elif line.get("schema") == RESULT_SCHEMA:
            result = Result.from_dict(line)
            record_id = (result.extra.get("record") or {}).get("id")
            if group and (group[0].extra.get("record") or {}).get("id") != record_id:
                group = []
            group.append(result)
            if len(group) == result.extra.get("parts"):
                records.append(results_record(group))
                group = []
    return header, records


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every case record of a results file, in order (see read_file)."""
    return read_file(path)[1]


class OpsResultsWriter(JsonlWriter):
    """The ops and replay writer: a case record as its Results (written together, with
    the header's device and threads); the header and footer lines as they are."""

    def __init__(self, path: str | os.PathLike, header: dict[str, Any], resume: bool,
                 lock: Any = None) -> None:
        self.header = {"schema": SCHEMA, **header, "version": VERSION}
        super().__init__(path, {"type": "header", **self.header}, resume, lock)

    def write(self, record: dict[str, Any]) -> None:
        if record.get("type") == "record":
            self.write_many([r.to_dict() for r in record_results(record, self.header)])
        else:
            super().write(record)
