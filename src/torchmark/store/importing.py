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
  exact metrics, whose counts repeat from run to run, and failures, a run of the same
  machine that started within DUPLICATE_WINDOW_S of it, unless the file's run holds a
  result with samples the store lacks: then it is another run): what a command recorded
  live and also wrote to a file (whose header may be a second later) is not stored
  again.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import hashlib
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from torchmark.core.bounded_input import brief, env_size, open_regular
from torchmark.core.collector import collector_paused
from torchmark.core.errors import LimitError, UsageError
from torchmark.core.provenance import Provenance, parse_time
from torchmark.core.result import EXACT_METRICS, STATED, Result
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.results_file import RESULTS_FILE_SCHEMA, RUN_SCHEMA, RunState
from torchmark.store import schema
from torchmark.store.import_records import (
    RUN_MARK,
    Chunk,
    ChunkParser,
    Parsed,
    parsed_of,
)
from torchmark.store.result_rows import KEY_AT, RESULT_VALUES

DEFAULT_MAX_IMPORT_BYTES = 8 << 30
MAX_LINE_BYTES = 64 << 20  # one result's line
MAX_RECORDS = 50_000_000
CHUNK_BYTES = 2 << 20  # a results file's lines parsed (and inserted) this much at a time
CHUNK_RESULTS = 4000  # results of another format stored at a time
PARSE_WORKERS = 2  # processes parsing a large results file beside the one inserting
PARALLEL_FROM = 32 << 20  # a results file this large is parsed by worker processes
PARSE_TIMEOUT_S = 600  # a worker's answer for one chunk
IMPORT_CACHE_MIB = 256  # SQLite's page cache while importing (the pages it uses, at most)
DUPLICATE_WINDOW_S = 60  # exact metrics: the same counts this close, one machine: one run


def max_import_bytes() -> int:
    """TORCHMARK_MAX_IMPORT_SIZE (`2G`), else DEFAULT_MAX_IMPORT_BYTES."""
    return env_size("TORCHMARK_MAX_IMPORT_SIZE", DEFAULT_MAX_IMPORT_BYTES)


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


def file_digest(fd: int) -> str:
    """The sha256 of an open regular file's content, read in blocks."""
    digest = hashlib.sha256()
    for block in blocks(fd, 1 << 20):
        digest.update(block)
    return digest.hexdigest()


def path_digest(path: Path, limit: int) -> str:
    """The sha256 of a file's content, or of a folder's files (their relative paths
    and contents, in order; each within `limit`; links left out, as the readers leave
    them: formats/common.py folder_files): what says it was imported before."""
    from torchmark.store.formats.common import folder_files

    files = [path] if not path.is_dir() else folder_files(path, "*", recursive=True)
    digest = hashlib.sha256()
    for file in files:
        fd = open_regular(file, "import", limit)
        try:
            digest.update(f"{file.relative_to(path) if file != path else ''}\0"
                          f"{file_digest(fd)}\n".encode())
        finally:
            os.close(fd)
    return digest.hexdigest()


def blocks(fd: int, size: int) -> Iterator[bytes]:
    """An open file's content from its start, `size` bytes at a time (os.pread: the
    descriptor's offset is left alone, so readers may share it)."""
    offset = 0
    while True:
        block = os.pread(fd, size, offset)
        if not block:
            return
        offset += len(block)
        yield block


def read_span(fd: int, offset: int, length: int) -> bytes:
    """`length` bytes of an open file from `offset` (fewer at its end)."""
    parts = []
    while length > 0:
        part = os.pread(fd, length, offset)
        if not part:
            break
        parts.append(part)
        offset, length = offset + len(part), length - len(part)
    return b"".join(parts)


def read_chunks(fd: int, where: str) -> Iterator[Chunk]:
    """An open results file's lines, about CHUNK_BYTES at a time (whole lines), each
    chunk with the run line before it and its place in the file. Bounded: a line longer
    than MAX_LINE_BYTES or more than MAX_RECORDS lines are refused (the file's size was
    checked when it was opened: open_regular)."""
    run_line, number, carry, offset = None, 0, b"", 0  # number: the lines before
    for block in itertools.chain(blocks(fd, CHUNK_BYTES), [b""]):
        data = carry + block if carry else block
        if not block:
            if data:  # the last line, without its newline
                yield Chunk(where, number + 1, data, run_line, torn_end=True, offset=offset)
            return
        cut = data.rfind(b"\n") + 1
        longest = (data.find(b"\n") + 1 if carry else 0) if cut else len(data)
        if longest > MAX_LINE_BYTES or len(data) - cut > MAX_LINE_BYTES:
            raise LimitError(f"{where}: line {number + 1} is longer than "
                             f"{MAX_LINE_BYTES >> 20} MiB")
        body, carry = data[:cut], data[cut:]
        if not body:
            continue
        yield Chunk(where, number + 1, body, run_line, offset=offset)
        run_line = _last_run_line(body) or run_line
        number += body.count(b"\n")
        offset += len(body)
        if number > MAX_RECORDS:
            raise LimitError(f"{where}: more than {MAX_RECORDS} lines")


def _last_run_line(data: bytes) -> bytes | None:
    """The last run line of whole lines `data` (found by its schema's name)."""
    found, at = None, data.find(RUN_MARK)
    while at >= 0:
        start, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at) + 1
        if _is_run_line(data[start:end]):
            found = data[start:end]
        at = data.find(RUN_MARK, end)
    return found


def _is_run_line(line: bytes) -> bool:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False  # the chunk's parser names it
    return isinstance(value, dict) and value.get("schema") == RUN_SCHEMA


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


def whole_file_results(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of a file of another format (read whole within the input limit),
    each validated (numbered by record)."""
    from torchmark.records import load_results

    for number, result in enumerate(load_results(path), start=1):
        problem = result.storable_problem()
        if problem is not None:
            raise UsageError(f"{brief(str(path))}: record {number}: {problem}")
        yield result


class Importer:
    """One file into one store, in one transaction (see the module docstring); `fmt`:
    another tool's format (store/formats/), the file then read whole by its reader.
    `workers`: processes that parse a results file of at least `parallel_from` bytes
    (None: up to PARSE_WORKERS, as the machine's cores allow)."""

    def __init__(self, store: Any, path: str | os.PathLike, max_bytes: int | None = None,
                 workers: int | None = None, parallel_from: int = PARALLEL_FROM,
                 fmt: str | None = None, conn: sa.Connection | None = None) -> None:
        self.store, self.path, self.fmt = store, Path(path), fmt
        self.conn = conn  # a transaction of several files' (Store.import_files), if any
        self.limit = max_import_bytes() if max_bytes is None else max_bytes
        self.workers = min(PARSE_WORKERS, os.cpu_count() or 1) if workers is None \
            else workers
        self.parallel_from = parallel_from
        self.runs: dict[str, int] = {}  # a provenance's JSON -> its run in this import
        self.cases: set[str] = set()  # the ids of the cases this import stored
        self.added = 0
        self.read = 0  # results the file holds (those read so far)
        self.before = False  # whether the file was imported before (nothing read then)
        self.key: str | None = None  # the file's digest (its first run's import key)
        self.whole: list[Result] | None = None  # a file read whole, ahead (read_ahead)

    def read_ahead(self) -> None:
        """Read now a file that is read whole (another tool's, or a torchmark file that
        is no results file), so that a transaction of several files (Store.import_files)
        holds the store's write lock while it stores, not while it parses. A file
        imported before is not read."""
        from torchmark.store.formats import read_foreign

        if self.fmt is not None:
            self.key = path_digest(self.path, self.limit)
            if self._imported_before(self.key):
                return  # nothing of it is stored: not parsed either
            with collector_paused():
                self.whole = list(read_foreign(self.path, self.fmt))
        elif not is_streamable(self.path):
            fd = open_regular(self.path, "import", self.limit)
            try:
                self.key = file_digest(fd)
            finally:
                os.close(fd)
            if not self._imported_before(self.key):
                self.whole = list(whole_file_results(self.path))

    def run(self) -> int:
        """Import the file; how many results were added (0 when it was imported before,
        or by another process importing it at the same moment: the import key is
        unique, and the loser's transaction is rolled back whole)."""
        try:
            return self._run_foreign(self.fmt) if self.fmt is not None else self._run_file()
        except sa.exc.IntegrityError:
            if self.conn is not None or self.key is None or \
                    not self._imported_before(self.key):
                raise
            self.runs.clear()
            self.cases.clear()
            self.added = 0
            return 0

    def _run_file(self) -> int:
        from torchmark.records.files import file_provenance

        fd = open_regular(self.path, "import", self.limit)
        try:
            key = self.key = self.key or file_digest(fd)  # read ahead: its digest then
            if self._imported_before(key):
                self.before = True
                return 0
            fallback = file_provenance(self.path) or _unknown_origin(self.path)
            with self._transaction() as conn, collector_paused(), bulk_cache(conn):
                for parsed in self._parsed(fd):
                    self._store(conn, parsed, key, fallback)
                self._pack(conn)
        finally:
            os.close(fd)
        return self.added

    def _run_foreign(self, fmt: str) -> int:
        """Import another tool's file or folder (store/formats/): every result read and
        checked before the store is touched, then stored as a torchmark file's are."""
        key = self.key = self.key or path_digest(self.path, self.limit)  # or read ahead's
        if self._imported_before(key):
            self.before = True
            return 0
        if self.whole is None:
            self.read_ahead()
        results = self.whole or []
        sent: set[str] = set()
        with self._transaction() as conn, collector_paused(), bulk_cache(conn):
            for start in range(0, len(results), CHUNK_RESULTS):
                self._store(conn, parsed_of(results[start:start + CHUNK_RESULTS], sent), key,
                            _unknown_origin(self.path))
            self._pack(conn)
        return self.added

    def _pack(self, conn: sa.Connection) -> None:
        """Each imported run's medians packed, as a finished run's are."""
        for run_id in self.runs.values():
            self.store.pack_medians(run_id, conn)

    def _transaction(self) -> contextlib.AbstractContextManager[sa.Connection]:
        """The import's transaction: the shared one of several files, else its own."""
        return contextlib.nullcontext(self.conn) if self.conn is not None \
            else self.store.engine.begin()

    def _imported_before(self, key: str) -> bool:
        query = sa.select(schema.runs.c.id).where(schema.runs.c.import_key == key)
        if self.conn is not None:  # files of this transaction count too
            return self.conn.execute(query).first() is not None
        with self.store.engine.connect() as conn:
            return conn.execute(query).first() is not None

    def _parsed(self, fd: int) -> Iterator[Parsed]:
        """The file's records (open as `fd`), validated, a batch at a time, in order."""
        if self.whole is not None or not is_streamable(self.path):
            results = self.whole if self.whole is not None \
                else list(whole_file_results(self.path))
            for start in range(0, len(results), CHUNK_RESULTS):
                yield parsed_of(results[start:start + CHUNK_RESULTS])
            return
        chunks = read_chunks(fd, brief(str(self.path)))
        if self.workers < 2 or os.fstat(fd).st_size < self.parallel_from:
            yield from map(ChunkParser(), chunks)
            return
        yield from parsed_by_workers(chunks, self.workers, fd)

    def _store(self, conn: sa.Connection, parsed: Parsed, key: str,
               fallback: Provenance) -> None:
        provenances = [p or fallback for p in parsed.provenances]
        texts = [p.to_json() for p in provenances]
        places = [(self.store.run_start(p), p.machine.hostname) for p in provenances]
        self.read += len(parsed.records)
        kinds = [_kind(values) for _, values in parsed.records]
        held = self.store.held_results(
            conn, [(values[KEY_AT], kind, *places[at])
                   for (at, values), kind in zip(parsed.records, kinds, strict=True)],
            set(self.runs.values()))
        if self.fmt is not None:  # another tool's session the store holds in another form
            held |= self._twins(conn, parsed, places, held)
        # a run with a result the store lacks is a new run, not one recorded again: its
        # failures and counts are its own, however like those of a run a moment before
        new_runs = {at for i, (at, _) in enumerate(parsed.records)
                    if i not in held and not exact(kinds[i])} | \
            {at for at, text in enumerate(texts) if text in self.runs}
        held = {i for i in held
                if not (exact(kinds[i]) and parsed.records[i][0] in new_runs)}
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for i, (at, values) in enumerate(parsed.records):
            if i not in held:
                groups.setdefault(at, []).append(values)
        if not groups:
            return
        self.store.insert_case_rows(conn, parsed.cases, self.cases)
        now = self.store.now()
        for at, members in groups.items():
            run_id = self.runs.get(texts[at])
            if run_id is None:
                run_id = self._run(conn, provenances[at],
                                   key if not self.runs else
                                   hashlib.sha256(f"{key}\0{len(self.runs)}".encode())
                                   .hexdigest(), parsed.runs[at] if parsed.runs else None)
                self.runs[texts[at]] = run_id
            self.store.insert_values(conn, members, run_id, now)
            self.added += len(members)

    def _twins(self, conn: sa.Connection, parsed: Parsed,
               places: list[tuple[str, str]], held: set[int]) -> set[int]:
        """The measured results of `parsed` (not `held`) the store holds as their
        twins: stated where these are raw, or the other way (Store.twin_results)."""
        at_n, at_mean, at_extra = (RESULT_VALUES.index(name)
                                   for name in ("n", "mean", "extra"))
        indexes, wanted = [], []
        for i, (at, values) in enumerate(parsed.records):
            if i in held or values[at_n] == 0:
                continue
            mean = stated_mean(values[at_extra])
            value = values[at_mean] if mean is None else mean
            if value is None:
                continue
            indexes.append(i)
            wanted.append((values[0], values[1], float(value), mean is not None,
                           *places[at]))
        found = self.store.twin_results(conn, wanted, set(self.runs.values())) \
            if wanted else set()
        return {indexes[j] for j in found}

    def _run(self, conn: sa.Connection, provenance: Provenance, key: str,
             state: RunState | None = None) -> int:
        """A run for `provenance`'s results: `ok`, unless the file says how it ended
        (RunState: a file `export` wrote), with the tags it states and the file's path."""
        return self.store.insert_run(
            conn, self.store.known_machine(conn, provenance),
            status=state.status if state else "ok", import_key=key,
            ended=state.ended if state else None,
            tags={**(state.tags if state else {}), "imported_from": str(self.path)})


@contextlib.contextmanager
def bulk_cache(conn: sa.Connection) -> Iterator[None]:
    """A SQLite connection's page cache raised to IMPORT_CACHE_MIB for a while: a
    million results' index pages (content keys land anywhere in their index) then stay
    in memory, and inserting them took a third less time."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar()
    conn.exec_driver_sql(f"PRAGMA cache_size=-{IMPORT_CACHE_MIB * 1024}")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size={int(before or -2000)}")


def parsed_by_workers(chunks: Iterator[Chunk], workers: int, fd: int) -> Iterator[Parsed]:
    """The chunks of the file open as `fd` parsed by `workers` processes
    (store/import_worker.py), in order. A worker reads its chunk from the file itself
    (the descriptor passed to it: the same file this process digested) and gets only
    the chunk's place; one chunk in flight a worker, each sent to an idle one, so while
    this process stores a chunk the workers parse the next ones."""
    import sys
    import tempfile

    from torchmark.core.worker import PipedChild

    with tempfile.TemporaryDirectory(prefix="torchmark-import-") as folder:
        children = [PipedChild(
            lambda requests, responses: [sys.executable, "-m",
                                         "torchmark.store.import_worker", str(requests),
                                         str(responses), str(fd)],
            log=Path(folder) / f"worker{i}.log", shutdown=None, name="import worker",
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
            pass_fds=(fd,))
            for i in range(workers)]
        busy: collections.deque[PipedChild] = collections.deque()
        try:
            for chunk in chunks:
                if len(busy) == workers:
                    yield _answer(busy.popleft())
                child = next(c for c in children if c not in busy)  # an idle one
                child.send(dataclasses.replace(chunk, data=b"", length=len(chunk.data)))
                busy.append(child)
            while busy:
                yield _answer(busy.popleft())
        finally:
            for child in children:
                child.close(kill=bool(busy))


def _answer(child: Any) -> Parsed:
    answer = child.receive(PARSE_TIMEOUT_S, "parsing a chunk of the file")
    if isinstance(answer, tuple) and answer[:1] == ("refused",):
        raise UsageError(answer[1])
    return answer


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
    """Whether a result of this kind (a metric, or WINDOWED) repeats from run to run, so
    that only a run of the same machine near its start can hold it already."""
    return metric in EXACT_METRICS or metric == WINDOWED


WINDOWED = "windowed"  # a failure, or stated statistics: its content names no moment


def stated_mean(extra: Any) -> float | None:
    """The mean a stored result's extra (JSON text or its value) states, when it holds
    stated statistics (core/result.py STATED); None otherwise."""
    if isinstance(extra, str):
        if f'"{STATED}"' not in extra:
            return None
        extra = json.loads(extra)
    stated = extra.get(STATED) if isinstance(extra, dict) else None
    mean = stated.get("mean") if isinstance(stated, dict) else None
    return float(mean) if isinstance(mean, (int, float)) else None


def _kind(values: tuple[Any, ...]) -> str:
    """A results row's metric, or WINDOWED for a failure (no samples) or a result of
    stated statistics (core/result.py STATED), whose content repeats from run to run."""
    n, extra = values[RESULT_VALUES.index("n")], values[RESULT_VALUES.index("extra")]
    if n == 0:
        return WINDOWED
    if f'"{STATED}"' in extra:  # the text names it: is it the extra's own key?
        document = json.loads(extra)
        if isinstance(document, dict) and STATED in document:
            return WINDOWED
    return values[1]
