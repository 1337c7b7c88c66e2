"""`torchmark cache info|clear`: the persistent cache of compiled C++ snippets."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import click


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


@click.group("cache")
def cache_cmd():
    """Show or empty torchmark's cache (compiled C++ snippets, precompiled headers)."""


@cache_cmd.command("info")
def cache_info():
    """Where the cache is and what it holds."""
    from torchmark.cpp.compile_cache import cache_entries, folder_size
    from torchmark.paths import cache_dir

    root = cache_dir()
    entries = cache_entries()
    click.echo(f"cache folder: {root}  (set TORCHMARK_CACHE_DIR to move it)")
    snippets = entries["snippets"]
    click.echo(f"C++ snippets: {len(snippets)}, "
               f"{_mb(sum(folder_size(p) for p in snippets))}")
    for path in entries["pch"]:
        click.echo(f"precompiled header: {path.name}, {_mb(folder_size(path))}")
    helper = root / "callgrind"
    if helper.exists():
        click.echo(f"callgrind helper: {_mb(folder_size(helper))}")
    click.echo(f"total: {_mb(folder_size(root))}")


@cache_cmd.command("clear")
@click.option("--keep-pch", is_flag=True, help="Keep the precompiled headers.")
def cache_clear(keep_pch):
    """Delete the cached builds (torchmark's own folders only; a build that another
    process is making right now is left alone)."""
    from torchmark.cpp.compile_cache import folder_size
    from torchmark.paths import cache_dir

    root = cache_dir()
    freed, busy = 0, 0
    for folder in OWN_FOLDERS:
        if not (root / folder).is_dir():
            continue
        for entry in list((root / folder).iterdir()):
            if keep_pch and folder == "cpp" and entry.name.startswith("pch-"):
                continue
            if _in_use(entry):
                busy += 1
                continue
            freed += folder_size(entry) if entry.is_dir() else entry.stat().st_size
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
    kept = f"; {busy} build(s) in progress kept" if busy else ""
    click.echo(f"cleared {root} ({_mb(freed)} freed{kept})")


OWN_FOLDERS = ("cpp", "suite", "callgrind")  # what torchmark writes under its cache folder


def _in_use(entry: Path) -> bool:
    """Whether another process holds the build lock of this cache entry."""
    lock = entry / ".lock"
    if not lock.exists():
        return False
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False
