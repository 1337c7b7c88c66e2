"""Range and copy expansion: counts, order, ids."""

import time

import pytest

from torchmark.ops import config_from_data, iter_cases
from torchmark.ops.schema import ConfigError


def cases(args, kwargs=None, op="torch.mm", build=None):
    entry = {"input": [{"args": args, "kwargs": kwargs or {}}]}
    if build is not None:
        entry["build"] = build
    return list(iter_cases(config_from_data({op: {"config": [entry]}})))


def shapes(case):
    return [a["shape"] for a in case.input["args"] if a["type"] == "tensor"]


def test_the_matmul_sweep_gives_121_cases():
    out = cases([{"type": "tensor", "shape": [[128, 2048, 16], 64], "__range__": ["shape"]},
                 {"type": "tensor", "shape": [64, 32]}])
    assert len(out) == 121
    assert shapes(out[0]) == [[128, 64], [64, 32]]
    assert shapes(out[-1]) == [[2048, 64], [64, 32]]  # max included
    assert [c.id for c in out[:2]] == ["torch.mm|0|0|0_0", "torch.mm|0|0|0_1"]
    assert "__range__" not in out[0].input["args"][0]


def test_products_in_param_order():
    out = cases([{"type": "tensor", "shape": [[1, 2, 1], [3, 4, 1]], "dtype": ["float", "double"],
                  "__range__": ["shape", "dtype"]},
                 {"type": "int", "value": [1, 3, 2], "__range__": ["value"]}])
    assert len(out) == 2 * 2 * 2 * 2
    first = [(c.input["args"][0]["shape"], c.input["args"][0]["dtype"], c.input["args"][1]["value"])
             for c in out[:4]]
    assert first == [([1, 3], "float", 1), ([1, 3], "float", 3), ([1, 3], "double", 1),
                     ([1, 3], "double", 3)]


def test_lists_of_bool_str_device_and_float_ranges():
    out = cases([{"type": "bool", "value": [True, False], "__range__": ["value"]},
                 {"type": "str", "value": ["a", "b", "c"], "__range__": ["value"]},
                 {"type": "device", "value": ["cpu", "meta"], "__range__": ["value"]},
                 {"type": "float", "value": [0.5, 1.5, 0.25], "__range__": ["value"]}],
                op="torch.add")
    assert len(out) == 2 * 3 * 2 * 5
    assert sorted({c.input["args"][3]["value"] for c in out}) == [0.5, 0.75, 1.0, 1.25, 1.5]


def test_recursive_expansion_inside_lists_and_tuples():
    out = cases([{"type": "genericlist", "__range__": ["value"], "value": [
        {"type": "tensor", "shape": [[1, 3, 1]], "__range__": ["shape"]},
        {"type": "tuple", "__range__": ["value"], "value": [
            {"type": "int", "value": [1, 2, 1], "__range__": ["value"]}]}]}], op="torch.cat")
    assert len(out) == 3 * 2
    inner = out[1].input["args"][0]["value"]
    assert inner[0]["shape"] == [1] and inner[1]["value"][0]["value"] == 2
    assert "__range__" not in inner[0] and "__range__" not in inner[1]["value"][0]


def test_kwargs_expand_too():
    out = cases([{"type": "tensor", "shape": [4]}],
                {"alpha": {"type": "int", "value": [1, 3, 1], "__range__": ["value"]}},
                op="torch.add")
    assert [c.input["kwargs"]["alpha"]["value"] for c in out] == [1, 2, 3]


def test_copy_takes_dimensions_from_other_arguments():
    out = cases([
        {"type": "tensor", "shape": [[1, 2, 1], -1, -1], "__range__": ["shape"],
         "__copy__": [{"shape": [1, [1, 1]]}, {"shape": [2, [2, 2]]}]},
        {"type": "tensor", "shape": [-1, [8, 9, 1], [16, 17, 1]], "__range__": ["shape"],
         "__copy__": [{"shape": [0, [0, 0]]}]},
        {"type": "tensor", "shape": [-1, -1, 4],
         "__copy__": [{"shape": [0, [0, 0]]}, {"shape": [1, [1, 2]]}]}], op="torch.baddbmm")
    assert len(out) == 2 * 2 * 2
    for c in out:
        inp, b1, b2 = shapes(c)
        assert inp == [b1[0], b1[1], 4] and b2 == [b1[0], b1[2], 4]
    assert "__copy__" not in out[0].input["args"][0]


def test_build_and_input_ids_combine():
    out = cases([{"type": "tensor", "shape": [2, 4]}], op="torch.nn.Linear",
                build=[{"args": [{"type": "int", "value": 4},
                                 {"type": "int", "value": [2, 3, 1], "__range__": ["value"]}]},
                       {"args": [{"type": "int", "value": 4}, {"type": "int", "value": 8}]}])
    assert [c.id for c in out] == ["torch.nn.Linear|0|0_0|0", "torch.nn.Linear|0|0_1|0",
                                   "torch.nn.Linear|0|1|0"]
    assert out[1].build["args"][1]["value"] == 3


def test_a_sweep_too_large_to_run_is_refused_before_expanding():
    huge = {"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [[1, 100000, 1], [1, 100000, 1], [1, 100000, 1]],
         "__range__": ["shape"]}, {"type": "float", "value": 1.0}]}]}]}}
    started = time.perf_counter()
    with pytest.raises(ConfigError) as e:
        list(iter_cases(config_from_data(huge)))
    assert time.perf_counter() - started < 5
    assert "1,000,000,000,000,000 cases" in str(e.value)
    assert "torch.add.config[0].input[0].args[0]" in str(e.value)


@pytest.mark.parametrize("arg, fragment", [
    ({"type": "tensor", "shape": [[1, 1000000000000, 1]], "__range__": ["shape"]},
     "1,000,000,000,000 cases"),
    ({"type": "tensor", "shape": [[1, 10**20, 1]], "__range__": ["shape"]},  # past 2**63
     "100,000,000,000,000,000,000 cases"),
    ({"type": "float", "value": [0.0, 1.0, 1e-12], "__range__": ["value"]},
     "1,000,000,000,001 cases"),
    ({"type": "genericlist", "value": [
        {"type": "int", "value": [1, 2000, 1], "__range__": ["value"]},
        {"type": "int", "value": [1, 2000, 1], "__range__": ["value"]}]},
     "4,000,000 cases"),
])
def test_huge_ranges_are_counted_not_built(arg, fragment):
    started = time.perf_counter()
    with pytest.raises(ConfigError) as e:
        config_from_data({"torch.add": {"config": [{"input": [{"args": [arg]}]}]}})
    assert time.perf_counter() - started < 2
    assert fragment in str(e.value) and "torch.add.config[0].input[0].args[0]" in str(e.value)


def test_builds_times_inputs_and_the_whole_config_are_capped():
    ranged = {"type": "int", "value": [1, 3000, 1], "__range__": ["value"]}
    with pytest.raises(ConfigError, match="the config reaches 9,000,000 cases here, more "
                                          "than the 1,000,000 a config"):
        config_from_data({"torch.nn.Linear": {"config": [{
            "build": [{"args": [ranged, {"type": "int", "value": 4}]}],
            "input": [{"args": [{"type": "tensor", "shape": [2, 8]}, ranged]}]}]}})


def test_expansion_errors_name_the_file(tmp_path):
    from torchmark.ops.loading import load_config

    path = tmp_path / "copy.json"
    path.write_text('{"torch.add": {"config": [{"input": [{"args": ['
                    '{"type": "tensor", "shape": [4]}, {"type": "tensor", "shape": [-1],'
                    ' "__copy__": [{"shape": [0, [0, 3]]}]}]}]}]}}')
    with pytest.raises(ConfigError, match=f"^{path}: torch.add.config\\[0\\].input\\[0\\]"
                                          ".args\\[1\\].__copy__: dimension 0 <- argument 0 "
                                          "dimension 3 is out of range"):
        load_config(path)


@pytest.mark.parametrize("arg, kwargs, message", [
    ({"type": "int", "value": 3, "__copy__": [{"shape": [0, [0, 0]]}]}, {},
     "args[1].__copy__: __copy__ copies into a tensor's shape; this argument is a int"),
    ({"type": "genericlist", "value": [{"type": "tensor", "shape": [-1],
                                        "__copy__": [{"shape": [0, [0, 0]]}]}]}, {},
     "args[1]: __copy__ works on positional tensor arguments only, not inside lists"),
    (None, {"other": {"type": "tensor", "shape": [-1], "__copy__": [{"shape": [0, [0, 0]]}]}},
     "kwargs.other.__copy__: __copy__ works on positional tensor arguments only"),
])
def test_copy_errors_are_found_at_load_and_named_by_the_file(tmp_path, arg, kwargs, message):
    import json

    from torchmark.ops.loading import load_config

    args = [{"type": "tensor", "shape": [4]}] + ([arg] if arg else [])
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"torch.add": {"config": [{"input": [
        {"args": args, "kwargs": kwargs}]}]}}))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"{path}: torch.add.config[0].input[0].{message}"


@pytest.mark.parametrize("value, message", [
    ([0, float("inf"), 1.0], "must hold finite numbers"),
    ([0, float("nan"), 1.0], "must hold finite numbers"),
    ([-1e308, 1e308, 1e-300], "spans more values than can be counted"),
    ([0, 10**400, 1], "must hold finite numbers"),  # an int beyond a float's range
    ([-10**308, 10**308, 1], "spans more values than can be counted"),
])
def test_ranges_must_be_finite(value, message):
    arg = {"type": "float", "value": value, "__range__": ["value"]}
    with pytest.raises(ConfigError, match=message):
        config_from_data({"torch.add": {"config": [{"input": [{"args": [arg]}]}]}})
    if all(isinstance(x, int) for x in value):  # shapes and value ranges alike
        shape = {"type": "tensor", "shape": [value], "__range__": ["shape"]}
        with pytest.raises(ConfigError, match=message):
            config_from_data({"torch.add": {"config": [{"input": [{"args": [shape]}]}]}})
        ranged = {"type": "tensor", "shape": [2], "value_range": value[:2]}
        if value[1] > 1e308:
            with pytest.raises(ConfigError, match="must hold finite numbers"):
                config_from_data({"torch.add": {"config": [{"input": [{"args": [ranged]}]}]}})


def test_float_ranges_stop_at_max_and_keep_tiny_steps():
    from torchmark.ops.expansion import _inclusive

    assert _inclusive(0.1, 0.3, 0.1) == [0.1, 0.2, 0.3]  # 0.1 + 0.2 lands past 0.3
    assert _inclusive(0, 9.49999999, 0.1)[-1] == 9.4
    assert _inclusive(1e-15, 3e-15, 1e-15) == [1e-15, 2e-15, 3e-15]
