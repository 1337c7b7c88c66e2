"""Reading the files `compare` and `ab` accept: saved Measurements or `ops` results."""

from __future__ import annotations

from typing import Any

from torchmark.timing.measurement import Measurement


def read_measurement_files(files: list[str], db: str | None = None,
                           sides: dict[str, Any] | None = None,
                           failed: bool = False) -> list[list[Measurement]]:
    """The measurements of each file, in order: JSON from `timeit --save`, `demo` or
    `save_measurements`; or `torchmark ops` results (the file's name as description); or
    runs of the store (`is_store_ref`), from the store at `db`, each side as resolved
    put in `sides` by its name (when given: the verdicts then judge the same runs).
    `failed`: a failed time result of a results file or the store too, as a placeholder
    whose metadata names its `failure` (timing/results.py failure_placeholder)."""
    from pathlib import Path

    from torchmark.core.errors import UsageError
    from torchmark.ops.as_measurements import column_names, ops_measurements
    from torchmark.ops.runner import SCHEMA as OPS_SCHEMA
    from torchmark.regressions.refs import REF_FORMS
    from torchmark.timing.files import first_line_schema, load_compared

    for path in files:  # a mistyped side: named as gate names it
        if not is_store_ref(path) and not Path(path).exists():
            raise UsageError(f"{path!r} is not {REF_FORMS} (no such file)")
    out = []
    # a side of the store beside a file: tagged as the file is, by its env label (a
    # description naming its runs would be a second field told apart, and none pair)
    tagged = all(is_store_ref(path) for path in files)
    for path, column in zip(files, column_names(list(files)), strict=True):
        if is_store_ref(path):
            out.append(stored_measurements(path, db, sides, tagged=tagged, failed=failed))
        elif first_line_schema(path) == OPS_SCHEMA:
            out.append(ops_measurements(path, column))
        else:
            out.append(load_compared(path, failed=failed))
    return out


def is_store_ref(token: str) -> bool:
    """A side the store holds, where no file has that name: a run (`run:12`, or `12`),
    `latest`, `commit:SHA` or `env:LABEL` (regressions/refs.py)."""
    from torchmark.regressions.refs import names_stored_side

    return names_stored_side(token)


def side_ref(token: str) -> str:
    """`token` (is_store_ref) as resolve_side reads it: a bare number is a run."""
    return f"run:{token}" if token.isdigit() else token


def stored_measurements(token: str, db: str | None, sides: dict[str, Any] | None = None,
                        tagged: bool = True, failed: bool = False) -> list[Measurement]:
    """The time results of a side of the store (is_store_ref; resolved as `gate` resolves
    it) as Measurements, each tagged with where it comes from in its description ("run
    12", "latest (run 12)", "commit:ab12 (runs 3, 4)"), so that two sides' measurements
    of one case pair up in `ab` and sit side by side in `compare`. Their runs' env label
    moves into that tag where they share one ("run 12 (before)"), and is dropped where
    they do not (a commit's runs, pooled as `gate` pools them): runs labelled `before`
    and `after` differ in one field, not two, and still pair. `sides`: where to put the
    side as resolved, by `token`. Not `tagged`: each keeps its run's env label and its
    own description, as a results file of the run holds them. `failed`: failed time
    results too, as placeholders (Store.measurements_of)."""
    import dataclasses

    from torchmark.cli.store_options import open_store
    from torchmark.regressions.refs import resolve_side
    from torchmark.store.store import rows_told_apart

    store = open_store(db)
    side = resolve_side(side_ref(token), store)
    if sides is not None:
        sides[token] = side
    found = store.measurements_of_results(side.results, failed)
    runs = ", ".join(map(str, side.runs))
    where = f"run{'s' if len(side.runs) > 1 else ''} {runs}"
    if not found:
        raise ValueError(f"{token} ({where}): no measured time result to show (its cases "
                         "failed, or measured counts or memory): `torchmark gate` judges "
                         "those")
    if not tagged:
        return found
    name = where if side_ref(token).startswith("run:") else f"{token} ({where})"
    env = side.envs[0] if len(side.envs) == 1 else None
    spec = {"description": f"{name} ({env})" if env else name, "env": None}
    return rows_told_apart([Measurement(m.number_per_run, m.raw_times,  # one tag: cases
                                        dataclasses.replace(m.task_spec, **spec),  # that
                                        m.metadata)  # differed by description now may not
                            for m in found])


def _cell(m: Measurement) -> tuple:
    """Where a measurement lands in a Compare table (the same cell: merged or hidden)."""
    spec = m.task_spec
    return spec.label, spec.sub_label or spec.stmt, spec.description, spec.env, \
        spec.num_threads


def tell_files_apart(groups: list[list[Measurement]],
                     files: list[str]) -> list[list[Measurement]]:
    """When measurements of different files would share a table cell (the same statement
    timed before and after a change, saved to two files), name each file's in the table:
    a column per file where its measurements have no description, else its name in their
    env. Files whose cells are all their own are left as they are."""
    import dataclasses

    from torchmark.ops.as_measurements import column_names

    owners: dict[tuple, set[int]] = {}
    for index, group in enumerate(groups):
        for m in group:
            owners.setdefault(_cell(m), set()).add(index)
    shared = {index for indices in owners.values() if len(indices) > 1 for index in indices}
    out = []
    for index, (group, name) in enumerate(zip(groups, column_names(files), strict=True)):
        if index not in shared:
            out.append(group)
            continue
        as_column = not any(m.task_spec.description for m in group)
        renamed = []
        for m in group:
            spec = m.task_spec
            tagged = dataclasses.replace(spec, description=name) if as_column else \
                dataclasses.replace(spec, env=f"{spec.env} @ {name}" if spec.env else name)
            renamed.append(Measurement(m.number_per_run, m.raw_times, tagged, m.metadata))
        out.append(renamed)
    return out
