"""The changes detected across the store (regressions/rescan.py: history.scan's changes,
kept current), for the regressions feed and the case pages: computed on first use, then
again in a background thread when the store's results have changed (their largest id,
the number of runs), checked at most every REFRESH_S; a request meanwhile gets the last
computation, which says when it was made. Marks (acknowledged, dismissed, ...) are read
apart and applied in this process: a mark never starts a detection.

The detection runs in a child process (`python -m torchmark.server.changes_cache`, at a
lower priority than the server, its chunks of cases read and detected in a process a
core, rescan.DETECT_WORKERS at most): the first one reads every result (minutes at 10M results
on two cores), and reading rows holds the interpreter lock for seconds at a time, which
would stall every request (and uvicorn's health checks) of a server that detected in a
thread. The child writes its state
(pickled) to a file in this user's private folder (core/private_folder.py: 0700, nobody
else can write it), under a file lock; every process of one `serve --workers N` reads
that file when it is at the store's current version, so the store is read once; the
next child starts from that state and detects again only the cases whose results
changed."""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

FORMAT = 3  # the detection file's layout
REFRESH_S = 5.0
DETECT_NICENESS = 10
FORGET_AFTER_S = 7 * 24 * 3600.0  # another store's detection unused this long: removed
LOCK_WAIT_S = 3600.0  # another process's scan of a large store, at most


class ChangesCache:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.loading = threading.Lock()  # one load at a time: the newest wins
        self.detected: Sequence[Any] | None = None  # the changes, without marks
        self.changes: Sequence[Any] | None = None  # and with them
        self.version: tuple[Any, ...] | None = None
        self.marks_version: tuple[Any, ...] | None = None
        self.computed_at = 0.0
        self.seconds = 0.0  # how long the detection took
        self.cases = 0  # and how many cases it detected again
        self.series_checked: dict[str, int] = {}  # what it checked (StoreDetection.checked)
        self.started_at = 0.0  # when it began: it holds what the store held then
        self.checked = 0.0
        self.refreshing = False
        self.url = _absolute(store.url)  # the same store from any folder
        self.path = _shared_path(self.url)

    def store_version(self) -> tuple[Any, ...]:
        """The store's newest result and its runs' version (Store.runs_version): what a
        new detection depends on."""
        from torchmark.store import schema

        with self.store.engine.connect() as conn:
            newest = conn.execute(sa.select(sa.func.max(schema.results.c.id))).scalar()
        return (newest, *self.store.runs_version())

    def _marks_version(self) -> tuple[Any, ...]:
        from torchmark.store import schema

        marks = schema.change_marks.c.id
        with self.store.engine.connect() as conn:
            return tuple(conn.execute(sa.select(sa.func.max(marks), sa.func.count(marks)))
                         .one())

    def _marked(self, detected: Sequence[Any] | None = None) -> None:
        """Hold `detected` (a new detection) with the store's marks applied; without
        it, apply them again to the detection held, when they changed."""
        from torchmark.regressions.history import with_marks

        version = self._marks_version()
        held = detected is None
        with self.lock:
            if held:
                detected = self.detected
                if detected is None or version == self.marks_version:
                    return
        assert detected is not None
        marked = with_marks(detected, self.store)
        with self.lock:
            if not held or self.detected is detected:
                self.detected, self.changes, self.marks_version = detected, marked, version

    def _load(self, version: tuple[Any, ...]) -> None:
        """The detection at `version`: the shared file's when it holds that version,
        else a new one (written to the file for the other processes)."""
        from filelock import FileLock

        with self.loading, FileLock(str(self.path) + ".lock", timeout=LOCK_WAIT_S):
            if self.version == version and self.detected is not None:
                return  # another thread loaded it meanwhile
            found = _read(self.path)
            if found is None or found["version"] != version:
                _scan_in_child(self.url, self.path, version)
                found = _read(self.path)
            if found is None:
                raise RuntimeError("detecting the store's changes failed (see the "
                                   "server's log)")
            self._marked(found["changes"])
            with self.lock:
                self.version = version
                self.computed_at, self.seconds = found["computed_at"], found["seconds"]
                self.started_at, self.cases = found["started_at"], found["cases"]
                self.series_checked = found["checked"]

    def get(self) -> tuple[Sequence[Any], dict[str, Any]]:
        """The changes, and how current they are."""
        now = time.monotonic()
        if self.detected is None:
            self._load(self.store_version())
            self.checked = now
        elif now - self.checked >= REFRESH_S:
            self.checked = now
            self._marked()
            version = self.store_version()
            with self.lock:
                start = version != self.version and not self.refreshing
                if start:
                    self.refreshing = True
            if start:
                threading.Thread(target=self._background, args=(version,),
                                 daemon=True).start()
        assert self.changes is not None
        return self.changes, {"computed_at": self.computed_at, "started_at": self.started_at,
                              "scan_seconds": self.seconds,
                              "cases_detected": self.cases, "checked": self.series_checked,
                              "refreshing": self.refreshing}

    def _background(self, version: tuple[Any, ...]) -> None:
        try:
            self._load(version)
        finally:
            self.refreshing = False

    def marks_changed(self) -> None:
        """Apply the marks again now (after this server stored one)."""
        self._marked()


def _scan_in_child(url: str, path: Path, version: tuple[Any, ...]) -> None:
    """Detect in a child process that writes the detection at `version` to `path`,
    starting from the state there (the store's URL passed in its environment, never on
    its command line, where `ps` would show a password)."""
    import json
    import subprocess
    import sys

    from torchmark.core.worker import NEUTRAL_CWD
    # started in the neutral folder (`python -m` puts its folder first on the import
    # path: never the user's), torchmark found where this process found it
    env = dict(os.environ, TORCHMARK_SERVE_DB=url,
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    subprocess.run([sys.executable, "-m", "torchmark.server.changes_cache", str(path),
                    json.dumps(list(version))], env=env, cwd=NEUTRAL_CWD, check=False,
                   timeout=LOCK_WAIT_S)


def scan_to(path: Path, version: tuple[Any, ...]) -> None:
    """The child's work: bring the detection in `path` (a new one when there is none)
    up to the store at $TORCHMARK_SERVE_DB, write it back."""
    from torchmark.regressions.rescan import DETECT_WORKERS, StoreDetection
    from torchmark.store import open as open_store

    os.nice(DETECT_NICENESS)  # the server's requests first
    store = open_store(os.environ["TORCHMARK_SERVE_DB"])
    started_at, start = time.time(), time.perf_counter()
    previous = _read(path)
    detection = previous.get("detection") if previous else None
    if not isinstance(detection, StoreDetection):
        detection = StoreDetection()
    cases = detection.update(store, workers=min(os.cpu_count() or 1, DETECT_WORKERS))
    _write(path, {"format": _format(), "version": version,
                  "changes": detection.changes(improvements=True),
                  "detection": detection, "cases": cases, "checked": detection.checked(),
                  "started_at": started_at,
                  "computed_at": time.time(),
                  "seconds": time.perf_counter() - start})
    from torchmark.core.atomic_files import write_atomically
    from torchmark.store.store import sqlite_path

    database = sqlite_path(store.url)
    if database is not None:  # _forget_old removes the detection once the file is gone
        try:
            write_atomically(f"{path}.store", str(database.resolve()))
        except OSError:
            pass


def _absolute(url: str) -> str:
    """A SQLite URL with its file's whole path (the child starts in another folder, and
    two folders' `sqlite:///results.db` are two stores); other URLs as they are."""
    from torchmark.store.store import sqlite_path

    database = sqlite_path(url)
    if database is None:
        return url
    return sa.engine.make_url(url).set(database=str(database.resolve())) \
        .render_as_string(hide_password=False)


def _shared_path(url: str) -> Path:
    """Where the processes serving the store at `url` share its detection."""
    from torchmark.core.private_folder import private_folder

    key = hashlib.sha256(url.encode()).hexdigest()[:20]
    return private_folder() / f"serve-changes-{os.getuid()}-{key}.pickle"


def _format() -> tuple[int, str]:
    """What wrote a detection file: its layout and torchmark's version (another
    version's detection is not reused: its detect may differ)."""
    from torchmark import __version__

    return FORMAT, __version__


def _read(path: Path) -> dict[str, Any] | None:
    """The shared detection, when the file is this user's own (in the private folder,
    not a link, not writable by others) and of this torchmark (_format); None
    otherwise."""
    try:
        info = os.lstat(path)
        if info.st_uid != os.getuid() or info.st_mode & 0o022 or not path.is_file():
            return None
        with open(path, "rb") as f:
            found = pickle.load(f)  # noqa: S301 (this user's own file: see above)
    except Exception:  # noqa: BLE001 (damaged, or of classes since changed: detect again)
        return None
    return found if isinstance(found, dict) and found.get("format") == _format() and \
        "version" in found else None


def _write(path: Path, found: dict[str, Any]) -> None:
    """Replace the shared detection atomically (a reader never sees half a file)."""
    from torchmark.core.atomic_files import write_atomically

    try:
        write_atomically(path, pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL))
    except (OSError, pickle.PicklingError, TypeError):
        pass  # the others scan for themselves
    _forget_old(path.parent)


def _forget_old(folder: Path) -> None:
    """Remove the detections (and their locks) of stores no server has served for
    FORGET_AFTER_S, and at once those of SQLite files that no longer exist (their
    `.store` beside them names the file): each store ever served leaves one."""
    cutoff = time.time() - FORGET_AFTER_S
    for old in folder.glob(f"serve-changes-{os.getuid()}-*.pickle"):
        beside = Path(f"{old}.store")
        try:
            gone = beside.is_file() and not Path(beside.read_text(encoding="utf-8")).exists()
            if gone or old.lstat().st_mtime < cutoff:
                old.unlink()
                Path(f"{old}.lock").unlink(missing_ok=True)
                beside.unlink(missing_ok=True)
        except OSError:
            pass


if __name__ == "__main__":
    import json
    import sys

    scan_to(Path(sys.argv[1]), tuple(json.loads(sys.argv[2])))
