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
    """Delete the cached builds."""
    from torchmark.cpp.compile_cache import folder_size
    from torchmark.paths import cache_dir

    root = cache_dir()
    freed = 0
    for entry in list(root.iterdir()):
        if keep_pch and entry.name == "cpp":
            for sub in entry.iterdir():
                if not sub.name.startswith("pch-"):
                    freed += folder_size(sub) if sub.is_dir() else sub.stat().st_size
                    shutil.rmtree(sub) if sub.is_dir() else sub.unlink()
            continue
        freed += folder_size(entry) if entry.is_dir() else entry.stat().st_size
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    click.echo(f"cleared {root} ({_mb(freed)} freed)")
