"""Other tools' result files as torchmark Results (`torchmark import --from FORMAT`):
one module a format, each with `TOOL`, `detect(path, document)` (document: the file's
JSON, None for a folder or a file that is no JSON) and `read(path)` (its Results, or a
FormatError naming what is wrong). `detect_format` names the format of a file or folder
when exactly one reader claims it; docs/import.md gives each format's mapping."""

from __future__ import annotations

import importlib
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, first_line, load_json, read_text
from torchmark.core.errors import UsageError
from torchmark.core.result import Result

# the format's name (as --from takes it) -> its module
FORMATS = {
    "pytest-benchmark": "torchmark.store.formats.pytest_benchmark",
    "pyperf": "torchmark.store.formats.pyperf",
    "asv": "torchmark.store.formats.asv",
    "google-benchmark": "torchmark.store.formats.google_benchmark",
    "nvbench": "torchmark.store.formats.nvbench",
    "torch-pickle": "torchmark.store.formats.torch_pickle",
}


def reader(name: str) -> Any:
    """The module of format `name`; a UsageError listing the formats otherwise."""
    if name not in FORMATS:
        raise UsageError(f"--from: unknown format {brief(name, 60)!r}; one of "
                         f"{', '.join(FORMATS)}")
    return importlib.import_module(FORMATS[name])


def detect_format(path: str | os.PathLike) -> str | None:
    """The one format whose reader claims `path`; None when none does (a torchmark
    file, or something else); a UsageError naming them when several do."""
    path = Path(path)
    document = None if path.is_dir() else _document(path)
    claims = [name for name in FORMATS if reader(name).detect(path, document)]
    if len(claims) > 1:
        raise UsageError(f"{brief(str(path))}: could be {' or '.join(claims)}; say which "
                         "with --from")
    return claims[0] if claims else None


def read_foreign(path: str | os.PathLike, name: str) -> Iterator[Result]:
    """The Results of `path` in format `name`, each checked as storable."""
    read = reader(name).read(Path(path))
    for number in itertools.count(1):
        try:
            result = next(read, None)
        except OverflowError as e:  # a value past what a float's arithmetic holds
            raise UsageError(f"{brief(str(path))}: {name} benchmark {number}: "
                             f"{brief(str(e), 200)}") from None
        if result is None:
            return
        problem = result.storable_problem()
        if problem is not None:
            raise UsageError(f"{brief(str(path))}: {name} benchmark {number} "
                             f"({brief(result.case.stmt, 80)}): {problem}")
        yield result


def _document(path: Path) -> Any:
    """A file's JSON value when it starts like one (and is one), else None."""
    head = first_line(path, "import").lstrip()
    if not head.startswith((b"{", b"[")):
        return None
    try:
        return load_json(read_text(path, "import"), brief(str(path)))
    except (json.JSONDecodeError, UsageError):
        return None
