"""NVIDIA nvbench's results: a `--json FILE` (or `--jsonbin FILE`) file, JSON format 1.x.

The schema is nvbench's own (https://github.com/NVIDIA/nvbench): docs/json_output.md
and nvbench/json_printer.cu (the writer), the summary tags in
nvbench/detail/measure_cold.cu and measure_hot.cu. Its numbers inside "value" fields
are strings ({"name": "value", "type": "float64", "value": "0.000123"}).

Each state of a benchmark is a case of frontend "nvbench": the benchmark's `name`, its
`axis_values` (and the device id) as `params`, device "cuda:ID". Its cold GPU time
(CUDA events around each isolated run: "nv/cold/time/gpu/...") is a "device" result:
the raw samples where `--jsonbin` wrote them to a file beside the JSON (its summary
"nv/json/bin:nv/cold/sample_times" names the file, relative to the JSON's folder, and
its `size`: little-endian float32 values; a path that leaves the folder is refused),
else the stated sample size, mean and standard deviation (the relative one times the
mean). The batch GPU time ("nv/batch/time/gpu/mean", back-to-back runs), where
measured, is a "batch" result: its mean per run over "nv/batch/sample_size" runs, a
single stated value (the batches' count and spread are not in the file: no interval).
The cold CPU time's mean goes to the result's extra; skipped states are left out.
`devices` give the machine's GPUs and the fingerprint "gpu.ID.model", ".sm_version",
".sm_clock_default" and ".memory_clock" (MHz), ".sms", ".memory_bytes" and ".ecc";
the file names no host and no start (the file's time is the run's)."""

from __future__ import annotations

import math
import os
import sys
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, read_bytes
from torchmark.core.result import Result, Stated
from torchmark.store.formats.common import (
    count,
    field,
    file_time,
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

TOOL = "nvbench"
COLD_MEAN = "nv/cold/time/gpu/mean"
COLD_RELATIVE_STDEV = "nv/cold/time/gpu/stdev/relative"
COLD_SAMPLES = "nv/cold/sample_size"
COLD_CPU_MEAN = "nv/cold/time/cpu/mean"
COLD_SAMPLE_FILE = "nv/json/bin:nv/cold/sample_times"
BATCH_MEAN = "nv/batch/time/gpu/mean"
BATCH_SAMPLES = "nv/batch/sample_size"
PARSE = {"int64": int, "float64": float, "string": str}  # a named value's type


def detect(path: Path, document: Any) -> bool:
    """Whether a file's JSON `document` is nvbench's (`devices` and `benchmarks`)."""
    return _is_document(document)


def _is_document(document: Any) -> bool:
    return isinstance(document, Mapping) and "devices" in document and \
        "benchmarks" in document


def read(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of an nvbench JSON file (module docstring)."""
    path = Path(path)
    document = load_document(path, TOOL)
    if not _is_document(document):
        raise refuse(path, "not an nvbench file (no 'devices' and 'benchmarks')")
    version = _version(document, path)
    provenance = _provenance(field(document, "devices", list, path, optional=True) or [],
                             version, path)
    for i, bench in enumerate(field(document, "benchmarks", list, path)):
        where = f"benchmarks[{i}]"
        name = text(field(bench, "name", str, path, where), limit=2048)
        for j, state in enumerate(field(bench, "states", list, path, where,
                                        optional=True) or []):
            yield from _state_results(name, state, f"{where}.states[{j}]", provenance, path)


def _version(document: Mapping[str, Any], path: Path) -> str | None:
    """nvbench's version (meta.version.nvbench.string); a FormatError for a JSON format
    other than 1.x (meta.version.json: older files have none)."""
    meta = document.get("meta")
    versions = meta.get("version") if isinstance(meta, Mapping) else None
    versions = versions if isinstance(versions, Mapping) else {}
    json_version, nvbench = versions.get("json"), versions.get("nvbench")
    major = json_version.get("major") if isinstance(json_version, Mapping) else None
    if major != 1:
        found = f"format {brief(repr(major), 40)}" if json_version else \
            "without meta.version.json (older than format 1.0)"
        raise refuse(path, f"nvbench JSON {found}: only format 1.x is read")
    return text(nvbench.get("string"), "", limit=64) or None \
        if isinstance(nvbench, Mapping) else None


def _state_results(name: str, state: Any, where: str, provenance: Any,
                   path: Path) -> Iterator[Result]:
    """The device and batch Results of one state (none for a skipped one)."""
    if field(state, "is_skipped", bool, path, where, optional=True):
        return
    device = field(state, "device", int, path, where)
    params = {"device": device, **_named_values(
        field(state, "axis_values", list, path, where, optional=True) or [],
        f"{where}.axis_values", path)}
    summaries = {}
    for k, summary in enumerate(field(state, "summaries", list, path, where,
                                      optional=True) or []):
        at = f"{where}.summaries[{k}]"
        summaries[field(summary, "tag", str, path, at)] = _named_values(
            field(summary, "data", list, path, at, optional=True) or [], f"{at}.data", path)
    case = foreign_case(TOOL, name, params, sub_label=text(state.get("name"), "") or None,
                        device=f"cuda:{device}")
    cold_mean = _time(summaries, COLD_MEAN, where, path)
    if cold_mean is not None:
        cpu_mean = _time(summaries, COLD_CPU_MEAN, where, path)
        extra = {"cpu_time_mean": cpu_mean} if cpu_mean is not None else {}
        samples = _sample_times(summaries.get(COLD_SAMPLE_FILE), where, path)
        if samples:
            yield raw_result(case, samples, provenance, metric="device", extra=extra)
        else:
            relative = summaries.get(COLD_RELATIVE_STDEV, {}).get("value")
            stdev = relative * cold_mean if isinstance(relative, float) and \
                math.isfinite(relative) and relative >= 0 else None
            stated = Stated(_count(summaries, COLD_SAMPLES, where, path), cold_mean, stdev)
            yield stated_result(case, stated, provenance, metric="device", extra=extra)
    batch_mean = _time(summaries, BATCH_MEAN, where, path)
    if batch_mean is not None:
        yield stated_result(case, Stated(1, batch_mean), provenance, metric="batch",
                            number_per_run=_count(summaries, BATCH_SAMPLES, where, path))


def _named_values(values: list[Any], where: str, path: Path) -> dict[str, Any]:
    """nvbench's [{"name", "type", "value"}, ...] as {name: value}, numbers parsed from
    their strings."""
    out = {}
    for k, item in enumerate(values):
        at = f"{where}[{k}]"
        kind = field(item, "type", str, path, at)
        raw = item.get("value")
        if kind not in PARSE:
            raise refuse(path, f"{at}.type must be one of {', '.join(PARSE)}, got "
                               f"{kind[:40]!r}")
        try:
            if not isinstance(raw, str if kind == "string" else (str, int, float)) or \
                    isinstance(raw, bool):
                raise ValueError
            value = PARSE[kind](raw)
        except ValueError:
            raise refuse(path, f"{at}.value must be {kind} (as a string), got "
                               f"{brief(repr(raw), 60)}") from None
        out[text(field(item, "name", str, path, at), limit=200)] = \
            text(value, limit=2048) if kind == "string" else value
    return out


def _time(summaries: Mapping[str, Any], tag: str, where: str, path: Path) -> float | None:
    """Summary `tag`'s value, a time in seconds; None where the state has none."""
    if tag not in summaries:
        return None
    value = summaries[tag].get("value")
    if not isinstance(value, float) or not math.isfinite(value) or value < 0:
        raise refuse(path, f"{where}: {tag} must be a finite float64 >= 0, got "
                           f"{brief(repr(value), 60)}")
    return value


def _count(summaries: Mapping[str, Any], tag: str, where: str, path: Path) -> int:
    """Summary `tag`'s value, a count >= 1."""
    value = summaries.get(tag, {}).get("value")
    if not isinstance(value, int) or value < 1:
        raise refuse(path, f"{where}: {tag} must be an int64 >= 1, got "
                           f"{brief(repr(value), 60)}")
    return value


def _sample_times(summary: Mapping[str, Any] | None, where: str,
                  path: Path) -> list[float] | None:
    """The cold GPU times of the sample file a summary names, where it lies beside the
    JSON (None: no file named, or none there); a FormatError for a path that leaves
    the JSON's folder, or a file that is not `size` float32 values."""
    if summary is None or not isinstance(summary.get("filename"), str):
        return None
    name, folder = summary["filename"], path.resolve().parent
    try:
        file = (folder / name).resolve()
        inside = file.is_relative_to(folder)
        found = inside and file.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long
        inside = False
    if not inside:
        raise refuse(path, f"{where}: the sample_times file {brief(name, 80)!r} is "
                           "not a path inside the JSON file's folder")
    if not found:
        return None
    data = read_bytes(file, "nvbench sample_times file")
    size = summary.get("size")
    if size != len(data) // 4 or len(data) % 4:
        raise refuse(path, f"{where}: the sample_times file {brief(file.name, 80)!r} "
                           f"holds {len(data)} bytes, not {brief(repr(size), 40)} "
                           "float32 values")
    values = array("f", data)
    if sys.byteorder == "big":
        values.byteswap()
    return number_list(values.tolist(), path, f"{where}: {COLD_SAMPLE_FILE}")


def _provenance(devices: list[Any], version: str | None, path: Path) -> Any:
    environment: dict[str, Any] = {}
    gpus = {}
    for i, device in enumerate(devices):
        at = f"devices[{i}]"
        gpu = field(device, "id", int, path, at)
        gpus[gpu] = text(field(device, "name", str, path, at))
        fields = {"model": gpus[gpu], "sm_version": count(device.get("sm_version")),
                  "sm_clock_default": count(device.get("sm_default_clock_rate")) // 10**6,
                  "memory_clock": count(device.get("global_memory_bus_peak_clock_rate"))
                  // 10**6, "sms": count(device.get("number_of_sms")),
                  "memory_bytes": count(device.get("global_memory_size")),
                  "ecc": device.get("ecc_state") if isinstance(device.get("ecc_state"), bool)
                  else None}
        environment.update({f"gpu.{gpu}.{k}": v for k, v in fields.items()
                            if v is False or v})  # a count not given is 0: left out
    return foreign_provenance(TOOL, version, path, started=when(None, file_time(path)),
                              gpus=[gpus[gpu] for gpu in sorted(gpus)],
                              environment=environment)
