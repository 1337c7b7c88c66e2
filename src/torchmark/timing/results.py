"""Measurements as core Results and back: the Timer's output in the one record.

A Measurement becomes a wall-time Result (a device-time one when its clock was CUDA
events), its per-call times the samples, its metadata in `extra`; reading it back gives
an equal Measurement (the raw block times are kept in `extra` only where the per-call
samples times the block size do not give them back exactly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result, timer_case
from torchmark.timing.measurement import SCHEMA_NAME, SCHEMA_VERSION, Measurement

TIME_METRICS = ("wall", "device", "kernel", "batch")


def measurement_to_result(m: Measurement, frontend: str = "timeit", *,
                          params: Mapping[str, Any] | None = None,
                          provenance: Provenance | None = None) -> Result:
    """A Measurement as a Result: wall time, or the GPU quantity it holds (device,
    batch or kernel time: Measurement.quantity; its metadata kept in `extra`). `frontend="cpp"` for a C++
    snippet, "fuzz" for a fuzzed case (its parameters in `params`)."""
    m = Measurement.coerce(m)
    device, metric = "cpu", "wall"
    extra: dict[str, Any] = {}
    if isinstance(m.metadata, dict):
        extra["metadata"] = m.metadata
        if m.clock == "device":
            metric = m.quantity
            device = str(m.metadata.get("device", "cuda"))
    number = int(m.number_per_run)
    samples = tuple(m.times)
    if [s * number for s in samples] != [float(t) for t in m.raw_times]:
        extra["raw_times"] = [float(t) for t in m.raw_times]  # rounding lost them
    return Result(case=timer_case(m.task_spec, frontend, device, params), metric=metric,
                  samples=samples, number_per_run=number, warnings=tuple(m.warnings),
                  provenance=provenance, extra=extra)


def result_to_measurement(result: Result) -> Measurement:
    """The Measurement a time Result holds (what `measurement_to_result` made, or any
    front-end's time result: its samples as blocks of `number_per_run` calls); a
    UsageError for a failed result or one of another metric."""
    case = result.case
    if result.failure is not None:
        raise UsageError(f"result {case.title!r} failed ({result.failure.error}); it holds "
                         "no times")
    if result.metric not in TIME_METRICS:
        raise UsageError(f"result {case.title!r} is {result.metric}, not a time")
    raw = result.extra.get("raw_times")
    if not isinstance(raw, list):
        raw = [s * result.number_per_run for s in result.samples]
    metadata = result.extra.get("metadata")
    spec = {"stmt": case.stmt, "setup": case.setup,
            "global_setup": str(case.params.get("global_setup", "")), "label": case.label,
            "sub_label": case.sub_label, "description": case.description, "env": case.env,
            "num_threads": case.threads}
    try:  # Measurement's own checks on what a file holds
        return Measurement.from_dict({
            "schema": SCHEMA_NAME, "version": SCHEMA_VERSION,
            "number_per_run": result.number_per_run, "raw_times": raw, "task_spec": spec,
            "metadata": metadata if isinstance(metadata, dict) else None})
    except ValueError as e:
        raise UsageError(f"result {case.title!r}: {e}") from None
