"""Measurements saved and read back as results files (no pickle needed); the older
measurements JSON documents still read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, brief_repr, first_line, load_json, read_text
from torchmark.core.errors import LimitError
from torchmark.core.provenance import Provenance
from torchmark.core.results_file import (
    is_results_file,
    read_results,
    save_results,
)
from torchmark.timing.measurement import SCHEMA_NAME as MEASUREMENT_SCHEMA
from torchmark.timing.measurement import Measurement
from torchmark.timing.results import TIME_METRICS, measurement_to_result, result_to_measurement

FILE_SCHEMA = "torchmark.measurements"  # the JSON document written before Results files
FILE_VERSION = 1


def dump_measurements(measurements: Iterable[Measurement]) -> dict:
    """The older measurements document (`torchmark.measurements`), still read and written
    on request; files are written as Results now (see save_measurements)."""
    return {
        "schema": FILE_SCHEMA,
        "version": FILE_VERSION,
        "measurements": [m.to_dict() for m in measurements],
    }


def save_measurements(path: str | os.PathLike, measurements: Iterable[Measurement],
                      append: bool = False, *, frontend: str = "timeit",
                      provenance: Provenance | None = None) -> list[Measurement]:
    """Write measurements to `path` as a results file (core.results_file: a header line,
    then one Result a line, each with `provenance` when given). With `append`, keep what
    the file held: Results are appended to a results file, and a measurements file
    written before Results is rewritten as one (atomically), its measurements first. The
    file's lock is held throughout (waiting up to 30 s for another process saving to it),
    so two processes appending at once both keep their results.

    Returns every measurement the file now holds.
    """
    new = [measurement_to_result(m, frontend, provenance=provenance) for m in measurements]
    save_results(path, new, append, what="measurements file", older=lambda old: [
        measurement_to_result(m, frontend) for m in load_measurements(old)])
    return load_measurements(path)


def parse_measurements(data: object, source: str = "input") -> list[Measurement]:
    """Measurements from a decoded JSON value: a file object, one measurement, or a list."""
    if isinstance(data, list):
        items = data
    elif isinstance(data, dict) and data.get("schema") == FILE_SCHEMA:
        if data.get("version") != FILE_VERSION:
            raise ValueError(
                f"{source}: {FILE_SCHEMA} version {brief_repr(data.get('version'))} is not supported"
            )
        listed = data.get("measurements")
        if not isinstance(listed, list):
            raise ValueError(f"{source}: 'measurements' must be a list")
        items = listed
    elif isinstance(data, dict) and data.get("schema") == MEASUREMENT_SCHEMA:
        items = [data]
    elif isinstance(data, dict) and "schema" in data:
        raise ValueError(f"{source}: not a torchmark measurements file (its schema is "
                         f"{brief_repr(data['schema'])}, not {brief_repr(FILE_SCHEMA)})")
    else:
        raise ValueError(f"{source}: not a torchmark measurements file (no 'schema' field)")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(Measurement.from_dict(item))
        except ValueError as e:
            raise ValueError(f"{source}: measurement {i}: {brief(str(e), 400)}") from None
    return out


def load_measurements(path: str | os.PathLike) -> list[Measurement]:
    """The time measurements of a file `save_measurements` wrote (a results file: its
    results of other metrics, and failed ones, left out), of an older measurements file,
    or of one Measurement's JSON."""
    path = Path(path)
    if path.is_file() and path.stat().st_size and is_results_file(path):
        return _time_measurements(read_results(path), path)
    text = read_text(path, "measurements file")
    try:
        data = load_json(text, str(path))
    except json.JSONDecodeError as e:
        first = _first_line_schema(text)
        if first is not None:
            raise ValueError(f"{path}: not a torchmark measurements file but JSON lines of "
                             f"{brief_repr(first)} (measurements files come from `timeit --save` or "
                             "save_measurements)") from None
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    return parse_measurements(data, str(path))


def _time_measurements(results: list[Any], path: Path) -> list[Measurement]:
    """load_measurements of a results file's `results`."""
    times = [r for r in results if r.ok and r.metric in TIME_METRICS]
    if results and not times:
        raise ValueError(f"{brief(str(path))}: its {len(results)} results hold no "
                         "times (instruction counts, or failed cases); `torchmark gate "
                         "--baseline A --candidate B` judges counts")
    return [result_to_measurement(r) for r in times]


def load_compared(path: str | os.PathLike, failed: bool = False) -> list[Any]:
    """What Compare can show of a file: its time measurements (load_measurements) and,
    in a results file (read once), its memory measurements (Timer.memory's) and with
    `failed` a placeholder for each case whose time results all failed
    (timing/results.py failure_placeholder)."""
    from torchmark.core.result import unmeasured_failures
    from torchmark.timing.results import failure_placeholder, result_to_memory

    path = Path(path)
    if path.is_file() and path.stat().st_size and is_results_file(path):
        results = read_results(path)
        memory = [result_to_memory(r) for r in results if r.ok and r.metric == "memory"]
        placeholders = [failure_placeholder(r) for r in unmeasured_failures(results)
                        if r.metric in TIME_METRICS] if failed else []
        if memory and not any(r.ok and r.metric in TIME_METRICS for r in results):
            return [*memory, *placeholders]
        return [*_time_measurements(results, path), *memory, *placeholders]
    return list(load_measurements(path))


def _first_line_schema(text: str) -> str | None:
    """The `schema` of a JSON-lines file's first line (ops, replay, suite results)."""
    try:
        first = load_json(text.split("\n", 1)[0], "the first line")
    except (json.JSONDecodeError, LimitError):
        return None
    return str(first["schema"]) if isinstance(first, dict) and "schema" in first else None


def first_line_schema(path: str | os.PathLike) -> str | None:
    """The `schema` of a file's first line, when it is a JSON object with one."""
    try:
        return _first_line_schema(first_line(path, "file").decode("utf-8"))
    except (OSError, UnicodeDecodeError, LimitError):
        return None  # whoever reads the file next says what is wrong with it
