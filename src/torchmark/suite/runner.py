"""Running suite cases: wall times in ordinary worker processes, instruction counts in
long-lived valgrind hosts, one of each per slot, pinned to the slot's CPUs.

Per case a slot measures `blocked_autorange` in its wall-time worker, then counts
`number` runs `repeats` times in its callgrind host (the host imports torch once and
forks per case, so valgrind's start-up is paid once per slot). C++ cases are compiled
beforehand into a few bundle libraries (one compile for many snippets). A case that
raises is recorded as failed; one that kills or hangs its worker is retried
`retries` times on a fresh worker, then recorded as failed; the others go on. Every
finished case is appended to the results file at once.

The slots are the local pool's workers (torchmark.executors.local); on Ray
(torchmark.executors.ray_executor) each Ray worker process keeps one Slot, a case is a
task, and the files cases load (C++ bundles, TorchScript models) travel with the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from torchmark.core.provenance import Provenance
from torchmark.core.results_lock import ResultsLock
from torchmark.executors.base import Executor, Item, local_sys_path
from torchmark.executors.local import LocalExecutor
from torchmark.suite.materialize import Case
from torchmark.suite.results import ResultsWriter, finished_ids
from torchmark.suite.workers import CaseFailed, WallWorker, WorkerLost

BUNDLE_MAX = 64


@dataclasses.dataclass
class RunOptions:
    workers: int = 2
    min_run_time: float = 0.1  # seconds of blocked_autorange per case
    number: int = 100  # runs counted per callgrind repeat
    repeats: int = 5
    timeout: float = 300.0  # seconds per case and stage
    retries: int = 2  # extra attempts after a worker (or a Ray node) died or hung
    wall: bool = True
    instructions: bool = True

    def __post_init__(self) -> None:
        for name in ("workers", "number", "repeats"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"suite run: {name} must be a positive int, got {value!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) \
                or self.retries < 0:
            raise ValueError(f"suite run: retries must be an int >= 0, got {self.retries!r}")
        for name in ("min_run_time", "timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"suite run: {name} must be a positive number, got {value!r}")
        if not (self.wall or self.instructions):
            raise ValueError("suite run: nothing to measure (wall times and instruction "
                             "counts are both off)")


@dataclasses.dataclass
class RunSummary:
    total: int
    skipped: int
    ok: int
    failed: int
    elapsed_s: float
    compile_s: float
    records: list[dict[str, Any]]


def _cpu_sets(workers: int) -> list[list[int]]:
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    return [[cpus[i % len(cpus)]] for i in range(workers)]


def _threads_cpus(cpus: list[int], all_cpus: list[int], threads: int) -> list[int]:
    """The slot's CPU first, then neighbours, for a case that runs `threads` threads."""
    start = all_cpus.index(cpus[0]) if cpus[0] in all_cpus else 0
    return [all_cpus[(start + i) % len(all_cpus)] for i in range(min(threads, len(all_cpus)))]


def instruction_summary(totals: Sequence[int], number: int) -> dict[str, Any]:
    median = statistics.median_low(totals)
    spread = (max(totals) - min(totals)) / median if median else 0.0
    return {"median": median, "per_run": median / number, "repeats": list(totals),
            "spread": spread, "number": number}


class Slot:
    """One worker slot: a wall-time worker and a callgrind host on the same CPUs. `cpus`
    None (a Ray worker): each case runs on the CPUs this process holds when it starts."""

    def __init__(self, index: int | None, cpus: list[int] | None,
                 all_cpus: list[int] | None) -> None:
        from torchmark.callgrind.collector import Host

        self.index, self.cpus, self.all_cpus = index, cpus, all_cpus
        self.wall = WallWorker(cpus)
        self.host = Host(cpus)

    def close(self, kill: bool = False) -> None:
        """Stop both processes: asked to exit, or (`kill`, when the run is interrupted
        mid-case) killed at once."""
        self.wall.close(kill)
        self.wall.remove_log()
        self.host.close(kill)

    def measure_wall(self, case: Case, library: tuple[str, str] | None,
                     options: RunOptions) -> dict[str, Any]:
        from torchmark.suite.wall_messages import WallRequest

        if self.cpus is None:
            held = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else []
            cpus = held[:max(1, case.timer_args.num_threads)]
        else:
            assert self.all_cpus is not None
            cpus = _threads_cpus(self.cpus, self.all_cpus, case.timer_args.num_threads)
        request = WallRequest(timer_args=case.timer_args.to_dict(),
                              min_run_time=options.min_run_time,
                              cpus=tuple(cpus) if cpus else None,
                              library=library[0] if library else None,
                              entry_suffix=library[1] if library else "")
        return self.wall.measure(request, options.timeout).to_dict()

    def count(self, case: Case, library: tuple[str, str] | None,
              options: RunOptions, where: tuple[str, tuple[str, ...]] | None = None
              ) -> dict[str, Any]:
        """Instruction counts; `where`: the counted process's working folder and
        sys.path (default this process's)."""
        from torchmark.callgrind.collector import CallgrindError

        timer = case.timer_args.timer()
        if library is not None:
            timer._timer.use_library(*library)
        request = timer._callgrind_request(options.number, options.repeats,
                                           collect_baseline=False)
        if where is not None:
            request = dataclasses.replace(request, cwd=where[0], sys_path=where[1])
        try:
            stats = self.host.run(request, timeout=options.timeout)
        except CallgrindError as e:
            message = str(e).splitlines()[0]
            raise (WorkerLost if e.crashed else CaseFailed)(message) from None
        return instruction_summary([s.counts() for s in stats], options.number)


def case_record(case: Case, slot: int | None, status: str, error: str | None = None,
                attempts: int = 1, **results: Any) -> dict[str, Any]:
    return {"type": "case", "id": case.id, "status": status, **case.to_dict(), **results,
            "error": error, "attempts": attempts, "slot": slot, "finished": time.time()}


@dataclasses.dataclass
class SuiteJob:
    """How an executor runs suite cases (torchmark.executors.base.Job): a Slot a worker;
    per case its wall time, then its instruction counts. A case that kills or hangs its
    worker is tried again on a fresh one while `retries` allow; one that raises is
    failed at once. `files`: what the cases load (C++ libraries, TorchScript models),
    written where they belong on a machine that lacks them."""

    options: RunOptions
    libraries: dict[str, tuple[str, str]]  # case id -> (bundle library, entry suffix)
    files: dict[str, Any] = dataclasses.field(default_factory=dict)  # path -> Shared bytes
    # the driver's working folder and sys.path, for the counted processes of Ray workers
    # (what they see shifts counts slightly: they see what a local run's would)
    where: tuple[str, tuple[str, ...]] = dataclasses.field(
        default_factory=lambda: (os.getcwd(), local_sys_path()))

    @property
    def key(self) -> str:
        return "suite:" + repr(sorted(dataclasses.asdict(self.options).items()))

    def make_state(self, slot: int | None) -> Slot:
        if slot is None:
            return Slot(None, None, None)
        cpu_sets = _cpu_sets(self.options.workers)
        return Slot(slot, cpu_sets[slot], sorted({c for s in cpu_sets for c in s}))

    def close_state(self, state: Slot, kill: bool = False) -> None:
        state.close(kill)

    def lost(self, item: Any, error: str, attempts: int) -> dict[str, Any]:
        return case_record(item.payload, None, "failed", error, attempts)

    def _place_files(self, case: Case) -> None:
        needed = [self.libraries[case.id][0]] if case.id in self.libraries else []
        if case.scripted is not None:
            needed.append(str(case.scripted.path))
        for path in needed:
            if path in self.files and not os.path.exists(path):
                write_atomically(path, self.files[path].get())

    def run(self, slot: Slot, item: Any, attempt: int) -> dict[str, Any]:
        case: Case = item.payload
        options, library = self.options, self.libraries.get(case.id)
        attempts = attempt - 1
        while True:
            attempts += 1
            started = time.perf_counter()
            results: dict[str, Any] = {}
            try:
                self._place_files(case)
                if options.wall:
                    results["wall"] = slot.measure_wall(case, library, options)
                if options.instructions:
                    results["instructions"] = slot.count(
                        case, library, options, self.where if slot.index is None else None)
            except Exception as e:
                if isinstance(e, WorkerLost) and attempts <= options.retries:
                    continue
                # anything else is this case's failure, never the run's
                error = str(e) if isinstance(e, (CaseFailed, WorkerLost)) else \
                    f"{type(e).__name__}: {e}"
                return case_record(case, slot.index, "failed", error, attempts, **results)
            return case_record(case, slot.index, "ok", None, attempts,
                               elapsed_s=time.perf_counter() - started, **results)


def write_atomically(path: str, data: bytes) -> None:
    """`data` at `path` (its folder made), appearing whole or not at all."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class SuiteRunner:
    """Runs cases into a JSON-lines file; see the module docstring. `executor`: where
    the cases run (torchmark.executors; default the local pool of `options.workers`)."""

    def __init__(self, cases: Sequence[Case], out: str | os.PathLike,
                 options: RunOptions | None = None, resume: bool = False,
                 on_record: Callable[[dict[str, Any]], None] | None = None,
                 on_phase: Callable[[str], None] | None = None,
                 done: Collection[str] = (), executor: Executor | None = None,
                 prior: Sequence[dict[str, Any]] = ()) -> None:
        self.options = options or RunOptions()
        # records a stored run being resumed finished: written to the file first, so
        # that it holds the whole run
        self.prior = list(prior)
        self.executor = executor or LocalExecutor(self.options.workers)
        self.done = frozenset(done)  # ids finished elsewhere (a stored run resumed): skipped
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            raise ValueError("suite run: the cases contain duplicate ids")
        self.out, self.resume, self._all_cases = out, resume, list(cases)
        self._select_cases()  # again in run(), under the file's lock
        self.on_record = on_record or (lambda record: None)
        self.on_phase = on_phase or (lambda phase: None)
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._writer_closed = False

    def _select_cases(self) -> None:
        """The cases to run: those not in `done` and, with resume, not held as done by the
        results file."""
        cases = self._all_cases
        done = finished_ids(self.out, dataclasses.asdict(self.options),
                            {c.id: c.timer_args.to_dict() for c in cases}) \
            if self.resume else set()
        self.cases = [c for c in cases if c.id not in done and c.id not in self.done]
        self.skipped = len(cases) - len(self.cases)

    # -- preparation ------------------------------------------------------------------
    def _prepare(self, writer: ResultsWriter) -> tuple[list[Case], dict[str, tuple[str, str]]]:
        """Script TorchScript models and compile C++ bundles; cases that fail here are
        recorded as failed. Returns the runnable cases and each C++ case's library."""
        runnable: list[Case] = []
        cpp: list[Case] = []
        for case in self.cases:
            try:
                case.prepare()
            except Exception as e:
                self._record(writer, case_record(
                    case, None, "failed", f"preparing: {type(e).__name__}: {str(e).strip()}"))
                continue
            (cpp if case.timer_args.language == "cpp" else runnable).append(case)
        libraries: dict[str, tuple[str, str]] = {}
        if cpp:
            self.on_phase(f"compiling {len(cpp)} C++ cases")
            chunks = _chunks(cpp, self.options.workers)
            with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
                for chunk_libraries, failures in pool.map(_build_bundle, chunks):
                    libraries.update(chunk_libraries)
                    for case, error in failures:
                        self._record(writer, case_record(case, None, "failed", error))
        runnable += [c for c in cpp if c.id in libraries]
        order = {c.id: i for i, c in enumerate(self.cases)}
        return sorted(runnable, key=lambda c: order[c.id]), libraries

    def _files(self, cases: list[Case], libraries: dict[str, tuple[str, str]]) -> dict:
        """The files the cases load, shared with workers elsewhere (none for local ones)."""
        if not getattr(self.executor, "remote", False):
            return {}
        paths = {library for library, _ in libraries.values()}
        paths |= {str(c.scripted.path) for c in cases if c.scripted is not None}
        return {path: self.executor.share(Path(path).read_bytes()) for path in sorted(paths)}

    # -- running ----------------------------------------------------------------------
    def _record(self, writer: ResultsWriter, record: dict[str, Any],
                provenance: Provenance | None = None) -> dict:
        if provenance is not None:  # measured elsewhere: where it was measured
            record = {**record, "node": provenance.machine.hostname,
                      "provenance": provenance.to_dict()}
        with self._write_lock:
            if self._writer_closed:  # a case that ended as an interrupted run closed
                return record
            writer.write(record)
        self.on_record(record)
        return record

    def _item(self, case: Case) -> Item:
        threads = case.timer_args.num_threads if self.options.wall else 1
        return Item(case.id, case, cpus=float(max(1, threads)))

    def run(self) -> RunSummary:
        started = time.perf_counter()
        options = dataclasses.asdict(self.options)
        lock = ResultsLock(self.out, "suite results file").acquire()
        try:  # what is done is read again under the lock: a run that ended meanwhile counts
            self._select_cases()
            writer = ResultsWriter(self.out, options, self.resume, lock=lock)
        except BaseException:
            lock.release()
            raise
        records: list[dict[str, Any]] = []
        inner = self.on_record

        def on_record(record: dict[str, Any]) -> None:
            records.append(record)
            inner(record)

        self.on_record = on_record
        compile_s = 0.0
        try:
            compile_started = time.perf_counter()
            for record in self.prior:
                writer.write(record)
            runnable, libraries = self._prepare(writer)
            job = SuiteJob(self.options, libraries, self._files(runnable, libraries))
            compile_s = time.perf_counter() - compile_started
            self.on_phase(f"measuring {len(runnable)} cases on {self.executor.describe()}")
            self.executor.run(job, [self._item(c) for c in runnable],
                              lambda o: self._record(writer, o.record, o.provenance))
        except KeyboardInterrupt:  # also while preparing: the footer says so
            self._stop.set()
            raise
        finally:
            close = getattr(self.executor, "close", None)
            if close is not None:
                close()
            ok = sum(r["status"] == "ok" for r in records)
            elapsed = time.perf_counter() - started
            with self._write_lock:
                self._writer_closed = True
                writer.close({"elapsed_s": elapsed, "ok": ok, "failed": len(records) - ok,
                              "interrupted": self._stop.is_set()})
        return RunSummary(len(self.cases) + self.skipped, self.skipped, ok, len(records) - ok,
                          elapsed, compile_s, records)


def _chunks(cases: list[Case], workers: int) -> list[list[Case]]:
    n = max(workers, -(-len(cases) // BUNDLE_MAX))
    n = min(n, len(cases))
    return [cases[i::n] for i in range(n)]


def _build_bundle(cases: list[Case]) -> tuple[dict[str, tuple[str, str]], list[tuple[Case, str]]]:
    """Compile `cases` into one library, dropping (and reporting) snippets that fail."""
    from torchmark.cpp.compile_cache import BundleCompileError, default_builder
    from torchmark.cpp.snippet_source import bundle_entry_suffix

    failures: list[tuple[Case, str]] = []
    remaining = list(cases)
    while remaining:
        snippets = [(c.timer_args.stmt, c.timer_args.setup, c.timer_args.global_setup)
                    for c in remaining]
        try:
            library = default_builder().build_bundle(snippets)
        except OSError as e:  # no compiler, or it could not run: every C++ case fails
            return {}, failures + [(c, f"C++ compile failed: {e}") for c in remaining]
        except BundleCompileError as e:
            if not e.failed:  # not attributable to one snippet: halve, so it fails alone
                message = "C++ compile failed: " + "\n".join(e.compiler_output.splitlines()[-5:])
                if len(remaining) == 1:
                    return {}, failures + [(remaining[0], message)]
                half = len(remaining) // 2
                libraries, first_failures = _build_bundle(remaining[:half])
                failures += first_failures
                if not libraries and half > 1:  # none of several built: the compiler or
                    # its setup failed, not one snippet
                    return {}, failures + [(c, message) for c in remaining[half:]]
                second, second_failures = _build_bundle(remaining[half:])
                return {**libraries, **second}, failures + second_failures
            failures += [(remaining[i], f"C++ compile failed: {msg}")
                         for i, msg in sorted(e.failed.items())]
            remaining = [c for i, c in enumerate(remaining) if i not in e.failed]
            continue
        return ({c.id: (str(library), bundle_entry_suffix(i)) for i, c in enumerate(remaining)},
                failures)
    return {}, failures
