"""An ops results file as Measurements, so `torchmark compare` puts runs side by side.

Each measured case becomes one Measurement per pass (forward, and backward when timed):
label = the operator, sub_label = its inputs (and the case id), description = the file's
name (a column per file; its path where two files share a name), env = the pass. Failed cases have no times and are left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.errors import error_line
from torchmark.core.task_spec import TaskSpec
from torchmark.ops.report import describe_config
from torchmark.ops.results_file import read_file
from torchmark.timing.measurement import MAX_TIME_S, Measurement, plausible_time


def column_names(paths: Sequence[str | os.PathLike]) -> list[str]:
    """A column name per file: its name without the suffix, or its path without the
    suffix where two files share a name (a/ops-results.jsonl, b/ops-results.jsonl)."""
    stems = [Path(p).stem for p in paths]
    return [stem if stems.count(stem) == 1 else str(Path(p).with_suffix(""))
            for stem, p in zip(stems, paths, strict=True)]


def ops_measurements(path: str | os.PathLike, column: str | None = None) -> list[Measurement]:
    """The forward (and backward) times of every case a results file holds as ok; when a
    resumed file holds a case twice, the last record counts. `column`: the description
    (default: the file's name without its suffix)."""
    path = Path(path)
    header, every = read_file(path)
    records = {r["id"]: r for r in every if r.get("status") == "ok" and "id" in r}
    options = header.get("run_options") or {}
    if not isinstance(options, dict):
        raise ValueError(f"{path}: the header's run_options is not an object")
    # the count the run used; files from before it was recorded say only --threads, and
    # without it are marked: `ab` then pairs their cases whatever the other side's count
    recorded = options.get("threads") or header.get("threads")
    threads, unknown = recorded or 1, not recorded
    out = []
    for record in records.values():
        try:
            out += _record_measurements(record, path, column, options, threads, unknown)
        except (TypeError, AttributeError, KeyError, ValueError, OverflowError) as e:
            raise ValueError(f"{path}: record {brief_repr(str(record.get('id'))[:80])} is malformed "
                             f"({error_line(e)})") from None
    return out


def _record_measurements(record: dict[str, Any], path: Path, column: str | None,
                         options: dict[str, Any], threads: Any,
                         threads_unknown: bool = False) -> list[Measurement]:
    """The forward (and backward) Measurements of one ok record."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"the run's thread count is {brief_repr(threads)}")
    out = []
    for phase in ("forward", "backward"):
        metrics = (record.get("metrics") or {}).get(phase)
        if not metrics or not metrics.get("times"):
            continue
        times, calls = metrics["times"], metrics.get("iterations", len(metrics["times"]))
        if not isinstance(times, list) or not all(map(plausible_time, times)):
            raise ValueError(f"its {phase} times are not a list of numbers from 0 to "
                             f"{MAX_TIME_S:g} s")
        if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
            raise ValueError(f"its {phase} iterations is {brief_repr(calls)}, not an int >= 1")
        number = calls if len(times) == 1 and calls > 1 else 1  # continuous: one mean
        spec = TaskSpec(stmt=str(record["op"]), setup="pass", label=str(record["op"]),
                        sub_label=f"{describe_config(record['config'])} [{record['id']}]",
                        description=column or path.stem, env=phase, num_threads=threads)
        out.append(Measurement(number, [t * number for t in times], spec,
                               metadata={"source": str(path), "device": options.get("device"),
                                         "exec_mode": options.get("exec_mode"),
                                         "threads_unknown": threads_unknown}))
    return out
