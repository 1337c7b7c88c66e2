"""Files of instruction counts (`torchmark callgrind --save`): CallgrindStats appended to
a versioned JSON list, as `timeit --save` appends Measurements. A file holding one
CallgrindStats (as torchmark wrote before) is read as a list of one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from torchmark.callgrind.stats import SCHEMA_NAME, CallgrindStats
from torchmark.core.bounded_input import brief, brief_repr, load_json, read_bytes
from torchmark.core.errors import LimitError
from torchmark.core.results_lock import ResultsLock

FILE_SCHEMA = "torchmark.callgrind_stats_file"
FILE_VERSION = 1
KINDS = (FILE_SCHEMA, SCHEMA_NAME)  # what `--save` may append to


def load_stats(path: str | os.PathLike) -> list[CallgrindStats]:
    """Every CallgrindStats of a counts file, in the order they were saved."""
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


def save_stats(path: str | os.PathLike, stats: CallgrindStats) -> int:
    """Append `stats` to the counts file at `path` (made if missing or empty), under the
    file's lock, replacing it atomically; returns how many it now holds."""
    path = Path(path)
    with ResultsLock(path, "callgrind stats file").acquire(wait=30.0):
        held = load_stats(path) if path.exists() and path.stat().st_size else []
        held.append(stats)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"schema": FILE_SCHEMA, "version": FILE_VERSION,
                                   "stats": [s.to_dict() for s in held]}, indent=1) + "\n")
        os.replace(tmp, path)
    return len(held)


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
