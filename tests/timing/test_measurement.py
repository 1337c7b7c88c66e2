"""Measurement: statistics, printed layout, merging and serialization."""

from __future__ import annotations

import json
import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmark import Measurement, TaskSpec

from conftest import make_measurement

SETUP = "x = torch.ones((128,))\ny = torch.ones((128,))"
RAW = [2.31e-3, 2.34e-3, 2.38e-3, 2.33e-3, 2.36e-3, 2.30e-3, 2.40e-3, 2.35e-3]


def summary_of(m: Measurement) -> str:
    head, _, rest = repr(m).partition("\n")
    assert head.startswith("<torchmark.") and head.endswith(">")
    assert rest == m.summary()
    return rest


def test_repr_many_measurements():
    m = Measurement(1000, RAW, TaskSpec("x * y", SETUP))
    assert summary_of(m) == (
        "x * y\n"
        "setup:\n"
        "  x = torch.ones((128,))\n"
        "  y = torch.ones((128,))\n"
        "\n"
        "  Median: 2.35 us\n"
        "  IQR:    0.04 us (2.33 to 2.37)\n"
        "  8 measurements, 1000 runs per measurement, 1 thread"
    )


def test_repr_single_measurement_has_no_stray_space():
    m = Measurement(1000, RAW[:1], TaskSpec("x * y", SETUP, label="Mul", sub_label="float",
                                            num_threads=4))
    assert summary_of(m) == (
        "Mul: float\n"
        "setup:\n"
        "  x = torch.ones((128,))\n"
        "  y = torch.ones((128,))\n"
        "\n"
        "  2.31 us\n"
        "  1 measurement, 1000 runs, 4 threads"
    )


def test_repr_with_gross_warning_and_description():
    m = Measurement(1000, [1e-3, 2e-3, 5e-3, 1e-3, 1.3e-3], TaskSpec("pass", "pass",
                                                                    description="d"))
    assert summary_of(m) == (
        "pass\n"
        "d\n"
        "  Median: 1.30 us\n"
        "  IQR:    1.00 us (1.00 to 2.00)\n"
        "  5 measurements, 1000 runs per measurement, 1 thread\n"
        "  WARNING: Interquartile range is 76.9% of the median measurement.\n"
        "           This suggests significant environmental influence."
    )


def test_repr_two_or_three_measurements_skip_iqr():
    m = Measurement(10, [1e-4, 2e-4, 3e-4], TaskSpec("f()", "pass"))
    assert summary_of(m) == (
        "f()\n  Median: 20.00 us\n  3 measurements, 10 runs per measurement, 1 thread\n"
        "  WARNING: Interquartile range is 50.0% of the median measurement.\n"
        "           This suggests significant environmental influence."
    )


def test_statistics_are_per_run():
    m = Measurement(10, [10.0, 20.0, 30.0, 40.0], TaskSpec("s", "pass"))
    assert m.times == [1.0, 2.0, 3.0, 4.0]
    assert m.median == 2.5
    assert m.mean == 2.5
    assert m.iqr == pytest.approx(3.25 - 1.75)


@pytest.mark.parametrize(
    "spread, has_warning, text",
    [(0.0, False, None), (0.12, True, "system fluctuation"),
     (0.3, True, "environmental influence")],
)
def test_warning_thresholds(spread, has_warning, text):
    # four times: IQR = spread * median exactly
    m = Measurement(1, [1.0 - spread, 1.0 - spread / 3, 1.0 + spread / 3, 1.0 + spread],
                    TaskSpec("s", "pass"))
    assert m.iqr / m.median == pytest.approx(spread, abs=1e-9)
    assert m.has_warnings is has_warning
    if text:
        assert text in m.warnings[0]


def test_meets_confidence():
    m = make_measurement(1e-6, spread=0.02)
    assert m.meets_confidence(0.1)
    assert not m.meets_confidence(0.001)


def test_env_defaults_to_unspecified():
    assert make_measurement(1e-6).env == "Unspecified env"
    assert make_measurement(1e-6, env="A").env == "A"


def test_task_spec_fields_forwarded():
    m = make_measurement(1e-6, label="L", sub_label="S", num_threads=2)
    assert (m.label, m.sub_label, m.num_threads, m.stmt) == ("L", "S", 2, "f(x)")
    assert m.title == "L: S"
    with pytest.raises(AttributeError):
        _ = m.not_a_field


def test_title_multiline_stmt():
    spec = TaskSpec("a = 1\nb = 2", "pass", sub_label="x")
    assert spec.title == "stmt: (x)\n  a = 1\n  b = 2"


def test_significant_figures_bounds():
    assert make_measurement(1e-3, spread=0.0).significant_figures == 4
    assert make_measurement(1e-6, spread=0.5).significant_figures == 1


def test_merge_pools_replicates_per_task():
    a1 = make_measurement(1e-6, number=10, n=4, seed=1, label="A")
    a2 = make_measurement(1e-6, number=100, n=6, seed=2, label="A")
    b = make_measurement(2e-6, n=3, label="B")
    merged = Measurement.merge([a1, b, a2])
    assert [m.label for m in merged] == ["A", "B"]
    assert merged[0].number_per_run == 1
    assert merged[0].raw_times == a1.times + a2.times
    assert merged[0].metadata is None


def test_pickle_round_trip():
    m = make_measurement(3e-6, label="L", metadata={"k": 1})
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.raw_times == m.raw_times and m2.task_spec == m.task_spec
    assert m2.summary() == m.summary()


def test_json_round_trip():
    m = make_measurement(3e-6, label="L", env="E", metadata={"commit": "abc"})
    text = m.to_json()
    data = json.loads(text)
    assert data["schema"] == "torchmark.measurement" and data["version"] == 1
    m2 = Measurement.from_json(text)
    assert m2.raw_times == m.raw_times
    assert m2.task_spec == m.task_spec
    assert m2.metadata == {"commit": "abc"}
    assert m2.summary() == m.summary()


@pytest.mark.parametrize("payload, message", [
    ("{", "not valid JSON"),
    ('{"a": 1}', "schema"),
    ('{"schema": "torchmark.measurement", "version": 99}', "version 99"),
    ('{"schema": "torchmark.measurement", "version": 1}', "missing field"),
    ('{"schema": "torchmark.measurement", "version": 1, "number_per_run": 1, '
     '"raw_times": [1], "task_spec": {"stmt": "s", "setup": "p", "bogus": 1}}', "bogus"),
])
def test_from_json_errors(payload, message):
    with pytest.raises(ValueError, match=message):
        Measurement.from_json(payload)


def test_to_json_rejects_unserializable_metadata():
    m = make_measurement(1e-6, metadata={"obj": object()})
    with pytest.raises(ValueError, match=r"metadata\['obj'\]"):
        m.to_json()


def test_empty_measurement_statistics_raise():
    with pytest.raises(ValueError, match="no times"):
        _ = Measurement(1, [], TaskSpec("s", "pass")).median


times_strategy = st.lists(st.floats(min_value=1e-9, max_value=1.0), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(raw=times_strategy, number=st.integers(1, 10_000))
def test_statistics_match_torch(raw, number):
    from torch.utils.benchmark import Measurement as TorchMeasurement
    from torch.utils.benchmark import TaskSpec as TorchTaskSpec

    ours = Measurement(number, raw, TaskSpec("s", "pass"))
    theirs = TorchMeasurement(number, raw, TorchTaskSpec("s", "pass"))
    assert (ours.median, ours.iqr) == (theirs.median, theirs.iqr)  # to the last bit
    assert math.isclose(ours.mean, theirs.mean, rel_tol=1e-12)  # a sum rounds its own way
    assert ours.has_warnings == theirs.has_warnings


def test_quantiles_round_as_torch_and_nan_is_nan_in_any_order():
    assert Measurement(1, [1.71e-06, 7.4e-06], TaskSpec("x", "pass")).median == 4.555e-06
    nan = math.nan
    for raw in ([nan, 1e-6, 2e-6, 3e-6], [3e-6, 2e-6, 1e-6, nan], [2e-6, nan, 3e-6, 1e-6]):
        m = Measurement(1, raw, TaskSpec("x", "pass"))
        assert math.isnan(m.median) and math.isnan(m.iqr)
        assert m.significant_figures == 1  # and Compare can print it
    negative = Measurement(1, [-1e-6, -2e-6, -3e-6, -4e-6], TaskSpec("x", "pass"))
    assert negative.meets_confidence() and not negative.has_warnings  # as torch


def test_what_to_json_writes_reads_back():
    import numpy as np

    with pytest.raises(ValueError, match="cannot be written as JSON: .*raw_times must be a "
                                         "non-empty list"):
        Measurement(1, [], TaskSpec("x", "pass")).to_json()
    with pytest.raises(ValueError, match="cannot be written as JSON: .*number_per_run"):
        Measurement(2**60, [1e-3], TaskSpec("x", "pass")).to_json()
    m = Measurement(np.int64(3), [np.float64(1e-3)], TaskSpec("x", "pass",
                                                              num_threads=np.int64(2)))
    back = Measurement.from_json(m.to_json())
    assert (back.number_per_run, back.task_spec.num_threads) == (3, 2)


def test_statistics_are_plain_floats_whatever_the_times_were():
    import numpy as np

    m = Measurement(2, list(np.array([1.0, 2.0, 3.0])), TaskSpec("x", "pass"))
    assert all(type(v) is float for v in (m.median, m.mean, m.iqr))  # torch's are too
    assert m.median == 1.0
