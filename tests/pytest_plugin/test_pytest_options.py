"""The plugin's pieces without a pytest session: options and their precedence, the
description of parameters, case identity, shares written as 5% or 0.05."""

from __future__ import annotations

import enum
import types

import pytest
import torch

from torchmark.core.errors import UsageError
from torchmark.core.proportion import parse_proportion
from torchmark.pytest_plugin.cases import case_of, describe, location_of
from torchmark.pytest_plugin.options import BenchOptions, Settings


class Colour(enum.Enum):
    RED = 1


def test_parameters_are_described_the_same_in_every_process():
    assert describe(torch.float16) == "torch.float16"
    assert describe(torch.device("cpu")) == "cpu"
    assert describe((64, 128)) == [64, 128] and describe(torch.Size([2, 3])) == [2, 3]
    assert describe(torch.ones(2, 3)) == "Tensor([2, 3], torch.float32)"
    assert describe({"n": 1.5, "x": float("nan")}) == {"n": 1.5, "x": "nan"}
    assert describe(Colour.RED) == "Colour.RED"
    assert describe(object()) == "<object>"  # never a repr holding an address


def _item(nodeid, **params):
    callspec = types.SimpleNamespace(params=params) if params else None
    return types.SimpleNamespace(nodeid=nodeid, callspec=callspec)


def test_a_case_is_the_test_its_parameters_threads_and_device():
    case = case_of(_item("tests/test_ops.py::TestMm::test_mm[64]", n=64), stmt="mm",
                   threads=2)
    assert case.frontend == "pytest" and case.label == "tests/test_ops.py"
    assert case.sub_label == "TestMm::test_mm[64]" and case.params == {"n": 64}
    again = case_of(_item("tests/test_ops.py::TestMm::test_mm[64]", n=64), stmt="other code",
                    threads=2)
    assert again.id == case.id  # the benchmarked code is not what the case is
    assert case_of(_item("tests/test_ops.py::TestMm::test_mm[64]", n=64), stmt="mm").id \
        != case.id
    assert case_of(_item("tests/test_ops.py::TestMm::test_mm[64]", n=64), stmt="mm",
                   threads=2, group="matmul").label == "matmul"


def test_a_test_file_is_named_from_its_project_root_whatever_the_rootdir(tmp_path):
    proj = tmp_path / "proj"
    (proj / "tests" / "bench").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("")
    file = proj / "tests" / "bench" / "test_x.py"
    ids = set()
    for nodeid in ("tests/bench/test_x.py::TestX::test_a[1]",  # the rootdir: proj
                   "test_x.py::TestX::test_a[1]",  # tests/bench
                   "../proj/tests/bench/test_x.py::TestX::test_a[1]"):  # beside proj
        item = types.SimpleNamespace(nodeid=nodeid, path=file, callspec=None)
        assert location_of(item) == ("tests/bench/test_x.py", "TestX::test_a[1]")
        case = case_of(item, stmt="x")
        assert (case.label, case.sub_label) == ("tests/bench/test_x.py", "TestX::test_a[1]")
        ids.add(case.id)
    assert len(ids) == 1
    # where the rootdir is the project's root, the id is the one the node id gave
    assert ids == {case_of(_item("tests/bench/test_x.py::TestX::test_a[1]"), stmt="x").id}


def test_marker_options_over_the_session_options():
    session = Settings(metric="instructions", min_run_time=0.5)
    assert BenchOptions.resolve((), {}, session).metric == "instructions"
    assert BenchOptions.resolve((), {}, session).min_run_time == 0.5
    assert BenchOptions.resolve((), {"metric": "wall", "min_run_time": 0.1},
                                session).min_run_time == 0.1
    assert BenchOptions.resolve((), {"device": "cuda"}, Settings()).metric == "device"
    assert BenchOptions.resolve((), {"device": "cuda", "metric": "wall"},
                                Settings()).metric == "wall"
    plain = BenchOptions.resolve((), {}, Settings())
    assert (plain.metric, plain.num_threads, plain.device, plain.l2) == ("wall", 1, "cpu",
                                                                         "cold")


@pytest.mark.parametrize("args, kwargs, message", [
    ((0.1,), {}, "keyword options only"),
    ((), {"min_run_tme": 1}, "unknown option(s) min_run_tme"),
    ((), {"device": "gpu"}, "device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    ((), {"metric": "cycles"}, "metric must be one of wall, device, instructions"),
    ((), {"num_threads": 0}, "num_threads must be an int >= 1, got 0"),
    ((), {"min_run_time": -1}, "min_run_time must be a finite number of seconds >= 0"),
    ((), {"l2": "warm"}, "l2 must be 'cold' or 'hot'"),
    ((), {"group": ""}, "group must be a non-empty str"),
])
def test_bad_marker_options_name_the_option(args, kwargs, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        BenchOptions.resolve(args, kwargs, Settings())


def test_session_options_that_cannot_go_together():
    with pytest.raises(UsageError, match="exclude each other"):
        Settings(store="x.db", no_store=True)
    with pytest.raises(UsageError, match="needs --torchmark-baseline"):
        Settings(fail_slower=0.05)
    with pytest.raises(UsageError, match="nowhere/out.jsonl: its folder does not exist"):
        Settings(json_path="nowhere/out.jsonl")
    options = {"torchmark_fail_slower": "150%", "torchmark_baseline": "latest"}
    settings = Settings.from_options(lambda name: options.get(name))
    assert settings.fail_slower == 1.5 and settings.min_run_time == 0.2


@pytest.mark.parametrize("text, share", [("5%", 0.05), ("0.05", 0.05), (0.05, 0.05),
                                         (" 12.5% ", 0.125), ("0", 0.0)])
def test_shares_as_fractions_or_percents(text, share):
    assert parse_proportion(text, 0, 10) == pytest.approx(share)


@pytest.mark.parametrize("text, message", [
    ("5", "5 is ambiguous: write 5% or a fraction such as 0.05"),
    ("five", "'five' is not a fraction (0.95) or a percent (95%)"),
    ("nan%", "'nan%' is not a finite number"),
    ("-1%", "-1% is outside [0, 10)"),
])
def test_shares_refused_say_why(text, message):
    with pytest.raises(UsageError) as caught:
        parse_proportion(text, 0, 10, high_open=True)
    assert str(caught.value) == message
