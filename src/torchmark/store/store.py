"""The result store: runs with their provenance, cases, results and raw samples, in SQLite
(default, a file under the user data folder, WAL mode) or PostgreSQL
(`postgresql+psycopg://...`), through one SQLAlchemy Core code path. The schema is kept
by alembic migrations (store/migrations): a new store is created at the head revision; an
older SQLite store is upgraded when opened, after a backup copy; an older PostgreSQL
store asks for `torchmark db upgrade`; a store written by a newer torchmark is refused."""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import functools
import json
import os
import struct
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from torchmark.core.errors import TorchmarkError, UsageError
from torchmark.core.procs import boot_id, pid_alive, process_start
from torchmark.core.provenance import Provenance
from torchmark.core.result import STATED, Result
from torchmark.core.results_file import RUN_ENDINGS, RunState
from torchmark.store import schema
from torchmark.store.driver_sql import driver_rows, insert_rows, placeholders
from torchmark.store.result_rows import KEY_AT, RESULT_VALUES, case_row, result_values

if TYPE_CHECKING:
    from torchmark.store.run_medians import RunMedians

HEAD = "0008"  # the newest migration
# every migration this torchmark knows, oldest first
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008")
# revisions that only add to a SQLite store, or change nothing in it: upgraded without a
# copy of the store first
SQLITE_NO_COPY = ("0006", "0007", "0008")
# what can be said of a detected change (schema.change_marks)
CHANGE_MARKS = ("dismissed", "acknowledged", "confirmed", "not-confirmed", "reopened")
# "reopened": a mark taken back (the change reads as it was detected again: new or recovered)
# the columns of a results table (Store.table, `torchmark export --format csv|parquet`)
TABLE_COLUMNS = ("run_id", "started", "case_id", "frontend", "label", "sub_label",
                 "description", "stmt", "metric", "unit", "number_per_run", "n", "median",
                 "mean", "iqr", "min", "max", "failure", "git_commit", "machine", "run_env",
                 "torch_version", "threads", "device")
RUN_STATUSES = ("running", *RUN_ENDINGS)
LOCK_WAIT_S = 60  # how long a SQLite store's writer waits for another's write lock
PREVIOUS_RUNS_LOOKED_AT = 50  # previous_run: a run sharing a case among these, or none
TWIN_WINDOW_S = 5  # twin_results: one session written twice, starts this close
PROVENANCES_KEPT = 1024  # runs whose parsed provenance a Store keeps
PING_AFTER_IDLE_S = 1.0  # a PostgreSQL connection idle this long is pinged at checkout
CASE_LABELS_KEPT = 200_000  # cases whose labels run pages keep in memory
MEDIANS_KEPT = 16  # runs whose medians run_medians keeps (about 1.5 MB each at 10k cases)


RESUMES_KEPT = 100  # a run's resumes noted in its tags (the newest)
# a time metric's rows as Measurements: the metadata that gives Measurement.quantity
_QUANTITY_METADATA: dict[str, dict[str, str] | None] = {
    "wall": None, "device": {"clock": "cuda_events"}, "kernel": {"clock": "cupti"},
    "batch": {"clock": "cuda_events", "mode": "batch"}}
TIME_QUANTITIES = frozenset(_QUANTITY_METADATA)  # the metrics `measurements` gives


class StoreError(TorchmarkError):
    """The store cannot be used as asked (a newer schema, one to upgrade first)."""


def default_path() -> Path:
    """The default SQLite file: `<user data folder>/torchmark/results.db`."""
    import platformdirs

    return Path(platformdirs.user_data_path("torchmark")) / "results.db"


def resolve_url(url: str | None = None) -> str:
    """The store's URL: `url` (--db), else $TORCHMARK_DB, else the default SQLite file. A
    plain path is taken as a SQLite file."""
    if url is not None and not url.strip():
        raise UsageError("--db: an empty URL (give a SQLite path or a postgresql+psycopg:// "
                         "URL, or leave --db out for $TORCHMARK_DB or the default store)")
    chosen = url or os.environ.get("TORCHMARK_DB") or str(default_path())
    if "://" not in chosen:
        path = Path(chosen).expanduser()
        return f"sqlite:///{path.resolve()}"
    return chosen


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for another backend or an in-memory database)."""
    if not url.startswith("sqlite"):
        return None
    database = sa.engine.make_url(url).database
    return Path(database) if database and database != ":memory:" else None


def is_locked(error: BaseException) -> bool:
    """Whether `error` is a SQLite store's write lock held too long by another process
    (a long import): worth trying again later, unlike any other failure."""
    return isinstance(error, sa.exc.OperationalError) and \
        "database is locked" in str(error.orig or error)


def this_process() -> dict[str, Any]:
    """Which process runs a run (its tags' `process`): this machine's name, this pid,
    and where readable (Linux) the boot and the process's start, which tell a pid
    given again after a reboot or an exit from this one."""
    import socket

    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    boot, started = boot_id(), process_start(os.getpid())
    if boot:
        out["boot"] = boot
    if started is not None:
        out["since"] = started[0]
    return out


def running_process(tags: dict[str, Any]) -> int | None:
    """The pid of another live process of this machine that a run's tags say runs it;
    None when none does: not this machine (another's cannot be checked), another boot,
    a pid now another process's (its start differs), a zombie, or none at all."""
    import socket

    process = tags.get("process")
    if not isinstance(process, dict) or process.get("host") != socket.gethostname():
        return None
    pid = process.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return None
    if process.get("boot") and boot_id() and process["boot"] != boot_id():
        return None
    started = process_start(pid)
    if started is not None:  # /proc: the process as it is now
        since, state = started
        alive = state != "Z" and (process.get("since") in (None, since))
        return pid if alive else None
    return pid if pid_alive(pid) else None


def resume_refused(run_id: int, tags: dict[str, Any], status: str) -> str | None:
    """Why run `run_id` (its tags and status) may not be resumed now, if it may not: a
    live process of this machine runs it (running_process)."""
    holder = running_process(tags) if status == "running" else None
    if holder is None:
        return None
    return (f"run {run_id} is being run by process {holder} on this machine (another "
            "--resume-run, or the command that started it): let it finish, or stop it "
            "first")


def recording_off() -> bool:
    """TORCHMARK_NO_STORE=1 (or --no-store) turns recording off."""
    return os.environ.get("TORCHMARK_NO_STORE", "").lower() in ("1", "true", "yes")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc(text: str | None) -> str:
    """An ISO time (any offset) as the store's UTC text, which sorts as time does."""
    if not text:
        return utc_now()
    try:  # with a fraction of a second too (another tool's file: 09:00:51.611792+02:00)
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return text if moment.tzinfo is None else _utc_text(moment)
    except (ValueError, OverflowError):
        return text


def _utc_text(moment: dt.datetime) -> str:
    """A time as the store's UTC text."""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unpack(data: bytes) -> list[float]:
    """Packed samples (result_rows.pack) as floats."""
    return list(unpack_tuple(data))


def unpack_tuple(data: bytes) -> tuple[float, ...]:
    """Packed samples as a tuple of floats."""
    if len(data) > 4096:
        import numpy as np

        return tuple(np.frombuffer(data, dtype="<f8").tolist())
    return _unpacker(len(data) // 8).unpack(data)


@functools.lru_cache(maxsize=256)
def _unpacker(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}d")


class SeriesRow(NamedTuple):
    """One measured result as a series' history needs it (Store.series_rows)."""

    case_id: str
    metric: str
    unit: str
    median: float
    n: int
    packed: bytes | None  # its samples, packed (unpack_tuple reads them); None: not read
    run_id: int
    q1: float | None  # its samples' first and third quartiles (None: it has none)
    q3: float | None


PLACE_COLUMNS = "id, started, git_commit, git_dirty, machine, env, torch_version"  # a RunPlace's
SPARSE_SPAN = 8  # a case's runs are read by id when the range they span holds 8x as many


class RunPlace(NamedTuple):
    """Where and when a run measured (Store.series_rows)."""

    started: str
    git_commit: str | None
    git_dirty: bool | None
    machine: str | None
    env: str | None
    torch_version: str | None
    # the fields of its fingerprint that change performance, sorted (name, value) pairs
    # (core/fingerprint.py BLOCKING); None for a run that recorded no fingerprint
    comparable: tuple[tuple[str, Any], ...] | None = None


class RunFacts(NamedTuple):
    """What a run's provenance says that series and pages read (Store.run_facts)."""

    comparable: tuple[tuple[str, Any], ...] | None  # RunPlace.comparable
    commit_date: str | None
    commit_subject: str | None
    started: str  # the run's start: a run id reused after a deletion is told apart


class ComparableFields:
    """A run's provenance (the decoded object) -> the fields of its fingerprint that
    change performance, as RunPlace.comparable keeps them; equal tuples shared (a
    store's runs have a handful of environments)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]] = {}

    def __call__(self, provenance: dict[str, Any]) -> tuple[tuple[str, Any], ...] | None:
        from torchmark.core.fingerprint import CAPTURED, is_blocking

        environment = provenance.get("environment")
        if not isinstance(environment, dict) or not environment:
            return None
        fields = tuple(sorted((k, v) for k, v in environment.items()
                              if (is_blocking(k) or k == CAPTURED)
                              and isinstance(v, (str, int, float, bool))))
        return self.seen.setdefault(fields, fields)


class Store:
    """One store; see the module docstring. `open()` is the usual way to get one."""

    def __init__(self, url: str | None = None, *, upgrade: bool = True) -> None:
        self.url = resolve_url(url)
        try:
            self._lock_wait = [float(LOCK_WAIT_S)]  # see lock_wait
            self.engine = _engine(self.url, self._lock_wait)
        except (sa.exc.ArgumentError, ImportError, ValueError) as e:  # not a URL it can use
            from torchmark.core.secrets import mask

            scheme = self.url.partition(":")[0].lower()
            hint = " (a PostgreSQL store: postgresql+psycopg://USER@HOST:PORT/DATABASE)" \
                if scheme.startswith("postgres") and scheme != "postgresql+psycopg" else ""
            raise UsageError(f"--db {mask(self.url)}: {str(e).splitlines()[0]}{hint}") \
                from None
        self.dialect = self.engine.dialect.name
        # what a run's provenance says that series and pages read, by run id (a run's
        # provenance never changes once stored): see run_facts
        self._facts: dict[int, RunFacts] = {}
        # run_medians' answers, the least recently used first
        self._medians: collections.OrderedDict[int, tuple[tuple[Any, ...], RunMedians]] \
            = collections.OrderedDict()
        self._key_lists: dict[str, list[tuple[str, str]]] = {}  # by digest: run_medians
        self._caches_lock = threading.Lock()  # the caches below and _provenances
        # builds_repeat's answers, by (machine, env, largest run id, number of runs)
        self._repeats: dict[tuple[Any, ...], bool] = {}
        # a finished run's result count, by (id, end, result writes, last change)
        self._counts: dict[tuple[Any, ...], int] = {}
        # a run page's order of each list of run keys (by id; the list kept alive with
        # it), and each case's label and sub-label: see run_results_page
        self._orders: dict[int, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {}
        self._labels: dict[str, tuple[str | None, str | None]] = {}
        # each run's parsed provenance, with the start it is of: see _provenance
        self._provenances: dict[int, tuple[str, Provenance | None]] = {}
        self._pinned = threading.local()  # a thread's one connection: see one_connection
        if upgrade:
            try:
                self._ensure_schema()
            except sa.exc.OperationalError as e:  # a server that cannot be reached
                raise StoreError(f"cannot open the store at {self.where}: "
                                 f"{str(e.orig or e).strip().splitlines()[0]}") from None

    # -- connections ----------------------------------------------------------------------
    @contextlib.contextmanager
    def one_connection(self) -> Iterator[None]:
        """Within the block, every read this thread makes of the store is made on one
        connection (a page's dozen reads: one checkout and one end of transaction, where
        each read took its own; SQLite's reads then see one state of the store). Writes
        take their own, as always. Nested blocks share the outer one's."""
        if getattr(self._pinned, "conn", None) is not None:
            yield
            return
        with self.engine.connect() as conn:
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    def _reading(self) -> contextlib.AbstractContextManager[sa.Connection]:
        """A connection to read on: this thread's one (one_connection), else one of its
        own for the caller's block."""
        conn = getattr(self._pinned, "conn", None)
        return contextlib.nullcontext(conn) if conn is not None else self.engine.connect()

    # -- schema ---------------------------------------------------------------------------
    def schema_version(self) -> str | None:
        with self._reading() as conn:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()

    def _ensure_schema(self) -> None:
        if self.schema_version() == HEAD:
            return
        # several processes may open a new store at once: one creates (or upgrades) the
        # schema, under a lock (a file lock beside a SQLite file, an advisory lock on
        # PostgreSQL), and the others find it done
        if self.dialect == "sqlite" and self.engine.url.database:
            from torchmark.core.results_lock import ResultsLock

            with ResultsLock(self.engine.url.database, "store").acquire(wait=120.0):
                self._migrate_if_needed()
        else:
            self._migrate_if_needed()

    def _migrate_if_needed(self) -> None:
        version = self.schema_version()
        if version == HEAD:
            return
        if version is not None and version not in REVISIONS:
            raise StoreError(f"the store at {self.where} was written by a newer torchmark "
                             f"(schema {version}, this one knows up to {HEAD}); upgrade "
                             "torchmark to use it")
        if version is not None and self.dialect != "sqlite":
            raise StoreError(f"the store at {self.where} has schema {version}, older than "
                             f"this torchmark's {HEAD}: run `torchmark db upgrade --db URL` "
                             "(every machine sharing it then needs this torchmark)")
        pending = REVISIONS[REVISIONS.index(version) + 1:] if version is not None else ()
        if version is not None and not set(pending) <= set(SQLITE_NO_COPY):
            # an older SQLite store: a backup first, then upgraded
            path = self.engine.url.database
            if path and Path(path).exists():
                backup = Path(f"{path}.schema-{version}.bak")
                # said, as any command (one that only reads too) may be the one to upgrade
                print(f"torchmark: upgrading the store at {path} from schema {version} to "
                      f"{HEAD}, a copy of it kept at {backup}", file=sys.stderr, flush=True)
                backup.unlink(missing_ok=True)  # one of an earlier, interrupted upgrade
                self.backup(backup)
        self.upgrade()

    def upgrade(self) -> str:
        """Migrate the schema to the newest revision; the revision now."""
        from alembic import command
        from alembic.config import Config

        version = self.schema_version()
        if version is not None and version not in REVISIONS:
            raise StoreError(f"the store at {self.where} was written by a newer torchmark "
                             f"(schema {version}, this one knows up to {HEAD}); upgrade "
                             "torchmark to use it")
        config = Config()
        config.set_main_option("script_location",
                               str(Path(__file__).with_name("migrations")))
        with self.engine.begin() as conn:
            if self.dialect == "postgresql":  # one migrating process at a time
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(74246)"))
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        return HEAD

    @property
    def in_memory(self) -> bool:
        """A SQLite store without a file: no other process can open it."""
        return self.dialect == "sqlite" and sqlite_path(self.url) is None

    @property
    def where(self) -> str:
        """The URL without a password (nor one in its query string)."""
        from torchmark.core.secrets import mask

        return mask(self.engine.url.render_as_string(hide_password=True))

    # -- writing --------------------------------------------------------------------------
    def start_run(self, provenance: Provenance | None = None, *,
                  tags: dict[str, Any] | None = None, import_key: str | None = None,
                  status: str = "running") -> int:
        """A new run (its provenance captured now when not given); its id."""
        with self.engine.begin() as conn:
            return self.insert_run(conn, provenance or Provenance.capture(), tags=tags,
                                   import_key=import_key, status=status)

    def insert_run(self, conn: sa.Connection, provenance: Provenance, *,
                   tags: dict[str, Any] | None = None, import_key: str | None = None,
                   status: str = "running", ended: str | None = None) -> int:
        """start_run within the caller's transaction `conn` (`ended`: an imported run's
        end, as its file states it)."""
        self._machine(conn, provenance)
        row = {"started": _utc(provenance.started), "status": status,
               "ended": _utc(ended) if ended else None,
               "command": list(provenance.command),
               "torchmark_version": provenance.torchmark_version,
               "torch_version": provenance.torch_version,
               "torch_git": provenance.torch_git, "torch_cuda": provenance.torch_cuda,
               "python": provenance.python, "git_commit": provenance.git_commit,
               "git_dirty": provenance.git_dirty,
               "machine": provenance.machine_fingerprint,
               "governor": provenance.machine.governor,
               "turbo": provenance.machine.turbo, "env": provenance.env,
               "tags": dict(tags or {}), "provenance": provenance.to_dict(),
               "import_key": import_key}
        key = conn.execute(schema.runs.insert().values(**row)).inserted_primary_key
        assert key is not None
        return int(key[0])

    @contextlib.contextmanager
    def lock_wait(self, seconds: float) -> Iterator[None]:
        """Writes within wait up to `seconds` for another process's write lock (SQLite;
        LOCK_WAIT_S otherwise), then fail (is_locked)."""
        before, self._lock_wait[0] = self._lock_wait[0], float(seconds)
        try:
            yield
        finally:
            self._lock_wait[0] = before

    def finish_run(self, run_id: int, status: str = "ok") -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}")
        with self.engine.begin() as conn:
            conn.execute(schema.runs.update().where(schema.runs.c.id == run_id)
                         .values(status=status, ended=utc_now()))
            self.pack_medians(run_id, conn)

    def record(self, results: Iterable[Any], run_id: int | None = None, *,
               replace_failed: bool = False) -> int:
        """Store `results` in one transaction, under `run_id` (a new finished run when
        None, with the results' own provenance or the present one); how many. Besides
        Results, what the front-ends return is taken as it is: Measurements (torch's
        too) and CallgrindStats. `replace_failed`: the run's failed results of these
        cases, and its results of these cases and metrics, are removed first (a resumed
        run measures again the cases that failed, and an ops record's pass measured
        beside one that failed: it then holds each once)."""
        items = list(results)
        if not all(isinstance(r, Result) for r in items):
            from torchmark.records import results_of

            items = results_of(items)
        results = items
        for r in results:
            problem = r.storable_problem()
            if problem is not None:  # one such record made every report fail
                raise StoreError(f"not stored: {r.case.title[:80]}: {problem}")
        if run_id is None:
            provenance = next((r.provenance for r in results if r.provenance), None)
            run_id = self.start_run(provenance, status="ok")
        with self.engine.begin() as conn:
            if replace_failed:
                res, ids = schema.results, sorted({r.case.id for r in results})
                keys = sorted({(r.case.id, r.metric) for r in results})
                for start in range(0, len(ids), 500):
                    conn.execute(res.delete().where(
                        res.c.run_id == run_id, res.c.failure.is_not(None),
                        res.c.case_id.in_(ids[start:start + 500])))
                for start in range(0, len(keys), 500):
                    conn.execute(res.delete().where(
                        res.c.run_id == run_id,
                        sa.tuple_(res.c.case_id, res.c.metric).in_(keys[start:start + 500])))
            self.insert_results(conn, results, run_id, utc_now())
            status = conn.execute(sa.select(schema.runs.c.status)
                                  .where(schema.runs.c.id == run_id)).scalar()
            if status is not None and status != "running":  # a finished run: repacked
                self.pack_medians(run_id, conn)
        return len(results)

    def held_in_run(self, run_id: int, results: list[Result]) -> list[Result]:
        """Those of `results` the run holds already, the same case, metric and samples
        (their content key): what a write a Ctrl-C cut short stored before it came."""
        res = schema.results
        keys = [result_values(r)[KEY_AT] for r in results]
        wanted = sorted(set(keys))
        found: set[str] = set()
        with self._reading() as conn:
            for start in range(0, len(wanted), 500):  # bounded IN lists
                found.update(conn.execute(sa.select(res.c.content_key).where(
                    res.c.run_id == run_id,
                    res.c.content_key.in_(wanted[start:start + 500]))).scalars())
        return [r for r, key in zip(results, keys, strict=True) if key in found]

    def insert_results(self, conn: sa.Connection, results: list[Result], run_id: int,
                       now: str, stored_cases: set[str] | None = None) -> None:
        """`results` (and their cases) under `run_id`, within the caller's transaction.
        `stored_cases`: the ids of cases this transaction stored before (not stored
        again), to which this call adds its own."""
        cases = {r.case.id: r.case for r in results}
        self.insert_case_rows(conn, map(case_row, cases.values()), stored_cases)
        self.insert_values(conn, [result_values(r) for r in results], run_id, now)

    @staticmethod
    def insert_values(conn: sa.Connection, values: list[tuple[Any, ...]], run_id: int,
                      now: str) -> None:
        """Results rows of `values` (result_rows.RESULT_VALUES each) under `run_id`,
        within the caller's transaction (their cases stored already)."""
        insert_rows(conn, schema.results, RESULT_VALUES, values,
                    same={"run_id": run_id, "recorded": now})
        Store.count_result_write(conn, run_id)

    @staticmethod
    def count_result_write(conn: sa.Connection, run_id: int) -> None:
        """Count one more write of the run's results, and say when (schema.runs
        result_writes, results_changed: what tells whether its packed medians still
        hold), within the writing transaction: whatever adds or removes a run's results
        calls it (insert_values does)."""
        r = schema.runs
        conn.execute(r.update().where(r.c.id == run_id)
                     .values(result_writes=r.c.result_writes + 1, results_changed=utc_now()))

    @staticmethod
    def now() -> str:
        """The store's time now (UTC text that sorts as time does)."""
        return utc_now()

    def _insert_ignoring_duplicates(self, conn: sa.Connection, table: sa.Table,
                                    rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        from sqlalchemy.dialects import postgresql, sqlite

        dialect: Any = postgresql if self.dialect == "postgresql" else sqlite
        conn.execute(dialect.insert(table).on_conflict_do_nothing(), rows)

    def _machine(self, conn: sa.Connection, provenance: Provenance) -> None:
        m = provenance.machine
        self._insert_ignoring_duplicates(conn, schema.machines, [{
            "fingerprint": m.fingerprint, "hostname": m.hostname, "cpu_model": m.cpu_model,
            "cores": m.cores, "memory_bytes": m.memory_bytes, "gpus": list(m.gpus),
            "gpu_driver": m.gpu_driver, "first_seen": utc_now()}])

    def insert_case_rows(self, conn: sa.Connection, rows: Iterable[dict[str, Any]],
                         stored: set[str] | None = None) -> None:
        """The case rows (result_rows.case_row) the store lacks, within the caller's
        transaction; `stored`: the ids of cases this transaction stored before
        (skipped), to which these are added."""
        fresh = {row["id"]: row for row in rows if stored is None or row["id"] not in stored}
        self._insert_ignoring_duplicates(conn, schema.cases, list(fresh.values()))
        if stored is not None:
            stored.update(fresh)

    def import_file(self, path: str | os.PathLike, max_bytes: int | None = None,
                    fmt: str | None = None) -> int:
        """Every result of a torchmark file (any format it has written), or with `fmt`
        of another tool's file or folder (store/formats/), that the store does not hold
        yet, in one transaction, one run a provenance the file names; bounded and
        validated before anything is stored (store/importing.py). Importing the same
        file again adds nothing, and neither do results already recorded when the file
        was written. How many results were added."""
        from torchmark.store.importing import Importer

        return Importer(self, path, max_bytes, fmt=fmt).run()

    def import_files(self, paths: Sequence[str | os.PathLike], max_bytes: int | None = None,
                     formats: Sequence[str | None] | None = None
                     ) -> list[tuple[int, int, bool]]:
        """import_file of each of `paths` (`formats`: each one's, None for torchmark's),
        all in one transaction: a file refused stores nothing of the others either. How
        many results each added, how many it held (read), and whether it was imported
        before (then none of its results is stored). Several files: those read whole
        (Importer.read_ahead) are parsed, and held, before the transaction takes the
        store's write lock. Two imports of one file at once: the one that loses its
        commit imports them again, finding that file imported."""
        from torchmark.store.importing import Importer

        kinds = list(formats) if formats is not None else [None] * len(paths)
        ahead = [Importer(self, path, max_bytes, fmt=fmt)
                 for path, fmt in zip(paths, kinds, strict=True)]
        for importer in ahead if len(ahead) > 1 else ():  # files read whole: parsed
            importer.read_ahead()  # before the lock is taken (unless imported before)
        for attempt in range(2):
            try:
                with self.engine.begin() as conn:
                    importers = [Importer(self, path, max_bytes, fmt=fmt, conn=conn)
                                 for path, fmt in zip(paths, kinds, strict=True)]
                    for importer, read in zip(importers, ahead, strict=True):
                        importer.whole, importer.key = read.whole, read.key
                    return [(importer.run(), importer.read, importer.before)
                            for importer in importers]
            except sa.exc.IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def held_results(self, conn: sa.Connection, wanted: list[tuple[str, str, str, str]],
                     exclude_runs: set[int] | None = None) -> set[int]:
        """The indexes of `wanted` (content key, metric, run start as the store's UTC
        text, hostname: one a result) that the store holds already, in runs other than
        `exclude_runs` (an import's own): the same case, metric and samples (their
        content key); for exact metrics, whose counts repeat from run to run, and for
        failures and stated statistics (importing.WINDOWED in place of the metric),
        only in a run of the same host that started near the result's."""
        from torchmark.store.importing import exact, within_window

        keys = sorted({w[0] for w in wanted})
        held: dict[str, list[tuple[str, str | None]]] = {}
        for start in range(0, len(keys), 1000):
            part = keys[start:start + 1000]
            for row in conn.exec_driver_sql(  # the driver's own IN list: no per-key work
                    "SELECT results.content_key, results.run_id, runs.started, "
                    "machines.hostname FROM results JOIN runs ON runs.id = results.run_id "
                    "LEFT OUTER JOIN machines ON machines.fingerprint = runs.machine "
                    f"WHERE results.content_key IN ({placeholders(conn, len(part))})",
                    tuple(part)):
                if row.run_id not in (exclude_runs or ()):
                    held.setdefault(row.content_key, []).append((row.started, row.hostname))
        out = set()
        for i, (key, metric, started, host) in enumerate(wanted):
            if key not in held:
                continue
            # a file's header names its machine by hostname (without all of it)
            if not exact(metric) or any(within_window(started, s) and h in (None, host)
                                        for s, h in held[key]):
                out.add(i)
        return out

    def twin_results(self, conn: sa.Connection,
                     wanted: list[tuple[str, str, float, bool, str, str | None]],
                     exclude_runs: set[int] | None = None) -> set[int]:
        """The indexes of `wanted` (case id, metric, mean, whether it is stated
        statistics, run start as the store's UTC text, hostname: one a result of
        another tool's file) that the store holds already in the other form: the same
        case and metric, stated where this one has raw samples or the other way, with
        the same mean (to 1e-9), in a run of the same host that started within
        TWIN_WINDOW_S of it. pytest-benchmark writes one session twice so (its
        `--benchmark-json` with raw data, its `.benchmarks/` save without)."""
        from torchmark.core.provenance import parse_time
        from torchmark.store.importing import stated_mean

        moments = [parse_time(w[4]) for w in wanted]
        known = [m for m in moments if m is not None]
        if not known:
            return set()
        slack = dt.timedelta(seconds=TWIN_WINDOW_S + 1)  # stored starts' spellings vary
        r, m, res = schema.runs, schema.machines, schema.results
        runs = {row.id: (parse_time(row.started), row.hostname) for row in conn.execute(
            sa.select(r.c.id, r.c.started, m.c.hostname)
            .outerjoin(m, m.c.fingerprint == r.c.machine)
            .where(r.c.started >= _utc_text(min(known) - slack),
                   r.c.started <= _utc_text(max(known) + slack)))
            if row.id not in (exclude_runs or ())}
        if not runs:
            return set()
        stored: dict[tuple[str, str], list[tuple[int, float, bool]]] = {}
        cases = sorted({w[0] for w in wanted})
        for start in range(0, len(cases), 500):
            for row in conn.execute(sa.select(res.c.run_id, res.c.case_id, res.c.metric,
                                              res.c.mean, res.c.extra).where(
                    res.c.run_id.in_(list(runs)), res.c.case_id.in_(cases[start:start + 500]),
                    res.c.failure.is_(None))):
                mean = stated_mean(row.extra)
                stored.setdefault((row.case_id, row.metric), []).append(
                    (row.run_id, row.mean if mean is None else mean, mean is not None))
        out = set()
        for i, ((case_id, metric, mean, stated, _, host), moment) in enumerate(
                zip(wanted, moments, strict=True)):
            for run_id, other, other_stated in stored.get((case_id, metric), ()):
                when, where = runs[run_id]
                if other_stated != stated and other is not None and moment is not None \
                        and when is not None and where in (None, host) \
                        and abs((when - moment).total_seconds()) <= TWIN_WINDOW_S \
                        and abs(other - mean) <= 1e-9 * max(abs(other), abs(mean)):
                    out.add(i)
                    break
        return out

    @staticmethod
    def run_start(provenance: Provenance) -> str:
        """A provenance's start as the store's UTC text (what runs.started holds)."""
        return _utc(provenance.started)

    def known_machine(self, conn: sa.Connection, provenance: Provenance) -> Provenance:
        """A file's header names its machine without all of it (no memory size, so its
        fingerprint differs): the store's machine of that hostname, CPU model and core
        count, when it knows exactly one, so imported runs join that machine's series."""
        import dataclasses

        m = provenance.machine
        if m.memory_bytes or m.hostname == "unknown":
            return provenance
        t = schema.machines
        found = conn.execute(sa.select(t).where(
            t.c.hostname == m.hostname, t.c.cpu_model == m.cpu_model,
            t.c.cores == m.cores)).all()
        if len(found) != 1:
            return provenance
        row = found[0]
        return dataclasses.replace(provenance, machine=dataclasses.replace(
            m, memory_bytes=row.memory_bytes, gpus=tuple(row.gpus or ()),
            gpu_driver=row.gpu_driver))

    # -- reading --------------------------------------------------------------------------
    def runs(self, *, since: str | None = None, machine: str | None = None,
             env: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Runs, newest first, each with how many results it holds."""
        r, res = schema.runs, schema.results
        query = sa.select(r.c.id, r.c.started, r.c.ended, r.c.status, r.c.command,
                          r.c.git_commit, r.c.git_dirty, r.c.torch_version, r.c.machine,
                          r.c.env, r.c.tags)
        query = _filtered(query, r, since, machine, env).order_by(r.c.started.desc(),
                                                                 r.c.id.desc())
        if limit:
            query = query.limit(limit)
        with self._reading() as conn:
            found = [dict(row._mapping) for row in conn.execute(query)]
            # the results of the runs listed only (not a count over the whole store)
            counts: dict[int, int] = {}
            ids = [run["id"] for run in found]
            for start in range(0, len(ids), 500):
                counts.update(conn.execute(
                    sa.select(res.c.run_id, sa.func.count()).where(
                        res.c.run_id.in_(ids[start:start + 500])).group_by(res.c.run_id)
                ).all())
        for run in found:
            run["results"] = counts.get(run["id"], 0)
        return found

    def runs_page(self, *, since: str | None = None, until: str | None = None,
                  machine: str | None = None, env: str | None = None,
                  commit: str | None = None, command: str | None = None,
                  run: int | None = None, offset: int = 0,
                  limit: int = 50) -> tuple[list[dict[str, Any]], int]:
        """One page of runs, newest first (as `runs`, with each run's result count and
        its commit's subject and date from its provenance), and how many runs the
        filters select in all. `until`: a date (that day included) or a time; `commit`:
        a prefix of the commit; `command`: words the command line holds, each (in its
        order or not); `run`: that run only."""
        r = schema.runs
        query = _filtered(sa.select(r.c.id), r, since, machine, env)
        if until is not None:
            limit_at = time_bound(until, "--until")
            query = query.where(r.c.started <= limit_at if "T" in limit_at else
                                r.c.started < _day_after(limit_at))
        if commit:
            query = query.where(r.c.git_commit.startswith(commit, autoescape=True))
        if run is not None:
            query = query.where(r.c.id == run)
        for word in (command or "").split():
            query = query.where(sa.cast(r.c.command, sa.Text).contains(word,
                                                                       autoescape=True))
        with self._reading() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(
                query.subquery())).scalar() or 0
            ids = [row[0] for row in conn.execute(
                query.order_by(r.c.started.desc(), r.c.id.desc()).offset(offset).limit(limit))]
            found = {row.id: dict(row._mapping) for row in conn.execute(sa.select(
                r.c.id, r.c.started, r.c.ended, r.c.status, r.c.command, r.c.git_commit,
                r.c.git_dirty, r.c.torch_version, r.c.machine, r.c.env, r.c.tags,
                r.c.provenance, r.c.result_writes, r.c.results_changed)
                .where(r.c.id.in_(ids)))} if ids else {}
            counts = self._result_counts(conn, [
                (run_id, found[run_id]["ended"], (found[run_id].pop("result_writes"),
                                                  found[run_id].pop("results_changed")))
                for run_id in ids])
        out = []
        for run_id in ids:
            row = found[run_id]
            provenance = _json(row.pop("provenance"))
            row["commit_subject"] = provenance.get("git_commit_subject")
            row["commit_date"] = provenance.get("git_commit_date")
            row["results"] = counts.get(run_id, 0)
            out.append(row)
        return out, int(total)

    def run_results_page(self, run_id: int, offset: int = 0,
                         limit: int = 50) -> tuple[list[dict[str, Any]], int]:
        """One page of a run's results (by case label, sub-label and id, then metric; a
        missing label first on SQLite, last on PostgreSQL, as each database orders
        them) with their cases' names, and how many (case, metric) the run holds. The
        run's keys come from run_medians (packed, kept in memory) and their order is
        worked out once for each list of keys that a suite's runs share, so a page
        reads its own rows only (the database sorted every result of the run for each
        page: 11 ms of a run page's 19 on PostgreSQL at 10,000 cases)."""
        keys = self.run_medians(run_id).keys
        shown = self._ordered_keys(keys)[offset:offset + limit]
        if not shown:
            return [], len(keys)
        res, c = schema.results, schema.cases
        query = sa.select(res.c.case_id, res.c.metric, res.c.unit, res.c.n, res.c.median,
                          res.c.iqr, res.c.warnings, res.c.failure, c.c.frontend, c.c.stmt,
                          c.c.label, c.c.sub_label, c.c.description, c.c.threads
                          ).join(c, c.c.id == res.c.case_id).where(
            res.c.run_id == run_id, res.c.case_id.in_(sorted({case for case, _ in shown}))
        ).order_by(res.c.id)
        found: dict[tuple[str, str], list[dict[str, Any]]] = {}
        with self._reading() as conn:
            for row in conn.execute(query):
                found.setdefault((row.case_id, row.metric), []).append(dict(row._mapping))
        return [row for key in shown for row in found.get(key, [])], len(keys)

    def _ordered_keys(self, keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """`keys` (a run's (case id, metric)) in a run page's order, kept for the list
        (a suite's runs share one: run_medians) while it is in use."""
        with self._caches_lock:
            kept = self._orders.get(id(keys))
            if kept is not None and kept[0] is keys:
                return kept[1]
        names = self._case_labels(sorted({case for case, _ in keys}))
        missing_first = self.dialect == "sqlite"  # where NULL sorts, as the database

        def label(text: str | None) -> tuple[bool, str]:
            return ((text is not None) if missing_first else (text is None), text or "")

        order = sorted(keys, key=lambda key: (*label(names[key[0]][0]),
                                              *label(names[key[0]][1]), key[0], key[1]))
        with self._caches_lock:
            if len(self._orders) >= 8:
                self._orders.pop(next(iter(self._orders)))
            self._orders[id(keys)] = (keys, order)
        return order

    def _case_labels(self, ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """Each case's label and sub-label (a case id names them for good: read once)."""
        with self._caches_lock:
            missing = [case for case in ids if case not in self._labels]
        c = schema.cases
        if missing:
            with self._reading() as conn:
                read = {row.id: (row.label, row.sub_label)
                        for start in range(0, len(missing), 500)
                        for row in conn.execute(sa.select(c.c.id, c.c.label, c.c.sub_label)
                                                .where(c.c.id.in_(missing[start:start + 500])))}
            with self._caches_lock:
                if len(self._labels) + len(read) > CASE_LABELS_KEPT:
                    self._labels.clear()
                self._labels.update(read)
        with self._caches_lock:
            return {case: self._labels.get(case, (None, None)) for case in ids}

    def median_rows(self, cases: Sequence[str], *, machine: str | None = None,
                    env: str | None = None) -> list[dict[str, Any]]:
        """What an A/A history is read from, lean: each measured result of `cases` on
        `machine` in runs labelled `env` (None: unlabelled runs only), oldest first, as
        a dict of its run id, case id, metric and median, and its run's commit, tree
        state, torch version and tags (each run's read once; driver tuples, no JSON
        decoded a result)."""
        r, res = schema.runs, schema.results
        ids = sorted(set(cases))
        rows: list[tuple[Any, ...]] = []
        with self._reading() as conn:
            query = _filtered(sa.select(res.c.run_id, res.c.case_id, res.c.metric,
                                        res.c.median, r.c.started, res.c.id)
                              .join(r, r.c.id == res.c.run_id)
                              .where(res.c.failure.is_(None), res.c.median.is_not(None),
                                     r.c.env.is_(None) if env is None else r.c.env == env),
                              r, None, machine, None)
            for start in range(0, len(ids), 500):
                rows += driver_rows(conn, query.where(res.c.case_id.in_(ids[start:start + 500])))
            run_ids = sorted({row[0] for row in rows})
            runs: dict[int, tuple[Any, ...]] = {}
            for start in range(0, len(run_ids), 500):
                for run in conn.execute(sa.select(r.c.id, r.c.git_commit, r.c.git_dirty,
                                                  r.c.torch_version, r.c.tags, r.c.env)
                                        .where(r.c.id.in_(run_ids[start:start + 500]))):
                    runs[run[0]] = tuple(run)
        rows.sort(key=lambda row: (row[4], row[5]))
        out = []
        for run_id, case_id, metric, median, _, _ in rows:
            _, commit, dirty, torch_version, tags, run_env = runs[run_id]
            out.append({"run_id": run_id, "case_id": case_id, "metric": metric,
                        "median": median, "failure": None, "git_commit": commit,
                        "git_dirty": None if dirty is None else bool(dirty),
                        "torch_version": torch_version, "run_tags": tags, "run_env": run_env})
        return out

    def builds_repeat(self, *, machine: str | None = None, env: str | None = None) -> bool:
        """Whether two runs on `machine` labelled `env` (None: unlabelled) share
        a build (a clean commit and torch version, or a `calibrate` round's tag): whether
        an A/A history can exist there at all. Kept until the store's runs change
        (runs_version)."""
        r = schema.runs
        key = (machine, env, *self.runs_version())
        if key in self._repeats:
            return self._repeats[key]
        with self._reading() as conn:
            query = _filtered(sa.select(r.c.git_commit, r.c.git_dirty, r.c.torch_version,
                                        r.c.tags), r, None, machine, None).where(
                r.c.env.is_(None) if env is None else r.c.env == env)
            found, seen = False, set()
            for commit, dirty, torch_version, tags in conn.execute(query):
                aa = tags.get("aa") if isinstance(tags, dict) else None
                build = ("aa", aa, torch_version) if aa else \
                    (commit, torch_version) if commit and dirty is False else None
                if build is not None:
                    if build in seen:
                        found = True
                        break
                    seen.add(build)
        if len(self._repeats) >= 256:
            self._repeats.clear()
        self._repeats[key] = found
        return found

    def case_row(self, case_id: str) -> Any:
        """One case as the core's Case record; None when the store holds no such case."""
        from torchmark.core.result import Case

        c = schema.cases
        with self._reading() as conn:
            row = conn.execute(sa.select(c).where(c.c.id == case_id)).first()
        if row is None:
            return None
        return Case(id=row.id, frontend=row.frontend, stmt=row.stmt, setup=row.setup,
                    label=row.label, sub_label=row.sub_label, description=row.description,
                    threads=row.threads, device=row.device, params=row.params or {})

    def run_medians(self, run_id: int) -> RunMedians:
        """Each (case id, metric) of a run and its median (NaN for a failed result or one
        stored without a median): what ranks a comparison's cases before any is judged. Read
        from the run's packed row where it is current (store/run_medians.py), else
        from its results; the last MEDIANS_KEPT runs' answers are kept in memory while
        the run is as it was. The answer is shared: read it, never change it."""
        import numpy as np

        from torchmark.store import run_medians as packing

        with self._reading() as conn:
            now = packing.version(conn, run_id)
            if now is None:
                return packing.RunMedians([], np.empty(0))
            with self._caches_lock:
                kept = self._medians.get(run_id)
                if kept is not None and kept[0] == now:
                    self._medians.move_to_end(run_id)
                    return kept[1]
            medians = packing.from_packed(conn, now, self._key_lists)
            if medians is None:
                medians = packing.from_results(conn, run_id).medians
        with self._caches_lock:
            self._medians[run_id] = (now, medians)
            self._medians.move_to_end(run_id)
            while len(self._medians) > MEDIANS_KEPT:
                self._medians.popitem(last=False)
            if len(self._key_lists) > 64:
                self._key_lists.clear()
        return medians

    def pack_medians(self, run_id: int, conn: sa.Connection | None = None) -> None:
        """Keep the run's medians packed as it is now (store/run_medians.py), within
        `conn`'s transaction (a transaction of its own when None): what finishing a
        run does, and the schema upgrade for the runs stored before it."""
        from torchmark.store import run_medians as packing

        if conn is None:
            with self.engine.begin() as own:
                self.pack_medians(run_id, own)
            return
        now = packing.version(conn, run_id)
        if now is not None:
            packing.write_packed(conn, packing.from_results(conn, run_id), now)

    def _result_counts(self, conn: sa.Connection,
                       runs: list[tuple[int, str | None, tuple[Any, ...]]]) -> dict[int, int]:
        """How many results each of `runs` (id, end, (result writes, last change))
        holds; a finished run's count read from its packed medians where they are of
        the run as it is (else counted) and kept for the life of this Store under its
        end and writes (a write to it, or its end again when resumed, makes another
        key)."""
        res, r, m = schema.results, schema.runs, schema.run_medians
        keys = {run_id: (run_id, ended, *written) for run_id, ended, written in runs}
        missing = [run_id for run_id, ended, _ in runs
                   if ended is None or keys[run_id] not in self._counts]
        finished = [run_id for run_id, ended, _ in runs
                    if ended is not None and keys[run_id] not in self._counts]
        # a finished run's count as its packed medians hold it, while they are of the
        # run as it is: no count of its results needed
        fresh: dict[int, int] = dict(conn.execute(
            sa.select(m.c.run_id, m.c.results).join(r, r.c.id == m.c.run_id)
            .where(m.c.run_id.in_(finished), m.c.started == r.c.started,
                   m.c.result_writes == r.c.result_writes,
                   m.c.results_changed.is_not_distinct_from(r.c.results_changed))
        ).all()) if finished else {}
        counted = [run_id for run_id in missing if run_id not in fresh]
        fresh.update(dict(conn.execute(
            sa.select(res.c.run_id, sa.func.count()).where(res.c.run_id.in_(counted))
            .group_by(res.c.run_id)).all()) if counted else {})
        for run_id, ended, _ in runs:
            if ended is not None and keys[run_id] not in self._counts:
                self._counts[keys[run_id]] = fresh.get(run_id, 0)
        return {run_id: self._counts[keys[run_id]] if ended is not None
                else fresh.get(run_id, 0) for run_id, ended, _ in runs}

    def run_provenance(self, run_id: int) -> dict[str, Any] | None:
        """A run's whole provenance as it was captured (None for no such run, {} for a
        run stored without one)."""
        with self._reading() as conn:
            row = conn.execute(sa.select(schema.runs.c.provenance)
                               .where(schema.runs.c.id == run_id)).first()
        return None if row is None else _json(row[0])

    def run_commits(self, run_ids: Iterable[int]) -> dict[int, tuple[str | None, str | None]]:
        """Each run's commit date and subject from its provenance."""
        with self._reading() as conn:
            return {run_id: (facts.commit_date, facts.commit_subject)
                    for run_id, facts in self.run_facts(conn, run_ids).items()}

    def run_facts(self, conn: sa.Connection, run_ids: Iterable[int]) -> dict[int, RunFacts]:
        """What each run's provenance says that series and pages read (RunFacts), its
        JSON parsed once a run for the life of this Store (series_rows drops a run id
        whose start changed: deleted, and reused)."""
        ids = set(run_ids)
        missing = sorted(ids.difference(self._facts))
        comparable = ComparableFields()
        for start in range(0, len(missing), 500):
            for run_id, provenance, started in driver_rows(conn, sa.select(
                    schema.runs.c.id, schema.runs.c.provenance, schema.runs.c.started)
                    .where(schema.runs.c.id.in_(missing[start:start + 500]))):
                data = _json(provenance)
                self._facts[run_id] = RunFacts(comparable(data), data.get("git_commit_date"),
                                               data.get("git_commit_subject"), started)
        return {run_id: self._facts[run_id] for run_id in ids if run_id in self._facts}

    def search_cases(self, text: str, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """Cases whose id, statement, label, sub-label, description or parameters hold
        `text` (case-insensitive), by id: at most `limit`, the first `offset` left out."""
        c = schema.cases
        # the text as it is: LIKE's wildcards (% and _) and the escape character escaped
        literal = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = f"%{literal}%"
        columns = (c.c.id, c.c.stmt, c.c.label, c.c.sub_label, c.c.description,
                   sa.cast(c.c.params, sa.Text))
        query = sa.select(c.c.id, c.c.frontend, c.c.stmt, c.c.label, c.c.sub_label,
                          c.c.description, c.c.threads, c.c.device, c.c.params).where(
            sa.or_(*(sa.func.lower(column).like(pattern, escape="\\")
                     for column in columns))
        ).order_by(c.c.id).offset(offset).limit(limit)
        with self._reading() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def results(self, *, case: str | None = None, run: int | None = None,
                metric: str | None = None, since: str | None = None,
                machine: str | None = None, env: str | None = None,
                samples: bool = False,
                cases: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Result rows with their run's time, commit (and whether the tree was dirty),
        machine and env (and the raw samples, unpacked, and the result's extra, with
        `samples=True`), oldest first. `cases`: only these case ids."""
        r, res, c = schema.runs, schema.results, schema.cases
        columns = [res.c.id, res.c.run_id, res.c.case_id, res.c.metric, res.c.unit,
                   res.c.number_per_run, res.c.n, res.c.median, res.c.mean, res.c.iqr,
                   res.c.min, res.c.max, res.c.warnings, res.c.failure, r.c.started,
                   r.c.git_commit, r.c.git_dirty, r.c.machine, r.c.env.label("run_env"),
                   r.c.torch_version, r.c.tags.label("run_tags"), c.c.frontend, c.c.stmt,
                   c.c.label, c.c.sub_label, c.c.description, c.c.threads, c.c.device]
        if samples:
            columns += [res.c.samples, res.c.extra]
        query = sa.select(*columns).join(r, r.c.id == res.c.run_id).join(
            c, c.c.id == res.c.case_id)
        if case is not None:
            query = query.where(res.c.case_id == case)
        if run is not None:
            query = query.where(res.c.run_id == run)
        if metric is not None:
            query = query.where(res.c.metric == metric)
        query = _filtered(query, r, since, machine, env).order_by(r.c.started, res.c.id)
        ids = sorted(set(cases)) if cases is not None else [None]
        rows = []
        with self._reading() as conn:
            for start in range(0, len(ids), 500):  # bounded IN lists
                chunk = ids[start:start + 500]
                rows += [dict(row._mapping) for row in conn.execute(
                    query if chunk == [None] else query.where(res.c.case_id.in_(chunk)))]
        if cases is not None and len(ids) > 500:
            rows.sort(key=lambda row: (row["started"], row["id"]))
        if samples:
            for row in rows:
                row["samples"] = unpack(row["samples"])
        return rows

    def series_rows(self, *, metric: str | None = None, since: str | None = None,
                    machine: str | None = None, env: str | None = None,
                    cases: Sequence[str] | None = None, samples: bool = True
                    ) -> tuple[list[SeriesRow], dict[int, RunPlace]]:
        """What the history of every series is made of, lean: each measured (not
        failed) result as a SeriesRow (its samples as stored, a page that draws the
        quartiles has no use for a thousand tuples; without `samples`, not read: its
        points then come from the index on them, results_case_points), oldest run first;
        and the runs they belong to, each once. `cases`: only these case ids. No JSON
        column is read and the driver's own tuples are used: a store of a million
        results is read in seconds."""
        r, res = schema.runs, schema.results
        ids = sorted(set(cases)) if cases is not None else [None]
        # a few cases and no filter of runs: their rows by the case index alone, put in
        # their runs' order here (the join and the database's sort cost more)
        few = cases is not None and len(ids) <= 500 and since is None and machine is None \
            and env is None
        query = sa.select(res.c.id, res.c.case_id, res.c.metric, res.c.unit, res.c.median,
                          res.c.n, res.c.samples if samples else sa.null(), res.c.run_id,
                          res.c.q1, res.c.q3) \
            .where(res.c.failure.is_(None), res.c.median.is_not(None))
        if metric is not None:
            query = query.where(res.c.metric == metric)
        if not few:
            query = _filtered(query.add_columns(r.c.started).join(r, r.c.id == res.c.run_id),
                              r, since, machine, env).order_by(r.c.started, res.c.id)
        rows: list[tuple[Any, ...]] = []
        with self._reading() as conn:
            for start in range(0, len(ids), 500):  # bounded IN lists
                chunk = ids[start:start + 500]
                rows += driver_rows(conn, query if chunk == [None] else
                                    query.where(res.c.case_id.in_(chunk)))
            if few:  # their runs, not every run of the store: by their ids where they
                # are a few of the runs between their first and last, else that range
                of_rows = sorted({row[7] for row in rows})
                first, last = (of_rows[0], of_rows[-1]) if of_rows else (0, -1)
                sparse = len(of_rows) <= 500 and last - first + 1 > SPARSE_SPAN * len(of_rows)
                ids_sql = f"IN ({placeholders(conn, len(of_rows))})" if sparse else \
                    f"BETWEEN {placeholders(conn, 1)} AND {placeholders(conn, 1)}"
                wanted = set(of_rows)
                places = [place for place in driver_rows(
                    conn, f"SELECT {PLACE_COLUMNS} FROM runs WHERE id {ids_sql}",
                    of_rows if sparse else (first, last)) if place[0] in wanted]
            else:
                places = driver_rows(conn, _filtered(sa.select(*(
                    r.c[name] for name in PLACE_COLUMNS.split(", "))), r, since, machine, env))
            for place in places:  # a run id that now names another run
                if place[0] in self._facts and self._facts[place[0]].started != place[1]:
                    del self._facts[place[0]]
            facts = self.run_facts(conn, (place[0] for place in places))
            runs = {run_id: RunPlace(started, commit, None if dirty is None else bool(dirty),
                                     machine_of, env_of, torch_version,
                                     facts[run_id].comparable if run_id in facts else None)
                    for run_id, started, commit, dirty, machine_of, env_of, torch_version
                    in places}
        if few:  # (a run deleted since its rows were read goes with them)
            rows = sorted((row for row in rows if row[7] in runs),
                          key=lambda row: (runs[row[7]].started, row[0]))
        elif cases is not None and len(ids) > 500:
            rows.sort(key=lambda row: (row[10], row[0]))
        return [SeriesRow(*row[1:10]) for row in rows], runs

    def history(self, case_id: str, metric: str | None = None) -> list[dict[str, Any]]:
        """One value a run for a case (the median of its samples, and their count), in
        time order, with the run's commit (and whether its tree was dirty), machine, env
        and torch: what regressions are read from. One
        indexed query on (case, metric), joined to runs only."""
        r, res = schema.runs, schema.results
        query = sa.select(res.c.run_id, r.c.started, res.c.metric, res.c.unit, res.c.median,
                          res.c.iqr, res.c.n, r.c.git_commit, r.c.git_dirty, r.c.machine,
                          r.c.env.label("run_env"), r.c.torch_version, res.c.failure
                          ).join(r, r.c.id == res.c.run_id).where(res.c.case_id == case_id)
        if metric is not None:
            query = query.where(res.c.metric == metric)
        with self._reading() as conn:
            found = conn.execute(query.order_by(r.c.started, res.c.id))
            keys = list(found.keys())
            return [dict(zip(keys, row, strict=True)) for row in found]

    def table(self, *, since: str | None = None, machine: str | None = None,
              env: str | None = None, case: str | None = None,
              metric: str | None = None) -> dict[str, list[Any]]:
        """The results as columns (TABLE_COLUMNS, a list each, oldest first), for
        `pandas.DataFrame(store.table())` or `polars.DataFrame(store.table())`."""
        rows = self.results(since=since, machine=machine, env=env, case=case, metric=metric)
        return {column: [row.get(column) for row in rows] for column in TABLE_COLUMNS}

    def run_starts(self) -> dict[int, tuple[str, str | None]]:
        """Each run's id -> its start and end (an id SQLite gave again, after a
        deletion, names a run of another start or end)."""
        r = schema.runs
        with self._reading() as conn:
            return {run: (started, ended) for run, started, ended in
                    driver_rows(conn, sa.select(r.c.id, r.c.started, r.c.ended))}

    def runs_version(self) -> tuple[Any, ...]:
        """What changes when runs are added or deleted: their number, largest id and
        latest start (a deleted run's id given to a new run: its start)."""
        r = schema.runs
        with self._reading() as conn:  # each from an index (one scan of the rows cost more)
            return tuple(conn.execute(sa.select(
                sa.select(sa.func.count(r.c.id)).scalar_subquery(),
                sa.select(sa.func.max(r.c.id)).scalar_subquery(),
                sa.select(sa.func.max(r.c.started)).scalar_subquery())).one())

    def case_versions(self) -> dict[str, tuple[int, int]]:
        """Each case's (number of results, largest result id): it changes whenever a
        result of the case is added or deleted, whatever order writers commit in, unless
        a deletion of the newest results let SQLite give their ids again (see
        run_starts) (one pass over an index: about a second at 10M results)."""
        res = schema.results
        query = sa.select(res.c.case_id, sa.func.count(), sa.func.max(res.c.id)) \
            .group_by(res.c.case_id)
        with self._reading() as conn:
            return {case: (int(count), int(last))
                    for case, count, last in driver_rows(conn, query)}

    def case_titles(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        """Every case's id (or those of `ids` the store holds) -> its one-line name
        (Case.title)."""
        from torchmark.core.result import Case

        c = schema.cases
        query = sa.select(c.c.id, c.c.frontend, c.c.stmt, c.c.label, c.c.sub_label,
                          c.c.description, c.c.threads)
        if ids is not None:
            query = query.where(c.c.id.in_(sorted(set(ids))[:1000]))
        with self._reading() as conn:
            return {row.id: Case(id=row.id, frontend=row.frontend, stmt=row.stmt,
                                 label=row.label, sub_label=row.sub_label,
                                 description=row.description, threads=row.threads).title
                    for row in conn.execute(query)}

    def case_params(self) -> dict[str, dict[str, Any]]:
        """Every case's id -> its parameters (shapes, dtypes, a test's parametrization)."""
        c = schema.cases
        with self._reading() as conn:
            return {row.id: dict(row.params or {})
                    for row in conn.execute(sa.select(c.c.id, c.c.params))}

    def newest_outcomes(self, run_ids: Sequence[int]) -> dict[str, bool]:
        """Each case the runs recorded -> whether its newest result (of any metric, in any
        of them) was measured (True) or failed: what a resume of them reads (a case that
        failed in one of a Ray run's node runs and was measured later is measured)."""
        res = schema.results
        newest = sa.select(res.c.case_id, sa.func.max(res.c.id).label("last")) \
            .where(res.c.run_id.in_(list(run_ids))).group_by(res.c.case_id).subquery()
        query = sa.select(res.c.case_id, res.c.failure.is_(None)) \
            .join(newest, res.c.id == newest.c.last)
        with self._reading() as conn:
            return {case: bool(ok) for case, ok in conn.execute(query)}

    def finished_cases(self, run_id: int) -> set[str]:
        """The ids of the cases a run recorded without failure."""
        res = schema.results
        query = sa.select(res.c.case_id).where(res.c.run_id == run_id,
                                                res.c.failure.is_(None)).distinct()
        with self._reading() as conn:
            return set(conn.execute(query).scalars())

    def reopen_run(self, run_id: int, command: Sequence[str] | None = None) -> None:
        """Mark a stored run running again (resumed), noting when and by which
        `command` line in its tags (`resumed`: a list, oldest first, the last
        RESUMES_KEPT); a StoreError when there is none."""
        from torchmark.core.secrets import mask_argv

        r = schema.runs
        with self.engine.begin() as conn:
            # the run's row locked first (SQLite: the store's write lock), so that of two
            # commands resuming it at once the second sees the first's claim
            conn.execute(r.update().where(r.c.id == run_id).values(status=r.c.status))
            found = conn.execute(sa.select(r.c.tags, r.c.status)
                                 .where(r.c.id == run_id)).first()
            if found is None:
                raise StoreError(f"the store at {self.where} holds no run {run_id} "
                                 "(`torchmark runs` lists them)")
            kept = dict(found[0]) if isinstance(found[0], dict) else {}
            refused = resume_refused(run_id, kept, found[1])
            if refused:
                raise UsageError(refused)
            kept["process"] = this_process()
            before = kept.get("resumed")
            resumes = [x for x in before if isinstance(x, dict)] \
                if isinstance(before, list) else []
            resumes.append({"at": utc_now(), "command": list(mask_argv(command or []))})
            kept["resumed"] = resumes[-RESUMES_KEPT:]
            conn.execute(r.update().where(r.c.id == run_id)
                         .values(status="running", ended=None, tags=kept))

    def result_records(self, *, run: int | None = None, case: str | None = None,
                       metric: str | None = None,
                       cases: Sequence[str] | None = None) -> list[Result]:
        """Stored results as the core's Result records (raw samples, case, provenance of
        their run), oldest first: what the gate and `compare` work on. `cases`: only
        these case ids."""
        from torchmark.core.result import Case, Failure

        r, res = schema.runs, schema.results
        query = _records_query()
        for column, value in ((res.c.run_id, run), (res.c.case_id, case),
                              (res.c.metric, metric)):
            if value is not None:
                query = query.where(column == value)
        query = query.order_by(r.c.started, res.c.id)
        ids = sorted(set(cases)) if cases is not None else None
        out = []
        provenances: dict[int, Provenance | None] = {}  # each run's, parsed once
        with self._reading() as conn:
            if ids is None:
                rows = list(conn.execute(query))
            else:  # bounded IN lists, then in time order again
                rows = [row for start in range(0, len(ids), 500) for row in conn.execute(
                    query.where(res.c.case_id.in_(ids[start:start + 500])))]
                if len(ids) > 500:
                    rows.sort(key=lambda row: (row.started, row.id))
            for row in rows:
                if row.run_id not in provenances:
                    provenances[row.run_id] = self._provenance(conn, row.run_id,
                                                               row.started)
                case_record = Case(id=row.case_id, frontend=row.frontend, stmt=row.stmt,
                                   setup=row.setup, label=row.label, sub_label=row.sub_label,
                                   description=row.description, env=row.env,
                                   threads=row.threads, device=row.device,
                                   params=row.params or {})
                out.append(Result(
                    case=case_record, metric=row.metric, samples=tuple(unpack(row.samples)),
                    number_per_run=int(row.number_per_run), unit=row.unit,
                    warnings=tuple(row.warnings or ()),
                    failure=Failure(row.failure, row.failure_tail or "")
                    if row.failure is not None else None,
                    provenance=provenances[row.run_id], extra=row.extra or {}))
        return out

    def _provenance(self, conn: sa.Connection, run_id: int,
                    started: str) -> Provenance | None:
        """A run's provenance, parsed once for the life of this Store while the run is
        the one that started at `started` (a run's provenance never changes once
        stored; a deleted run's id SQLite gives again starts at another time)."""
        kept = self._provenances.get(run_id)
        if kept is not None and kept[0] == started:
            return kept[1]
        stored = conn.execute(sa.select(schema.runs.c.provenance)
                              .where(schema.runs.c.id == run_id)).scalar()
        provenance = Provenance.from_dict(stored) if stored else None
        with self._caches_lock:  # pages are built in threads
            if len(self._provenances) >= PROVENANCES_KEPT:
                self._provenances.pop(next(iter(self._provenances)))
            self._provenances[run_id] = (started, provenance)
        return provenance

    def iter_runs_results(self, *, since: str | None = None, machine: str | None = None,
                          env: str | None = None) -> Iterator[tuple[RunState, list[Result]]]:
        """Every run's state (how it ended, when, its tags) and results as Result records
        (with its provenance), run by run in the order they started: what `export`
        writes, one run in memory at a time."""
        r = schema.runs
        query = _filtered(sa.select(r.c.id, r.c.status, r.c.ended, r.c.tags), r, since,
                          machine, env).order_by(r.c.started, r.c.id)
        with self._reading() as conn:
            runs = [tuple(row) for row in conn.execute(query)]
        for run_id, status, ended, tags in runs:
            results = self.result_records(run=run_id)
            if results:
                yield RunState(status, ended, tags or {}), results

    def finished_runs(self, *, commit: str | None = None, env: str | None = None,
                      machine: str | None = None, run: int | None = None,
                      status: Sequence[str] = RUN_ENDINGS) -> list[dict[str, Any]]:
        """Runs that ended with one of `status` (by default any ending: a run that failed
        is the newest run as much as one that did not, and its failures are what a side
        naming it holds), newest first (id, started, commit, torch, machine and its
        hostname, env): made at a commit (a prefix of its SHA), with an env label, on a
        machine; or the one run `run`."""
        r, m = schema.runs, schema.machines
        query = sa.select(r.c.id, r.c.started, r.c.git_commit, r.c.torch_version,
                          r.c.machine, m.c.hostname, r.c.env).outerjoin(
            m, m.c.fingerprint == r.c.machine).where(r.c.status.in_(list(status)))
        if run is not None:
            query = query.where(r.c.id == run)
        if commit is not None:
            query = query.where(r.c.git_commit.startswith(commit, autoescape=True))
        query = _filtered(query, r, None, machine, env)
        with self._reading() as conn:
            return [dict(row._mapping) for row in
                    conn.execute(query.order_by(r.c.started.desc(), r.c.id.desc()))]

    def previous_run(self, run_id: int) -> int | None:
        """The run before `run_id` on its machine with its env label that holds a case
        of it (the newest that started before it, among the PREVIOUS_RUNS_LOOKED_AT
        newest), if any: what it is compared with by default."""
        r, res = schema.runs, schema.results
        with self._reading() as conn:
            this = conn.execute(sa.select(r.c.started, r.c.machine, r.c.env)
                                .where(r.c.id == run_id)).first()
            if this is None:
                return None
            started, machine, env = this
            before = conn.execute(sa.select(r.c.id).where(
                r.c.machine == machine, r.c.env.is_(None) if env is None else r.c.env == env,
                sa.or_(r.c.started < started, sa.and_(r.c.started == started,
                                                      r.c.id < run_id)))
                .order_by(r.c.started.desc(), r.c.id.desc())
                .limit(PREVIOUS_RUNS_LOOKED_AT)).scalars().all()
            mine = sa.select(res.c.case_id).where(res.c.run_id == run_id)
            for other in before:
                if conn.execute(sa.select(res.c.id).where(
                        res.c.run_id == other, res.c.case_id.in_(mine)).limit(1)).first():
                    return int(other)
            return None

    def has_run(self, run_id: int) -> bool:
        """Whether the store holds run `run_id`, whatever its status."""
        with self._reading() as conn:
            return conn.execute(sa.select(schema.runs.c.id)
                                .where(schema.runs.c.id == run_id)).first() is not None

    def has_env(self, label: str) -> bool:
        """Whether a run of the store has the env label `label`."""
        r = schema.runs
        with self._reading() as conn:
            return conn.execute(sa.select(r.c.id).where(r.c.env == label).limit(1)) \
                .first() is not None

    def hostnames(self) -> dict[str, str]:
        """Every machine's fingerprint -> its hostname."""
        t = schema.machines
        with self._reading() as conn:
            return {row.fingerprint: row.hostname
                    for row in conn.execute(sa.select(t.c.fingerprint, t.c.hostname))}

    def mark_change(self, *, case_id: str, metric: str, first_bad_run: int, mark: str,
                    note: str = "", machine: str | None = None, env: str | None = None,
                    by: str | None = None) -> None:
        """Record what was said of a detected change (one of CHANGE_MARKS); the newest
        mark of a change is the one that counts."""
        if mark not in CHANGE_MARKS:
            raise ValueError(f"a change's mark must be one of {', '.join(CHANGE_MARKS)}")
        with self.engine.begin() as conn:
            conn.execute(schema.change_marks.insert().values(
                case_id=case_id, metric=metric, first_bad_run=first_bad_run, mark=mark,
                note=note, machine=machine, env=env, by=by, at=utc_now()))

    def change_marks(self) -> dict[tuple[str, str, int], dict[str, Any]]:
        """The newest mark of each change: (case id, metric, first bad run) -> the mark,
        its note, who and when."""
        m = schema.change_marks
        with self._reading() as conn:
            rows = conn.execute(sa.select(m).order_by(m.c.id))
            return {(row.case_id, row.metric, row.first_bad_run): dict(row._mapping)
                    for row in rows}

    def measurements(self, run: int, cases: Sequence[str] | None = None) -> list[Any]:
        """A run's time results (wall or device; `cases`: only these case ids) as
        Measurements (per-run samples back to block times), for Compare and `ab` as saved
        files are."""
        return self.measurements_of(self.results(run=run, samples=True, cases=cases))

    @staticmethod
    def measurements_of(rows: Iterable[dict[str, Any]], failed: bool = False) -> list[Any]:
        """`measurements` of rows `results(samples=True)` gave (a row's setup where it
        has one, else "pass"). `failed`: a failed time result too, as a placeholder of
        one sample whose metadata names its `failure` (what `ab` pairs to say so)."""
        from torchmark.core.task_spec import TaskSpec
        from torchmark.timing.measurement import Measurement

        out = []
        for row in rows:
            failure = row.get("failure") if failed else None
            if row["metric"] not in _QUANTITY_METADATA or not (row["samples"] or failure):
                continue
            spec = TaskSpec(stmt=row["stmt"], setup=row.get("setup") or "pass",
                            label=row["label"],
                            sub_label=row["sub_label"], description=row["description"],
                            env=row["run_env"], num_threads=row["threads"])
            number = int(row["number_per_run"])
            # the quantity (docs/gpu.md) kept, so Compare never merges two of one case;
            # and the processes of a run over several (`ab` compares by them)
            metadata = dict(_QUANTITY_METADATA[row["metric"]] or {})
            metadata["case_id"] = row["case_id"]  # which stored case (its A/A history)
            if row.get("build"):  # its run's build (verdicts/engine.py: one build)
                metadata["build"] = row["build"]
            kept = (row.get("extra") or {}).get("metadata")
            if isinstance(kept, dict) and isinstance(kept.get("processes"), dict):
                metadata["processes"] = kept["processes"]
            stated = (row.get("extra") or {}).get(STATED)
            if stated is not None:  # another tool's statistics: what `ab` compares too
                metadata[STATED] = stated
            if failure:
                metadata["failure"] = failure
            out.append(Measurement(number, [s * number for s in row["samples"]] if not failure
                                   else [1.0], spec, metadata))
        return rows_told_apart(out)

    @classmethod
    def measurements_of_results(cls, results: Iterable[Result],
                                failed: bool = False) -> list[Any]:
        """`measurements` of Result records (result_records, or a side of the store);
        `failed`: as measurements_of, for a case of no measured result among them."""
        from torchmark.core.result import unmeasured_failures

        results = list(results)
        shown = {id(r) for r in unmeasured_failures(results)} if failed else set()
        kept = [r for r in results if r.failure is None or id(r) in shown]
        return cls.measurements_of((
            {"metric": r.metric, "samples": list(r.samples), "stmt": r.case.stmt,
             "setup": r.case.setup,
             "label": r.case.label, "sub_label": r.case.sub_label,
             "description": r.case.description,
             "run_env": r.provenance.env if r.provenance is not None else r.case.env,
             "threads": r.case.threads, "number_per_run": r.number_per_run,
             "case_id": r.case.id, "extra": r.extra,
             "build": r.provenance.build if r.provenance is not None else None,
             "failure": r.failure.error if r.failure is not None else None}
            for r in kept), failed)

    def info(self) -> dict[str, Any]:
        """Where the store is, its schema, size (a SQLite file's, a PostgreSQL
        database's) and counts."""
        out: dict[str, Any] = {"url": self.where, "dialect": self.dialect,
                               "schema": self.schema_version()}
        with self._reading() as conn:
            for table in (schema.runs, schema.cases, schema.results, schema.machines):
                out[table.name] = conn.execute(
                    sa.select(sa.func.count()).select_from(table)).scalar()
            if self.dialect == "postgresql":
                out["bytes"] = conn.execute(sa.text(
                    "SELECT pg_database_size(current_database())")).scalar()
                return out
        path = self.engine.url.database if self.dialect == "sqlite" else None
        out["bytes"] = Path(path).stat().st_size if path and Path(path).exists() else None
        return out

    # -- maintenance ----------------------------------------------------------------------
    def delete_runs(self, run_ids: Sequence[int]) -> int:
        """Remove these runs, their results, packed medians (and the key lists no run
        holds any more) and what was said of their changes, in one transaction; how many
        runs there were."""
        ids = sorted(set(run_ids))
        r, res, marks = schema.runs, schema.results, schema.change_marks
        deleted = 0
        with self.engine.begin() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                conn.execute(marks.delete().where(marks.c.first_bad_run.in_(chunk)))
                conn.execute(schema.run_medians.delete()
                             .where(schema.run_medians.c.run_id.in_(chunk)))
                conn.execute(res.delete().where(res.c.run_id.in_(chunk)))
                deleted += conn.execute(r.delete().where(r.c.id.in_(chunk))).rowcount
            keys = schema.median_keys  # the key lists no run holds any more
            conn.execute(keys.delete().where(keys.c.digest.not_in(
                sa.select(schema.run_medians.c.key_digest))))
        return deleted

    def runs_before(self, moment: str) -> list[int]:
        """The ids of the runs that started before `moment` (a date or an ISO time)."""
        r = schema.runs
        with self._reading() as conn:
            return list(conn.execute(
                sa.select(r.c.id).where(r.c.started < time_bound(moment, "--before"))
                .order_by(r.c.id)).scalars())

    def backup(self, path: str | os.PathLike) -> Path:
        """A consistent copy of a SQLite store at `path` (a new file), taken with
        SQLite's online backup API: what the write-ahead log holds is in it, and writers
        may go on meanwhile. A PostgreSQL store is backed up with pg_dump."""
        import sqlite3

        if self.dialect != "sqlite" or not self.engine.url.database:
            raise StoreError(f"the store at {self.where} is {self.dialect}: back it up with "
                             "pg_dump (pg_dump -Fc -f store.dump DBNAME), or copy it with "
                             "`torchmark export`")
        target = Path(path)
        if target.exists():
            raise UsageError(f"{target}: already exists; give a new file for the backup")
        source = sqlite3.connect(self.engine.url.database)
        try:
            copy = sqlite3.connect(target)
            try:
                source.backup(copy)
            finally:
                copy.close()
        finally:
            source.close()
        return target

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rows_told_apart(measurements: list[Any]) -> list[Any]:
    """Measurements of different cases that one Compare cell would merge (tests of one
    name in two files under one group) with their case id after their row's name."""
    import dataclasses

    def cell(m: Any) -> tuple[Any, ...]:
        spec = m.task_spec
        return (spec.label, spec.sub_label or spec.stmt, spec.description, spec.env,
                spec.num_threads, m.metadata.get("clock"))

    cases: dict[tuple[Any, ...], set[str]] = {}
    for m in measurements:
        cases.setdefault(cell(m), set()).add(m.metadata["case_id"])
    return [m if len(cases[cell(m)]) < 2 else type(m)(
        m.number_per_run, m.raw_times, dataclasses.replace(
            m.task_spec, sub_label=f"{m.task_spec.sub_label or m.task_spec.stmt} "
                                   f"({m.metadata['case_id']})"), m.metadata)
        for m in measurements]


def time_bound(text: str, name: str = "--since") -> str:
    """A date (2026-11-01) or an ISO time with its offset as the store's UTC text;
    anything else is a usage error naming the option (or parameter) `name`."""
    try:
        if "T" in text:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if moment.tzinfo is None:  # no offset: UTC, as the store keeps times
                moment = moment.replace(tzinfo=dt.timezone.utc)
            return _utc_text(moment)  # its fraction of a second and offset kept
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{name} {text!r}: expected a date (2026-11-01) or an ISO time "
                         "(2026-11-01T09:00:00+00:00)") from None
    except OverflowError:  # 9999-12-31T23:00:00-05:00 in UTC
        raise UsageError(f"{name} {text!r}: beyond the times a store holds (years 1 to "
                         "9999 in UTC)") from None


def _day_after(date: str) -> str:
    """The day after a date (2026-11-01), as the store's times compare with it; past the
    last day a date can name, a text every time sorts before."""
    try:
        return (dt.date.fromisoformat(date) + dt.timedelta(days=1)).isoformat()
    except OverflowError:
        return "9999-12-31U"  # after any "9999-12-31T..."


def _json(value: Any) -> dict[str, Any]:
    """A JSON column's object (drivers give text or the decoded value); {} otherwise."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _filtered(query: Any, runs: sa.Table, since: str | None, machine: str | None,
              env: str | None) -> Any:
    if since is not None:  # a date, or a time with its offset
        query = query.where(runs.c.started >= time_bound(since))
    if machine is not None:  # a fingerprint, its first characters as listed, or a hostname
        query = query.where(sa.or_(runs.c.machine == machine,
                                   runs.c.machine.startswith(machine, autoescape=True)
                                   if len(machine) >= 4 else sa.false(),
                                   runs.c.machine.in_(sa.select(schema.machines.c.fingerprint)
                                                      .where(schema.machines.c.hostname ==
                                                             machine))))
    if env is not None:
        query = query.where(runs.c.env == env)
    return query


@functools.cache
def _records_query() -> sa.Select:
    """What Store.result_records selects, before its filters: built once (the pages of
    a comparison ask it twice)."""
    r, res, c = schema.runs, schema.results, schema.cases
    return sa.select(res.c.case_id, res.c.metric, res.c.unit, res.c.number_per_run,
                     res.c.samples, res.c.warnings, res.c.failure, res.c.failure_tail,
                     res.c.extra, res.c.env, c.c.frontend, c.c.stmt, c.c.setup, c.c.label,
                     c.c.sub_label, c.c.description, c.c.threads, c.c.device, c.c.params,
                     res.c.run_id, r.c.started, res.c.id
                     ).join(r, r.c.id == res.c.run_id).join(c, c.c.id == res.c.case_id)


def _engine(url: str, lock_wait: list[float]) -> sa.Engine:
    """The engine of `url`; a SQLite store's connections wait up to `lock_wait[0]`
    seconds (read at each checkout) for another process's write lock. JSON columns are
    read by orjson (a comparison page reads some 300 of them; json's parser took 4 ms of
    its 34), json's parser taking what orjson refuses (core/jsonl.py loads)."""
    from torchmark.core.jsonl import loads

    if url.startswith("sqlite"):
        path = sa.engine.make_url(url).database
        if path and path != ":memory:":
            if os.path.exists(path) and not os.path.isfile(path):
                raise StoreError(f"{path}: not a regular file; a SQLite store is a file "
                                 "(give a file path or a postgresql+psycopg:// URL)")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": LOCK_WAIT_S},
                                  json_deserializer=loads)

        @sa.event.listens_for(engine, "connect")
        def _pragmas(connection: Any, record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
            cursor.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at each checkpoint
            cursor.execute("PRAGMA cache_size=-65536")  # 64 MiB: an import's index pages
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @sa.event.listens_for(engine, "checkout")
        def _lock_wait(connection: Any, record: Any, proxy: Any) -> None:
            cursor = connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={int(lock_wait[0] * 1000)}")
            cursor.close()

        return engine
    engine = sa.create_engine(url, json_deserializer=loads)

    # a connection that sat in the pool is pinged before use (the server may have closed
    # it); one given back a moment ago is not: a page takes and returns one several
    # times, and pinging at each checkout cost a round trip each
    @sa.event.listens_for(engine, "checkin")
    def _returned(connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def _ping_if_idle(connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_S:
            return  # a new connection, or one just used
        try:
            alive = engine.dialect.do_ping(connection)
        except engine.dialect.loaded_dbapi.Error as e:  # a connection the server closed
            raise sa.exc.DisconnectionError(str(e)) from e
        if not alive:
            raise sa.exc.DisconnectionError("the connection did not answer a ping")

    return engine


def open(url: str | None = None) -> Store:  # noqa: A001 (torchmark.store.open)
    """The store at `url` (see resolve_url), created or upgraded as needed."""
    return Store(url)
