"""Results files into the store, as a team can trust them: bounded, validated, all or
nothing.

- **Bounds before reading.** The file must be a regular file (a pipe, a device or a
  folder is refused before any read) of at most `max_bytes` (TORCHMARK_MAX_IMPORT_SIZE,
  default 8 GiB); results files (JSON lines) are streamed a line at a time, each line at
  most MAX_LINE_BYTES, at most MAX_RECORDS of them: memory stays bounded whatever the
  file's size. Other formats (measurements and counts documents, ops, replay and suite
  files) are read whole within the input limit (--max-input-size).
- **Every record validated** as a Result (core/result.py: its case, its samples
  positive and finite, its unit its metric's, its provenance's fields and a start no
  later than now); the first bad one is named by its line and nothing is stored.
- **One transaction.** The runs, cases and results of a file are stored together or not
  at all: a failing or killed import leaves nothing behind, and the file can be imported
  again.
- **Nothing twice.** A file imported before (its content's digest) adds nothing; so does
  a result the store held before this import (the same case, metric and samples, and for
  exact metrics, whose counts repeat from run to run, a run of the same machine that
  started within DUPLICATE_WINDOW_S of it): what a command recorded live and also wrote
  to a file (whose header may be a second later) is not stored again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from torchmark.core.bounded_input import brief, check_nesting, open_regular, parse_size
from torchmark.core.errors import LimitError, UsageError
from torchmark.core.provenance import Provenance, parse_time
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import Result
from torchmark.core.results_file import RESULTS_FILE_SCHEMA, RunLines
from torchmark.store import schema

DEFAULT_MAX_IMPORT_BYTES = 8 << 30
MAX_LINE_BYTES = 64 << 20  # one result's line
MAX_RECORDS = 50_000_000
BATCH = 4000  # results inserted a statement
DUPLICATE_WINDOW_S = 60  # exact metrics: the same counts this close, one machine: one run
_EXACT = ("instructions", "memory")


def max_import_bytes() -> int:
    """TORCHMARK_MAX_IMPORT_SIZE (`2G`), else DEFAULT_MAX_IMPORT_BYTES."""
    env = os.environ.get("TORCHMARK_MAX_IMPORT_SIZE")
    if env:
        try:
            return parse_size(env)
        except ValueError as e:
            raise LimitError(f"TORCHMARK_MAX_IMPORT_SIZE: {e}") from None
    return DEFAULT_MAX_IMPORT_BYTES


def check_file(path: str | os.PathLike, max_bytes: int | None = None) -> None:
    """Refuse, before the store is opened, a path that is missing, not a regular file or
    too large, or whose first line is no results file torchmark reads (one line)."""
    limit = max_import_bytes() if max_bytes is None else max_bytes
    try:
        fd = open_regular(path, "import", limit)
    except FileNotFoundError:
        raise UsageError(f"{brief(str(path))}: no such file") from None
    except PermissionError:
        raise UsageError(f"{brief(str(path))}: permission denied") from None
    with os.fdopen(fd, "rb") as f:
        first = f.readline(MAX_LINE_BYTES).strip()
    if not first:
        raise UsageError(f"{brief(str(path))}: empty, not a torchmark results file")
    if not first.startswith((b"{", b"[")):
        raise UsageError(f"{brief(str(path))}: not a torchmark results file (it does not "
                         "start with a JSON object)")


def file_digest(path: str | os.PathLike, limit: int) -> str:
    """The sha256 of a regular file's content, read in chunks."""
    digest = hashlib.sha256()
    fd = open_regular(path, "import", limit)
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def streamed_results(path: str | os.PathLike, limit: int) -> Iterator[tuple[int, Result]]:
    """(line number, Result) of a results file (JSON lines: a header, a Result a line),
    a line at a time; a UsageError naming the first line that is not a valid Result (a
    torn last line, which a killed writer leaves, is skipped)."""
    where = brief(str(path))
    runs = RunLines()
    fd = open_regular(path, "import", limit)
    with os.fdopen(fd, "rb") as f:
        number, count, pending = 0, 0, None
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise LimitError(f"{where}: line {number} is longer than "
                                 f"{MAX_LINE_BYTES >> 20} MiB")
            if pending is not None:  # a bad line followed by more: not a torn last line
                raise pending
            text = line.strip()
            if not text:
                continue
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
                pending = UsageError(f"{where}: line {number}: not a JSON object "
                                     f"({brief(str(e), 120)})")
                if not line.endswith(b"\n"):
                    break  # the torn last line of a killed writer: skipped
                continue
            if text.count(b"[") + text.count(b"{") > 200:
                check_nesting(value, f"{where}: line {number}")
            if not isinstance(value, dict) or value.get("schema") == RESULTS_FILE_SCHEMA:
                continue
            try:
                if runs.take(value):
                    continue
                if value.get("schema") != RESULT_SCHEMA:
                    raise UsageError(f"{where}: line {number}: not a {RESULT_SCHEMA} "
                                     "record")
                result = runs.result(value)
            except (ValueError, TypeError) as e:
                raise UsageError(f"{where}: line {number}: {brief(str(e), 300)}") from None
            problem = result.storable_problem()
            if problem is not None:
                raise UsageError(f"{where}: line {number}: {result.case.id[:80]}: {problem}")
            count += 1
            if count > MAX_RECORDS:
                raise LimitError(f"{where}: more than {MAX_RECORDS} records")
            yield number, result
        if pending is not None and line.endswith(b"\n"):
            raise pending


def is_streamable(path: str | os.PathLike) -> bool:
    """Whether a file is a results file (JSON lines of Results), which is streamed."""
    fd = open_regular(path, "import", max_import_bytes())
    with os.fdopen(fd, "rb") as f:
        first = f.readline(MAX_LINE_BYTES)
    try:
        head = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(head, dict) and head.get("schema") in (RESULTS_FILE_SCHEMA,
                                                            RESULT_SCHEMA)


def whole_file_results(path: str | os.PathLike) -> Iterator[tuple[int, Result]]:
    """The Results of a file of another format (read whole within the input limit),
    each validated; numbered by record."""
    from torchmark.records import load_results

    for number, result in enumerate(load_results(path), start=1):
        problem = result.storable_problem()
        if problem is not None:
            raise UsageError(f"{brief(str(path))}: record {number}: {problem}")
        yield number, result


class Importer:
    """One file into one store, in one transaction (see the module docstring)."""

    def __init__(self, store: Any, path: str | os.PathLike,
                 max_bytes: int | None = None) -> None:
        self.store, self.path = store, Path(path)
        self.limit = max_import_bytes() if max_bytes is None else max_bytes
        self.runs: dict[str, int] = {}  # a provenance's JSON -> its run in this import
        self.keys: dict[int, tuple[Provenance, str]] = {}  # id -> (it, its JSON)
        self.added = 0

    def run(self) -> int:
        """Import the file; how many results were added."""
        from torchmark.records.files import file_provenance

        key = file_digest(self.path, self.limit)
        engine = self.store.engine
        with engine.connect() as conn:
            if conn.execute(sa.select(schema.runs.c.id)
                            .where(schema.runs.c.import_key == key)).first():
                return 0
        streamed = is_streamable(self.path)
        results = streamed_results(self.path, self.limit) if streamed else \
            whole_file_results(self.path)
        fallback = file_provenance(self.path) or _unknown_origin(self.path)
        with engine.begin() as conn:
            batch: list[Result] = []
            for _, result in results:
                batch.append(result)
                if len(batch) >= BATCH:
                    self._store(conn, batch, key, fallback)
                    batch = []
            self._store(conn, batch, key, fallback)
        return self.added

    def _store(self, conn: sa.Connection, batch: list[Result], key: str,
               fallback: Provenance) -> None:
        if not batch:
            return
        held = self.store.held_results(conn, batch, fallback, set(self.runs.values()))
        fresh = [r for i, r in enumerate(batch) if i not in held]
        groups: dict[str, list[Result]] = {}
        for r in fresh:
            groups.setdefault(self._key(r.provenance or fallback), []).append(r)
        now = self.store.now()
        for text, members in groups.items():
            run_id = self.runs.get(text)
            if run_id is None:
                run_id = self._run(conn, members[0].provenance or fallback,
                                   key if not self.runs else
                                   hashlib.sha256(f"{key}\0{len(self.runs)}".encode())
                                   .hexdigest())
                self.runs[text] = run_id
            self.store.insert_results(conn, members, run_id, now)
            self.added += len(members)

    def _key(self, provenance: Provenance) -> str:
        """A provenance's JSON, computed once for each provenance object (the records of
        one run share theirs)."""
        known = self.keys.get(id(provenance))
        if known is None or known[0] is not provenance:
            known = self.keys[id(provenance)] = (provenance, provenance.to_json())
        return known[1]

    def _run(self, conn: sa.Connection, provenance: Provenance, key: str) -> int:
        return self.store.insert_run(conn, self.store.known_machine(conn, provenance),
                                     status="ok", import_key=key,
                                     tags={"imported_from": str(self.path)})


def _unknown_origin(path: str | os.PathLike) -> Provenance:
    """The provenance of a file that says nothing of where it was made."""
    from torchmark.core.provenance import Machine

    started = dt.datetime.fromtimestamp(Path(path).stat().st_mtime, dt.timezone.utc)
    return Provenance(torchmark_version="unknown", torch_version=None, torch_git=None,
                      torch_cuda=None, torch_cudnn=None, torch_debug=None,
                      python="unknown", git_commit=None, git_dirty=None,
                      machine=Machine(hostname="unknown", cpu_model="unknown", cores=0,
                                      memory_bytes=0),
                      env=None, started=started.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      command=("torchmark", "import", str(path)))


def within_window(a: str | None, b: str | None) -> bool:
    """Whether two run starts (ISO times) lie within DUPLICATE_WINDOW_S of each other."""
    ta, tb = (parse_time(t) if t else None for t in (a, b))
    return ta is not None and tb is not None and \
        abs((ta - tb).total_seconds()) <= DUPLICATE_WINDOW_S


def exact(metric: str) -> bool:
    return metric in _EXACT
