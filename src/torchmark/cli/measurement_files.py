"""Reading the files `compare` and `ab` accept: saved Measurements or `ops` results."""

from __future__ import annotations

from torchmark.timing.measurement import Measurement


def read_measurement_files(files: list[str],
                           db: str | None = None) -> list[list[Measurement]]:
    """The measurements of each file, in order: JSON from `timeit --save`, `demo` or
    `save_measurements`; or `torchmark ops` results (the file's name as description); or
    a run of the store (`run:N`, or N that is no file), from the store at `db`."""
    from torchmark.ops.as_measurements import column_names, ops_measurements
    from torchmark.ops.runner import SCHEMA as OPS_SCHEMA
    from torchmark.timing.files import first_line_schema, load_compared

    out = []
    for path, column in zip(files, column_names(list(files)), strict=True):
        if is_run_id(path):
            out.append(run_measurements(path, db))
        elif first_line_schema(path) == OPS_SCHEMA:
            out.append(ops_measurements(path, column))
        else:
            out.append(load_compared(path))
    return out


def is_run_id(token: str) -> bool:
    """`run:12`, or a bare number that is not a file: a run of the store."""
    from pathlib import Path

    return token.startswith("run:") or (token.isdigit() and not Path(token).exists())


def run_measurements(token: str, db: str | None) -> list[Measurement]:
    """A stored run's time results as Measurements, each tagged with the run in its
    description ("run 12"), so that two runs of one case pair up in `ab` and sit side by
    side in `compare`. Where the run's results share one env label, it moves into that
    tag ("run 12 (before)"): runs labelled `before` and `after` differ in one field, not
    two, and still pair."""
    import dataclasses

    from torchmark.store import open as open_store

    run = int(token.removeprefix("run:"))
    found = open_store(db).measurements(run)
    if not found:
        raise ValueError(f"run {run}: the store holds no time results of it (`torchmark "
                         "runs` lists the runs)")
    envs = {m.task_spec.env for m in found}
    env = envs.pop() if len(envs) == 1 else None
    spec = {"description": f"run {run} ({env})", "env": None} if env else \
        {"description": f"run {run}"}
    return [Measurement(m.number_per_run, m.raw_times,
                        dataclasses.replace(m.task_spec, **spec), m.metadata)
            for m in found]


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
