"""Front-end outputs -> core Results (see the package docstring)."""

from __future__ import annotations

from typing import Any

from torchmark.callgrind.results import stats_to_result as from_callgrind
from torchmark.callgrind.stats import CallgrindStats
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result
from torchmark.ops.results_file import record_results as from_ops_record
from torchmark.timing.memory import MemoryMeasurement
from torchmark.timing.results import measurement_to_result as from_measurement
from torchmark.timing.results import memory_to_results


def from_replay_report(report: Any, *,
                       provenance: Provenance | None = None) -> list[Result]:
    """A replay's ops as Results: one a replayed op (its per-op times), or one carrying
    why it was skipped or refused."""
    from torchmark.replay.session import op_record

    header = {"source": "replay", "run_options": {
        "device": report.device, "threads": report.threads,
        "metric": getattr(report, "metric", "time")}}
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
    if isinstance(obj, MemoryMeasurement):
        return memory_to_results(obj, **kwargs)
    try:
        return [from_measurement(obj, **kwargs)]
    except TypeError:
        raise TypeError(f"results_of: cannot turn a {type(obj).__name__} into Results") \
            from None
