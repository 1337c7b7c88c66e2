"""The ops and replay results file holds each case's Results; the records the runner made
read back equal (with the node's provenance of a record measured elsewhere), a record a
killed run left half written is not read, and version-1 files (a `record` line a case)
still read."""

from __future__ import annotations

import json
from pathlib import Path

from torchmark.core.provenance import Provenance
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.ops.results_file import (
    OpsResultsWriter,
    read_file,
    read_records,
    record_results,
    results_record,
)
from torchmark.records import load_results

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "ops_results.jsonl"


def _records() -> list[dict]:
    header, ok = read_file(OLD)  # version 1 lines
    failed = {"type": "record", "op": "torch.mm", "id": "torch.mm|0|0|9", "status": "failed",
              "config": {"input": {}}, "metrics": {}, "error": "RuntimeError: shapes"}
    elsewhere = {**ok[0], "id": "torch.add|0|0|7", "node": "n1",
                 "provenance": Provenance.capture(command=[]).to_dict()}
    return [*ok, failed, elsewhere]


def test_records_round_trip_through_their_results():
    header, _ = read_file(OLD)
    records = _records()  # once: two captures differ when a second ticks between them (`started`)
    for record in records:
        results = record_results(record, header)
        assert results_record(results) == record
    passes = [[(r.case.id.rpartition("#")[2], r.ok) for r in record_results(x, header)]
              for x in records]
    assert passes[0] == [("forward", True), ("backward", True)]
    # a failure: each pass the run times failed, under the ids measured passes have
    assert passes[-2] == [("forward", False), ("backward", False)]
    assert all(r.case.id.startswith("torch.mm|0|0|9@")
               for r in record_results(records[-2], header))
    node = record_results(records[-1], header)[0].provenance
    assert node is not None and node.to_dict() == records[-1]["provenance"]


def test_the_file_holds_results_and_drops_a_half_written_record(tmp_path):
    header, _ = read_file(OLD)
    path = tmp_path / "r.jsonl"
    writer = OpsResultsWriter(path, {"run_options": header["run_options"], "threads": 1},
                              resume=False)
    records = _records()  # once: two captures differ when a second ticks between them (`started`)
    for record in records:
        writer.write(record)
    writer.close({"type": "footer", "ok": 3})
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["version"] == 2 and lines[0]["schema"] == "torchmark.ops.results"
    assert {x.get("schema") for x in lines[1:-1]} == {RESULT_SCHEMA}
    assert read_records(path) == records
    assert len(load_results(path)) == sum(len(record_results(r, header)) for r in records)
    # a killed run: the footer and the last record's second Result never written
    path.write_text("\n".join(path.read_text().splitlines()[:-2]) + "\n")
    assert read_records(path) == records[:-1]
