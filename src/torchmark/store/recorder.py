"""Recording a command's results into the store as they come.

A RunRecorder starts a run when entered (its provenance captured then, unless given),
stores each batch of results in its own transaction as the command produces them (so an
interrupted run keeps every finished result), and marks the run ok, failed or
interrupted when left. With recording off (--no-store, TORCHMARK_NO_STORE=1) it does
nothing. A store that cannot be opened or written is said once on stderr and the
command goes on: its file outputs still hold the results.

Results that carry the provenance of another machine (measured on a Ray node) go to a
run of that machine, one a machine, tagged `cluster_run` with this run's id, so that a
history never mixes machines; they end as this run ends, and --resume-run continues
them too."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from typing import Any

from torchmark.core.provenance import Provenance
from torchmark.core.result import Result


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

    def __enter__(self) -> RunRecorder:
        if self.enabled:
            try:
                from torchmark.store.store import RUN_STATUSES, Store

                self.store = Store(self.db)
                if self.resume_run is not None:
                    self.store.reopen_run(self.resume_run, self.command)
                    self.run_id = self.resume_run
                    self.machine = self.store.finished_runs(
                        run=self.resume_run, status=RUN_STATUSES)[0]["machine"]
                    self.node_runs = node_runs(self.store, self.resume_run)
                    for run_id in self.node_runs.values():
                        self.store.reopen_run(run_id, self.command)
                else:
                    self.provenance = self.provenance or Provenance.capture(
                        env=self.env, command=self.command)
                    self.run_id = self.store.start_run(self.provenance, tags=self.tags)
                    self.machine = self.provenance.machine_fingerprint
            except Exception as e:  # the store is optional to the measurement itself
                self._give_up(e)
        return self

    def add(self, results: Iterable[Result]) -> None:
        """Store these results now, in one transaction."""
        if self.store is None or self.run_id is None:
            return
        runs: dict[int, list[Result]] = {}
        for result in results:
            runs.setdefault(self._run_of(result), []).append(result)
        try:
            for run_id, batch in runs.items():
                self.recorded += self.store.record(
                    batch, run_id, replace_failed=self.resume_run is not None)
        except Exception as e:
            self._give_up(e)

    def _run_of(self, result: Result) -> int:
        """This run, or the run of the other machine that measured `result`."""
        assert self.run_id is not None
        provenance = result.provenance
        if provenance is None or provenance.machine_fingerprint == self.machine:
            return self.run_id
        machine = provenance.machine_fingerprint
        if machine not in self.node_runs:  # labelled as this run is (--env)
            if self.env is not None:
                provenance = dataclasses.replace(provenance, env=self.env)
            self.node_runs[machine] = self.store.start_run(
                provenance, tags={**self.tags, "cluster_run": self.run_id})
        return self.node_runs[machine]

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if self.store is None or self.run_id is None:
            return
        status = self.status or ("ok" if kind is None else
                                 "interrupted" if issubclass(kind, KeyboardInterrupt)
                                 else "failed")
        try:
            for run_id in (self.run_id, *self.node_runs.values()):
                self.store.finish_run(run_id, status)
            if status == "interrupted" and self.resumable:
                sys.stderr.write(f"torchmark: run {self.run_id} keeps the results it "
                                 f"finished; the same command with --resume-run "
                                 f"{self.run_id} runs the rest\n")
        except Exception as e:
            self._give_up(e)
        finally:
            if self.store is not None:
                self.store.close()

    def _give_up(self, error: BaseException) -> None:
        from torchmark.core.errors import error_line
        from torchmark.core.secrets import mask

        where = getattr(self.store, "where", mask(self.db) if self.db else "the default store")
        sys.stderr.write(f"torchmark: note: results not recorded in the store ({where}): "
                         f"{mask(error_line(error))}\n")
        if self.store is not None:
            self.store.close()
        self.store, self.run_id = None, None


def node_runs(store: Any, run_id: int) -> dict[str, int]:
    """The runs of other machines that run `run_id` spread to (tagged cluster_run):
    machine fingerprint -> run id."""
    return {run["machine"]: run["id"] for run in store.runs()
            if (run.get("tags") or {}).get("cluster_run") == run_id}
