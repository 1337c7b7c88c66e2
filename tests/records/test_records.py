"""Every front-end's output becomes Results that serialize and load back equal, and every
file format torchmark has written loads as Results (fixtures in tests/fixtures/formats)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

import torchmark
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result
from torchmark.records import (
    from_callgrind,
    from_measurement,
    load_results,
    results_of,
    save_results,
)

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
EXPECTED = {  # fixture -> (results, {(frontend, metric)})
    "measurements.json": (1, {("timeit", "wall")}),
    "measurement_single.json": (1, {("timeit", "wall")}),
    "callgrind_counts.json": (1, {("callgrind", "instructions")}),
    "callgrind_stats_single.json": (1, {("callgrind", "instructions")}),
    "ops_results.jsonl": (4, {("ops", "wall")}),
    "replay_results.jsonl": (3, {("replay", "wall")}),
    "suite_results.jsonl": (4, {("suite", "wall"), ("suite", "instructions")}),
}


def round_trips(results: list[Result], tmp_path: Path) -> None:
    for r in results:
        assert Result.from_dict(json.loads(r.to_json())) == r
    path = tmp_path / "results.jsonl"
    path.unlink(missing_ok=True)
    save_results(path, results)
    assert load_results(path) == results


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_earlier_file_format_loads(name, tmp_path):
    results = load_results(FORMATS / name)
    count, kinds = EXPECTED[name]
    assert len(results) == count
    assert {(r.case.frontend, r.metric) for r in results} == kinds
    assert all(r.ok and r.summary.median > 0 for r in results)
    round_trips(results, tmp_path)


def test_a_resumed_ops_file_counts_each_case_once(tmp_path):
    lines = (FORMATS / "ops_results.jsonl").read_text().splitlines()
    path = tmp_path / "resumed.jsonl"
    path.write_text("\n".join([*lines, lines[1]]) + "\n")  # a case recorded twice
    assert len(load_results(path)) == len(load_results(FORMATS / "ops_results.jsonl"))


def test_timeit_cpp_and_fuzz_measurements(tmp_path):
    provenance = Provenance.capture()
    m = torchmark.Timer("x * y", "x = torch.ones(8); y = torch.ones(8)",
                        label="mul").blocked_autorange(min_run_time=0.02)
    [r] = results_of(m, provenance=provenance)
    assert (r.case.frontend, r.metric, r.case.label) == ("timeit", "wall", "mul")
    assert r.number_per_run == m.number_per_run and list(r.samples) == m.times
    assert r.case.id == results_of(m)[0].case.id  # stable: same statement, same id
    fuzzer = torchmark.Fuzzer(parameters=[torchmark.FuzzedParameter("n", 1, 64, "uniform")],
                              tensors=[torchmark.FuzzedTensor("x", size=("n",))], seed=0)
    tensors, _, params = next(fuzzer.take(1))
    fm = torchmark.Timer("x.sum()", globals=tensors).blocked_autorange(min_run_time=0.02)
    fuzzed = from_measurement(fm, "fuzz", params=params)
    assert fuzzed.case.frontend == "fuzz" and fuzzed.case.params["n"] == params["n"]
    round_trips([r, fuzzed], tmp_path)


@pytest.mark.compiler
@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="needs a C++ compiler")
def test_cpp_snippets(tmp_path):
    m = torchmark.Timer("auto y = x * 2;", "auto x = torch::ones({8});",
                        language="cpp").blocked_autorange(min_run_time=0.02)
    r = from_measurement(m, "cpp")
    assert r.case.frontend == "cpp" and r.metric == "wall"
    round_trips([r], tmp_path)


def test_ops_and_replay_runs(tmp_path):
    from torchmark.ops import config_from_data, run
    from torchmark.ops.executor import RunOptions
    from torchmark.replay import record, replay

    tensor = {"type": "tensor", "shape": [4]}
    config = config_from_data({"torch.add": {"config": [{"input": [{"args": [tensor,
                                                                             tensor]}]}]}})
    run(config, RunOptions(warmup=1, iterations=3), out=tmp_path / "ops.jsonl")
    ops = load_results(tmp_path / "ops.jsonl")
    [only] = ops
    assert only.case.frontend == "ops"
    assert re.fullmatch(r"torch\.add\|0\|0\|0@[0-9a-f]{12}#forward", only.case.id)
    # the same position in a config of other shapes is another case
    other = config_from_data({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [8]}, {"type": "tensor", "shape": [8]}]}]}]}})
    run(other, RunOptions(warmup=1, iterations=3), out=tmp_path / "ops8.jsonl")
    [eight] = load_results(tmp_path / "ops8.jsonl")
    assert eight.case.id.split("@")[0] == only.case.id.split("@")[0]
    assert eight.case.id != only.case.id
    trace = tmp_path / "t.json"
    with record(trace, with_timing=False):
        torch.ones(3).add(1).relu_()
    replay(trace, iterations=2, out=tmp_path / "replay.jsonl")
    replayed = load_results(tmp_path / "replay.jsonl")
    assert replayed and {r.case.frontend for r in replayed} == {"replay"}
    round_trips(ops + replayed, tmp_path)


def test_a_failed_case_is_a_result_with_its_failure(tmp_path):
    from torchmark.ops import config_from_data, run
    from torchmark.ops.executor import RunOptions

    config = config_from_data({"torch.mm": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [2, 3]}, {"type": "tensor", "shape": [2, 3]}]}]}]}})
    run(config, RunOptions(warmup=0, iterations=2), out=tmp_path / "ops.jsonl")
    [failed] = load_results(tmp_path / "ops.jsonl")
    assert not failed.ok and "RuntimeError" in failed.failure.error
    round_trips([failed], tmp_path)


@pytest.mark.valgrind
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_counts(tmp_path):
    stats = torchmark.Timer("x + 1", "x = torch.ones(4)").collect_callgrind(number=10)
    r = from_callgrind(stats)
    assert r.metric == "instructions" and r.samples[0] == pytest.approx(stats.counts() / 10)
    round_trips([r], tmp_path)


def test_appending_results_cuts_a_torn_line_and_refuses_other_files(tmp_path):
    from torchmark.core.errors import UsageError

    results = load_results(FORMATS / "ops_results.jsonl")
    path = tmp_path / "r.jsonl"
    save_results(path, results[:1])
    with open(path, "a") as f:
        f.write(results[1].to_json()[:40])  # a writer killed mid-line
    save_results(path, results[2:])
    assert load_results(path) == [results[0], *results[2:]]
    with pytest.raises(UsageError, match="not a torchmark results file"):
        save_results(_copy(FORMATS / "measurements.json", tmp_path), results)


def _copy(source: Path, folder: Path) -> Path:
    target = folder / source.name
    target.write_bytes(source.read_bytes())
    return target


def test_a_suite_case_that_failed_after_its_wall_time_carries_its_failure():
    from torchmark.records import from_suite_record

    record = {"type": "case", "id": "a [py explicit t1]", "status": "failed",
              "timer_args": {"stmt": "f()"}, "wall": {"times": [1e-6], "number_per_run": 10},
              "error": "callgrind: boom"}
    wall, failed = from_suite_record(record)
    assert wall.ok and wall.metric == "wall"
    assert failed.metric == "instructions" and failed.failure.error == "callgrind: boom"
