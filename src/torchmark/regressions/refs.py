"""What a gate or a comparison names as one side: a stored run, the newest run, the runs
of a commit or an env label, or a results file; resolved to core Result records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.result import Result

REF_FORMS = "a run id (12 or run:12), latest, commit:SHA, env:LABEL, or a results file"


def resolve_ref(ref: str, store: Any | None) -> list[Result]:
    """The results `ref` names (REF_FORMS). A commit or env label may span several runs:
    each (case, metric) is taken from the newest run that holds it. `store` is opened
    lazily by the caller (None when only files are named)."""
    path = Path(ref)
    if path.exists():
        from torchmark.records import load_results

        return load_results(path)
    if store is None:
        raise UsageError(f"{ref!r} is no file; naming a run needs the store")
    if ref == "latest":
        runs = store.run_ids()[:1]
    elif ref.startswith("commit:") and ref.removeprefix("commit:"):
        runs = store.run_ids(commit=ref.removeprefix("commit:"))
    elif ref.startswith("env:") and ref.removeprefix("env:"):
        runs = store.run_ids(env=ref.removeprefix("env:"))
    elif ref.removeprefix("run:").isdigit():
        runs = [int(ref.removeprefix("run:"))]
    else:
        raise UsageError(f"{ref!r} is not {REF_FORMS}")
    if not runs:
        raise UsageError(f"{ref!r}: the store at {store.where} holds no finished run of it "
                         "(`torchmark runs` lists them)")
    newest: dict[tuple[str, str], Result] = {}
    for run in runs:  # newest first: an older run fills only what newer ones lack
        for result in store.result_records(run=run):
            newest.setdefault((result.case.id, result.metric), result)
    if not newest:
        raise UsageError(f"{ref!r}: run {runs[0]} holds no results")
    return list(newest.values())
