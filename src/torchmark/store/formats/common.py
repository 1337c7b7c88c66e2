"""What every importer of another tool's results shares: reading its file within bounds,
its refusals as one line (a FormatError, exit 2), and the Result and provenance a case
and a run of another tool become.

A case is named by its tool (the Result's frontend) and the tool's own name for it, its
parameters in `params`; its id is a hash of the three, so the same benchmark imported
from two runs is one case. Samples are per call, in seconds (or the metric's unit).
Where a file kept raw samples they are the Result's samples; where it kept only
statistics, those are stated (core/result.py Stated) and the samples are their median
(or mean) alone, so the verdict engine compares the statistics instead."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, load_json, read_text
from torchmark.core.errors import UsageError
from torchmark.core.provenance import Machine, Provenance
from torchmark.core.result import STATED, Case, Result, Stated, case_id


class FormatError(UsageError):
    """A file that is not what its format says (one line naming the file and what is
    wrong; exit 2, nothing stored)."""


def refuse(path: str | os.PathLike, problem: str) -> FormatError:
    return FormatError(f"{brief(str(path))}: {problem}")


def folder_files(folder: Path, pattern: str, recursive: bool = False) -> list[Path]:
    """The regular files in `folder` whose names match `pattern` (in its subfolders too
    with `recursive`), sorted. A symbolic link, to a file or a folder, is left out: a
    results folder from someone else must not make an import read files outside it."""
    def linked(file: Path) -> bool:
        """Whether the file, or a folder between `folder` and it, is a link."""
        inner = [folder / part for part in file.relative_to(folder).parents
                 if part != Path(".")]
        return any(p.is_symlink() for p in (file, *inner))

    found = folder.rglob(pattern) if recursive else folder.glob(pattern)
    return sorted(file for file in found if not linked(file) and file.is_file())


def load_document(path: str | os.PathLike, tool: str) -> Any:
    """A JSON document of `tool` read within the input limits (core/bounded_input.py);
    a FormatError when it is no JSON."""
    text = read_text(path, f"{tool} file")
    try:
        return load_json(text, brief(str(path)))
    except json.JSONDecodeError as e:
        raise refuse(path, f"not a {tool} JSON file ({e})") from None


def field(data: Any, key: str, kind: type | tuple[type, ...], path: str | os.PathLike,
          where: str = "", optional: bool = False, least: float | None = None) -> Any:
    """data[key] of type `kind` (a number: int or float, never bool), at least `least`
    when given (a count of iterations, loops or rounds: 1); a FormatError naming
    `where`.key otherwise (None for a missing optional key)."""
    if not isinstance(data, Mapping):
        raise refuse(path, f"{where or 'the document'} must be an object")
    value = data.get(key)
    if value is None and optional:
        return None
    numbers = kind in (float, (int, float))
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) if numbers else isinstance(value, kind)
    if not ok:
        name = "a number" if numbers else getattr(kind, "__name__", str(kind))
        raise refuse(path, f"{(where + '.') if where else ''}{key} must be {name}, got "
                           f"{brief(repr(value), 60)}")
    if least is not None and isinstance(value, (int, float)) and value < least:
        raise refuse(path, f"{(where + '.') if where else ''}{key} must be at least "
                           f"{least:g}, got {brief(repr(value), 60)}")
    return value


def number_list(values: Any, path: str | os.PathLike, where: str) -> list[float]:
    """A list of finite non-negative numbers; a FormatError naming `where` otherwise."""
    if not isinstance(values, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v >= 0 for v in values):
        raise refuse(path, f"{where} must be a list of finite numbers >= 0")
    return [float(v) for v in values]


def foreign_case(tool: str, name: str, params: Mapping[str, Any] | None = None, *,
                 label: str | None = None, sub_label: str | None = None,
                 device: str = "cpu", threads: int = 1) -> Case:
    """The case of `tool`'s benchmark `name` with `params` (stable across files)."""
    params = {str(k): v for k, v in (params or {}).items()}
    return Case(id=case_id(tool, name=name, params=params), frontend=tool, stmt=name,
                label=label or name, sub_label=sub_label, device=device,
                threads=max(1, threads), params=params)


def raw_result(case: Case, samples: Sequence[float], provenance: Provenance, *,
               metric: str = "wall", number_per_run: int = 1,
               extra: Mapping[str, Any] | None = None) -> Result:
    """A Result of raw samples (per call, in the metric's unit)."""
    return Result(case=case, metric=metric, samples=tuple(samples),
                  number_per_run=max(1, int(number_per_run)), provenance=provenance,
                  extra=dict(extra or {}))


def stated_result(case: Case, stated: Stated, provenance: Provenance, *,
                  metric: str = "wall", number_per_run: int = 1,
                  extra: Mapping[str, Any] | None = None) -> Result:
    """A Result of the statistics a file stated (no raw samples): its one sample is
    the median where stated, else the mean."""
    value = stated.median if stated.median is not None else stated.mean
    return Result(case=case, metric=metric, samples=(value,),
                  number_per_run=max(1, int(number_per_run)), provenance=provenance,
                  extra={**dict(extra or {}), STATED: stated.to_dict()})


def when(value: Any, fallback: dt.datetime, path: str | os.PathLike | None = None,
         name: str = "date") -> str:
    """A run's start as provenance writes it, from an ISO text or a Unix time in
    seconds (or milliseconds, as asv writes them); `fallback` (the file's time) when it
    is missing. With `path`, a `name` given that is not a time, or lies in the future,
    is refused (a FormatError); without, it too gives way to `fallback`."""
    moment = None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value) and value > 0:
        seconds = value / 1000 if value > 1e11 else value
        try:
            moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            moment = None
    elif isinstance(value, str):
        from torchmark.core.provenance import parse_time

        moment = parse_time(value[:64])
    now = dt.datetime.now(dt.timezone.utc)
    if value is not None and path is not None and (
            moment is None or moment > now + dt.timedelta(days=1)):
        raise refuse(path, f"{name} {brief(repr(value), 60)} is "
                           f"{'not a time' if moment is None else 'in the future'}")
    if moment is None or moment > now + dt.timedelta(days=1):
        moment = fallback
    return moment.strftime("%Y-%m-%dT%H:%M:%S%z")


def file_time(path: str | os.PathLike) -> dt.datetime:
    """When the file was last written (the start of a run that says nothing of it)."""
    return dt.datetime.fromtimestamp(Path(path).stat().st_mtime, dt.timezone.utc)


def text(value: Any, default: str = "unknown", limit: int = 512) -> str:
    """A string field of another tool's file as provenance keeps it (cut to `limit`)."""
    return value[:limit] if isinstance(value, str) and value else default


def count(value: Any) -> int:
    """A count of another tool's file (cores, bytes), 0 when it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and \
        0 <= value < 2**62 else 0


def foreign_provenance(tool: str, version: str | None, path: str | os.PathLike, *,
                       started: str, hostname: str = "unknown",
                       cpu_model: str = "unknown", cores: int = 0, memory_bytes: int = 0,
                       python: str = "unknown", commit: str | None = None,
                       dirty: bool | None = None, torch_version: str | None = None,
                       gpus: Sequence[str] = (), gpu_driver: str | None = None,
                       env: str | None = None,
                       environment: Mapping[str, Any] | None = None) -> Provenance:
    """The provenance of a run of `tool` (at `version`), from what its file says of the
    machine, Python and commit: torchmark_version names the tool ("pyperf 2.10.0"),
    the command is the import's. `environment`: the fingerprint fields the file gives
    (core/fingerprint.py names them), kept for comparability checks."""
    return Provenance(
        torchmark_version=f"{tool} {version}" if version else tool,
        torch_version=torch_version, torch_git=None, torch_cuda=None, torch_cudnn=None,
        torch_debug=None, python=python, git_commit=commit[:64] if commit else None,
        git_dirty=dirty if dirty in (True, False) else None,
        machine=Machine(hostname=text(hostname), cpu_model=text(cpu_model),
                        cores=count(cores), memory_bytes=count(memory_bytes),
                        gpus=tuple(text(g) for g in gpus), gpu_driver=gpu_driver),
        env=env, started=started,
        command=("torchmark", "import", "--from", tool, brief(str(path), 400)),
        environment=tuple(sorted((environment or {}).items())))
