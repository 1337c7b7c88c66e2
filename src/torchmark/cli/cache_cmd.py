"""`torchmark cache info|clear`: the persistent cache of compiled C++ snippets."""

from __future__ import annotations

import shutil

import click


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


@click.group("cache")
def cache_cmd():
    """Show or empty torchmark's cache (compiled C++ snippets, precompiled headers)."""


@cache_cmd.command("info")
def cache_info():
    """Where the cache is and what it holds."""
    from torchmark.core.paths import cache_dir
    from torchmark.cpp.compile_cache import cache_entries, folder_size, pch_torch

    root = cache_dir()
    entries = cache_entries()
    click.echo(f"cache folder: {root}  (set TORCHMARK_CACHE_DIR to move it)")
    snippets = entries["snippets"]
    click.echo(f"C++ snippets: {len(snippets)}, "
               f"{_mb(sum(folder_size(p) for p in snippets))}")
    for path in entries["pch"]:
        built_for, gone = pch_torch(path)
        what = "unrecorded (not used since headers record their torch install)" \
            if built_for is None else built_for + (" (gone: stale)" if gone else "")
        click.echo(f"precompiled header: {path.name}, {_mb(folder_size(path))}, {what}")
    for path in entries["pch_failed"]:
        click.echo(f"precompiled header: {path.name} failed to build (see "
                   f"{path / 'error.log'}); snippets compile without it, more slowly; "
                   "`torchmark cache clear` lets the next snippet try again")
    helper = root / "callgrind"
    if helper.exists():
        click.echo(f"callgrind helper: {_mb(folder_size(helper))}")
    click.echo(f"total: {_mb(folder_size(root))}")


@cache_cmd.command("clear")
@click.option("--keep-pch", is_flag=True, help="Keep the precompiled headers.")
@click.option("--stale", is_flag=True,
              help="Only remove the precompiled headers of torch installs that no longer "
                   "exist or hold another version, and those no torchmark has used since "
                   "headers record their install (`cache info` says which), and what "
                   "killed builds left half-written.")
def cache_clear(keep_pch, stale):
    """Delete the cached builds (torchmark's own folders only; a build that another
    process is making right now is left alone)."""
    from torchmark.core.paths import cache_dir
    from torchmark.cpp.compile_cache import (
        folder_size,
        in_use,
        remove_orphan_builds,
        remove_stale_pch,
    )

    root = cache_dir()
    if stale:
        if keep_pch:
            raise click.UsageError("--stale removes precompiled headers only; it does not "
                                   "take --keep-pch")
        removed = remove_stale_pch(unrecorded=True)
        orphans = sum(remove_orphan_builds(entry) for entry in
                      ((root / "cpp").iterdir() if (root / "cpp").is_dir() else ())
                      if entry.is_dir() and not in_use(entry))
        click.echo(f"removed {len(removed)} precompiled header(s) of torch installs that "
                   f"are gone or unrecorded ({_mb(sum(size for _, size in removed))} freed)"
                   + (f"; half-written builds of killed processes: {_mb(orphans)} freed"
                      if orphans else ""))
        return
    freed, busy = 0, 0
    for folder in OWN_FOLDERS:
        if not (root / folder).is_dir():
            continue
        for entry in list((root / folder).iterdir()):
            if keep_pch and folder == "cpp" and entry.name.startswith("pch-"):
                continue
            if in_use(entry):
                busy += 1
                continue
            freed += folder_size(entry) if entry.is_dir() else entry.stat().st_size
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
    kept = f"; {busy} build(s) in progress kept" if busy else ""
    click.echo(f"cleared {root} ({_mb(freed)} freed{kept})")


OWN_FOLDERS = ("cpp", "suite", "callgrind")  # what torchmark writes under its cache folder
