"""The progress bar the long-running commands share: done / total, failures, ETA."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(disable: bool = False) -> Progress:
    """A Progress on stderr; tasks carry a `failed` field."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("failed: {task.fields[failed]}"), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True),
                    disable=disable)
