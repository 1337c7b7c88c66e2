"""What a gate or a comparison names as one side: a stored run, the newest run, the runs
of a commit or an env label, or a results file; resolved to core Result records, with
the runs and machines they come from."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.result import Result

REF_FORMS = "a run id (12 or run:12), latest, commit:SHA, env:LABEL, or a results file"


@dataclasses.dataclass(frozen=True)
class Side:
    """One side's results, and where they come from (for people)."""

    ref: str
    results: tuple[Result, ...]
    runs: tuple[int, ...]  # the store's runs used (none for a file)
    machines: tuple[str, ...]  # hostnames (or fingerprints) the results were measured on
    note: str = ""  # how several runs, or replicates in a file, were reduced to one side

    def describe(self) -> str:
        where = (f"run{'s' if len(self.runs) > 1 else ''} "
                 f"{', '.join(map(str, self.runs[:8]))}{' ...' if len(self.runs) > 8 else ''}"
                 if self.runs else "file")
        machines = f" on {', '.join(self.machines)}" if self.machines else ""
        return f"{self.ref} ({where}{machines}){': ' + self.note if self.note else ''}"


def resolve_ref(ref: str, store: Any | None) -> list[Result]:
    """The results `ref` names (see resolve_side)."""
    return list(resolve_side(ref, store).results)


def resolve_side(ref: str, store: Any | None) -> Side:
    """The results `ref` names (REF_FORMS). A commit or env label may span several runs:
    each (case, metric) is taken from the newest run that holds it, among the runs of
    the machine that made the newest one (times from two machines are not one side). A
    commit prefix must name one commit. A file holding a case several times (appended
    runs) gives its samples pooled."""
    path = Path(ref)
    if path.exists():
        return _file_side(ref, path)
    if store is None or path.suffix in (".json", ".jsonl") or "/" in ref:
        raise UsageError(f"{ref}: no such file")
    if ref == "latest":
        runs = store.finished_runs()[:1]
    elif ref.startswith("commit:") and ref.removeprefix("commit:"):
        runs = store.finished_runs(commit=ref.removeprefix("commit:"))
        commits = sorted({run["git_commit"] for run in runs})
        if len(commits) > 1:
            raise UsageError(f"{ref} is ambiguous: it begins {len(commits)} commits "
                             f"({', '.join(c[:12] for c in commits[:4])}"
                             f"{' ...' if len(commits) > 4 else ''}); give more of the SHA")
    elif ref.startswith("env:") and ref.removeprefix("env:"):
        runs = store.finished_runs(env=ref.removeprefix("env:"))
    elif ref.removeprefix("run:").isdigit():
        from torchmark.store.store import RUN_STATUSES

        runs = store.finished_runs(run=int(ref.removeprefix("run:")), status=RUN_STATUSES)
    else:
        raise UsageError(f"{ref!r} is not {REF_FORMS}")
    if not runs:
        raise UsageError(f"{ref!r}: the store at {store.where} holds no finished run of it "
                         "(`torchmark runs` lists them)")
    machine = runs[0]["machine"]
    same = [run for run in runs if run["machine"] == machine]
    note = (f"{len(runs) - len(same)} run(s) on other machines left out"
            if len(same) < len(runs) else "")
    newest: dict[tuple[str, str], Result] = {}
    used = []
    for run in same:  # newest first: an older run fills only what newer ones lack
        before = len(newest)
        for result in store.result_records(run=run["id"]):
            newest.setdefault((result.case.id, result.metric), result)
        if len(newest) > before:
            used.append(run["id"])
    if not newest:
        raise UsageError(f"{ref!r}: run {runs[0]['id']} holds no results")
    return Side(ref, tuple(newest.values()), tuple(used),
                (runs[0]["hostname"] or machine or "an unknown machine",), note)


def _file_side(ref: str, path: Path) -> Side:
    from torchmark.records import load_results

    pooled: dict[tuple[str, str], Result] = {}
    replicated = set()
    for result in load_results(path):
        key = (result.case.id, result.metric)
        if key in pooled:
            replicated.add(key)
            first = pooled[key]
            pooled[key] = dataclasses.replace(first, samples=first.samples + result.samples)
        else:
            pooled[key] = result
    machines = sorted({r.provenance.machine.hostname for r in pooled.values()
                       if r.provenance is not None})
    note = (f"{len(replicated)} case(s) held several times: their samples pooled"
            if replicated else "")
    return Side(ref, tuple(pooled.values()), (), tuple(machines), note)
