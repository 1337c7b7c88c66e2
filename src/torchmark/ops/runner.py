"""Running a config: every expanded case, one record each, appended to a JSON-lines file
as it finishes. A case that fails (shapes the op rejects, out of memory) is recorded with
its error and the run goes on. The cases run in this process (the local executor) or as
Ray tasks (torchmark.executors): `OpsJob` is how either runs one."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.errors import USER_CODE_FAILURES, PolicyError, error_line
from torchmark.core.jsonl import (
    dumps_line,
    refuse_other_options,
    refuse_other_torch,
    system_info,
)
from torchmark.core.operator_policy import safety_refusal
from torchmark.core.provenance import Provenance
from torchmark.core.results_lock import ResultsLock
from torchmark.core.threads import set_torch_threads
from torchmark.executors.base import Executor, Item, Outcome
from torchmark.executors.local import LocalExecutor
from torchmark.ops.executor import BackwardFailed, RunOptions, measure
from torchmark.ops.expansion import Case, iter_cases
from torchmark.ops.generators import DataGenerator, seed_for
from torchmark.ops.registry import resolve
from torchmark.ops.results_file import SCHEMA, OpsResultsWriter, read_file
from torchmark.ops.schema import BenchmarkConfig
from torchmark.ops.throughput import changes_inputs, work


def select_cases(config: BenchmarkConfig, options: RunOptions,
                 done: set[str] | None = None) -> list[Case]:
    """The cases to run: from --resume-id (inclusive) to --stop-id (exclusive), minus
    those already done. An id that is not in the config is an error."""
    cases = list(iter_cases(config))
    ids = [c.id for c in cases]
    for flag, value in (("--resume-id", options.resume_id), ("--stop-id", options.stop_id)):
        if value is not None and value not in ids:
            raise ValueError(f"{flag} {brief_repr(value)} is not a case of this config (ids look like "
                             f"{brief_repr(ids[0])}; --list prints them)")
    start = ids.index(options.resume_id) if options.resume_id else 0
    stop = ids.index(options.stop_id) if options.stop_id else len(ids)
    if stop <= start:
        raise ValueError(
            f"--stop-id {brief_repr(options.stop_id)} is the --resume-id: no case would run (the stop "
            "id itself is not run)" if stop == start and options.resume_id else
            f"--stop-id {brief_repr(options.stop_id)} comes before --resume-id "
            f"{brief_repr(options.resume_id)}: no case would run" if options.resume_id
            else f"--stop-id {brief_repr(options.stop_id)} is the first case: no case "
                 "would run (the stop id itself is not run)")
    return [c for c in cases[start:stop] if not done or c.id not in done]


# Options that change what a measurement means: a file is resumed only with the same ones.
_MEASUREMENT_OPTIONS = ("warmup", "iterations", "backward", "device", "threads", "exec_mode",
                        "l2_flush", "cuda_graph", "compile", "metric")


def _jsonable(value: Any) -> Any:
    return json.loads(dumps_line(value))


def resumable_ids(path: str | os.PathLike, config: BenchmarkConfig,
                  options: RunOptions) -> set[str]:
    """Ids already recorded in a results file (ok or failed), read once. Refuses to
    resume `path` with other options or a changed config: case ids are positions in the
    config, so a changed config would silently keep old results under the new cases' ids
    (and mixed settings would share one file)."""
    if not Path(path).exists():
        raise FileNotFoundError(f"--resume {path}: no such file")
    try:
        header, records = read_file(Path(path))
    except UnicodeDecodeError:
        raise ValueError(f"--resume {path}: not a text file") from None
    if Path(path).stat().st_size == 0:
        return set()  # nothing was written: a fresh start
    if not header or header.get("schema") != SCHEMA or header.get("source") == "replay":
        what = "it has no header line" if not header else \
            "it holds a replay's results" if header.get("source") == "replay" else \
            f"its schema is {brief_repr(header.get('schema'))}"
        raise ValueError(f"--resume {path}: not a torchmark ops results file ({what}); "
                         "resume a file that `torchmark ops -o` wrote")
    refuse_other_options(path, header.get("run_options") or {}, dataclasses.asdict(options),
                         _MEASUREMENT_OPTIONS)
    refuse_other_torch(path, header)
    recorded = {r["id"]: r.get("config") for r in records if "id" in r}
    ids = set()
    for case in iter_cases(config):
        ids.add(case.id)
        if case.id in recorded and _jsonable(recorded[case.id]) != \
                _jsonable({"build": case.build, "input": case.input}):  # files of any age
            raise ValueError(f"--resume {path}: case {case.id} was recorded with another "
                             "config than this one has now (ids are positions in the "
                             "config); resume with the config it was made from, or write a "
                             "new file")
    foreign = sorted(set(recorded) - ids)
    if foreign:
        raise ValueError(f"--resume {path}: it holds {len(foreign)} case(s) this config does "
                         f"not have (e.g. {brief_repr(foreign[0])}); resume with the config it was "
                         "made from, or write a new file")
    return set(recorded)


def _default_threads() -> int:
    import torch

    return torch.get_num_threads()


def _derived(metrics: dict[str, Any], amount: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = dict(amount)
    if "bytes" in metrics["forward"]:  # --metric memory: its median is bytes, not time
        return out
    median = metrics["forward"]["median"]
    if median > 0 and "flops" in amount:
        out["tflops"] = amount["flops"] / median / 1e12
    if median > 0 and "bytes" in amount:
        out["gbps"] = amount["bytes"] / median / 1e9
    return out


class _Builds:
    """The built operator of the current build spec, reused across its inputs."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.key: tuple[str, int, str] | None = None
        self.fn: Callable[..., Any] | None = None

    def get(self, case: Case) -> Callable:
        key = (case.op, case.config_index, case.build_id)
        if key != self.key:
            self.key, self.fn = None, None
            op = resolve(case.op)
            generator = DataGenerator(self.device, seed_for("build|" + "|".join(map(str, key))))
            args, kwargs = generator.arguments(case.build)
            import torch

            torch.manual_seed(seed_for("weights|" + "|".join(map(str, key))))
            self.fn, self.key = op.build(args, kwargs, self.device), key
        assert self.fn is not None
        return self.fn


def run_case(case: Case, options: RunOptions, builds: _Builds) -> dict[str, Any]:
    """One record: the case's config and metrics, or its error."""
    record: dict[str, Any] = {"type": "record", "op": case.op, "id": case.id,
                              "config": {"build": case.build, "input": case.input}}
    started = time.perf_counter()
    try:
        fn = builds.get(case)
        args, kwargs = DataGenerator(options.device, seed_for(case.id)).arguments(case.input)
        refusal = safety_refusal(case.op, args, kwargs)
        if refusal:  # never called: a check switched off may read out of bounds, or crash
            raise PolicyError(f"operator {case.op!r} refused: {refusal}")
        metrics, out = measure(fn, args, kwargs, options, in_place=changes_inputs(case.op))
        metrics["work"] = _derived(metrics, work(case.op, args, kwargs, out, fn))
        record.update(status="ok", metrics=metrics, error=None)
    except BackwardFailed as e:  # failed, but the forward's figures are kept
        with contextlib.suppress(Exception):
            e.metrics["work"] = _derived(e.metrics, work(case.op, args, kwargs, e.out, fn))
        record.update(status="failed", metrics=e.metrics, error=str(e))
    except PolicyError as e:  # refused before anything ran; the run goes on
        record.update(status="failed", metrics=None, error=str(e))
    except USER_CODE_FAILURES as e:  # recorded (sys.exit() too); the run goes on
        record.update(status="failed", metrics=None, error=error_line(e))
        _release_memory(options.device)
    record["elapsed_s"] = time.perf_counter() - started
    return record


@dataclasses.dataclass
class OpsJob:
    """How an executor runs op cases (torchmark.executors.base.Job): a worker keeps the
    operator built for the current build spec; each case runs under the run's thread
    count. `plugins`: modules that register operators (--plugin), imported by a worker
    elsewhere (a Ray node) before its first case; as absolute paths where they are
    files."""

    options: RunOptions
    plugins: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return "ops:" + repr((sorted(dataclasses.asdict(self.options).items()), self.plugins))

    def make_state(self, slot: int | None) -> _Builds:
        if slot is None:  # a Ray worker: this process has not imported them
            from torchmark.ops.registry import load_plugin

            for module in self.plugins:
                load_plugin(module)
        return _Builds(self.options.device)

    def close_state(self, state: _Builds, kill: bool = False) -> None:
        state.key, state.fn = None, None
        _release_memory(self.options.device)

    def run(self, builds: _Builds, item: Item, attempt: int) -> dict[str, Any]:
        with set_torch_threads(self.options.threads):
            record = run_case(item.payload, self.options, builds)
        if attempt > 1:
            record["attempts"] = attempt
        return record

    def lost(self, item: Item, error: str, attempts: int) -> dict[str, Any]:
        case: Case = item.payload
        return {"type": "record", "op": case.op, "id": case.id,
                "config": {"build": case.build, "input": case.input}, "status": "failed",
                "metrics": None, "error": error, "attempts": attempts, "elapsed_s": 0.0}


def with_node(record: dict[str, Any], provenance: Provenance | None) -> dict[str, Any]:
    """A record measured elsewhere (a Ray node) names where: its hostname and the
    node's provenance (the store files its results under that machine)."""
    if provenance is None:
        return record
    return {**record, "node": provenance.machine.hostname, "provenance": provenance.to_dict()}


def _release_memory(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run(config: BenchmarkConfig, options: RunOptions | None = None, *,
        out: str | os.PathLike | None = None, resume: str | os.PathLike | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        on_start: Callable[[int], None] | None = None,
        profile: str | os.PathLike | None = None,
        on_profiled: Callable[[dict[str, Any]], None] | None = None,
        done: set[str] | None = None,
        executor: Executor | None = None,
        plugins: Sequence[str] = (),
        prior: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Run every case of `config`; returns the records. With `out` (or `resume`, an
    existing file to continue) each record is appended to that JSON-lines file as it
    finishes, between a header and a footer line. `done`: ids already measured (a run
    of the store being resumed), skipped too. With `profile`, a trace path, a
    torch.profiler pass follows; `on_profiled` then gets {"trace_file": ...,
    "profile_failed": {id: reason}} (the latter when some case failed in it).
    `executor`: where the cases run (default: here, one after another); records from
    elsewhere come back as they finish, with the provenance of the node that measured
    them. `plugins`: the --plugin modules, for workers elsewhere to import. `prior`:
    records measured before (a stored run being resumed), written to `out` first and
    returned with the others, so the file holds the whole run."""
    options = options or RunOptions()
    options.validate()
    executor = executor or LocalExecutor(1)
    if getattr(executor, "remote", False):
        if profile is not None:
            raise ValueError("--profile traces the cases in this process: run them with "
                             "--executor local")
        if options.device.startswith("cuda:"):
            raise ValueError(f"--device {options.device}: on Ray each CUDA case gets the "
                             "GPU Ray assigns it; use --device cuda")
    path = resume if resume is not None else out
    # held from before the file is read for --resume: two runs never share one file
    lock = ResultsLock(path, "ops results file").acquire() if path is not None else None
    try:
        skipped = resumable_ids(resume, config, options) if resume is not None else set()
        done = skipped | set(done or ())
        cases = select_cases(config, options, done)
        if on_start:
            on_start(len(cases))
        writer = None
        if path is not None:
            writer = OpsResultsWriter(
                Path(path), {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       "run_options": dataclasses.asdict(options),
                       # what the run used: --threads, else torch's default
                       "threads": options.threads or _default_threads(),
                       "system": {**system_info(), **_device_info(options)}},
                resume=resume is not None, lock=lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    records: list[dict[str, Any]] = list(prior)
    for record in prior:
        if writer:
            writer.write(record)
    profiled: dict[str, Any] | None = None  # the profile pass's outcome, once it ended

    def finished(outcome: Outcome) -> None:
        record = with_node(outcome.record, outcome.provenance)
        records.append(record)
        if writer:
            writer.write(record)
        if on_record:
            on_record(record)

    gpus = 1.0 if options.device.startswith("cuda") else 0.0
    try:
        with set_torch_threads(options.threads):
            plugins = tuple(os.path.abspath(p) if p.endswith(".py") or "/" in p else p
                            for p in plugins)
            executor.run(OpsJob(options, plugins), [Item(c.id, c, cpus=1.0, gpus=gpus) for c in cases],
                         finished)
            if profile is not None:
                profiled = {"trace_file": str(profile),
                            **_profile_pass(cases, records, options, _Builds(options.device),
                                            profile)}
                if on_profiled:
                    on_profiled(profiled)
    finally:
        if writer:
            ok = sum(r.get("status") == "ok" for r in records)
            ran = len(records) - len(prior)  # this time (the prior ones are in `done`)
            written = {r.get("id") for r in prior}  # done, and in the file as records
            footer = {"type": "footer", "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      "ok": ok, "failed": len(records) - ok,
                      "skipped": len(done - written),
                      # False when the run stopped early (Ctrl-C, a crash): resume it
                      "complete": ran == len(cases), "not_run": len(cases) - ran}
            if profiled is not None:  # not when the pass (or the run) stopped before it
                footer.update(profiled)
            writer.close(footer)
    return records


def _profile_pass(cases: list[Case], records: list[dict[str, Any]], options: RunOptions,
                  builds: _Builds, path: str | os.PathLike) -> dict[str, Any]:
    """A separate pass under torch.profiler (so the recorded times carry none of its
    overhead): each case that ran is called `iterations` times inside a range named by
    its id; the trace goes to `path`. A case that fails there is left out of it (the
    others are kept): returns {"profile_failed": {id: reason}} for those, else {}."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    ok = {r["id"] for r in records if r["status"] == "ok"}
    failed: dict[str, str] = {}
    from torchmark.profiler_logs import quietly_entered

    with quietly_entered(torch.profiler.profile(activities=activities,
                                                record_shapes=True)) as prof:
        for case in cases:
            if case.id not in ok:
                continue
            try:
                fn = builds.get(case)
                args, kwargs = DataGenerator(options.device,
                                             seed_for(case.id)).arguments(case.input)
                with torch.profiler.record_function(case.id), torch.no_grad():
                    for _ in range(options.iterations):
                        fn(*args, **kwargs)
            except USER_CODE_FAILURES as e:
                failed[case.id] = error_line(e)
    prof.export_chrome_trace(str(path))
    return {"profile_failed": failed} if failed else {}


def _device_info(options: RunOptions) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"device": options.device, "cuda_available": torch.cuda.is_available()}
    if options.device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(options.device))
        info.update(gpu=props.name, gpu_memory=props.total_memory,
                    l2_bytes=getattr(props, "L2_cache_size", None), cuda=torch.version.cuda)
    return info
