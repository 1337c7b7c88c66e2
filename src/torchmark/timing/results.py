"""Measurements as core Results and back: the Timer's output in the one record (and a
MemoryMeasurement as its two exact Results).

A Measurement becomes a wall-time Result (a device-time one when its clock was CUDA
events), its per-call times the samples, its metadata in `extra`; reading it back gives
an equal Measurement (the raw block times are kept in `extra` only where the per-call
samples times the block size do not give them back exactly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import STATED, Result, timer_case
from torchmark.timing.measurement import SCHEMA_NAME, SCHEMA_VERSION, Measurement
from torchmark.timing.memory import MemoryMeasurement

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
    if STATED in result.extra:  # another tool's statistics: the verdict compares them
        metadata = {**(metadata if isinstance(metadata, dict) else {}),
                    STATED: result.extra[STATED]}
    try:  # Measurement's own checks on what a file holds
        return Measurement.from_dict({
            "schema": SCHEMA_NAME, "version": SCHEMA_VERSION,
            "number_per_run": result.number_per_run, "raw_times": raw,
            "task_spec": _spec_fields(result),
            "metadata": metadata if isinstance(metadata, dict) else None})
    except ValueError as e:
        raise UsageError(f"result {case.title!r}: {e}") from None


def failure_placeholder(result: Result) -> Measurement:
    """A failed time result as `ab` pairs it: one placeholder sample, its TaskSpec as
    result_to_measurement gives, its metadata naming the `failure`."""
    assert result.failure is not None
    return Measurement.from_dict({
        "schema": SCHEMA_NAME, "version": SCHEMA_VERSION,
        "number_per_run": result.number_per_run, "raw_times": [1.0],
        "task_spec": _spec_fields(result), "metadata": {"failure": result.failure.error}})


def _spec_fields(result: Result) -> dict[str, Any]:
    """The TaskSpec fields a result's case holds."""
    case = result.case
    return {"stmt": case.stmt, "setup": case.setup,
            "global_setup": str(case.params.get("global_setup", "")), "label": case.label,
            "sub_label": case.sub_label, "description": case.description, "env": case.env,
            "num_threads": case.threads}


def result_to_memory(result: Result) -> MemoryMeasurement:
    """The MemoryMeasurement a `memory` Result holds (what `memory_to_results` made); a
    UsageError for another metric or a result without its samples' counts."""
    from torchmark.core.task_spec import TaskSpec
    from torchmark.timing.memory import FIELDS, MemorySample

    title = result.case.title
    if result.metric != "memory" or result.failure is not None:
        raise UsageError(f"result {title!r} is not a memory measurement")
    held = result.extra.get("memory")
    listed = held.get("samples") if isinstance(held, Mapping) else None
    if not isinstance(listed, list) or not listed:
        raise UsageError(f"result {title!r}: no memory samples in its record")
    samples = []
    for entry in listed:
        values = entry if isinstance(entry, Mapping) else {}
        numbers = {name: values.get(name) for name in FIELDS}
        if not all(isinstance(v, int) and not isinstance(v, bool) for k, v in numbers.items()
                   if k != "reserved" or v is not None):
            raise UsageError(f"result {title!r}: a memory sample is not whole numbers of "
                             f"{', '.join(FIELDS)}")
        samples.append(MemorySample(**numbers))  # type: ignore[arg-type]
    warm_up = held.get("warm_up") if isinstance(held, Mapping) else None
    return MemoryMeasurement(tuple(samples), TaskSpec(**_spec_fields(result)),
                             str(held.get("device") or "cpu") if isinstance(held, Mapping)
                             else "cpu", warm_up if isinstance(warm_up, int) else 0)


def memory_to_results(m: MemoryMeasurement, frontend: str = "timeit", *,
                      params: Mapping[str, Any] | None = None,
                      provenance: Provenance | None = None) -> list[Result]:
    """A MemoryMeasurement as two exact Results of one case: `memory` (each sampled
    call's peak bytes above its start) and `allocated` (each call's bytes allocated in
    all); the samples' counts (allocations, bytes kept, reserved) in `extra`."""
    device = "cuda" if m.device.startswith("cuda") else "cpu"
    case = timer_case(m.task_spec, frontend, device, params)
    extra = {"memory": {"device": m.device, "warm_up": m.warm_up,
                        "samples": [s.to_dict() for s in m.samples]}}
    return [Result(case=case, metric=metric, samples=tuple(float(getattr(s, field))
                                                           for s in m.samples),
                   number_per_run=1, warnings=m.warnings, provenance=provenance, extra=extra)
            for metric, field in (("memory", "peak"), ("allocated", "allocated"))]
