"""Checks on the file a command will write, made before it measures anything: its folder
is created, and an existing file of another kind is refused rather than replaced."""

from __future__ import annotations

from pathlib import Path

import click

from torchmark.core.bounded_input import first_line, load_json, read_bytes


def file_kind(path: Path) -> str | None:
    """The `schema` a torchmark file declares, on its first line (JSON lines, with its
    `source` when it names one: `torchmark.ops.results/replay`) or in the whole document
    (JSON); None when it declares none or cannot be read."""
    try:
        first = load_json(first_line(path, "file"), str(path))
        if isinstance(first, dict) and "schema" in first:
            source = first.get("source")
            return str(first["schema"]) + (f"/{source}" if source else "")
    except (OSError, UnicodeDecodeError, ValueError):  # LimitError is a ValueError
        pass
    try:
        data = load_json(read_bytes(path, "file"), str(path))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return str(data["schema"]) if isinstance(data, dict) and "schema" in data else None


def prepare_output(path: str | Path, kind: str | tuple[str, ...], what: str,
                   option: str) -> Path:
    """Make `path`'s folder; refuse (a usage error naming `option`) an existing, non-empty
    file that is not of `kind` (see file_kind; a tuple: any of them), so that a slip of
    the path loses nothing."""
    path = Path(path)
    kinds = (kind,) if isinstance(kind, str) else kind
    if path.is_dir():
        raise click.UsageError(f"{option} {path}: is a folder")
    if path.exists() and path.stat().st_size > 0:
        found = file_kind(path)
        if found not in kinds:
            described = f"a {found!r} file" if found else "not a torchmark file"
            raise click.UsageError(f"{option} {path}: the file exists and is {described}; "
                                   f"refusing to replace it with {what} (remove it or "
                                   "choose another path)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise click.UsageError(f"{option} {path}: cannot create its folder ({e})") from None
    return path
