"""pyperf's JSON results: a benchmark's file (`pyperf timeit -o`, a Runner script's `-o`)
or a suite of several (a Runner running several benchmarks, `pyperf convert --add`),
plain or gzipped (`.json.gz`); pyperf's file format "1.0" (pyperf 1.0 and later).

A run's metadata is the file's, its benchmark's and its own merged, as pyperf merges
them. Each benchmark (its `name`; `timeit_stmt` and `timeit_setup` as params where
pyperf's timeit recorded them, since `pyperf timeit` names every statement "timeit") is
a case of frontend "pyperf". The `values` of all its runs are the raw samples, per loop
iteration as pyperf writes them: seconds for unit "second" (metric wall), bytes for
unit "byte" (metric memory: the peak of a run, `--tracemalloc` or `--track-memory`);
other units are refused. Warmups are left out, and so are calibration runs (warmups
only); a benchmark with no values is refused. number_per_run is `loops` x `inner_loops`
(the smallest where runs differ). `hostname`, `cpu_model_name`, `cpu_count`,
`python_implementation`, `python_version` and `perf_version` become the provenance, the
earliest run's `date` its start (pyperf writes local time without its offset: read as
UTC), and the CPU, OS and Python build metadata its fingerprint."""

from __future__ import annotations

import json
import math
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from torchmark.core.bounded_input import brief, first_line, gunzip, load_json, read_bytes
from torchmark.core.errors import UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.store.formats.common import (
    count,
    field,
    file_time,
    foreign_case,
    foreign_provenance,
    number_list,
    raw_result,
    refuse,
    text,
    when,
)

TOOL = "pyperf"
VERSION = "1.0"  # the file format pyperf 1.0 and later write
GZIP_MAGIC = b"\x1f\x8b"
METRICS = {"second": "wall", "byte": "memory"}  # pyperf's unit -> the metric
CASE_PARAMS = ("timeit_stmt", "timeit_setup")
# pyperf's metadata -> the fingerprint's names (core/fingerprint.py; python.version,
# cpu.governor and cpu.quota are read from it as well)
FINGERPRINT = {
    "cpu_model_name": "cpu.model", "cpu_count": "cpu.threads", "cpu_machine": "cpu.arch",
    "cpu_affinity": "cpu.affinity", "cpu_config": "cpu.config",
    "platform": "os.platform", "aslr": "os.aslr", "python_compiler": "python.compiler",
    "python_cflags": "python.cflags", "python_gc": "python.gc", "timer": "python.timer",
}


class _Benchmark(NamedTuple):
    """A benchmark's values and what its first run with values says of them."""

    case: Case
    metric: str
    values: list[float]
    number_per_run: int
    metadata: dict[str, Any]
    dates: list[str]


def detect(path: Path, document: Any) -> bool:
    """Whether a file's JSON `document` is pyperf's, or a gzip file holds pyperf's."""
    if document is None and path.is_file() and \
            first_line(path, "import", limit=2) == GZIP_MAGIC:
        try:
            document = _load(path)
        except UsageError:
            return False
    return _is_document(document)


def _is_document(document: Any) -> bool:
    return isinstance(document, Mapping) and document.get("version") == VERSION and \
        isinstance(document.get("benchmarks"), list)


def _load(path: Path) -> Any:
    """The file's JSON, gunzipped first where it is gzip data; a FormatError otherwise."""
    data = read_bytes(path, f"{TOOL} file")
    if data[:2] == GZIP_MAGIC:
        try:
            data = gunzip(data, f"{TOOL} file {brief(str(path))}")
        except (EOFError, zlib.error) as e:
            raise refuse(path, f"a damaged gzip file ({e})") from None
    try:
        return load_json(data, brief(str(path)))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise refuse(path, f"not a {TOOL} JSON file ({e})") from None


def read(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of a pyperf JSON file (module docstring)."""
    path = Path(path)
    document = _load(path)
    if not _is_document(document):
        raise refuse(path, f"not a {TOOL} file (no 'benchmarks' and 'version' {VERSION!r})")
    metadata = field(document, "metadata", dict, path, optional=True) or {}
    benchmarks = [_benchmark(bench, metadata, path, f"benchmarks[{i}]")
                  for i, bench in enumerate(field(document, "benchmarks", list, path))]
    if not benchmarks:
        raise refuse(path, "no benchmarks")
    started = when(min((date for bench in benchmarks for date in bench.dates), default=None),
                   file_time(path), path, "date")
    for bench in benchmarks:
        yield raw_result(bench.case, bench.values, _provenance(bench.metadata, started, path),
                         metric=bench.metric, number_per_run=bench.number_per_run)


def _benchmark(bench: Any, suite: dict[str, Any], path: Path, where: str) -> _Benchmark:
    """A benchmark's values (calibration runs left out) and its first such run's
    metadata; a FormatError when it has none, or runs of different units."""
    metadata = {**suite, **(field(bench, "metadata", dict, path, where, optional=True) or {})}
    name = text(field(metadata, "name", str, path, f"{where}.metadata"), limit=2048)
    values: list[float] = []
    loops: list[int] = []
    metrics: set[str] = set()
    dates: list[str] = []
    first: dict[str, Any] | None = None
    for i, run in enumerate(field(bench, "runs", list, path, where)):
        at = f"{where}.runs[{i}]"
        run_metadata = {**metadata,
                        **(field(run, "metadata", dict, path, at, optional=True) or {})}
        if isinstance(run_metadata.get("date"), str):
            dates.append(run_metadata["date"])
        run_values = number_list(field(run, "values", list, path, at, optional=True) or [],
                                 path, f"{at}.values")
        if not run_values:
            continue  # a calibration run: warmups only
        unit = run_metadata.get("unit", "second")
        if unit not in METRICS:
            raise refuse(path, f"{at}: unit {brief(repr(unit), 40)} is neither 'second' nor "
                               "'byte'")
        metrics.add(METRICS[unit])
        loops.append(math.prod(field(run_metadata, key, int, path, at, optional=True,
                                     least=1) or 1 for key in ("loops", "inner_loops")))
        values += run_values
        if first is None:
            first = run_metadata
    if first is None:
        raise refuse(path, f"{where} ({brief(name, 80)}): no values (calibration runs only)")
    if len(metrics) > 1:
        raise refuse(path, f"{where} ({brief(name, 80)}): runs of different units")
    params = {key: metadata[key] for key in CASE_PARAMS if isinstance(metadata.get(key), str)}
    return _Benchmark(foreign_case(TOOL, name, params), metrics.pop(), values, min(loops),
                      first, dates)


IMPLEMENTATIONS = {"cpython": "CPython", "pypy": "PyPy", "graalpy": "GraalPy",
                   "jython": "Jython", "ironpython": "IronPython"}


def python_spelled(implementation: str, version: str) -> str:
    """pyperf's `cpython` and `3.11.7 (64-bit)` as torchmark spells its own Python
    (core/fingerprint.py: "CPython 3.11.7"), so the two compare equal."""
    name = IMPLEMENTATIONS.get(implementation.lower(), implementation or "Python")
    number = re.match(r"[0-9]+(?:\.[0-9]+)*\S*", version.strip())
    return f"{name} {number.group(0) if number else version.strip() or '?'}"


def _provenance(metadata: Mapping[str, Any], started: str, path: Path) -> Provenance:
    python = python_spelled(text(metadata.get("python_implementation"), ""),
                            text(metadata.get("python_version"), ""))
    governor = re.search(r"governor:([\w-]+)", text(metadata.get("cpu_config"), ""))
    quota = re.fullmatch(r"(\d+(?:\.\d+)?) CPUs", text(metadata.get("cpu_quota"), ""))
    environment = {name: metadata.get(key) for key, name in FINGERPRINT.items()}
    cpus = count(metadata.get("cpu_count"))
    if environment["cpu.affinity"] is None and cpus:  # pyperf names only a restricted one
        environment["cpu.affinity"] = "0" if cpus == 1 else f"0-{cpus - 1}"
    environment.update({"python.version": python,
                        "cpu.governor": governor.group(1) if governor else None,
                        "cpu.quota": float(quota.group(1)) if quota else None})
    return foreign_provenance(
        TOOL, text(metadata.get("perf_version"), "") or None, path, started=started,
        hostname=text(metadata.get("hostname")), cpu_model=text(metadata.get("cpu_model_name")),
        cores=count(metadata.get("cpu_count")), python=python,
        environment={k: v for k, v in environment.items()
                     if isinstance(v, (str, int, float)) and not isinstance(v, bool)})
