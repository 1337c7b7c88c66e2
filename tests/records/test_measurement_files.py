"""`timeit --save`, `demo` and `save_measurements` write results files (Results with their
provenance); Measurements read back equal, and older measurements files still load and
are carried over when appended to."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import torchmark
from torchmark.core.provenance import Provenance
from torchmark.core.results_file import RESULTS_FILE_SCHEMA, read_results
from torchmark.timing.files import load_measurements, save_measurements
from torchmark.timing.measurement import Measurement
from torchmark.timing.results import measurement_to_result, result_to_measurement

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def _measurements() -> list[Measurement]:
    spec = torchmark.Timer("x + 1", "x = 3", label="add", sub_label="int",
                           description="d", env="e", num_threads=2).task_spec
    odd = Measurement(3, [0.1, 0.2, 0.9], spec, {"note": [1, 2]})  # 0.9/3*3 != 0.9
    device = Measurement(1, [1e-6, 2e-6], spec, {"clock": "cuda_events", "device": "cuda:1"})
    return [odd, device]


def test_measurements_round_trip_through_results(tmp_path):
    provenance = Provenance.capture(env="e")
    path = tmp_path / "m.json"
    held = save_measurements(path, _measurements(), provenance=provenance)
    assert held == _measurements() == load_measurements(path)
    assert json.loads(path.read_text().splitlines()[0])["schema"] == RESULTS_FILE_SCHEMA
    results = read_results(path)
    assert [r.metric for r in results] == ["wall", "device"]
    assert results[1].case.device == "cuda:1"
    assert all(r.provenance == provenance and r.case.frontend == "timeit" for r in results)
    assert [result_to_measurement(r) for r in results] == _measurements()
    assert "raw_times" in results[0].extra and "raw_times" not in results[1].extra


def test_appending_keeps_both_runs_and_converts_an_older_file(tmp_path):
    old = tmp_path / "old.json"
    shutil.copy(FORMATS / "measurements.json", old)
    before = load_measurements(old)
    held = save_measurements(old, _measurements()[:1], append=True)
    assert held == before + _measurements()[:1] == load_measurements(old)
    assert json.loads(old.read_text().splitlines()[0])["schema"] == RESULTS_FILE_SCHEMA
    held = save_measurements(old, _measurements()[1:], append=True)  # plain append now
    assert held == before + _measurements()


def test_a_file_of_counts_only_is_refused_as_measurements(tmp_path):
    from torchmark.core.results_file import save_results
    from torchmark.records import load_results

    path = tmp_path / "counts.jsonl"
    save_results(path, load_results(FORMATS / "callgrind_counts.json"))
    with pytest.raises(ValueError, match="hold no times"):
        load_measurements(path)
    with pytest.raises(ValueError, match="is instructions, not a time"):
        result_to_measurement(read_results(path)[0])


def test_timeit_save_then_compare_reads_it(tmp_path):
    from torchmark.cli.main import main

    path = tmp_path / "t.json"
    for env in ("a", "b"):
        assert main(["timeit", "-s", "x = 1", "x + 1", "--min-run-time", "0.01", "--env", env,
                     "--save", str(path), "--no-store"]) == 0
    results = read_results(path)
    assert [r.case.env for r in results] == ["a", "b"]
    assert all(r.provenance is not None and r.provenance.env == r.case.env for r in results)
    assert [m.env for m in load_measurements(path)] == ["a", "b"]
    assert measurement_to_result(load_measurements(path)[0]).case == results[0].case


def test_callgrind_counts_files_hold_results_with_their_function_counts(tmp_path):
    from torchmark.callgrind.stats_files import load_stats, save_stats

    old = tmp_path / "counts.json"
    shutil.copy(FORMATS / "callgrind_counts.json", old)
    before = load_stats(old)
    provenance = Provenance.capture()
    assert save_stats(old, before[0], provenance) == 2  # the older list rewritten, appended
    after = load_stats(old)
    assert [s.to_dict() for s in after] == [s.to_dict() for s in before * 2]
    results = read_results(old)
    assert [r.metric for r in results] == ["instructions"] * 2
    assert results[1].provenance == provenance and results[0].provenance is None
    # counts and times may share one results file; each reader takes its own
    save_measurements(old, _measurements(), append=True)
    assert len(load_stats(old)) == 2 and load_measurements(old) == _measurements()
