"""Reading the files `compare` and `ab` accept: saved Measurements or `ops` results."""

from __future__ import annotations

from torchmark.timing.measurement import Measurement


def read_measurement_files(files: list[str]) -> list[list[Measurement]]:
    """The measurements of each file, in order: JSON from `timeit --save`, `demo` or
    `save_measurements`; or `torchmark ops` results (the file's name as description)."""
    from torchmark.ops.as_measurements import column_names, ops_measurements
    from torchmark.ops.runner import SCHEMA as OPS_SCHEMA
    from torchmark.timing.files import first_line_schema, load_measurements

    out = []
    for path, column in zip(files, column_names(list(files)), strict=True):
        if first_line_schema(path) == OPS_SCHEMA:
            out.append(ops_measurements(path, column))
        else:
            out.append(load_measurements(path))
    return out
