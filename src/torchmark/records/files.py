"""Reading any torchmark file as Results (writing them: core.results_file)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, first_line, load_json, read_text
from torchmark.core.errors import UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import Result
from torchmark.core.results_file import RESULTS_FILE_SCHEMA, read_results, save_results
from torchmark.ops.results_file import SCHEMA as OPS_SCHEMA
from torchmark.ops.results_file import read_file as read_ops_file
from torchmark.ops.results_file import record_results as from_ops_record
from torchmark.records.convert import from_callgrind
from torchmark.suite.results import SCHEMA as SUITE_SCHEMA
from torchmark.suite.results import read_records as read_suite_records
from torchmark.suite.results import record_results as from_suite_record

__all__ = ["file_provenance", "load_results", "save_results"]


def load_results(path: str | os.PathLike) -> list[Result]:
    """Every Result a torchmark file holds, whatever its format (see the package
    docstring); a UsageError naming the file when it is none of them."""
    path = Path(path)
    text = read_text(path, "results file")
    first = text.split("\n", 1)[0].strip()
    try:
        head = load_json(first, brief(str(path))) if first else None
    except json.JSONDecodeError:
        head = None
    if isinstance(head, dict) and (head.get("type") in ("header", "record", "case") or
                                   head.get("schema") in (RESULTS_FILE_SCHEMA, RESULT_SCHEMA)):
        return _from_lines(path)  # JSON lines: ops, replay, suite, or Results
    try:
        data = load_json(text, brief(str(path)))
    except json.JSONDecodeError as e:
        raise UsageError(f"{brief(str(path))}: not a torchmark results file ({e})") from None
    return _from_document(data, path)


def _from_lines(path: Path) -> list[Result]:
    """A JSON-lines file's Results: a suite's or an ops / replay file's records (a
    resumed case: its last record), or a results file's lines."""
    from torchmark.core.jsonl import iter_lines

    first = next(iter_lines(path), {})
    kind = first.get("type")
    schema = first.get("schema") if kind == "header" else None
    if schema == SUITE_SCHEMA or kind == "case":
        last = {str(r["id"]): r for r in read_suite_records(path)}
        return [r for record in last.values() for r in from_suite_record(record)]
    if schema == OPS_SCHEMA or kind == "record":
        header, records = read_ops_file(path)
        latest = {str(r["id"]): r for r in records if "id" in r}
        return [r for record in latest.values() for r in from_ops_record(record, header)]
    return read_results(path)


def _from_document(data: Any, path: Path) -> list[Result]:
    from torchmark.callgrind.stats import SCHEMA_NAME as COUNTS
    from torchmark.callgrind.stats_files import FILE_SCHEMA as COUNTS_FILE
    from torchmark.callgrind.stats_files import load_stats
    from torchmark.records.convert import from_measurement
    from torchmark.timing.files import parse_measurements

    schema = data.get("schema") if isinstance(data, dict) else None
    if schema in (COUNTS_FILE, COUNTS):
        return [from_callgrind(s) for s in load_stats(path)]
    if schema == RESULT_SCHEMA:
        return [Result.from_dict(data)]
    return [from_measurement(m) for m in parse_measurements(data, brief(str(path)))]


def file_provenance(path: str | os.PathLike) -> Provenance | None:
    """What a results file's header says about where it was made (ops, replay and suite
    files record their machine, torch and commit), as a Provenance; None when the file
    has no header (measurements and counts files)."""
    from torchmark.core.provenance import Machine

    try:
        head = load_json(first_line(path, "results file") or b"{}", brief(str(path)))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(head, dict) or head.get("type") != "header":
        return None
    raw = head.get("system")
    system: dict[str, Any] = raw if isinstance(raw, dict) else {}
    machine = Machine(hostname=str(system.get("host") or "unknown"),
                      cpu_model=str(system.get("cpu") or "unknown"),
                      cores=int(system.get("cpus") or 0), memory_bytes=0,
                      gpus=(str(system["gpu"]),) if system.get("gpu") else ())
    return Provenance(torchmark_version="unknown", torch_version=system.get("torch"),
                      torch_git=None, torch_cuda=system.get("cuda"), torch_cudnn=None,
                      torch_debug=None, python=str(system.get("python") or "unknown"),
                      git_commit=system.get("git_commit"), git_dirty=None, machine=machine,
                      env=None, started=str(head.get("started") or ""),
                      command=("torchmark", "import", str(path)))
