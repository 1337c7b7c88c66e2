"""Interleaved A/B across Python environments: one statement, two interpreters (two
venvs, two torch builds), a worker process in each, their blocks alternated.

torch.utils.benchmark's A/B across environments runs the whole measurement in one
environment, pickles it, then does the same in the other: whatever changed in between
(another job, a warmer CPU) reads as a difference. Here both workers are up at once
and the driver asks them in turn for blocks of the same length (sized once, as
`measure_ab` sizes them: compare/interleave.py), A B B A A B B A ..., so drift hits
both sides alike. The unit of comparison is the A B B A quad (`ab_test(..., paired=True,
abba=True)`): across processes the block that runs second in a pair came out 1 to 4%
faster than the first on the development machine, an order effect that per-pair
ratios turn into two modes around the true ratio and a quad's ratio (its B time over
its A time) cancels. Both wall-time workers of a pair are pinned to the same CPU (the
idlest when the pair starts measuring), so that two cores cannot read as two
environments.

A process's speed also depends on where its code and data landed in memory, a lottery
drawn anew at every start: on the development machine one process of an environment ran
the same loop 430, 520, 600, 680 or 760 us a call, for its whole life, and pairs of
processes of one environment read 1 to 2.5% apart in 12 of 82 runs (once 2.2x).
No interleaving cancels that within one pair of processes, so wall time is measured by
`worker_pairs` (5) fresh pairs, one after the other, each timing its share of the
budget. The verdict is the paired one over the quads of all pairs, and a direction it
finds is called only when the median of the pairs' own ratios moved by `min_effect`
that way too, else "unsure" (`ABResult.replicate_ratios`): one or two pairs whose
processes drew unlike layouts decide nothing (pyperf spawns many worker processes for
the same reason).

Instruction counts are asked of each environment's own callgrind collector, in the same
order, and compared exactly (`counts_test`).

A worker is `PY -m torchmark.compare.env_worker` (a PipedChild) with the driver's
torchmark package, and nothing else of the driver's environment, on its PYTHONPATH:
the other environment needs only torch. Bad interpreters (missing, not executable,
without torch, failing to start) are UsageErrors that name the interpreter; a worker
that dies while measuring is an EnvWorkerLost carrying the tail of its output."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchmark.compare.ab import ABResult, ab_test, counts_test
from torchmark.compare.env_messages import (
    ClockOverhead,
    CountBlock,
    EstimateBlock,
    Failed,
    Prepare,
    Prepared,
    StartFailed,
    Stop,
    TimeBlock,
    Value,
    WorkerReady,
)
from torchmark.compare.interleave import BlockCallback, abba, block_numbers, interleave
from torchmark.core.errors import MeasurementError, UsageError
from torchmark.core.procs import idlest_cpus, pin
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result
from torchmark.core.worker import ChildLost, PipedChild, driver_folder_env
from torchmark.timing.measurement import Measurement

METRICS = ("wall", "instructions")
# blocks a side unless asked (wall: a worker pair's, 6 quads; instructions: counts)
DEFAULT_BLOCKS = {"wall": 12, "instructions": 2}
DEFAULT_WORKER_PAIRS = 5  # fresh worker pairs for wall time
START_TIMEOUT_S = 300.0  # python starts and imports torch (slow on a loaded machine)
PREPARE_TIMEOUT_S = 120.0
BLOCK_TIMEOUT_S = 300.0  # one wall-time request (a block, the block-size estimate)
COUNT_TIMEOUT_S = 1800.0  # one count: valgrind's start (the collector's own limits) and more


class EnvWorkerLost(MeasurementError):
    """A worker died or stopped answering while measuring; `log_tail` holds the end of
    its output (stdout and stderr)."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclasses.dataclass(frozen=True)
class EnvSide:
    """One environment of the A/B: its interpreter, label, what it runs, and (for
    instruction counts) each block's CallgrindStats."""

    python: str
    label: str
    python_version: str  # "CPython 3.11.7"
    torch_version: str
    provenance: Provenance
    cpus: tuple[int, ...] = ()  # the CPUs its workers could run on
    counts: tuple[Any, ...] = ()  # CallgrindStats, in the order collected

    def describe(self) -> str:
        return f"{self.label}: {self.python} ({self.python_version}, torch {self.torch_version})"


@dataclasses.dataclass(frozen=True)
class EnvABResult:
    """`ab_environments`' outcome: the verdict (`ab`, an ABResult whose baseline and
    candidate Measurements hold the raw samples of every worker pair: block times, or
    counts a run; for wall time its `replicate_ratios` are the pairs' ratios), each
    worker pair's own ABResult in the order they ran (`pairs`) and the two environments
    (`sides`: baseline, candidate)."""

    ab: ABResult
    sides: tuple[EnvSide, EnvSide]
    metric: str
    pairs: tuple[ABResult, ...] = ()

    @property
    def verdict(self) -> str:
        return self.ab.verdict

    @property
    def ratio(self) -> float:
        return self.ab.ratio

    def results(self) -> tuple[list[Result], list[Result]]:
        """Each side's samples as Results (with that environment's provenance), for the
        store: a wall-time Result, or an instructions one whose samples are the counts a
        run of every block."""
        out: list[list[Result]] = []
        for side, m in zip(self.sides, (self.ab.baseline, self.ab.candidate), strict=True):
            if self.metric == "wall":
                from torchmark.timing.results import measurement_to_result

                out.append([measurement_to_result(m, provenance=side.provenance)])
            else:
                from torchmark.callgrind.results import stats_to_result

                median = sorted(side.counts, key=lambda s: s.counts())[(len(side.counts) - 1) // 2]
                stats = dataclasses.replace(median, repeat_totals=tuple(
                    int(s.counts()) for s in side.counts))
                out.append([stats_to_result(stats, provenance=side.provenance)])
        return out[0], out[1]

    def pairs_line(self) -> str:
        """The worker pairs' ratios in the order they ran and their median; "" for one
        pair."""
        if len(self.pairs) < 2:
            return ""
        return (f"{len(self.pairs)} worker pairs, each a fresh process in each environment "
                f"timing its share: ratios {' '.join(f'{p.ratio:.3f}' for p in self.pairs)}, "
                f"median {self.ab.replicate_median:.3f}")

    def __str__(self) -> str:
        a, b = self.ab.baseline, self.ab.candidate
        runs = (f"{a.number_per_run}" if a.number_per_run == b.number_per_run
                else f"{a.number_per_run} / {b.number_per_run}")
        what = "wall time" if self.metric == "wall" else "instruction counts"
        return "\n".join([f"baseline  {self.sides[0].describe()}",
                          f"candidate {self.sides[1].describe()}",
                          f"{what}: {len(a.times)} blocks a side of {runs} runs, A B B A ...",
                          *filter(None, [self.pairs_line()]), str(self.ab)])


def resolve_python(python: str | os.PathLike[str], role: str) -> str:
    """The interpreter's path as given (a venv's `bin/python` is a link: it is not
    followed, or the venv would be lost), a bare name looked up on PATH; a UsageError
    naming it when it is missing or not executable."""
    text = os.fspath(python)
    if not text:
        raise UsageError(f"env {role}: the python is an empty path")
    found = text if os.sep in text else shutil.which(text)
    if found is None:
        raise UsageError(f"env {role} ({text}): no such interpreter on PATH")
    path = os.path.abspath(found)
    if not os.path.exists(path):
        raise UsageError(f"env {role} ({text}): no such file")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise UsageError(f"env {role} ({text}): not an executable file")
    return path


def default_labels(baseline: str, candidate: str) -> tuple[str, str]:
    """Labels from the interpreters' paths: the environment's folder (a venv's, above its
    `bin`), with as many parent folders as tell the two apart (`envA`, `proj1/.venv`);
    the interpreter's name when only it differs; `NAME (A)` / `NAME (B)` for one
    interpreter twice."""
    def parts(python: str) -> list[str]:
        path = Path(python)
        folder = path.parent.parent if path.parent.name in ("bin", "Scripts") else path.parent
        return [*(p for p in folder.parts if p != folder.anchor), path.name]

    a, b = parts(baseline), parts(candidate)
    if a == b:
        name = a[-2] if len(a) > 1 else a[-1]
        return f"{name} (A)", f"{name} (B)"
    if a[-1] == b[-1]:  # the same interpreter name in two folders
        a, b = a[:-1] or a, b[:-1] or b
    for k in range(1, max(len(a), len(b)) + 1):
        if a[-k:] != b[-k:]:
            return "/".join(a[-k:]), "/".join(b[-k:])
    return baseline, candidate


def worker_path(folder: Path) -> Path:
    """`folder` made ready for EnvWorkers: its "path", their PYTHONPATH, holds the
    driver's torchmark package only."""
    (folder / "path").mkdir()
    (folder / "path" / "torchmark").symlink_to(Path(__file__).resolve().parents[1])
    return folder


class EnvWorker:
    """A worker in one environment (a PipedChild), started on construction."""

    def __init__(self, python: str, role: str, folder: Path, log_name: str,
                 pair: str = "", kind: str = "env", import_path: str | None = None) -> None:
        self.python, self.role, self.kind = python, role, kind
        # the environment names start errors (every worker of it fails alike); the
        # worker pair too names what goes wrong while measuring
        who = " ".join(filter(None, [kind, role]))
        self.env_name = f"{who} ({python})"
        self.name = f"{who} ({python}{', ' + pair if pair else ''})"
        # `import_path` (a checkout of the code under test) first, then torchmark
        path = os.pathsep.join([*filter(None, [import_path]), str(folder / "path"),
                                *filter(None, [os.environ.get("PYTHONPATH")])])
        try:
            self.child = PipedChild(
                lambda requests, responses: [
                    python, "-m", "torchmark.compare.env_worker", "--requests",
                    str(requests), "--responses", str(responses)],
                log=folder / log_name, shutdown=Stop(),
                env=dict(os.environ, PYTHONPATH=path, **driver_folder_env()), name="worker")
        except OSError as e:
            raise UsageError(f"{self.env_name}: cannot start it ({e.strerror or e})") from None

    def ready(self) -> WorkerReady:
        """Its first answer (torch imported); a UsageError when it has no torch or did not
        start."""
        try:
            reply = self.child.receive(START_TIMEOUT_S, "its start")
        except ChildLost as e:
            how = "did not start in time" if e.timed_out else \
                f"did not start (exit status {e.exit_code})"
            last = [line for line in e.log_tail.splitlines() if line.strip()][-1:]
            raise UsageError(f"{self.env_name}: {how}" + (f": {last[0].strip()}" if last else "")
                             + ("; is it a Python interpreter (3.10 or later)?"
                                if self.kind == "env" else "")) from None
        if isinstance(reply, StartFailed):
            self.close()
            raise UsageError(f"{self.env_name}: {reply.error}" +
                             ("; install torch there or name another interpreter"
                              if self.kind == "env" else ""))
        if not isinstance(reply, WorkerReady):
            self.close(kill=True)
            raise MeasurementError(f"{self.name}: answered {type(reply).__name__} to its start")
        return reply

    def call(self, request: Any, timeout: float, what: str) -> Any:
        """Send `request`, return its answer (see `receive`)."""
        self.send(request, what)
        return self.receive(timeout, what)

    def send(self, request: Any, what: str) -> None:
        try:
            self.child.send(request)
        except OSError as e:  # the pipe broke as the worker died
            tail = self.child.log_tail()
            self.close(kill=True)
            raise EnvWorkerLost(f"{self.name}: the worker is gone before {what} ({e})",
                                tail) from None

    def receive(self, timeout: float, what: str) -> Any:
        """The answer to the request sent; a MeasurementError naming the environment when
        the request raised there, an EnvWorkerLost when the worker died."""
        try:
            reply = self.child.receive(timeout, what)
        except ChildLost as e:
            last = [line for line in e.log_tail.splitlines() if line.strip()][-1:]
            raise EnvWorkerLost(f"{self.name}: {e}" + (f": {last[0].strip()}" if last else ""),
                                e.log_tail) from None
        if isinstance(reply, Failed):
            raise MeasurementError(f"{self.name}: {what} raised {reply.error}")
        return reply

    def value(self, request: Any, timeout: float, what: str) -> Any:
        reply = self.call(request, timeout, what)
        if not isinstance(reply, Value):
            raise MeasurementError(f"{self.name}: answered {type(reply).__name__} to {what}")
        return reply.value

    def pin(self, cpus: Sequence[int] | None) -> set[int]:
        """Keep it (every thread it has) on `cpus`; the CPUs it may run on now (empty
        where that cannot be read)."""
        pin(self.child.proc.pid, list(cpus) if cpus else None)
        try:
            return set(os.sched_getaffinity(self.child.proc.pid))
        except (AttributeError, OSError):
            return set()

    def close(self, kill: bool = False) -> None:
        self.child.close(kill=kill)


class RemoteSource:
    """A worker's Timer as a BlockSource for `interleave`."""

    def __init__(self, worker: EnvWorker) -> None:
        self.worker = worker

    def estimate_block_size(self, min_run_time: float) -> int:
        return int(self.worker.value(EstimateBlock(min_run_time), BLOCK_TIMEOUT_S,
                                     "the block-size estimate"))

    def time_block(self, number: int) -> float:
        return float(self.worker.value(TimeBlock(number), BLOCK_TIMEOUT_S, "a block"))

    def clock_overhead(self) -> float:
        return float(self.worker.value(ClockOverhead(), BLOCK_TIMEOUT_S,
                                       "the clock-overhead estimate"))


def _check(name: str, value: Any, minimum: float, integer: bool) -> Any:
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not ok or not (minimum <= value < math.inf):
        kind = "an int" if integer else "a finite number"
        raise UsageError(f"ab_environments: {name} must be {kind} >= {minimum:g}, got "
                         f"{value!r}")
    return value


def ab_environments(baseline_python: str | os.PathLike[str],
                    candidate_python: str | os.PathLike[str], stmt: str = "pass",
                    setup: str = "pass", *, labels: Sequence[str] | None = None,
                    metric: str = "wall", min_run_time: float = 1.0,
                    min_blocks: int | None = None, number: int = 100,
                    num_threads: int = 1, label: str | None = None,
                    confidence: float = 0.95, min_effect: float = 0.01,
                    callback: BlockCallback | None = None,
                    command: Sequence[str] | None = None,
                    cpus: Sequence[int] | None = None,
                    worker_pairs: int | None = None,
                    import_paths: Sequence[str | None] = (None, None)) -> EnvABResult:
    """Measure `stmt` (after `setup`) in two Python environments at once, blocks
    alternating A B B A ..., and give the verdict (see the module docstring).

    `labels`: the two environments' names (env labels of the Timers, of the Results and
    of the store's runs); default from the paths (`default_labels`). `metric`: "wall"
    (`worker_pairs` fresh pairs of workers, default 5, one after the other, each
    timing blocks until each side has its share of `min_run_time` seconds and
    `min_blocks` blocks, default 12; the paired verdict over the A B B A quads of all
    pairs at `confidence`, a direction called only when the median of the pairs' ratios
    shows it too, else "unsure") or "instructions" (`min_blocks` counts of `number` runs
    a side, default 2, by each environment's callgrind collector, one worker pair;
    compared exactly). Changes under `min_effect` count as none.
    `callback(side, runs, value)` follows each block (side 0 or 1; seconds, or the
    block's instruction count). `command`: the command line the provenance records.
    `cpus`: for wall time, both workers of a pair are pinned to these same CPUs
    (default: the `num_threads` idlest this process may use, over 0.2 s, chosen anew for
    each pair), so that two cores of different speed or load cannot read as two
    environments of different speed. `import_paths`: a folder each side's workers
    import from first (a checkout of the code under test at another commit: bisect).
    """
    if metric not in METRICS:
        raise UsageError(f"ab_environments: metric must be one of {', '.join(METRICS)}, "
                         f"got {metric!r}")
    for name, code in (("stmt", stmt), ("setup", setup)):
        if not isinstance(code, str):
            raise UsageError(f"ab_environments: {name} must be a str, got "
                             f"{type(code).__name__}")
    min_run_time = float(_check("min_run_time", min_run_time, 0, integer=False))
    blocks = _check("min_blocks", DEFAULT_BLOCKS[metric] if min_blocks is None
                    else min_blocks, 1, integer=True)
    number = _check("number", number, 1, integer=True)
    num_threads = _check("num_threads", num_threads, 1, integer=True)
    if worker_pairs is not None and metric != "wall":
        raise UsageError("ab_environments: worker_pairs is for wall time (instruction "
                         "counts are taken by one pair)")
    pair_count = _check("worker_pairs", DEFAULT_WORKER_PAIRS if worker_pairs is None
                        else worker_pairs, 1, integer=True) if metric == "wall" else 1
    if not (isinstance(confidence, float) and 0 < confidence < 1):
        raise UsageError(f"ab_environments: confidence must be in (0, 1), got {confidence!r}")
    _check("min_effect", min_effect, 0, integer=False)
    if min_effect >= 1:
        raise UsageError(f"ab_environments: min_effect must be in [0, 1), got {min_effect!r}")
    pythons = (resolve_python(baseline_python, "A"), resolve_python(candidate_python, "B"))
    if labels is None:
        labels = default_labels(*pythons)
    if len(labels) != 2 or not all(isinstance(x, str) and x.strip() for x in labels) \
            or labels[0] == labels[1]:
        raise UsageError(f"ab_environments: labels must be two different names, got "
                         f"{list(labels)!r}")
    request = Prepare(stmt, setup, num_threads, label, "", metric,
                      tuple(command) if command is not None else ())
    with tempfile.TemporaryDirectory(prefix="torchmark-ab-") as tmp:
        folder = worker_path(Path(tmp))
        workers: list[EnvWorker] = []  # A, B of pair 0, A, B of pair 1, ...
        ok = False
        try:
            for k in range(pair_count):  # all start at once, unpinned: torch imports in parallel
                for python, role, first in zip(pythons, "AB", import_paths, strict=True):
                    workers.append(EnvWorker(
                        python, role, folder, f"{role}{k}.log",
                        f"worker pair {k + 1} of {pair_count}" if pair_count > 1 else "",
                        import_path=first))
            ready = [w.ready() for w in workers]
            for i, w in enumerate(workers):  # all at once again
                w.send(dataclasses.replace(request, env=labels[i % 2]), "making the Timer")
            prepared: list[Prepared] = []
            for w in workers:
                reply = w.receive(PREPARE_TIMEOUT_S, "making the Timer")
                if not isinstance(reply, Prepared):
                    raise MeasurementError(f"{w.name}: answered {type(reply).__name__} "
                                           "to Prepare")
                prepared.append(reply)
            pairs = [(workers[2 * k], workers[2 * k + 1]) for k in range(pair_count)]
            counts: tuple[list[Any], list[Any]] = ([], [])
            used: set[int] = set()
            if metric == "wall":
                results, used = _wall_pairs(pairs, prepared, min_run_time, blocks, cpus,
                                            num_threads, confidence, min_effect, callback)
                ab = _pooled(results, confidence, min_effect)
            else:
                for side in abba(blocks):
                    stats = workers[side].value(CountBlock(number), COUNT_TIMEOUT_S,
                                                "counting instructions")
                    counts[side].append(stats)
                    if callback is not None:
                        callback(side, number, float(stats.counts()))
                a, b = (Measurement(number, [float(s.counts()) for s in c], p.task_spec)
                        for c, p in zip(counts, prepared, strict=True))
                results = [counts_test(a, b, min_effect=min_effect)]
                ab = results[0]
            ok = True
        finally:
            for w in workers:
                w.close(kill=not ok)
    sides = tuple(EnvSide(python, env, r.python, r.torch_version, p.provenance,
                          tuple(sorted(used)) or p.cpus, tuple(c))
                  for python, env, r, p, c in zip(pythons, labels, ready[:2], prepared[:2],
                                                  counts, strict=True))
    return EnvABResult(ab=ab, sides=(sides[0], sides[1]), metric=metric,
                       pairs=tuple(results))


def _pooled(pairs: Sequence[ABResult], confidence: float, min_effect: float) -> ABResult:
    """The paired verdict over the A B B A quads of all worker pairs (each pair timed
    whole quads, so none spans two pairs), with the pairs' ratios as its replicates
    (`ABResult.replicate_ratios`); one pair's own verdict when there is one."""
    if len(pairs) == 1:
        return pairs[0]

    def side(measurements: list[Measurement]) -> Measurement:
        raw = [t for m in measurements for t in m.raw_times]
        return Measurement(measurements[0].number_per_run, raw, measurements[0].task_spec)

    a = side([p.baseline for p in pairs])
    b = side([p.candidate for p in pairs])
    return ab_test(a, b, confidence=confidence, min_effect=min_effect, paired=True,
                   abba=True, replicate_ratios=[p.ratio for p in pairs])


def _wall_pairs(pairs: Sequence[tuple[EnvWorker, EnvWorker]], prepared: Sequence[Prepared],
                min_run_time: float, min_blocks: int, cpus: Sequence[int] | None,
                num_threads: int, confidence: float, min_effect: float,
                callback: BlockCallback | None) -> tuple[list[ABResult], set[int]]:
    """Each worker pair in turn, pinned to one CPU set, times its share of the budget in
    A B B A blocks of one size (the first pair's choice; the later ones warm up with an
    estimate of their own, not kept), whole quads only: each pair's paired verdict, and
    the CPUs the pairs' workers could run on (read back after pinning). A pair's workers
    are closed once it is done."""
    share = min_run_time / len(pairs)
    numbers: list[int] | None = None
    results = []
    used: set[int] = set()
    for pair in pairs:
        pinned = list(cpus) if cpus is not None else idlest_cpus(num_threads) or None
        for w in pair:
            used.update(w.pin(pinned))
        sources = (RemoteSource(pair[0]), RemoteSource(pair[1]))
        if numbers is None:  # sized for the whole budget: as long as one pair's would be
            numbers = block_numbers(sources, min_run_time, same_statement=True)
        else:
            for source in sources:
                source.estimate_block_size(min_run_time)
        times = interleave(sources, numbers, min_run_time=share, min_blocks=min_blocks,
                           callback=callback, whole_quads=True)
        a, b = (Measurement(n, t, p.task_spec)
                for n, t, p in zip(numbers, times, prepared[:2], strict=True))
        results.append(ab_test(a, b, confidence=confidence, min_effect=min_effect,
                               paired=True, abba=True))
        for w in pair:
            w.close()
    return results, used
