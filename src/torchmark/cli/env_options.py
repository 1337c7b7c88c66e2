"""--allow-env-diff, and the comparability check of the commands that compare two sides
(gate, compare, ab on runs, regressions): regressions/comparability.py decides; this
prints the differences on stderr before the refusal (exit 2), or as a warning when they
are allowed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click

ALLOW_HELP = ("Compare even when the two sides' environments differ in what changes "
              "performance (hardware, the torch build, thread settings); every verdict "
              "is then marked.")


def allow_env_diff_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--allow-env-diff", is_flag=True, help=ALLOW_HELP)(command)


def check_environments(baseline: Iterable[Any], candidate: Iterable[Any], allow: bool,
                       what: str) -> list[Any]:
    """The blocking differences between two sides' results' fingerprints, each printed
    on stderr: [] when comparable; with `allow`, the differences, after a warning;
    otherwise an EnvironmentsDiffer (exit 2)."""
    from torchmark.core.neutralise import terminal_text
    from torchmark.regressions.comparability import (
        EnvironmentsDiffer,
        check_sides,
        marked,
    )

    try:
        found = check_sides(baseline, candidate, allow, what)
    except EnvironmentsDiffer as refused:
        for difference in refused.differences:
            click.echo(terminal_text(f"  {difference.describe()}"), err=True)
        raise
    if found:
        click.echo(f"warning: {what}: {terminal_text(marked(found))}:", err=True)
        for difference in found:
            click.echo(terminal_text(f"  {difference.describe()}"), err=True)
    return found


def check_files(files: list[str], allow: bool) -> list[Any]:
    """Files compared only in comparable environments: each file's results (the
    fingerprints their provenance holds; a format without one: none) against the first
    file's, as check_environments; the differences allowed."""
    from torchmark.records import load_results

    first = load_results(files[0])
    return [difference for other in files[1:] for difference in check_environments(
        first, load_results(other), allow, f"{files[0]} and {other}")]
