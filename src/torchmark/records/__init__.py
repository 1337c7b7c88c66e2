"""Every front-end's output as core Results, and every torchmark file format read as them.

`results_of(obj)` turns what a front-end returns (a Measurement, a CallgrindStats, an
ops or replay record, a suite case record) into Results; `load_results(path)` reads any
file torchmark writes or has written: measurements JSON (`timeit --save`,
`save_measurements`, one Measurement), callgrind counts (`callgrind --save`, a list or
one CallgrindStats), ops and replay results JSON lines, suite results JSON lines, and
results JSON lines of Results themselves (`dump_results`). A sink layer: it imports the
front-ends, none of them imports it.
"""

from torchmark.records.convert import (
    from_callgrind,
    from_measurement,
    from_ops_record,
    from_replay_report,
    results_of,
)
from torchmark.records.files import load_results, save_results
from torchmark.suite.results import record_results as from_suite_record

__all__ = ["from_callgrind", "from_measurement", "from_ops_record", "from_replay_report",
           "from_suite_record",
           "load_results", "results_of", "save_results"]
