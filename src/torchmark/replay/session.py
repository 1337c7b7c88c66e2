"""A whole replay: load, prepare, time, report coverage, write JSON lines."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from torchmark.core.bounded_input import brief_repr, load_json, read_bytes
from torchmark.core.jsonl import system_info
from torchmark.core.results_lock import ResultsLock
from torchmark.core.threads import set_torch_threads
from torchmark.ops.results_file import OpsResultsWriter
from torchmark.replay.record import timing_path
from torchmark.replay.replayer import ReplayedOp, Replayer
from torchmark.replay.trace import load_trace


@dataclasses.dataclass
class ReplayReport:
    trace: str
    device: str
    ops: list[ReplayedOp]
    iteration: Any  # a Measurement of whole iterations
    time_weighted: float | None  # share of the recorded op time that was replayed
    notes: list[str] = dataclasses.field(default_factory=list)  # caveats of the timing
    # why `time_weighted` is None
    time_weighted_unknown: str = "no op durations beside the trace"
    threads: int | None = None  # torch's CPU threads during the replay
    metric: str = "time"  # "kernel": the ops' kernel times (docs/gpu.md); "memory": bytes

    @property
    def quantity(self) -> str:
        """What the ops' times are: kernel time, device time (CUDA events, on a GPU)
        or host time."""
        if self.metric == "memory":
            return "peak bytes"
        return "kernel time" if self.metric == "kernel" else \
            "device time" if self.device.startswith("cuda") else "host time"

    def __str__(self) -> str:
        return "\n".join(summary_lines(self))

    @property
    def replayed(self) -> list[ReplayedOp]:
        return [op for op in self.ops if op.status == "replayed"]

    @property
    def skipped(self) -> list[ReplayedOp]:
        return [op for op in self.ops if op.status != "replayed"]

    @property
    def coverage(self) -> float:
        return len(self.replayed) / len(self.ops) if self.ops else 0.0

    def top(self, n: int = 10) -> list[ReplayedOp]:
        from torchmark.replay.replayer import median_or_none

        return sorted(self.replayed, key=lambda op: -(median_or_none(op.values) or 0))[:n]


def _load_timing(trace_path: str | os.PathLike) -> Any:
    """The profiler trace recorded beside the execution trace (`torchmark trace` /
    `record()` write it), parsed; None when there is none or it cannot be read."""
    try:
        path = timing_path(trace_path)
        return load_json(read_bytes(path, "profiler trace"), str(path))
    except (OSError, ValueError):
        return None


def recorded_durations(trace_path: str) -> dict[int, float]:
    """rf_id -> duration (us) from the profiler trace recorded beside the execution
    trace; {} when there is none."""
    return _durations(_load_timing(trace_path))


def _durations(timing: Any) -> dict[int, float]:
    events = timing.get("traceEvents", []) if isinstance(timing, dict) else []
    out: dict[int, float] = {}
    if not isinstance(events, list):
        return out  # not a profiler trace: no recorded durations, as if there were none
    for event in events:
        args = event.get("args") if isinstance(event, dict) else None
        if not isinstance(args, dict) or event.get("ph") != "X" or \
                "Record function id" not in args or "dur" not in event:
            continue
        try:
            out[int(args["Record function id"])] = float(event["dur"])
        except (TypeError, ValueError, OverflowError):
            continue  # one unreadable event does not spoil the others
    return out


def _timing_cut_note(timing: Any) -> str | None:
    """A note when the durations stop early (the traced program started its own profiler
    while it was recorded)."""
    from torchmark.replay.record import CUT_KEY

    if not (isinstance(timing, dict) and timing.get(CUT_KEY)):
        return None
    return ("the recorded op durations stop where the traced program started its own "
            "profiler: the time-weighted coverage is of the ops before that point")


def _time_weighted(ops: list[ReplayedOp], durations: dict[int, float]) -> float | None:
    if not durations:
        return None
    total = replayed = 0.0
    for op in ops:
        op.recorded_us = durations.get(op.node.rf_id) if op.node.rf_id is not None else None
        if op.recorded_us is None:
            continue
        total += op.recorded_us
        if op.status == "replayed":
            replayed += op.recorded_us
    return replayed / total if total else None


def op_record(op: ReplayedOp) -> dict[str, Any]:

    node = op.node
    return {"type": "record", "op": op.op, "id": op.id,
            "config": {"build": None, "input": {"shapes": node.inputs["shapes"],
                                                "types": node.inputs["types"]},
                       "node": node.id, "schema": node.schema},
            "status": "ok" if op.status == "replayed" else op.status,
            "metrics": _metrics(op),
            "error": op.reason, "output_mismatch": op.output_mismatch,
            "recorded_us": op.recorded_us}


def _metrics(op: ReplayedOp) -> dict[str, Any] | None:
    """A replayed op's record metrics: its bytes (--metric memory) or its times."""
    from torchmark.ops.executor import bytes_record, summarize
    from torchmark.timing.memory import columns

    if op.memory:
        return {"forward": bytes_record(columns(op.memory, reserved=any(
            s.reserved is not None for s in op.memory)))}
    return {"forward": summarize(op.times)} if op.times else None


def _unknown_because(timing: Any, durations: dict[int, float]) -> str:
    """Why the time-weighted coverage could not be computed."""
    if timing is None:
        return "no op durations beside the trace"
    if not durations:
        return "the op durations beside the trace hold none"
    if _timing_cut_note(timing):
        return ("the recorded op durations stop before these ops (where the traced "
                "program started its own profiler)")
    return "the recorded op durations cover none of these ops"


def replay(path: str | os.PathLike, *, device: str = "cpu", warmup: int = 2,
           iterations: int = 10, subgraph: str | None = None, step: int | None = None,
           threads: int | None = 1, out: str | os.PathLike | None = None,
           profile: str | os.PathLike | None = None,
           allow_unsafe_ops: bool = False, metric: str = "time") -> ReplayReport:
    """Replay a trace's top-level operators and time them; see ReplayReport. `threads`
    sets torch's CPU threads for the replay (default 1, as torch's Timer; None: torch's
    own count). Ops with side
    effects (files, process-wide state) are refused unless `allow_unsafe_ops`.
    `metric="kernel"` (a CUDA device): each op's kernel time, the sum of its kernels'
    durations from the GPU's timestamps, instead of its device time (docs/gpu.md);
    `metric="memory"`: each op's allocations a call instead (docs/metrics.md)."""
    import torch

    from torchmark.replay.replayer import METRICS

    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got "
                         f"{brief_repr(metric)}")
    if metric == "kernel" and not torch.cuda.is_available():
        raise ValueError("--metric kernel: there is no CUDA device here "
                         "(torch.cuda.is_available() is False); kernel time is read from "
                         "the GPU's own timestamps")
    if metric == "kernel" and not device.startswith("cuda"):
        raise ValueError("--metric kernel reads the GPU's kernel timestamps: add --device cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine")
    if device.split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda, got {brief_repr(device)}")
    for name, value, low in (("warmup", warmup, 0), ("iterations", iterations, 1),
                             ("threads", 1 if threads is None else threads, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {brief_repr(value)}")
    lock = ResultsLock(out, "replay results file").acquire() if out is not None else None
    try:
        return _replay(path, device, warmup, iterations, subgraph, step, threads, out,
                       profile, allow_unsafe_ops, lock, metric)
    finally:
        if lock is not None:
            lock.release()


def _replay(path: str | os.PathLike, device: str, warmup: int, iterations: int,
            subgraph: str | None, step: int | None, threads: int | None,
            out: str | os.PathLike | None, profile: str | os.PathLike | None,
            allow_unsafe_ops: bool, lock: ResultsLock | None,
            metric: str = "time") -> ReplayReport:
    import torch

    trace = load_trace(path)
    replayer = Replayer(trace, device, subgraph=subgraph, step=step,
                        allow_unsafe_ops=allow_unsafe_ops, metric=metric)
    if not replayer.ops:
        scope = f" under {brief_repr(subgraph)}" if subgraph else \
            f" under ProfilerStep#{step}" if step is not None else ""
        raise ValueError(f"{path}: no aten operators to replay{scope}")
    devices = [torch.device(device).index or 0] if device.startswith("cuda") else []
    used_threads = threads or torch.get_num_threads()
    with set_torch_threads(threads):
        iteration = _time(replayer, torch, devices, warmup, iterations, profile)
    timing = _load_timing(path)  # read once: it may be large
    durations = _durations(timing)
    notes = [note for note in (replayer.spin_note(), _timing_cut_note(timing)) if note]
    weighted = _time_weighted(replayer.ops, durations)
    report = ReplayReport(str(path), device, replayer.ops, iteration, weighted, notes,
                          "" if weighted is not None else _unknown_because(timing, durations),
                          threads=used_threads, metric=metric)
    if out is not None:
        writer = OpsResultsWriter(out, {"source": "replay", "trace": str(path),
                                        "trace_schema": trace.schema,
                                        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                        "run_options": {"device": device, "warmup": warmup,
                                                        "iterations": iterations,
                                                        "subgraph": subgraph, "step": step,
                                                        "threads": threads,
                                                        "metric": metric},
                                        "threads": used_threads,  # as ops records it
                                        "system": system_info()}, resume=False, lock=lock)
        for op in replayer.ops:
            writer.write(op_record(op))
        writer.close({"type": "footer", "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      "ok": len(report.replayed),
                      "skipped": sum(op.status == "skipped" for op in report.skipped),
                      "refused": sum(op.status == "refused" for op in report.skipped),
                      "coverage": report.coverage, "time_weighted_coverage": report.time_weighted,
                      "iteration_median": iteration.median if iteration else None,
                      "notes": report.notes})
    return report


def _time(replayer: Replayer, torch: Any, devices: list[int], warmup: int, iterations: int,
          profile: str | os.PathLike | None) -> Any:
    """Prepare, time each op and whole iterations (returned), and profile one iteration;
    torch's generators are reseeded for the replay (random ops repeat) and the caller's
    kept."""
    with torch.random.fork_rng(devices=devices):
        replayer.prepare()
        replayer.time_ops(warmup, iterations)
        iteration = replayer.time_iterations(iterations) if replayer.replayed else None
        if profile is not None:
            from torch.profiler import profile as profiler

            from torchmark.profiler_logs import quietly_entered

            with quietly_entered(profiler()) as prof:
                replayer.run_once()
            prof.export_chrome_trace(str(profile))
    return iteration


def summary_lines(report: ReplayReport, top: int = 10) -> list[str]:
    """The text report: coverage, iteration time, top ops, every skipped op, and every
    replayed op whose outputs differ from the recorded ones."""
    from torchmark.ops.report import format_bytes, format_seconds
    from torchmark.replay.replayer import median_or_none

    threads = f", {report.threads} thread{'s' if report.threads != 1 else ''}" \
        if report.threads else ""
    lines = [f"trace: {report.trace} on {report.device}{threads}",
             f"replayed {len(report.replayed)} of {len(report.ops)} top-level ops "
             f"({report.coverage:.1%})"
             + (f"; {report.time_weighted:.1%} of the recorded op time"
                if report.time_weighted is not None else
                f"; time-weighted coverage unknown ({report.time_weighted_unknown})")]
    if report.iteration is not None:
        lines.append(f"iteration: median {format_seconds(report.iteration.median)} "
                     f"({len(report.iteration.times)} iterations)")
    total = sum(median_or_none(op.values) or 0 for op in report.replayed) or 1.0
    shown = format_bytes if report.metric == "memory" else format_seconds
    lines.append(f"top {min(top, len(report.replayed))} ops by {report.quantity}:")
    for op in report.top(top):
        median = median_or_none(op.values) or 0
        mark = " *" if op.output_mismatch else ""
        lines.append(f"  {shown(median):>10}  {median / total:6.1%}  {op.op} "
                     f"(node {op.node.id}){mark}")
    lines += [f"note: {note}" for note in report.notes]
    differing = [op for op in report.replayed if op.output_mismatch]
    if differing:
        lines.append(f"outputs differ from the recording ({len(differing)}; marked * above; "
                     "data-dependent shapes see the replay's data):")
        for op in differing:
            lines.append(f"  {op.op} (node {op.node.id}): {op.output_mismatch}")
    for status in ("skipped", "refused"):
        ops = [op for op in report.skipped if op.status == status]
        if ops:
            lines.append(f"{status} ({len(ops)}):" + (" (--allow-unsafe-ops runs them)"
                                                      if status == "refused" else ""))
            lines.extend(f"  {op.op} (node {op.node.id}): {op.reason}" for op in ops)
    return lines
