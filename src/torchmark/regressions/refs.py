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
STORE_PREFIXES = ("run:", "commit:", "env:")  # an env label may hold a "/"


def names_stored_side(token: str) -> bool:
    """Whether `token` names a side of the store (a run, `latest`, `commit:SHA`,
    `env:LABEL`) rather than a file: never when a file has that name."""
    if Path(token).exists():
        return False
    return token.startswith(STORE_PREFIXES) or token.isdigit() or token == "latest"


@dataclasses.dataclass(frozen=True)
class Side:
    """One side's results, and where they come from (for people)."""

    ref: str
    results: tuple[Result, ...]
    runs: tuple[int, ...]  # the store's runs used (none for a file)
    machines: tuple[str, ...]  # hostnames (or fingerprints) the results were measured on
    note: str = ""  # how several runs, or replicates in a file, were reduced to one side
    machine: str | None = None  # the fingerprint of the machine (where one is known)
    env: str | None = None  # the env label of its runs (the newest's)
    envs: tuple[str | None, ...] = ()  # the env labels of the runs used, each once

    def describe(self) -> str:
        where = (f"run{'s' if len(self.runs) > 1 else ''} "
                 f"{', '.join(map(str, self.runs[:8]))}{' ...' if len(self.runs) > 8 else ''}"
                 if self.runs else "file")
        machines = f" on {', '.join(self.machines)}" if self.machines else ""
        return f"{self.ref} ({where}{machines}){': ' + self.note if self.note else ''}"


def check_distinct(baseline: Side, candidate: Side) -> None:
    """A UsageError when the two sides are the same runs (`latest` against `latest`):
    nothing to compare, and every command refuses it alike."""
    if baseline.runs and baseline.runs == candidate.runs:
        raise UsageError(f"{baseline.ref} and {candidate.ref} are the same run"
                         f"{'s' if len(baseline.runs) > 1 else ''} "
                         f"({', '.join(map(str, baseline.runs))}): nothing to compare")


def resolve_ref(ref: str, store: Any | None) -> list[Result]:
    """The results `ref` names (see resolve_side)."""
    return list(resolve_side(ref, store).results)


def resolve_side(ref: str, store: Any | None, files: bool = True) -> Side:
    """The results `ref` names (REF_FORMS), among the runs of the machine that made the
    newest one it names (times from two machines are not one side). A commit names
    every run made at it, their samples pooled case by case (a prefix must name one
    commit); an env label, each (case, metric) from the newest run that holds it. A file
    holding a case several times (appended runs) gives its samples pooled, or its
    failure where the newest of them failed. Not `files`
    (a reference from a web request): the store's forms only, never a path read."""
    path = Path(ref)
    if files and path.exists():
        return _file_side(ref, path)
    named = ref.startswith(STORE_PREFIXES)
    if store is None or (not named and (path.suffix in (".json", ".jsonl") or "/" in ref)):
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
    notes = [f"{len(runs) - len(same)} run(s) on other machines left out"
             if len(same) < len(runs) else ""]
    if ref.startswith("commit:"):  # every run of the commit: their samples pooled
        results, used = _pooled_runs(store, same)
        if len(used) > 1:
            notes.append(f"{len(used)} runs of the commit pooled")
    else:
        results, used = _newest_of_each(store, same)
    if not results:
        raise UsageError(f"{ref!r}: run {runs[0]['id']} holds no results")
    labels = tuple(dict.fromkeys(run["env"] for run in same if run["id"] in used))
    return Side(ref, tuple(results), tuple(used),
                (runs[0]["hostname"] or machine or "an unknown machine",),
                "; ".join(filter(None, notes)), machine, runs[0]["env"], labels)


def _newest_of_each(store: Any, runs: list[dict[str, Any]]) -> tuple[list[Result], list[int]]:
    """Each (case, metric) from the newest of `runs` (newest first) that holds it, and
    the runs used. Which run gives which key is read from the runs' packed medians (a
    row a run), so only the results used are read: an env label's thousand runs cost
    a thousand small reads, not their millions of results."""
    given: dict[int, tuple[set[tuple[str, str]], bool]] = {}  # run -> its keys, all?
    seen: set[tuple[str, str]] = set()
    for run in runs:  # newest first: an older run gives only what newer ones lack
        keys = store.run_medians(run["id"]).keys
        fresh = {key for key in keys if key not in seen}
        if fresh:
            given[run["id"]] = fresh, len(fresh) == len(keys)
            seen.update(fresh)
    newest: dict[tuple[str, str], Result] = {}
    for run_id, (keys, whole) in given.items():
        cases = None if whole else sorted({case for case, _ in keys})
        for result in store.result_records(run=run_id, cases=cases):
            key = (result.case.id, result.metric)
            if key in keys:
                newest.setdefault(key, result)  # a key held twice in a run: its first
    return list(newest.values()), list(given)


def _pooled_runs(store: Any, runs: list[dict[str, Any]]) -> tuple[list[Result], list[int]]:
    """Each (case, metric) with the samples of every one of `runs` that measured it
    pooled (a failure only where no run measured it), and the runs used."""
    pooled: dict[tuple[str, str], Result] = {}
    used = []
    for run in runs:
        records = store.result_records(run=run["id"])
        if records:
            used.append(run["id"])
        for result in records:
            key = (result.case.id, result.metric)
            pooled[key] = _pool(pooled[key], result) if key in pooled else result
    return list(pooled.values()), used


def _pool(first: Result, other: Result) -> Result:
    """Two results of one case as one: their samples together; a failed one gives way to
    one with samples."""
    if not other.ok:
        return first
    if not first.ok:
        return other
    return dataclasses.replace(first, samples=first.samples + other.samples)


def _file_side(ref: str, path: Path) -> Side:
    from torchmark.records import load_results

    pooled: dict[tuple[str, str], Result] = {}
    replicated = set()
    for result in load_results(path):
        key = (result.case.id, result.metric)
        if key in pooled:
            envs = {r.case.env or (r.provenance.env if r.provenance else None)
                    for r in (pooled[key], result)}
            if len(envs) > 1:  # `timeit --env before` then `--env after` into one file
                names = ", ".join(sorted(str(env) for env in envs))
                raise UsageError(
                    f"{ref}: holds {result.case.title[:80]} under several env labels "
                    f"({names}), which one side would pool: `torchmark ab {ref}` compares "
                    "them; or save each env to its own file")
            replicated.add(key)
            # samples pooled; a newest attempt that failed is the side's (the code as
            # last run fails: older samples must not pass it)
            pooled[key] = _pool(pooled[key], result) if result.ok else result
        else:
            pooled[key] = result
    provenances = [r.provenance for r in pooled.values() if r.provenance is not None]
    machines = sorted({p.machine.hostname for p in provenances})
    note = (f"{len(replicated)} case(s) held several times: their samples pooled"
            if replicated else "")
    first = provenances[0] if provenances else None
    return Side(ref, tuple(pooled.values()), (), tuple(machines), note,
                first.machine.fingerprint if first else None, first.env if first else None)
