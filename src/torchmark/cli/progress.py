"""The progress bar the long-running commands share: done / total, failures, ETA."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(disable: bool = False) -> Progress:
    """A Progress on stderr, shown where progress is wanted (a terminal, or
    TORCHMARK_PROGRESS=1: core/announce.py); tasks carry a `failed` field. Disabled, its
    console still prints (the failures RecordTicker reports)."""
    from torchmark.core.announce import progress_wanted

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("failed: {task.fields[failed]}"), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True),
                    disable=disable or not progress_wanted())


class RecordTicker:
    """Advances a progress task per finished record and prints each failure above it."""

    def __init__(self, progress: Progress, task: Any,
                 describe: Callable[[dict], str] = lambda record: record["id"]) -> None:
        self.progress, self.task, self.describe, self.failed = progress, task, describe, 0

    def __call__(self, record: dict) -> None:
        if record["status"] != "ok":
            self.failed += 1
            error = (record.get("error") or "").splitlines()
            # user text (ids, error messages) may hold brackets: never read as markup
            self.progress.console.print(f"[red]failed[/red] {escape(self.describe(record))}: "
                                        f"{escape(error[0]) if error else ''}")
        self.progress.update(self.task, advance=1, failed=self.failed)
