"""torch.utils.benchmark's Measurements pickled (`pickle.dump(measurement, f)`, or a
list, tuple or dict of them), read without running anything the file names.

The pickle is read by an Unpickler whose `find_class` admits only torch's Measurement
and TaskSpec, each as a stand-in that keeps its pickled fields (torch is never
imported); any other class or function the file names (os.system, a tensor, ...) is
refused before anything is built. Each Measurement becomes what torchmark's own Timer
records for it (timing/results.py measurement_to_result): a case of frontend "timeit"
with the same id as torchmark's Timer gives the same statement, setup, labels and
threads; its per-call times (`raw_times` / `number_per_run`) the wall-time samples; its
`metadata` (plain JSON data) the result's extra. The pickle says nothing of the machine
or the run: the provenance names torch.utils.benchmark, the file's time its start."""

from __future__ import annotations

import io
import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import MAX_NESTING, first_line, read_bytes
from torchmark.core.errors import UsageError
from torchmark.core.result import Result
from torchmark.core.task_spec import TASK_SPEC_FIELDS
from torchmark.store.formats.common import (
    file_time,
    foreign_provenance,
    refuse,
    when,
)

TOOL = "torch-pickle"
SOURCE = "torch.utils.benchmark"
PROTOCOLS = range(2, 6)  # the pickle protocols detected (their header: 0x80, protocol)
MAX_METADATA_VALUES = 1_000_000  # values a Measurement's metadata writes out, at most


class _Pickled:
    """Stands in for a class the pickle names: keeps the state pickle gives it."""

    state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _Measurement(_Pickled):
    """torch.utils.benchmark.utils.common.Measurement's pickled fields."""


class _TaskSpec(_Pickled):
    """torch.utils.benchmark.utils.common.TaskSpec's pickled fields."""


ADMITTED = {f"{SOURCE}.utils.common.Measurement": _Measurement,
            f"{SOURCE}.utils.common.TaskSpec": _TaskSpec}


class _Unpickler(pickle.Unpickler):
    """Builds Measurements and plain data only: any other global is refused."""

    def __init__(self, data: bytes, path: Path) -> None:
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        qualified = f"{module}.{name}"
        if qualified in ADMITTED:
            return ADMITTED[qualified]
        shown = qualified[:120] if qualified.isprintable() else repr(qualified[:120])
        raise refuse(self.path, f"refused: the pickle names {shown}, which is not a "
                                f"{SOURCE} Measurement or plain data")


def detect(path: Path, document: Any) -> bool:
    """Whether a file that is no JSON starts as a pickle of protocol 2 to 5 does."""
    if document is not None or not path.is_file():
        return False
    head = first_line(path, "import", limit=2)
    return len(head) == 2 and head[0] == 0x80 and head[1] in PROTOCOLS


def read(path: str | os.PathLike) -> Iterator[Result]:
    """The Results of a pickle of Measurements (module docstring)."""
    from torchmark.timing.measurement import SCHEMA_NAME, SCHEMA_VERSION, Measurement
    from torchmark.timing.results import measurement_to_result

    path = Path(path)
    try:
        value = _Unpickler(read_bytes(path, f"{TOOL} file"), path).load()
    except UsageError:
        raise
    except Exception as e:  # anything a damaged or truncated pickle raises
        raise refuse(path, f"not a readable pickle ({type(e).__name__}: "
                           f"{str(e)[:120]!r})") from None
    measurements = list(_measurements(value, path))
    if not measurements:
        raise refuse(path, f"the pickle holds no {SOURCE} Measurements")
    provenance = foreign_provenance(SOURCE, None, path, started=when(None, file_time(path)))
    for number, pickled in enumerate(measurements, start=1):
        state = _state(pickled, _Measurement)
        try:
            measurement = Measurement.from_dict({
                "schema": SCHEMA_NAME, "version": SCHEMA_VERSION,
                "number_per_run": state.get("number_per_run"),
                "raw_times": state.get("raw_times"),
                "task_spec": {k: v for k, v in _state(state.get("task_spec"), _TaskSpec).items()
                              if k in TASK_SPEC_FIELDS},
                "metadata": _plain(state.get("metadata"))})
        except ValueError as e:
            raise refuse(path, f"Measurement {number}: {' '.join(str(e).split())}") from None
        yield measurement_to_result(measurement, provenance=provenance)


def _state(value: Any, kind: type[_Pickled]) -> dict[Any, Any]:
    """The fields pickled for a stand-in of `kind` ({} for anything else)."""
    state = value.state if isinstance(value, kind) else None
    return state if isinstance(state, dict) else {}


def _measurements(value: Any, path: Path) -> Iterator[_Measurement]:
    """The Measurements in `value`: itself, or those its lists, tuples and dicts (their
    values) hold, each container walked once; a FormatError for anything else."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Measurement):
            yield item
        elif isinstance(item, (list, tuple, dict)):
            if id(item) not in seen:
                seen.add(id(item))
                stack.extend(reversed(list(item.values() if isinstance(item, dict)
                                           else item)))
        else:
            raise refuse(path, f"the pickle holds {type(item).__name__.lstrip('_')}, not "
                               f"{SOURCE} Measurements")


def _plain(metadata: Any) -> Any:
    """A Measurement's metadata as plain JSON data (a ValueError when it is not). A
    pickle may hold one container many times (each level two references to the one
    below: a few hundred bytes that write out as gigabytes), so the values it would
    write are counted first, each reference as often as it is reached, within
    MAX_METADATA_VALUES and MAX_NESTING levels."""
    if metadata is None:
        return None
    stack, counted = [(metadata, 1)], 0
    while stack:
        item, depth = stack.pop()
        counted += 1
        if counted > MAX_METADATA_VALUES or depth > MAX_NESTING:
            raise ValueError(f"metadata holds more than {MAX_METADATA_VALUES} values or "
                             f"nests deeper than {MAX_NESTING} levels")
        if isinstance(item, dict):
            stack.extend((value, depth + 1) for value in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((value, depth + 1) for value in item)
    try:
        return json.loads(json.dumps(metadata, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        raise ValueError("metadata is not plain JSON data") from None
