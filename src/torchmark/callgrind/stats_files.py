"""Files of instruction counts (`torchmark callgrind --save`): results files (core.
results_file), each CallgrindStats a Result with its per-function counts, appended as
`timeit --save` appends Measurements (the two may share a file). The files written
before, a versioned JSON list of CallgrindStats or one CallgrindStats, still read, and
are rewritten as results files when appended to."""

from __future__ import annotations

import os
from pathlib import Path

from torchmark.callgrind.results import result_to_stats, stats_to_result
from torchmark.callgrind.stats import SCHEMA_NAME, CallgrindStats
from torchmark.core.bounded_input import brief, brief_repr, load_json, read_bytes
from torchmark.core.errors import LimitError
from torchmark.core.provenance import Provenance
from torchmark.core.results_file import (
    RESULTS_FILE_SCHEMA,
    is_results_file,
    read_results,
    save_results,
)

FILE_SCHEMA = "torchmark.callgrind_stats_file"  # the JSON list written before Results
FILE_VERSION = 1
KINDS = (RESULTS_FILE_SCHEMA, FILE_SCHEMA, SCHEMA_NAME)  # what `--save` may append to


def load_stats(path: str | os.PathLike) -> list[CallgrindStats]:
    """Every CallgrindStats of a counts file, in the order they were saved (a results
    file's other results, times or failures, left out)."""
    path = Path(path)
    if path.is_file() and path.stat().st_size and is_results_file(path):
        results = read_results(path)
        counted = [r for r in results if "callgrind_stats" in r.extra]
        if results and not counted:
            raise ValueError(f"{brief(str(path))}: its {len(results)} results hold no "
                             "callgrind counts")
        return [result_to_stats(r) for r in counted]
    data = load_json(read_bytes(path, "callgrind stats file"), brief(str(path)))
    if isinstance(data, dict) and data.get("schema") == FILE_SCHEMA:
        if data.get("version") != FILE_VERSION:
            raise ValueError(f"{FILE_SCHEMA} version {brief_repr(data.get('version'))} is "
                             "not supported")
        items = data.get("stats")
        if not isinstance(items, list):
            raise ValueError("'stats' must be a list")
        return [CallgrindStats.from_dict(item) for item in items]
    return [CallgrindStats.from_dict(data)]


def save_stats(path: str | os.PathLike, stats: CallgrindStats,
               provenance: Provenance | None = None) -> int:
    """Append `stats` (as a Result, with `provenance` when given) to the counts file at
    `path` (made if missing or empty), under the file's lock; a file written before
    Results is rewritten as one, atomically. Returns how many counts it now holds."""
    save_results(path, [stats_to_result(stats, provenance=provenance, functions=True)],
                 what="callgrind stats file",
                 older=lambda old: [stats_to_result(s, functions=True)
                                    for s in load_stats(old)])
    return len(load_stats(path))


def read_counts(path: str | os.PathLike) -> list[CallgrindStats]:
    """load_stats with every failure one line naming the file (for the CLI)."""
    from torchmark.core.errors import error_line

    try:
        return load_stats(path)
    except (FileNotFoundError, LimitError):
        raise
    except (ValueError, TypeError, AttributeError, KeyError, OverflowError) as e:
        raise ValueError(f"{brief(str(path))}: not a callgrind stats file torchmark can read "
                         f"({error_line(e)})") from None
