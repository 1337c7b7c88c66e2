"""The changes detected across the store (regressions/history.py scan), kept current for
the regressions feed: computed once on first use, then again in a background thread
when the store has changed (a new result or mark: their largest ids), at most every
REFRESH_S; a request meanwhile gets the last computation, which says when it was made."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

REFRESH_S = 5.0


class ChangesCache:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.changes: Sequence[Any] | None = None
        self.version: tuple[Any, ...] | None = None
        self.computed_at = 0.0
        self.seconds = 0.0  # how long the last scan took
        self.checked = 0.0
        self.refreshing = False

    def store_version(self) -> tuple[Any, ...]:
        """The store's newest result and mark (their ids): what a new scan depends on."""
        from torchmark.store import schema

        with self.store.engine.connect() as conn:
            return (conn.execute(sa.select(sa.func.max(schema.results.c.id))).scalar(),
                    conn.execute(sa.select(sa.func.max(schema.change_marks.c.id))).scalar(),
                    conn.execute(sa.select(sa.func.count(schema.change_marks.c.id))).scalar())

    def _scan(self, version: tuple[Any, ...]) -> None:
        from torchmark.regressions.history import scan

        start = time.perf_counter()
        changes = scan(self.store, improvements=True)
        with self.lock:
            self.changes, self.version = changes, version
            self.computed_at, self.seconds = time.time(), time.perf_counter() - start
            self.refreshing = False

    def get(self) -> tuple[Sequence[Any], dict[str, Any]]:
        """The changes, and how current they are."""
        now = time.monotonic()
        if self.changes is None:
            with self.lock:
                first = self.changes is None
            if first:
                self._scan(self.store_version())
        elif now - self.checked >= REFRESH_S and not self.refreshing:
            self.checked = now
            version = self.store_version()
            if version != self.version:
                self.refreshing = True
                threading.Thread(target=self._background, args=(version,),
                                 daemon=True).start()
        assert self.changes is not None
        return self.changes, {"computed_at": self.computed_at, "scan_seconds": self.seconds,
                              "refreshing": self.refreshing}

    def _background(self, version: tuple[Any, ...]) -> None:
        try:
            self._scan(version)
        finally:
            self.refreshing = False

    def invalidate(self) -> None:
        """Scan again now (after this server stored a mark)."""
        self._scan(self.store_version())
