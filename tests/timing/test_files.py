"""Measurement files: save, append, load, and the errors for bad files."""

from __future__ import annotations

import json

import pytest

from torchmark import Measurement, TaskSpec
from torchmark.timing.files import load_measurements, parse_measurements, save_measurements

from conftest import make_measurement


def test_save_append_load(tmp_path):
    path = tmp_path / "sub" / "m.json"
    a, b = make_measurement(1e-6, label="A"), make_measurement(2e-6, label="B")
    save_measurements(path, [a])
    held = save_measurements(path, [b], append=True)
    assert [m.label for m in held] == ["A", "B"]
    loaded = load_measurements(path)
    assert [m.summary() for m in loaded] == [a.summary(), b.summary()]
    save_measurements(path, [b])  # without append: replaced
    assert [m.label for m in load_measurements(path)] == ["B"]
    assert not list(path.parent.glob(".*.tmp"))


def test_single_measurement_and_list_accepted():
    m = make_measurement(1e-6)
    assert parse_measurements(m.to_dict())[0].raw_times == m.raw_times
    assert len(parse_measurements([m.to_dict(), m.to_dict()])) == 2


@pytest.mark.parametrize("data, message", [
    ({"schema": "torchmark.measurements", "version": 7, "measurements": []}, "version 7"),
    ({"schema": "torchmark.measurements", "version": 1, "measurements": 3}, "must be a list"),
    ({"schema": "other"}, "not a torchmark measurements file"),
    ([{"schema": "torchmark.measurement", "version": 1}], "measurement 0"),
])
def test_bad_content(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_measurements(path)


GOOD = {"schema": "torchmark.measurement", "version": 1, "number_per_run": 1,
        "raw_times": [1e-6], "task_spec": {"stmt": "x", "setup": "pass"}}


@pytest.mark.parametrize("change, message", [
    ({"raw_times": "123"}, "raw_times must be a non-empty list"),
    ({"raw_times": [-1e-6]}, "times from 0 to 1e"),
    ({"raw_times": [1e308]}, "times from 0 to 1e"),  # overflowed the statistics
    ({"raw_times": [10**400]}, "times from 0 to 1e"),
    ({"number_per_run": 10**400}, "number_per_run must be an int in 1"),
    ({"raw_times": [True]}, "raw_times"),
    ({"number_per_run": 1.5}, "number_per_run must be an int"),
    ({"number_per_run": True}, "number_per_run must be an int"),
    ({"task_spec": {"stmt": 5, "setup": "pass"}}, "stmt must be a str"),
    ({"task_spec": {"stmt": "x", "setup": "pass", "num_threads": "2"}}, "num_threads"),
    ({"task_spec": {"stmt": "x", "setup": "pass", "label": 7}}, "label must be a str"),
    ({"task_spec": []}, "task_spec must be an object"),
    ({"metadata": [1]}, "metadata must be an object"),
])
def test_fields_of_the_wrong_type_are_named(tmp_path, change, message):
    path = tmp_path / "m.json"
    path.write_text(json.dumps([GOOD, {**GOOD, **change}]))
    with pytest.raises(ValueError, match=f"m.json: measurement 1: .*{message}"):
        load_measurements(path)


@pytest.mark.parametrize("metadata, raw, message", [
    ({(1, 2): 3}, [1.0], "key \\(1, 2\\) is not a str"),
    ({1: "a"}, [1.0], "key 1 is not a str"),
    ([1, 2], [1.0], "metadata must be a dict"),
    (None, [1.0, float("nan")], "NaN or infinite"),
])
def test_what_json_cannot_carry_is_refused_when_written(metadata, raw, message):
    m = Measurement(1, raw, TaskSpec("x", "pass"), metadata=metadata)
    with pytest.raises(ValueError, match=message):
        m.to_json()


def test_a_zero_time_is_written_and_read_back():
    # a CUDA-event interval of an empty statement can be 0: it must survive a round trip
    m = Measurement(1, [0.0, 0.0, 0.0], TaskSpec("pass", "pass"))
    again = Measurement.from_json(m.to_json())
    assert again.median == 0.0 and again.significant_figures == 1 and not again.has_warnings
    spread = Measurement(1, [0.0, 0.0, 0.0, 2e-9, 4e-9], TaskSpec("pass", "pass"))
    assert "Interquartile range is inf% of the median" in repr(spread)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_measurements(tmp_path / "nope.json")


def test_other_torchmark_files_are_named(tmp_path):
    lines = tmp_path / "ops.jsonl"
    lines.write_text('{"type": "header", "schema": "torchmark.ops.results"}\n{"type": "x"}\n')
    with pytest.raises(ValueError, match="JSON lines of 'torchmark.ops.results'"):
        load_measurements(lines)
    for field, value in (("number_per_run", 0), ("raw_times", [float("nan")])):
        data = json.loads(Measurement(number_per_run=1, raw_times=[1.0],
                                      task_spec=TaskSpec(stmt="x", setup="pass")).to_json())
        data[field] = value
        with pytest.raises(ValueError, match=field):
            Measurement.from_dict(data)
