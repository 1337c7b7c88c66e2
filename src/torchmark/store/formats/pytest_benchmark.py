"""pytest-benchmark's results: a `--benchmark-json` file, a `--benchmark-save` file, or
its storage folder (`.benchmarks/`, every saved file in it, oldest first).

Each benchmark (its `fullname`, the test's node id, and `params`) is a case of frontend
"pytest-benchmark"; its `stats.data` (kept by pytest-benchmark 3.2+ unless
`--benchmark-save-data` was off in older versions) are the raw samples, per call (a
round's time divided by its `iterations`, as pytest-benchmark reports them); without
them the stated rounds, mean, stddev, median and IQR. `group` becomes the label's
prefix, `extra_info` the result's extra. `machine_info` and `commit_info` become the
run's provenance and fingerprint; `datetime` its start."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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

TOOL = "pytest-benchmark"
MAX_FILES = 100_000  # saved files a storage folder may hold


def detect(path: Path, document: Any) -> bool:
    """Whether a file's JSON `document` is pytest-benchmark's, or a folder holds its
    saved files (`.benchmarks/MACHINE/0001_NAME.json`)."""
    if path.is_dir():
        first = next(iter(folder_files(path, "*/[0-9][0-9][0-9][0-9]_*.json")), None)
        return first is not None
    return _is_document(document)


def _is_document(document: Any) -> bool:
    return isinstance(document, Mapping) and "benchmarks" in document and \
        "machine_info" in document


def read(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of a pytest-benchmark JSON file or storage folder (module docstring)."""
    path = Path(path)
    if path.is_dir():
        files = folder_files(path, "*.json", recursive=True)
        if not files:
            raise refuse(path, "no pytest-benchmark JSON files in this folder")
        if len(files) > MAX_FILES:
            raise refuse(path, f"more than {MAX_FILES} files")
        for file in files:
            yield from read_file(file)
        return
    yield from read_file(path)


def read_file(path: Path) -> Iterator[Result]:
    document = load_document(path, TOOL)
    if not _is_document(document):
        raise refuse(path, "not a pytest-benchmark file (no 'benchmarks' and "
                           "'machine_info')")
    benchmarks = field(document, "benchmarks", list, path)
    provenance = _provenance(document, path)
    for i, bench in enumerate(benchmarks):
        where = f"benchmarks[{i}]"
        name = text(field(bench, "fullname", str, path, where, optional=True) or
                    field(bench, "name", str, path, where), limit=2048)
        params = field(bench, "params", dict, path, where, optional=True) or {}
        group = field(bench, "group", str, path, where, optional=True)
        stats = field(bench, "stats", dict, path, where)
        iterations = field(stats, "iterations", int, path, f"{where}.stats", optional=True,
                           least=1)
        extra = {"extra_info": bench.get("extra_info") or {},
                 "options": bench.get("options") or {}}
        case = foreign_case(TOOL, name, params, label=f"{group}: {name}" if group else name)
        data = stats.get("data")
        if data:
            yield raw_result(case, number_list(data, path, f"{where}.stats.data"),
                             provenance, number_per_run=iterations or 1, extra=extra)
            continue
        rounds = field(stats, "rounds", int, path, f"{where}.stats", least=1)
        stated = Stated(max(rounds, 1), field(stats, "mean", float, path, f"{where}.stats"),
                        field(stats, "stddev", float, path, f"{where}.stats", optional=True),
                        field(stats, "median", float, path, f"{where}.stats", optional=True),
                        field(stats, "iqr", float, path, f"{where}.stats", optional=True))
        yield stated_result(case, stated, provenance, number_per_run=iterations or 1,
                            extra=extra)


def _provenance(document: Mapping[str, Any], path: Path) -> Any:
    machine: Mapping[str, Any] = _mapping(document.get("machine_info"))
    cpu: Mapping[str, Any] = _mapping(machine.get("cpu"))
    commit: Mapping[str, Any] = _mapping(document.get("commit_info"))
    commit_id = commit.get("id") if isinstance(commit.get("id"), str) and \
        commit.get("id") != "unversioned" else None
    python = f"{text(machine.get('python_implementation'), 'Python')} " \
             f"{text(machine.get('python_version'), '?')}"
    build = machine.get("python_build")
    environment = {
        "cpu.model": cpu.get("brand_raw"), "cpu.threads": cpu.get("count"),
        "cpu.arch": machine.get("machine"), "os.kernel": machine.get("release"),
        "os.system": machine.get("system"), "python.version": python,
        "python.build": " ".join(map(str, build)) if isinstance(build, list) else None,
        "python.compiler": machine.get("python_compiler"),
    }
    return foreign_provenance(
        TOOL, text(document.get("version"), "") or None, path,
        started=when(document.get("datetime"), file_time(path), path, "datetime"),
        hostname=text(machine.get("node")), cpu_model=text(cpu.get("brand_raw")),
        cores=count(cpu.get("count")), python=python, commit=commit_id,
        dirty=commit.get("dirty") if commit_id else None,
        environment={k: v for k, v in environment.items()
                     if isinstance(v, (str, int)) and not isinstance(v, bool)})


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
