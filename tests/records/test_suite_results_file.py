"""The suite's results file holds each case's Results; the records the runner made read
back equal, a record a killed run left half written is not read, and files of the
earlier format (a `case` line a record) still read."""

from __future__ import annotations

import json
from pathlib import Path

from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.records import load_results
from torchmark.suite.results import (
    ResultsWriter,
    read_records,
    record_results,
    results_record,
)

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
OLD = FORMATS / "suite_results.jsonl"


def _records() -> list[dict]:
    ok = read_records(OLD)  # version 1 lines
    counted_failed = {**ok[0], "id": "b", "status": "failed", "error": "callgrind: boom"}
    del counted_failed["instructions"]
    lost = {"type": "case", "id": "c", "status": "failed", "label": ["c"],
            "timer_args": {"stmt": "f()"}, "error": "worker lost", "attempts": 2,
            "slot": None, "finished": 1.5, "node": {"host": "n1"}}
    return [*ok, counted_failed, lost]


def test_records_round_trip_through_their_results():
    for record in _records():
        results = record_results(record)
        assert results_record(results) == record
        assert all(r.extra["parts"] == len(results) for r in results)
    metrics = [[(r.metric, r.ok) for r in record_results(x)] for x in _records()[-2:]]
    assert metrics == [[("wall", True), ("instructions", False)], [("wall", False)]]


def test_the_file_holds_results_and_drops_a_half_written_record(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = ResultsWriter(path, {"wall": True}, resume=False)
    for record in _records():
        writer.write(record)
    writer.close({"finished": 1})
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert {x.get("schema") for x in lines[1:-1]} == {RESULT_SCHEMA}
    assert read_records(path) == _records()
    assert len(load_results(path)) == sum(len(record_results(r)) for r in _records())
    # a killed run: the footer, the last record and the second Result of the one
    # before it never written: the two whole records read
    path.write_text("\n".join(path.read_text().splitlines()[:-3]) + "\n")
    assert read_records(path) == _records()[:2]


def test_a_record_measured_on_another_node_carries_its_provenance():
    from torchmark.core.provenance import Provenance

    node = Provenance.capture(command=[])
    record = {**_records()[0], "node": "n1", "provenance": node.to_dict()}
    results = record_results(record)
    assert all(r.provenance == node for r in results)
    assert results_record(results) == record
