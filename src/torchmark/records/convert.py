"""Front-end outputs -> core Results (see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchmark.callgrind.stats import CallgrindStats
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Failure, Result
from torchmark.timing.results import measurement_to_result as from_measurement
from torchmark.timing.results import timer_case


def from_callgrind(stats: CallgrindStats, *, params: Mapping[str, Any] | None = None,
                   provenance: Provenance | None = None) -> Result:
    """Instruction counts a run (exact: one sample, the counts over the runs / number),
    with the baseline and the per-repeat totals in `extra`."""
    spec = stats.task_spec
    number = int(stats.number_per_run)
    extra: dict[str, Any] = {"total": int(stats.counts()),
                             "denoised_total": int(stats.counts(denoise=True))}
    repeats = getattr(stats, "repeat_totals", ()) or ()
    if repeats:
        extra["repeat_totals"] = [int(t) for t in repeats]
    baseline = stats.baseline_exclusive_stats
    if baseline is not None and len(baseline):
        extra["baseline_total"] = int(baseline.sum())
    samples = tuple(int(t) / number for t in repeats) if repeats else \
        (stats.counts() / number,)
    return Result(case=timer_case(spec, "callgrind", "cpu", params), metric="instructions",
                  samples=samples, number_per_run=number, provenance=provenance,
                  extra=extra)


def from_ops_record(record: Mapping[str, Any], header: Mapping[str, Any] | None = None, *,
                    provenance: Provenance | None = None) -> list[Result]:
    """An ops (or replay) record: one Result a timed pass (forward, backward), or one
    carrying the failure. The case id is the record's own (op|config|build|input, or a
    replayed node's name|id)."""
    header = header or {}
    options = header.get("run_options") or {}
    frontend = "replay" if header.get("source") == "replay" else "ops"
    device = str(options.get("device") or "cpu")
    threads = int(options.get("threads") or header.get("threads") or 1)
    config = record.get("config") or {}
    case = Case(id=str(record["id"]), frontend=frontend, stmt=str(record.get("op", "")),
                threads=threads, device=device,
                params={"config": config} if config else {})
    metric = "device" if device.startswith("cuda") else "wall"  # CUDA runs time events
    metrics = record.get("metrics") or {}
    results = []
    for phase in ("forward", "backward"):
        data = metrics.get(phase) if isinstance(metrics, Mapping) else None
        if not isinstance(data, Mapping) or not data.get("times"):
            continue
        note = data.get("note")
        extra = {"phase": phase, **{k: data[k] for k in ("memory", "iterations")
                                    if k in data}}
        if "work" in metrics:
            extra["work"] = metrics["work"]
        times = tuple(data["times"])
        iterations = data.get("iterations")
        # continuous mode keeps one mean over all its calls: that sample covers them all
        number = int(iterations) if len(times) == 1 and isinstance(iterations, int) \
            and iterations > 1 else 1
        results.append(Result(case=Case(**{**case.__dict__, "id": f"{case.id}#{phase}"}),
                              metric=metric, samples=times, number_per_run=number,
                              warnings=(note,) if note else (), provenance=provenance,
                              extra=extra))
    if not results:
        status = record.get("status")
        error = record.get("error") or f"no timed pass ({status})"
        results.append(Result(case=case, metric=metric, failure=Failure(str(error)),
                              provenance=provenance, extra={"status": status}))
    return results


def from_replay_report(report: Any, *,
                       provenance: Provenance | None = None) -> list[Result]:
    """A replay's ops as Results: one a replayed op (its per-op times), or one carrying
    why it was skipped or refused."""
    from torchmark.replay.session import op_record

    header = {"source": "replay", "run_options": {"device": report.device,
                                                   "threads": report.threads}}
    return [r for op in report.ops
            for r in from_ops_record(op_record(op), header, provenance=provenance)]


def results_of(obj: Any, **kwargs: Any) -> list[Result]:
    """Results of whatever a front-end returned (see the package docstring)."""
    if isinstance(obj, Result):
        return [obj]
    if isinstance(obj, CallgrindStats):
        return [from_callgrind(obj, **kwargs)]
    if isinstance(obj, (list, tuple)):
        return [r for item in obj for r in results_of(item, **kwargs)]
    try:
        return [from_measurement(obj, **kwargs)]
    except TypeError:
        raise TypeError(f"results_of: cannot turn a {type(obj).__name__} into Results") \
            from None
