"""JSON-lines result files: a header line per run, one line per record, a footer when a
run ends. Each line is flushed as written, so an interrupted run keeps every finished
record; a torn last line is skipped on reading and cut off before appending, so the file
stays valid JSON lines."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from torchmark.core.bounded_input import brief, brief_repr, load_json, read_text
from torchmark.core.results_lock import ResultsLock


def _finite(value: Any) -> Any:
    """`value` with every non-finite float spelled as a string ("inf", "-inf", "nan"):
    JSON has no such numbers, and Python's `Infinity` / `NaN` break other readers (jq,
    JavaScript, strict parsers); as strings they also compare equal on reading back."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(float(value))
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps_line(record: Any) -> str:
    """One strict JSON line: non-finite floats as strings, anything else unknown as str()."""
    return json.dumps(_finite(record), default=str, allow_nan=False)


def iter_lines(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The JSON objects of a results file. Its last line is skipped when it is not one
    (a torn line: a run killed while writing it); any other line that is not is a
    UsageError naming it (a damaged file is never read as a shorter one). The file is
    read within bounds (core.bounded_input): a regular file under the size cap, no line
    nested too deep (a LimitError naming the line)."""
    from torchmark.core.errors import UsageError

    text = read_text(path, "results file")
    lines = [(number, stripped) for number, line in enumerate(text.splitlines(), start=1)
             if (stripped := line.strip())]
    last = lines[-1][0] if lines else 0
    for number, line in lines:
        where = f"{brief(str(path))}: line {number}"
        try:
            value = load_json(line, where)
        except json.JSONDecodeError as e:
            if number == last:
                continue
            raise UsageError(f"{where}: not a JSON object ({e.msg}); only a last line "
                             "torn by an interrupted run is passed over") from None
        if isinstance(value, dict):
            yield value
        elif number != last:
            raise UsageError(f"{where}: not a JSON object (a {type(value).__name__})")


def cut_torn_line(path: Path, chunk: int = 1 << 16) -> None:
    """Truncate what follows the last newline when it is not a whole JSON object (a line
    an interrupted run left half written: its record was never finished, and appending
    after it would bury an invalid line in the middle of the file). A whole object that
    only lacks its newline (a file edited by hand) is kept, and the newline added."""
    with open(path, "r+b") as f:
        end = f.seek(0, os.SEEK_END)
        position, cut = end, 0
        while position > 0:
            step = min(chunk, position)
            position -= step
            f.seek(position)
            newline = f.read(step).rfind(b"\n")
            if newline >= 0:
                cut = position + newline + 1
                break
        if cut == end:
            return
        f.seek(cut)
        try:
            whole = isinstance(json.loads(f.read(end - cut)), dict)
        except (json.JSONDecodeError, UnicodeDecodeError):
            whole = False
        if whole:
            f.seek(end)
            f.write(b"\n")
        else:
            f.truncate(cut)


def refuse_other_options(path: str | os.PathLike, before: dict[str, Any],
                         now: dict[str, Any], keys: tuple[str, ...]) -> None:
    """For --resume: a ValueError naming each of `keys` whose value the file was made
    with (`before`, from its header) differs from this run's (`now`); one file never
    mixes settings."""
    changed = [f"{k} {brief_repr(before[k])} -> {brief_repr(now[k])}" for k in keys
               if k in before and k in now and before[k] != now[k]]
    if changed:
        raise ValueError(f"--resume {path}: it was run with other options "
                         f"({', '.join(changed)}); resume with the same ones, or write a "
                         "new file")


def refuse_other_torch(path: str | os.PathLike, header: dict[str, Any]) -> None:
    """For --resume: a ValueError when the file's header says it was made with another
    torch than the one installed now (figures of two torch builds must not mix)."""
    from torchmark.core.torch_install import torch_version

    before, now = (header.get("system") or {}).get("torch"), torch_version()
    if before and now and before != now:
        raise ValueError(f"--resume {path}: it was run with torch {before}, this is torch "
                         f"{now}; resume with the torch it was made with, or write a new "
                         "file")


class JsonlWriter:
    """Appends one flushed JSON line per record (thread-safe). `resume` appends to an
    existing file; otherwise the file is replaced. The header is written at once.

    The writer holds the file's ResultsLock until close(): `lock`, taken by a caller who
    read the file first (to resume it), or else taken here; a file another run holds is
    a BusyError."""

    def __init__(self, path: str | os.PathLike, header: dict[str, Any], resume: bool,
                 lock: ResultsLock | None = None) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._hold = lock if lock is not None else ResultsLock(self.path).acquire()
        try:
            fresh = not resume or not self.path.exists() or self.path.stat().st_size == 0
            if not fresh:
                cut_torn_line(self.path)
            self._file = open(self.path, "w" if fresh else "a", encoding="utf-8")
            self.resumed = not fresh
            self.write({**header, "resumed": self.resumed})
        except BaseException:
            self._hold.release()
            raise

    def write(self, record: dict[str, Any]) -> None:
        self.write_many([record])

    def write_many(self, records: list[dict[str, Any]]) -> None:
        """Lines written together (one write, one flush): no other thread's line lands
        between them."""
        text = "".join(dumps_line(record) + "\n" for record in records)
        with self._lock:
            self._file.write(text)
            self._file.flush()

    def close(self, footer: dict[str, Any] | None = None) -> None:
        try:
            if footer is not None:
                self.write(footer)
            self._file.close()
        finally:
            self._hold.release()


def system_info() -> dict[str, Any]:
    """Where a run happened: torch, Python, machine, CPU model, git commit (when known)."""
    import platform
    import subprocess

    from torchmark.core.torch_install import torch_version

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5, check=False).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"torch": torch_version(), "python": platform.python_version(),
            "machine": platform.machine(), "cpu": cpu, "cpus": os.cpu_count(),
            "host": platform.node(), "git_commit": commit}


def loads(line: bytes | str | memoryview) -> Any:
    """A line's JSON value (an import's lines; a JSON column's: the store's engines read
    theirs with it): orjson's parser (C, several times the standard one's speed); a line it refuses
    that the standard parser reads (an integer past 64 bits, NaN) is taken from that
    one, so validation names what is wrong with it. A ValueError for what is no JSON."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as e:
        try:
            return json.loads(bytes(line) if isinstance(line, memoryview) else line)
        except (ValueError, RecursionError):
            raise ValueError(str(e)) from None
