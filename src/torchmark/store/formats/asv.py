"""asv (airspeed velocity)'s results: its results folder (benchmarks.json and a folder a
machine), one machine's folder, or one result file (`MACHINE/COMMIT-ENV.json`, asv's
results format 2); benchmarks.json, which says each benchmark's type and parameter
names, is read from the folder above the machine's and must be there.

Each benchmark and combination of its parameters is a case of frontend "asv": the
benchmark's name (`module.Class.time_x`) its statement, `param_names` and the values as
asv writes them (their repr: `'float32'`) its params, `name(value, ...)` its label.
time benchmarks are wall time in seconds: the raw samples, each per call, where asv kept
them (`--record-samples`), else the statistics asv states: n = stats_repeat, its result
(the median) as median and mean (asv states no mean), the IQR q_75 - q_25, no deviation.
mem and peakmem benchmarks are memory in bytes, one sample, though neither is what torch
allocated (the result's extra says what it is: MEASURES); a peakmem reading (the
process's RSS, which moves from run to run) is stated statistics of one sample, so the
verdict engine judges it unmeasured rather than as an exact count. Skipped: track benchmarks
(units of their own), values asv has none of (a failure is null, a skip NaN), and
results of a benchmark that benchmarks.json does not describe at that version (stale:
asv ignores them too). Each result file is a run, oldest first: its commit, its
environment's name (env), its machine (the result's `params`: machine name as hostname,
cpu, num_cpu, arch, ram, os) and Python; the run starts at its first benchmark's
`started_at`."""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, brief_repr
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result, Stated
from torchmark.store.formats.common import (
    count,
    field,
    file_time,
    folder_files,
    foreign_case,
    foreign_provenance,
    load_document,
    number_list,
    raw_result,
    refuse,
    stated_result,
    text,
    when,
)

TOOL = "asv"
MAX_FILES = 100_000  # result files a results folder may hold
RESULTS_VERSION = 2  # asv's results format (asv 0.5 and later)
BENCHMARKS = "benchmarks.json"
MACHINE = "machine.json"
METRIC_OF_TYPE = {"time": "wall", "memory": "memory", "peakmemory": "memory"}
MEASURES = {"memory": "the size of the object the benchmark returns (pympler's asizeof),"
                      " not bytes torch allocated",
            "peakmemory": "the process's peak resident set size (RSS) while the "
                          "benchmark ran, not bytes torch allocated"}
STATS = ("stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples")
RAM = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,15})?)\s*([kmgt]?)i?b?", re.IGNORECASE)

# a benchmark's definition in benchmarks.json: (type, param_names, version or None)
Definition = tuple[str, list[str], str | None]


def detect(path: Path, document: Any) -> bool:
    """Whether a folder is asv's results folder (benchmarks.json and a machine folder) or
    one machine's folder in it, or a file's JSON `document` is an asv result file."""
    if path.is_dir():
        return (path / BENCHMARKS).is_file() and bool(folder_files(path, f"*/{MACHINE}")) or \
            (path / MACHINE).is_file() and (path.parent / BENCHMARKS).is_file()
    return _is_result_file(document)


def _is_result_file(document: Any) -> bool:
    return isinstance(document, Mapping) and "result_columns" in document and \
        "commit_hash" in document


def read(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of an asv results folder, machine folder or result file (module
    docstring), a run a result file, oldest first."""
    path = Path(path)
    files, benchmarks = _result_files(path)
    if not benchmarks.is_file():
        raise refuse(path, f"no {BENCHMARKS} at {brief(str(benchmarks))} (asv writes it in "
                           "its results folder; it gives the benchmarks' types)")
    definitions = _definitions(benchmarks)
    runs = sorted((_run(file, definitions) for file in files), key=lambda run: run[0])
    for _, results in runs:
        yield from results


def _result_files(path: Path) -> tuple[list[Path], Path]:
    """The result files at `path` and where its benchmarks.json would be."""
    if not path.is_dir():
        return [path], path.parent.parent / BENCHMARKS
    if (path / MACHINE).is_file():
        machines, benchmarks = [path], path.parent / BENCHMARKS
    else:
        machines = sorted(file.parent for file in folder_files(path, f"*/{MACHINE}"))
        benchmarks = path / BENCHMARKS
    files = [file for machine in machines for file in folder_files(machine, "*.json")
             if file.name != MACHINE]
    if not files:
        raise refuse(path, f"no asv result files here (in a folder with {MACHINE})")
    if len(files) > MAX_FILES:
        raise refuse(path, f"more than {MAX_FILES} files")
    return files, benchmarks


def _definitions(path: Path) -> dict[str, Definition]:
    """benchmarks.json's benchmarks: name -> (type, param_names, version)."""
    document = load_document(path, TOOL)
    if not isinstance(document, Mapping):
        raise refuse(path, f"not asv's {BENCHMARKS} (not an object)")
    definitions: dict[str, Definition] = {}
    for name, bench in document.items():
        if name == "version":
            continue
        where = brief_repr(name, 120)
        names = field(bench, "param_names", list, path, where)
        if not all(isinstance(n, str) for n in names):
            raise refuse(path, f"{where}.param_names must be a list of strings")
        definitions[name] = (field(bench, "type", str, path, where), names,
                             field(bench, "version", str, path, where, optional=True))
    return definitions


def _run(path: Path, definitions: Mapping[str, Definition]) -> tuple[str, list[Result]]:
    """A result file's start and Results."""
    document = load_document(path, TOOL)
    if not _is_result_file(document):
        raise refuse(path, "not an asv result file (no 'result_columns' and 'commit_hash')")
    if document.get("version") != RESULTS_VERSION:
        raise refuse(path, f"asv results format {brief(repr(document.get('version')), 20)} "
                           f"is not supported (only {RESULTS_VERSION}: asv 0.5 and later)")
    columns = field(document, "result_columns", list, path)
    if not all(isinstance(c, str) for c in columns):
        raise refuse(path, "result_columns must be a list of strings")
    rows = {}
    for name, values in field(document, "results", dict, path).items():
        if not isinstance(values, list):
            raise refuse(path, f"results[{brief_repr(name, 120)}] must be a list")
        rows[name] = dict(zip(columns, values, strict=False))  # no trailing nulls
    starts = [row["started_at"] for row in rows.values()
              if type(row.get("started_at")) in (int, float) and
              math.isfinite(row["started_at"])]
    started = when(min(starts) if starts else document.get("date"), file_time(path), path,
                   "started_at" if starts else "date")
    provenance = _provenance(document, path, started)
    return started, [result for name, row in rows.items() if name in definitions
                     for result in _results(name, row, definitions[name], path, provenance)]


def _results(name: str, row: Mapping[str, Any], definition: Definition, path: Path,
             provenance: Provenance) -> Iterator[Result]:
    """The Results of one benchmark's row: one a parameter combination asv has a value
    of (none for a track benchmark or a stale version)."""
    kind, param_names, version = definition
    metric = METRIC_OF_TYPE.get(kind)
    values = row.get("result")
    if metric is None or values is None or row.get("version") not in (None, version):
        return
    where = f"results[{brief_repr(name, 120)}]"
    if not isinstance(values, list):
        raise refuse(path, f"{where}: result must be a list or null")
    params = row.get("params") or []
    if not isinstance(params, list) or len(params) != len(param_names) or not all(
            isinstance(p, list) and all(isinstance(v, str) for v in p) for p in params):
        raise refuse(path, f"{where}: params must be {len(param_names)} lists of strings "
                           f"(benchmarks.json's param_names)")
    if math.prod(map(len, params)) != len(values):
        raise refuse(path, f"{where}: {len(values)} results for "
                           f"{math.prod(map(len, params))} parameter combinations")
    stats = {key: _column(row, key, len(values), path, where) for key in STATS}
    extra = {"asv_type": kind, **({"measures": MEASURES[kind]} if kind in MEASURES else {})}
    for i, combination in enumerate(itertools.product(*params)):
        value = values[i]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue  # failed, or skipped
        at = {"result": value, **{key: column[i] for key, column in stats.items()}}
        here = f"{where}[{i}]"
        value = field(at, "result", float, path, here)
        if value < 0:
            raise refuse(path, f"{here}: result must be >= 0, got {value!r}")
        case = foreign_case(TOOL, name, dict(zip(param_names, combination, strict=True)),
                            label=f"{name}({', '.join(combination)})" if combination
                            else name)
        if kind == "memory":  # an object's size: the same from run to run
            yield raw_result(case, [value], provenance, metric=metric, extra=extra)
            continue
        if kind == "peakmemory":  # one reading of a noisy RSS: stated, no verdict on it
            yield stated_result(case, Stated(1, value, None, value, None), provenance,
                                metric=metric, extra=extra)
            continue
        number = field(at, "stats_number", int, path, here, optional=True, least=1) or 1
        if at["samples"]:
            yield raw_result(case, number_list(at["samples"], path, f"{here}.samples"),
                             provenance, number_per_run=number, extra=extra)
            continue
        q25, q75 = (field(at, key, float, path, here, optional=True)
                    for key in ("stats_q_25", "stats_q_75"))
        if q25 is not None and q75 is not None and q75 < q25:
            raise refuse(path, f"{here}: stats_q_75 is below stats_q_25")
        repeat = field(at, "stats_repeat", int, path, here, optional=True, least=1) or 1
        iqr = q75 - q25 if q25 is not None and q75 is not None else None
        yield stated_result(case, Stated(max(repeat, 1), value, None, value, iqr),
                            provenance, number_per_run=number, extra=extra)


def _column(row: Mapping[str, Any], key: str, length: int, path: Path,
            where: str) -> list[Any]:
    """A row's per-combination column `key` (null: none of them has one)."""
    column = row.get(key)
    if column is None:
        return [None] * length
    if not isinstance(column, list) or len(column) != length:
        raise refuse(path, f"{where}: {key} must be a list of {length} or null")
    return column


def _provenance(document: Mapping[str, Any], path: Path, started: str) -> Provenance:
    machine = document.get("params")
    if not isinstance(machine, Mapping):
        machine = {}
    env = text(document.get("env_name"), "") or None
    python = text(document.get("python"))
    system, _, release = text(machine.get("os"), "").partition(" ")
    commit = document.get("commit_hash")
    environment = {
        "cpu.model": text(machine.get("cpu"), ""), "cpu.threads": _whole(machine.get("num_cpu")),
        "cpu.arch": text(machine.get("arch"), ""),
        "memory.bytes": _bytes(machine.get("ram")), "os.system": system, "os.kernel": release,
        "python.version": python if re.fullmatch(r"[0-9]+(\.[0-9]+)*", python) else "",
        "asv.env": env or "",
    }
    return foreign_provenance(
        TOOL, None, path, started=started, hostname=text(machine.get("machine")),
        cpu_model=text(machine.get("cpu")), cores=_whole(machine.get("num_cpu")),
        memory_bytes=_bytes(machine.get("ram")), python=python,
        commit=commit if isinstance(commit, str) and commit else None, env=env,
        environment={k: v for k, v in environment.items() if v})


def _whole(value: Any) -> int:
    """A count machine.json gives as text ("8") or a number; 0 when it is neither."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,15}", value):
        return int(value)
    return count(value)


def _bytes(value: Any) -> int:
    """machine.json's ram: bytes ("16777216000", as `asv machine` finds it) or a size
    a person wrote ("16GB", "16 GiB": powers of 1024); 0 when it is neither."""
    match = RAM.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        return count(value)
    size = float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " ")
    return int(size) if size < 2**62 else 0
