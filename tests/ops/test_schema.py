"""Validation: every bad input is reported with its JSON path and a one-line reason."""

import json

import pytest

from torchmark.cli.main import main
from torchmark.ops import ConfigError, config_from_data


def config(arg=None, op="torch.mm", entry=None):
    arg = arg or {"type": "tensor", "shape": [4, 4]}
    return {op: entry or {"config": [{"input": [{"args": [{"type": "tensor", "shape": [4, 4]},
                                                          arg]}]}]}}


ARG = "torch.mm.config[0].input[0].args[1]"


@pytest.mark.parametrize("data, path, reason", [
    (config({"type": "tensr", "shape": [4]}), ARG, "unknown type 'tensr'"),
    (config({"type": "tensor", "shape": [4, 4], "dtype": "float8"}), f"{ARG}.dtype",
     "unknown dtype 'float8'"),
    (config({"type": "tensor", "shape": [4, 0]}), f"{ARG}.shape",
     "shape must be a list of positive ints, got [4, 0]"),
    (config({"type": "tensor", "shape": [4, 2.5]}), f"{ARG}.shape",
     "shape must be a list of positive ints"),
    (config({"type": "tensor", "shape": "4x4"}), f"{ARG}.shape", "valid list"),
    (config({"type": "tensor"}), f"{ARG}.shape", "required, but missing"),
    (config({"type": "tensor", "shape": [4], "requires_grad": "yes"}),
     f"{ARG}.requires_grad", "valid boolean"),
    (config({"type": "tensor", "shape": [4], "__range__": ["shape"]}), f"{ARG}.shape",
     "'shape' is in __range__, but no element of [4] is a range"),
    (config({"type": "int", "value_range": [10, 1]}), f"{ARG}.value_range",
     "value_range [10, 1] is reversed"),
    (config({"type": "float", "value_range": [1]}), f"{ARG}.value_range",
     "value_range must be [min, max]"),
    (config({"type": "int"}), ARG, "needs a value or a value_range"),
    (config({"type": "int", "value": 1.5}), f"{ARG}.value", "must be an integer"),
    (config({"type": "tensor", "shape": [[1, 8, 1]]}), f"{ARG}.shape",
     "'shape' is not in __range__"),
    (config({"type": "tensor", "shape": [[8, 1, 1]], "__range__": ["shape"]}), f"{ARG}.shape",
     "is reversed"),
    (config({"type": "tensor", "shape": [4], "__range__": ["value"]}), f"{ARG}.shape",
     "can only range over shape, dtype"),
    (config({"type": "tensor", "shape": [4], "__copy__": [{"shape": 1}]}), f"{ARG}.__copy__",
     "each __copy__ entry"),
    (config({"type": "device", "value": "gpu"}), f"{ARG}.value", "a device such as"),
    (config({"type": "tensor", "shape": [4], "dtype": "float", "__range__": ["dtype"]}),
     f"{ARG}.dtype", "dtype must be a non-empty list"),
    (config({"type": "int", "value_range": [1, 3], "__range__": ["value"]}), f"{ARG}.value",
     "a value range must be [min, max, step], got None"),
    (config({"type": "bool", "__range__": ["value"]}), f"{ARG}.value",
     "value must be a non-empty list"),
    (config({"type": "none", "__range__": ["value"]}), ARG, "can only range over nothing"),
    (config({"type": "genericlist", "value": [{"type": "tensor", "shape": [-1]}]}),
     f"{ARG}.value[0].shape", "-1 is a placeholder for __copy__ only"),
    ({"torch.mm": {"config": [{"build": []}]}}, "torch.mm.config[0].input",
     "required, but missing"),
    ({"torch.mm": {"config": [{"input": []}]}}, "torch.mm.config[0].input",
     "at least one spec"),
    ({"torch.mm": {"config": []}}, "torch.mm.config", "at least one entry"),
    ({"torch.mm": {"config": [{"input": [{"args": [], "kargs": {}}]}]}},
     "torch.mm.config[0].input[0].kargs", "unknown key"),
    ({"torch.mm": {"input_iterator": "Nope", "config": [{"input": [{}]}]}},
     "torch.mm.input_iterator", "unknown iterator 'Nope'"),
    ({"torch.mm": {"input_data_generator": "PyTorch:Other", "config": [{"input": [{}]}]}},
     "torch.mm.input_data_generator", "unknown data generator"),
    (config(op="torch.no_such_op"), "torch.no_such_op",
     "torch has no attribute 'no_such_op'"),
    (config(op="aten::mm.NoOverload"), "aten::mm.NoOverload", "has no overload 'NoOverload'"),
    (config(op="os.system"), "os.system", "expected torch.<name>"),
    (config(op="torch._C"), "torch._C", "private and dunder names are not operators"),
])
def test_each_problem_has_a_path_and_a_reason(data, path, reason):
    with pytest.raises(ConfigError) as e:
        config_from_data(data, "c.json")
    problems = e.value.problems
    assert any(p == path and reason in r for p, r in problems), problems
    assert str(e.value).startswith("c.json: ")


def test_all_problems_are_reported_together():
    data = {"torch.mm": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [0]}, {"type": "tensor", "shape": [1], "dtype": "x"}]}]}]}}
    with pytest.raises(ConfigError) as e:
        config_from_data(data)
    assert [p for p, _ in e.value.problems] == ["torch.mm.config[0].input[0].args[0].shape",
                                                "torch.mm.config[0].input[0].args[1].dtype"]


def test_cli_reports_bad_configs_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(config({"type": "tensor", "shape": [4, 0]})))
    assert main(["ops", "-c", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"torchmark: error: {bad}: torch.mm.config[0].input[0].args[1].shape: shape "
                   "must be a list of positive ints, got [4, 0]")
    broken = tmp_path / "broken.json"
    broken.write_text('{"torch.mm": ')
    assert main(["ops", "-c", str(broken)]) == 2
    assert "not valid JSON (line 1" in capsys.readouterr().err
    assert main(["ops", "-c", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["ops", "-c", str(empty)]) == 2
    assert "non-empty JSON object" in capsys.readouterr().err


def test_config_text_is_never_evaluated(tmp_path):
    data = config({"type": "str", "value": "__import__('os').system('touch pwned')"},
                  op="torch.add")
    loaded = config_from_data(data)
    assert loaded.ops["torch.add"].config[0].input[0].args[1].value.startswith("__import__")
    with pytest.raises(ConfigError, match="expected torch"):
        config_from_data(config(op="__import__('os')"))


@pytest.mark.parametrize("key, message", [
    ("value_rnage", "unknown key 'value_rnage': did you mean 'value_range'?"),
    ("__rnage__", "unknown key '__rnage__': did you mean '__range__'?"),
    ("__sweep__", "unknown key '__sweep__' (meta keys are"),
])
def test_misspelled_argument_keys_are_refused(key, message):
    arg = {"type": "tensor", "shape": [4, 4], key: [0, 1]}
    with pytest.raises(ConfigError) as e:
        config_from_data({"torch.relu": {"config": [{"input": [{"args": [arg]}]}]}})
    assert "torch.relu.config[0].input[0].args[0]" in str(e.value) and message in str(e.value)


def test_other_unknown_argument_keys_are_ignored_as_param_does():
    arg = {"type": "tensor", "shape": [4, 4], "comment": "PARAM configs may carry their own"}
    config_from_data({"torch.relu": {"config": [{"input": [{"args": [arg]}]}]}})


@pytest.mark.parametrize("name, text", [
    ("dup.json", '{"torch.relu": {"config": []}, "torch.relu": {"config": []}}'),
    ("dup.yaml", "torch.relu:\n  config: []\ntorch.relu:\n  config: []\n"),
])
def test_a_key_given_twice_is_refused(tmp_path, name, text):
    from torchmark.ops import load_config

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match="the key 'torch.relu' appears twice"):
        load_config(path)


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    from torchmark.ops import iter_cases, load_config

    path = tmp_path / "merge.yaml"
    path.write_text("torch.add:\n"
                    "  config:\n"
                    "    - input:\n"
                    "        - args:\n"
                    "            - &b {type: tensor, shape: [8, 8], dtype: float}\n"
                    "            - <<: *b\n"
                    "              dtype: double\n")
    case = next(iter_cases(load_config(path)))
    assert [a["dtype"] for a in case.input["args"]] == ["float", "double"]
    path.write_text(path.read_text() + "              <<: *b\n")  # a second merge key
    with pytest.raises(ConfigError, match="the key '<<' appears twice"):
        load_config(path)
    path.write_text("torch.neg:\n  config:\n    - input:\n        - args:\n"
                    "            - type: tensor\n              ? [a, b]\n              : 1\n")
    with pytest.raises(ConfigError, match=f"{path}: a mapping key must be a plain value, "
                                          "got a list"):
        load_config(path)


@pytest.mark.parametrize("arg, message", [
    ({"type": "tensor", "shape": [4], "dtype": "long", "requires_grad": True},
     "requires_grad needs a floating-point dtype; a long tensor"),
    ({"type": "tensor", "shape": [4], "dtype": "uint8", "value_range": [-5, -1]},
     "does not fit uint8 ([0, 255])"),
    ({"type": "tensor", "shape": [4], "dtype": "int8", "value_range": [0, 1000]},
     "does not fit int8"),
    ({"type": "tensor", "shape": [4], "dtype": "long", "value_range": [1.5, 2.5]},
     "must hold integers"),
    ({"type": "tensor", "shape": [4], "dtype": "float16", "value_range": [0, 70000]},
     "exceeds the largest float16 (65504)"),
    ({"type": "tensor", "shape": [4], "dtype": ["float", "bool"], "value_range": [0, 2],
      "__range__": ["dtype"]}, "value_range does not apply to bool"),
    ({"type": "int", "value_range": [1.5, 2.5]}, "of an int argument must hold integers"),
])
def test_dtype_and_value_range_must_agree(arg, message):
    with pytest.raises(ConfigError) as e:
        config_from_data({"torch.abs": {"config": [{"input": [{"args": [arg]}]}]}})
    assert "torch.abs.config[0].input[0].args[0]" in str(e.value) and message in str(e.value)
