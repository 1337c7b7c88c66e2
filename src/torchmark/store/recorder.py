"""Recording a command's results into the store as they come.

A RunRecorder starts a run when entered (its provenance captured then, unless given),
stores each batch of results in its own transaction as the command produces them (so an
interrupted run keeps every finished result), and marks the run ok, failed or
interrupted when left. With recording off (--no-store, TORCHMARK_NO_STORE=1) it does
nothing. A store that cannot be opened or written is said once on stderr and the
command goes on: its file outputs still hold the results.

A SQLite store whose write lock another process holds for long (an import of a large
file) loses nothing: the run's start and results wait in memory, tried again (for a
second) with a new batch at most every BUSY_RETRY_S, and at the end for up to
TORCHMARK_STORE_WAIT seconds (default 600); still refused then (or on Ctrl-C during that
wait, or when the store fails otherwise), they are written to a new results file beside
the store (`torchmark import` stores them), and stderr says where.

Results that carry the provenance of another machine (measured on a Ray node) go to a
run of that machine, one a machine, tagged `cluster_run` with this run's id, so that a
history never mixes machines; they end as this run ends, and --resume-run continues
them too."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torchmark.core.provenance import Provenance
from torchmark.core.result import Result

BUSY_TRY_S = 1.0  # a try to write, while the store is found busy, waits this long
BUSY_RETRY_S = 30.0  # and is made this long after the last one, at the soonest
DEFAULT_STORE_WAIT_S = 600.0  # at the end, for the store's write lock (TORCHMARK_STORE_WAIT)


def store_wait() -> float:
    """TORCHMARK_STORE_WAIT (seconds to wait for the store's write lock, >= 0), else
    DEFAULT_STORE_WAIT_S."""
    from torchmark.core.bounded_input import env_seconds

    return env_seconds("TORCHMARK_STORE_WAIT", DEFAULT_STORE_WAIT_S)


class RunRecorder:
    def __init__(self, db: str | None = None, *, enabled: bool = True,
                 tags: dict[str, Any] | None = None,
                 command: list[str] | None = None, resume_run: int | None = None,
                 provenance: Provenance | None = None, env: str | None = None,
                 resumable: bool = False) -> None:
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
        self.machine: str | None = None  # the run's machine fingerprint
        self.node_runs: dict[str, int] = {}  # another machine's fingerprint -> its run
        self.resumable = resumable  # the command takes --resume-run: an interrupt says so
        self.pending: list[Result] = []  # results waiting for the store's write lock
        self.busy = False  # a write found the store's write lock held (see is_locked)
        self.next_try = 0.0  # while busy: when add tries again (time.monotonic)
        self.spilled: Path | None = None  # the file results went to when the store failed
        self.reopening = False  # the resumed runs are still to be reopened
        # a write a Ctrl-C cut short: it may have been stored before the Ctrl-C came
        self.in_doubt = False

    def __enter__(self) -> RunRecorder:
        if self.enabled:
            store_wait()  # a bad TORCHMARK_STORE_WAIT is said before anything is measured
            from torchmark.core.errors import UsageError
            from torchmark.store.store import this_process

            try:
                from torchmark.store.store import RUN_STATUSES, Store

                self.store = Store(self.db)
                if self.resume_run is not None:
                    self.run_id = self.resume_run
                    self.machine = self.store.finished_runs(
                        run=self.resume_run, status=RUN_STATUSES)[0]["machine"]
                    self.provenance = self.provenance or _stored_provenance(
                        self.store, self.resume_run)
                    self.node_runs = node_runs(self.store, self.resume_run)
                    self.reopening = True
                    self._flush(BUSY_TRY_S)  # reopened (or when the store is free)
                else:
                    if self.provenance is None:
                        _import_torch()
                    self.provenance = self.provenance or Provenance.capture(
                        env=self.env, command=self.command)
                    self.machine = self.provenance.machine_fingerprint
                    self.tags.setdefault("process", this_process())  # who runs it
                    self._flush(BUSY_TRY_S)  # the run started (or when the store is free)
            except UsageError:  # a run another process is running: not resumed twice
                if self.store is not None:
                    self.store.close()
                raise
            except Exception as e:  # the store is optional to the measurement itself
                self._give_up(e)
        return self

    def add(self, results: Iterable[Result]) -> None:
        """Store these results now, in one transaction (later, when the store's write
        lock is held by another process: see the module docstring)."""
        if self.store is None:
            if self.spilled is not None:  # the store was left: the rest go where the
                self._spill_more(list(results))  # first of them went
            return
        self.pending += list(results)
        if self.busy and time.monotonic() < self.next_try:
            return
        from torchmark.core.errors import UsageError

        try:
            self._flush(BUSY_TRY_S)
        except UsageError:  # a resumed run another process runs (found late): refused
            self._spill("the run is another process's")
            raise
        except Exception as e:
            self._give_up(e)

    def _spill_more(self, results: list[Result]) -> None:
        """Results after the store was left, appended to the file the first went to."""
        from torchmark.core.results_file import save_results

        assert self.spilled is not None
        try:
            save_results(self.spilled, [self._provenanced(r) for r in results])
        except Exception as e:
            sys.stderr.write(f"torchmark: note: {len(results)} result(s) not recorded "
                             f"in the store, nor written to {self.spilled}: {e}\n")

    def _flush(self, wait: float, status: str | None = None) -> bool:
        """Start the run if it is not yet (or reopen the runs resumed), store the
        pending results and, given a `status`, end the runs with it; each write waiting up to `wait` seconds for the
        store's write lock: whether all was done. A lock held longer leaves the rest
        for later (said once)."""
        from torchmark.store.store import is_locked

        try:
            with self.store.lock_wait(wait):
                if self.run_id is None:
                    self.run_id = self.store.start_run(self.provenance, tags=self.tags)
                if self.reopening:
                    for run_id in (self.run_id, *self.node_runs.values()):
                        self.store.reopen_run(run_id, self.command)
                    self.reopening = False
                runs: dict[int, list[Result]] = {}
                for result in self.pending:
                    runs.setdefault(self._run_of(result), []).append(result)
                for run_id, batch in runs.items():  # a run's batch: one transaction
                    stored = self.store.held_in_run(run_id, batch) if self.in_doubt else []
                    self.in_doubt = True  # until the pending results say what it stored
                    held = {id(r) for r in stored}
                    left = [r for r in batch if id(r) not in held]
                    self.recorded += len(stored) + (self.store.record(
                        left, run_id, replace_failed=self.resume_run is not None)
                        if left else 0)
                    done = {id(r) for r in batch}
                    self.pending = [r for r in self.pending if id(r) not in done]
                    self.in_doubt = False
                if status is not None:
                    for run_id in (self.run_id, *self.node_runs.values()):
                        self.store.finish_run(run_id, status)
        except Exception as e:
            if not is_locked(e):
                raise
            if not self.busy:
                sys.stderr.write("torchmark: note: the store is busy (another process holds "
                                 "its write lock, an import say): results are kept and "
                                 "recorded when it is free\n")
            self.busy, self.next_try = True, time.monotonic() + BUSY_RETRY_S
            return False
        self.busy = False
        return True

    def _run_of(self, result: Result) -> int:
        """This run, or the run of the other machine that measured `result`."""
        assert self.run_id is not None
        provenance = result.provenance
        if provenance is None or provenance.machine_fingerprint == self.machine:
            return self.run_id
        machine = provenance.machine_fingerprint
        if machine not in self.node_runs:  # labelled as this run is (--env)
            self.node_runs[machine] = self.store.start_run(
                self._labelled(provenance), tags={**self.tags, "cluster_run": self.run_id})
        return self.node_runs[machine]

    def _labelled(self, provenance: Provenance) -> Provenance:
        """Another machine's provenance with this run's env label (--env), if given."""
        return dataclasses.replace(provenance, env=self.env) if self.env is not None \
            else provenance

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if self.store is None:
            return
        status = self.status or ("ok" if kind is None else
                                 "interrupted" if issubclass(kind, KeyboardInterrupt)
                                 else "failed")
        try:
            if not (self._flush(BUSY_TRY_S, status) or self._wait_for_store(status)):
                return
            if status == "interrupted" and self.resumable:
                sys.stderr.write(f"torchmark: run {self.run_id} keeps the results it "
                                 f"finished; the same command with --resume-run "
                                 f"{self.run_id} runs the rest\n")
        except Exception as e:
            self._give_up(e)
        finally:
            if self.store is not None:
                self.store.close()

    def _wait_for_store(self, status: str) -> bool:
        """_flush tried for up to store_wait() seconds; else (or on Ctrl-C meanwhile)
        the pending results written to a results file (_spill): whether all was done."""
        wait = store_wait()
        sys.stderr.write(f"torchmark: waiting up to {wait:g} s for the store's write lock "
                         "(TORCHMARK_STORE_WAIT); Ctrl-C writes the results to a file "
                         "instead\n")
        deadline = time.monotonic() + wait
        try:
            while True:
                left = deadline - time.monotonic()
                if self._flush(max(0.0, min(BUSY_TRY_S, left)), status):  # Ctrl-C: 1 s
                    sys.stderr.write(f"torchmark: the store is free again: run "
                                     f"{self.run_id} recorded\n")
                    return True
                if left <= 0:
                    break
        except KeyboardInterrupt:
            self._spill("the wait was interrupted")
            raise
        self._spill(f"the store stayed busy for TORCHMARK_STORE_WAIT ({wait:g} s)")
        return False

    def _spill(self, why: str) -> None:
        """The pending results, each with its run's provenance, in a new results file
        beside the store (else in the working folder), said on stderr with `why`; and
        the store left."""
        started = f"run {self.run_id} stays \"running\" in the store" \
            if self.run_id is not None else ""
        if self.pending:
            results = [self._provenanced(r) for r in self.pending]
            try:
                path = self.spilled = _spill_file(self.db, results)
            except Exception as e:  # nowhere to write: said, as a store that failed
                sys.stderr.write(f"torchmark: note: {len(results)} result(s) not recorded "
                                 f"in the store, nor written to a file: {e}\n")
            else:
                sys.stderr.write(f"torchmark: {why}: {len(results)} result(s) written to "
                                 f"{path} instead (and any that follow); `torchmark "
                                 f"import {path}` stores them"
                                 + (f" (as a run of their own; {started}, with the "
                                    "results recorded before)" if started else "") + "\n")
            self.pending = []
        elif started:
            sys.stderr.write(f"torchmark: note: {why}: {started} (its results are all "
                             "there; only its end could not be recorded)\n")
        if self.store is not None:
            self.store.close()
        self.store, self.run_id = None, None

    def _provenanced(self, result: Result) -> Result:
        """A pending result with the provenance its run has (this run's, or another
        machine's labelled as this run is)."""
        if result.provenance is None:
            return result if self.provenance is None else \
                dataclasses.replace(result, provenance=self.provenance)
        if result.provenance.machine_fingerprint != self.machine:
            return dataclasses.replace(result, provenance=self._labelled(result.provenance))
        return result

    def _give_up(self, error: BaseException) -> None:
        from torchmark.core.errors import error_line
        from torchmark.core.secrets import mask

        where = getattr(self.store, "where", mask(self.db) if self.db else "the default store")
        sys.stderr.write(f"torchmark: note: results not recorded in the store ({where}): "
                         f"{mask(error_line(error))}\n")
        if self.pending:  # what the store did not take is not lost
            self._spill("the store failed")
        if self.store is not None:
            self.store.close()
        self.store, self.run_id = None, None


def _stored_provenance(store: Any, run_id: int) -> Provenance | None:
    """The provenance stored run `run_id` was captured with (None if unreadable)."""
    stored = store.run_provenance(run_id)
    try:
        return Provenance.from_dict(stored) if stored else None
    except (TypeError, ValueError, KeyError):
        return None


def _spill_file(db: str | None, results: list[Result]) -> Path:
    """A new results file of `results` beside the SQLite store `db` (else in the working
    folder): its path."""
    import tempfile

    from torchmark.core.results_file import save_results
    from torchmark.store.store import resolve_url, sqlite_path

    store_file = sqlite_path(resolve_url(db))
    for folder in ([store_file.parent] if store_file is not None else []) + [Path.cwd()]:
        try:
            fd, name = tempfile.mkstemp(prefix=f"torchmark-unrecorded-"
                                        f"{time.strftime('%Y%m%dT%H%M%S')}-",
                                        suffix=".jsonl", dir=folder)
        except OSError:
            continue
        os.close(fd)
        save_results(name, results, append=False)
        return Path(name)
    raise OSError("no folder to write them in (the store's, the working folder)")


def node_runs(store: Any, run_id: int) -> dict[str, int]:
    """The runs of other machines that run `run_id` spread to (tagged cluster_run):
    machine fingerprint -> run id."""
    return {run["machine"]: run["id"] for run in store.runs()  # never an imported run's
            if (run.get("tags") or {}).get("cluster_run") == run_id
            and "imported_from" not in (run.get("tags") or {})}


def _import_torch() -> None:
    """torch imported here, where it is installed: its build and thread settings are part
    of the run's fingerprint, which reads them only from an imported torch (capture never
    imports it), and a command measuring in child processes (`timeit --vs`, worker
    pools) may not have imported it yet."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
