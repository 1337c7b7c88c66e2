"""The suite's JSON-lines results: a header line per run, one line per finished case,
a footer when a run ends. Lines are flushed as written, so an interrupted run keeps
every finished case, and a torn last line is ignored on reading."""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

SCHEMA = "torchmark.suite.results"
VERSION = 1


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every case record of a results file, in order (later duplicates of an id win when
    the caller builds a dict). Non-JSON lines (a torn last line) are skipped."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    records, saw_header = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "header":
                if record.get("schema") != SCHEMA:
                    raise ValueError(f"{path} is not a torchmark suite results file "
                                     f"(schema {record.get('schema')!r})")
                saw_header = True
            elif record.get("type") == "case" and "id" in record:
                records.append(record)
    if not saw_header and not records:
        raise ValueError(f"{path} holds no torchmark suite results")
    return records


def finished_ids(path: str | os.PathLike) -> set[str]:
    """Ids of the cases a results file already holds (for --resume)."""
    return {r["id"] for r in read_records(path)} if Path(path).exists() else set()


def _system() -> dict[str, Any]:
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    return {"torch": torch_version, "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(), "host": platform.node()}


class ResultsWriter:
    """Appends records to a results file, one flushed line each (thread-safe)."""

    def __init__(self, path: str | os.PathLike, options: dict[str, Any], resume: bool) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        if self.path.parent != Path(""):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not resume or not self.path.exists() or self.path.stat().st_size == 0
        if not fresh:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
        self._file = open(self.path, "w" if fresh else "a", encoding="utf-8")
        if not fresh and torn:
            self._file.write("\n")  # end the torn line so the next record stands alone
        self.write({"type": "header", "schema": SCHEMA, "version": VERSION,
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "resumed": not fresh,
                    "options": options, "system": _system()})

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=False)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self, footer: dict[str, Any] | None = None) -> None:
        if footer is not None:
            self.write({"type": "footer", **footer})
        self._file.close()
