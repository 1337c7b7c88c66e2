"""Results files: JSON lines, a header line (`torchmark.results`) then one Result a line.

Written under the file's lock and appended to, so two processes saving at once both keep
what they saved; a line a killed writer left half written is cut off before appending
and skipped on reading."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from torchmark.core.atomic_files import write_atomically
from torchmark.core.bounded_input import brief, first_line, load_json
from torchmark.core.errors import UsageError
from torchmark.core.jsonl import cut_torn_line, iter_lines
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import Result, dump_results
from torchmark.core.results_lock import ResultsLock

RESULTS_FILE_SCHEMA = "torchmark.results"  # the header line of a results file
HEADER = {"schema": RESULTS_FILE_SCHEMA, "version": 1}


def first_schema(path: str | os.PathLike) -> str | None:
    """The `schema` of a file's first line when it is a JSON object naming one."""
    head = first_line(path, "results file").decode("utf-8", "replace").strip()
    try:  # bounded: a line nested too deep is a LimitError naming the file
        value = load_json(head, brief(str(path))) if head else None
    except json.JSONDecodeError:
        return None
    return str(value["schema"]) if isinstance(value, dict) and "schema" in value else None


def is_results_file(path: str | os.PathLike) -> bool:
    """Whether `path` starts as a results file does (its header, or a Result line)."""
    return first_schema(path) in (RESULTS_FILE_SCHEMA, RESULT_SCHEMA)


def save_results(path: str | os.PathLike, results: Iterable[Result], append: bool = True,
                 *, what: str = "results file",
                 older: Callable[[Path], list[Result]] | None = None) -> None:
    """Write `results` to the results file at `path` under its lock (waiting up to 30 s
    for another writer): appended to a results file (`append`, after cutting a
    half-written last line a killed writer left), else the file written anew (the header
    first) and put in place atomically. A non-empty file of another format is refused
    (UsageError) unless `older` converts it (`what`: "measurements file"): then it is
    rewritten as a results file holding `older(path)`, its contents as Results, first."""
    path = Path(path)
    results = list(results)
    with ResultsLock(path, what).acquire(wait=30.0):
        held = append and path.exists() and path.stat().st_size > 0
        if held and is_results_file(path):
            cut_torn_line(path)
            with open(path, "a", encoding="utf-8") as f:
                f.write(results_text(results, header=False))
            return
        if held and older is None:
            raise UsageError(f"{brief(str(path))}: not a torchmark results file (its first "
                             f"line is not a {RESULTS_FILE_SCHEMA} header); refusing to "
                             "append Results to it")
        kept = older(path) if held and older is not None else []
        write_atomically(path, results_text(kept + results))


def results_text(results: Iterable[Result], header: bool = True) -> str:
    """A results file's text: the header line (unless `header` is false), then the
    results' lines."""
    return (json.dumps(HEADER) + "\n" if header else "") + dump_results(results)


def read_results(path: str | os.PathLike) -> list[Result]:
    """The Results of a results file, in order (a torn last line skipped); a UsageError
    naming the line when one is not a valid Result."""
    out = []
    for number, line in enumerate(iter_lines(path), start=1):
        if line.get("schema") != RESULT_SCHEMA:
            continue
        try:
            out.append(Result.from_dict(line))
        except (ValueError, TypeError) as e:
            raise UsageError(f"{brief(str(path))}: entry {number}: {brief(str(e), 300)}") \
                from None
    return out
