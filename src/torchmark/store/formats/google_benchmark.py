"""Google Benchmark's results: a `--benchmark_out=FILE --benchmark_out_format=json` file.

Each `run_name` is a case of frontend "google-benchmark" (metric "wall": its
`real_time`, which is the manual time under UseManualTime), named by it; its `/`
parts become `params`: the arguments as "args" (and their names as "arg_names" where
named, `n:3`), the options (`min_time`, `iterations`, `repeats`...) and flags
(`real_time`, `manual_time`, `process_time`) under their own names; `threads` is the
case's thread count. Its "iteration" entries (one a repetition) are the raw samples,
each the time per iteration of that repetition in seconds, `iterations` the calls a
sample; the aggregates are then ignored. A file of aggregates only
(`--benchmark_report_aggregates_only`) gives the stated mean, median and stddev of
`repetitions` samples (the iterations a repetition ran are not in it). A run without
repetitions gives one sample, which the verdict engine can judge against nothing (an
unmeasured verdict). `cpu_time`, `label` and the user counters (the entry's other
numeric keys; each a list, a value a repetition) go to the result's extra. A run that failed (`SkipWithError`:
`error_occurred`) is a failed result with its `error_message`; one skipped on purpose
(`SkipWithMessage`) and the complexity fits (BigO, RMS) are left out. `context`
becomes the run's provenance: its `date` the start, `host_name`, `num_cpus`; and the
fingerprint "cpu.threads", "cpu.mhz", "cpu.scaling" (frequency scaling on),
"os.aslr", "load.1m" and "build.type" (the library's: a debug build is slow)."""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from torchmark.core.result import MAX_CASE_THREADS, Failure, Result, Stated
from torchmark.store.formats.common import (
    count,
    field,
    file_time,
    foreign_case,
    foreign_provenance,
    load_document,
    raw_result,
    refuse,
    stated_result,
    text,
    when,
)

TOOL = "google-benchmark"
SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}  # a time_unit's seconds
OPTIONS = ("min_time", "min_warmup_time", "iterations", "repeats")  # `key:value` name parts
FLAGS = ("real_time", "manual_time", "process_time")  # name parts without a value
STATED_AGGREGATES = ("mean", "median", "stddev")  # the aggregates a stated result reads
NOT_COUNTERS = frozenset((
    "name", "family_index", "per_family_instance_index", "run_name", "run_type",
    "repetitions", "repetition_index", "threads", "iterations", "real_time", "cpu_time",
    "time_unit", "aggregate_name", "aggregate_unit", "error_occurred", "error_message",
    "skipped", "skip_message", "label"))


def detect(path: Path, document: Any) -> bool:
    """Whether a file's JSON `document` is Google Benchmark's (`context` and
    `benchmarks`)."""
    return _is_document(document)


def _is_document(document: Any) -> bool:
    return isinstance(document, Mapping) and isinstance(document.get("context"), Mapping) \
        and "benchmarks" in document


def read(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of a Google Benchmark JSON file (module docstring)."""
    path = Path(path)
    document = load_document(path, TOOL)
    if not _is_document(document):
        raise refuse(path, "not a Google Benchmark file (no 'context' and 'benchmarks')")
    provenance = _provenance(document["context"], path)
    runs: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}  # run_name -> its entries
    for i, entry in enumerate(field(document, "benchmarks", list, path)):
        where = f"benchmarks[{i}]"
        name = field(entry, "name", str, path, where)
        if not name.strip():
            raise refuse(path, f"{where}.name is empty: a benchmark needs its name")
        aggregate = field(entry, "aggregate_name", str, path, where, optional=True)
        run_name = field(entry, "run_name", str, path, where, optional=True) or \
            (name.removesuffix(f"_{aggregate}") if aggregate else name)  # before 1.5
        runs.setdefault(text(run_name, limit=2048), []).append((where, entry))
    for run_name, entries in runs.items():
        yield from _run_results(run_name, entries, provenance, path)


def _run_results(run_name: str, entries: list[tuple[str, Mapping[str, Any]]],
                 provenance: Any, path: Path) -> Iterator[Result]:
    """The Result of one run_name's entries: raw, stated, failed, or none."""
    iterations, aggregates, errors = [], {}, []
    for where, entry in entries:
        if entry.get("error_occurred") is True:
            errors.append(text(entry.get("error_message"), "error_occurred", limit=1000))
        elif entry.get("skipped") is not True:
            aggregate = field(entry, "aggregate_name", str, path, where, optional=True)
            kind = field(entry, "run_type", str, path, where, optional=True) or \
                ("aggregate" if aggregate else "iteration")
            if kind == "iteration":
                iterations.append((where, entry))
            elif kind != "aggregate":
                raise refuse(path, f"{where}.run_type must be 'iteration' or 'aggregate', "
                                   f"got {kind[:40]!r}")
            elif aggregate in STATED_AGGREGATES:
                aggregates[aggregate] = (where, entry)
    first = (iterations or list(aggregates.values()) or entries)[0]
    case = _case(run_name, *first, path)
    if iterations:
        samples = [_seconds(entry, "real_time", where, path) for where, entry in iterations]
        extra = _extra(iterations, path)
        warnings = [f"{len(errors)} of {len(errors) + len(iterations)} repetitions "
                    f"failed: {errors[0]}"] if errors else []
        result = raw_result(case, samples, provenance, extra=extra, number_per_run=min(
            field(e, "iterations", int, path, w, least=1) for w, e in iterations))
        yield dataclasses.replace(result, warnings=tuple(warnings))
    elif "mean" in aggregates:
        where, mean = aggregates["mean"]
        stated = {name: _seconds(entry, "real_time", at, path)
                  for name, (at, entry) in aggregates.items()}
        repetitions = field(mean, "repetitions", int, path, where, optional=True)
        yield stated_result(case, Stated(max(1, repetitions or 1), stated["mean"],
                                         stated.get("stddev"), stated.get("median")),
                            provenance, extra=_extra([aggregates["mean"]], path))
    elif errors:
        yield Result(case, "wall", failure=Failure(errors[0]), provenance=provenance)


def _case(run_name: str, where: str, entry: Mapping[str, Any], path: Path) -> Any:
    threads = field(entry, "threads", int, path, where, optional=True, least=1) or 1
    if not 1 <= threads <= MAX_CASE_THREADS:
        raise refuse(path, f"{where}.threads must be from 1 to {MAX_CASE_THREADS}, got "
                           f"{threads}")
    return foreign_case(TOOL, run_name, name_params(run_name), threads=threads)


def name_params(run_name: str) -> dict[str, Any]:
    """The parameters a run name spells after its family name: `join/8/64` ->
    {"args": [8, 64]}, `f/n:3/real_time/threads:2` -> {"args": [3], "arg_names": ["n"],
    "real_time": True} (the threads are the case's own)."""
    params: dict[str, Any] = {}
    args, names = [], []
    for part in run_name.split("/")[1:]:
        key, colon, value = part.partition(":")
        if part in FLAGS:
            params[part] = True
        elif colon and key in OPTIONS:
            params[key] = _integer(value)
        elif not (colon and key == "threads"):
            args.append(_integer(value if colon else part))
            names.append(key if colon else "")
    if args:
        params["args"] = args
    if any(names):
        params["arg_names"] = names
    return params


def _integer(part: str) -> int | str:
    return int(part) if re.fullmatch(r"-?\d{1,18}", part) else part


def _seconds(entry: Mapping[str, Any], key: str, where: str, path: Path) -> float:
    """entry[key], a time in the entry's time_unit, in seconds."""
    value = field(entry, key, (int, float), path, where)
    unit = field(entry, "time_unit", str, path, where)
    if unit not in SECONDS:
        raise refuse(path, f"{where}.time_unit must be one of {', '.join(SECONDS)}, got "
                           f"{unit[:40]!r}")
    if value < 0:
        raise refuse(path, f"{where}.{key} must be >= 0, got {value!r}")
    return value * SECONDS[unit]


def _extra(entries: list[tuple[str, Mapping[str, Any]]], path: Path) -> dict[str, Any]:
    """The entries' cpu_time (seconds, one an entry), the first's label, and the user
    counters, each as its values (one an entry, in the entries' order; None where an
    entry has none)."""
    where, first = entries[0]

    def counted(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value)

    names = dict.fromkeys(str(k)[:200] for _, e in entries for k, v in e.items()
                          if k not in NOT_COUNTERS and counted(v))
    counters = {name: [e[name] if counted(e.get(name)) else None for _, e in entries]
                for name in names}
    extra: dict[str, Any] = {"cpu_time": [_seconds(e, "cpu_time", w, path)
                                          for w, e in entries if "cpu_time" in e]}
    if isinstance(first.get("label"), str) and first["label"]:
        extra["label"] = text(first["label"])
    if counters:
        extra["counters"] = counters
    return extra


def _provenance(context: Mapping[str, Any], path: Path) -> Any:
    load = context.get("load_avg")
    environment = {
        "cpu.threads": context.get("num_cpus"), "cpu.mhz": context.get("mhz_per_cpu"),
        "cpu.scaling": context.get("cpu_scaling_enabled"),
        "os.aslr": context.get("aslr_enabled"),
        "load.1m": load[0] if isinstance(load, list) and load else None,
        "build.type": text(context.get("library_build_type"), "", limit=64) or None,
    }
    return foreign_provenance(
        TOOL, text(context.get("library_version"), "", limit=64) or None, path,
        started=when(context.get("date"), file_time(path), path, "context.date"),
        hostname=text(context.get("host_name")), cores=count(context.get("num_cpus")),
        environment={k: v for k, v in environment.items() if isinstance(v, (str, int, float))
                     and (not isinstance(v, float) or math.isfinite(v))})
