"""Recording a command's results into the store as they come.

A RunRecorder starts a run when entered (its provenance captured then, unless given),
stores each batch of results in its own transaction as the command produces them (so an
interrupted run keeps every finished result), and marks the run ok, failed or
interrupted when left. With recording off (--no-store, TORCHMARK_NO_STORE=1) it does
nothing. A store that cannot be opened or written is said once on stderr and the
command goes on: its file outputs still hold the results."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from torchmark.core.provenance import Provenance
from torchmark.core.result import Result


class RunRecorder:
    def __init__(self, db: str | None = None, *, enabled: bool = True,
                 tags: dict[str, Any] | None = None,
                 command: list[str] | None = None, resume_run: int | None = None,
                 provenance: Provenance | None = None, env: str | None = None) -> None:
        from torchmark.store.store import recording_off

        self.db, self.tags, self.command = db, dict(tags or {}), command
        self.provenance = provenance  # the run's, when captured earlier than entering
        self.env = env  # the run's env label (default: $TORCHMARK_ENV)
        self.resume_run = resume_run  # record into this stored run (resumed)
        self.enabled = enabled and not recording_off()
        self.store: Any = None
        self.run_id: int | None = None
        self.recorded = 0
        self.status: str | None = None  # the run's end, when the command knows it better

    def __enter__(self) -> RunRecorder:
        if self.enabled:
            try:
                from torchmark.store.store import Store

                self.store = Store(self.db)
                if self.resume_run is not None:
                    self.store.reopen_run(self.resume_run)
                    self.run_id = self.resume_run
                else:
                    self.provenance = self.provenance or Provenance.capture(
                        env=self.env, command=self.command)
                    self.run_id = self.store.start_run(self.provenance, tags=self.tags)
            except Exception as e:  # the store is optional to the measurement itself
                self._give_up(e)
        return self

    def add(self, results: Iterable[Result]) -> None:
        """Store these results now, in one transaction."""
        if self.store is None or self.run_id is None:
            return
        results = list(results)
        try:
            self.recorded += self.store.record(results, self.run_id)
        except Exception as e:
            self._give_up(e)

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if self.store is None or self.run_id is None:
            return
        status = self.status or ("ok" if kind is None else
                                 "interrupted" if issubclass(kind, KeyboardInterrupt)
                                 else "failed")
        try:
            self.store.finish_run(self.run_id, status)
        except Exception as e:
            self._give_up(e)
        finally:
            if self.store is not None:
                self.store.close()

    def _give_up(self, error: BaseException) -> None:
        from torchmark.core.errors import error_line

        where = getattr(self.store, "where", self.db or "the default store")
        sys.stderr.write(f"torchmark: note: results not recorded in the store ({where}): "
                         f"{error_line(error)}\n")
        if self.store is not None:
            self.store.close()
        self.store, self.run_id = None, None
