import pytest
import torch

from torchmark.core.errors import PolicyError
from torchmark.ops.registry import load_plugin, register_op, resolve


def test_torch_functions_methods_and_functional():
    assert resolve("torch.add").target is torch.add
    assert resolve("torch.nn.functional.relu").target is torch.nn.functional.relu
    add_ = resolve("torch.Tensor.add_")
    x = torch.zeros(2)
    add_.build([], {}, "cpu")(x, 1)
    assert x.tolist() == [1.0, 1.0]


def test_modules_are_built_from_the_build_spec():
    op = resolve("torch.nn.Linear")
    assert op.kind == "module"
    model = op.build([4, 2], {"bias": False}, "cpu")
    assert isinstance(model, torch.nn.Linear) and model.bias is None
    assert model(torch.ones(3, 4)).shape == (3, 2)
    with pytest.raises(ValueError, match="takes no build arguments"):
        resolve("torch.add").build([1], {}, "cpu")


def test_build_arguments_for_a_function_are_refused_when_the_config_loads():
    from torchmark.ops import config_from_data
    from torchmark.ops.schema import ConfigError

    tensor = {"type": "tensor", "shape": [2]}
    with pytest.raises(ConfigError, match=r"torch\.add\.config\[1\]\.build: torch\.add is a "
                                          "function, called with the inputs"):
        config_from_data({"torch.add": {"config": [
            {"input": [{"args": [tensor, tensor]}]},
            {"build": [{"args": [{"type": "int", "value": 3}]}],
             "input": [{"args": [tensor, tensor]}]}]}})
    config_from_data({"torch.add": {"config": [{"build": [{"args": []}],  # empty: fine
                                                "input": [{"args": [tensor, tensor]}]}]}})


def test_aten_ops_by_schema_name():
    add = resolve("aten::add.Tensor")
    assert add.target is torch.ops.aten.add.Tensor
    assert add.target(torch.ones(2), torch.ones(2)).tolist() == [2.0, 2.0]
    assert resolve("aten::mm").target is torch.ops.aten.mm  # the packet picks the overload
    assert resolve("aten::add").target(torch.ones(2), torch.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(LookupError, match="aten has no op 'no_such'"):
        resolve("aten::no_such")


@pytest.mark.parametrize("name, fragment", [
    ("torch.no_such", "torch has no attribute 'no_such'"),
    ("torch.nn.functional.nope", "torch.nn.functional has no attribute 'nope'"),
    ("numpy.add", "expected torch.<name>"),
    ("torch.float32", "not callable"),
    ("torch.Size", "a class (defined in torch), not an operator"),
    ("torch.add; import os", "expected torch.<name>"),
])
def test_unknown_names(name, fragment):
    with pytest.raises((LookupError, PolicyError)) as e:
        resolve(name)
    assert fragment in str(e.value)


def test_plugins_register_functions_and_builders(monkeypatch):
    monkeypatch.syspath_prepend(__file__.rsplit("/", 1)[0])
    load_plugin("plugin_ops")
    assert resolve("test.double").build([], {}, "cpu")(torch.ones(1)).item() == 2.0
    scale = resolve("test.scaler").build([3], {}, "cpu")
    assert scale(torch.ones(1)).item() == 3.0
    with pytest.raises(ValueError, match="cannot import"):
        load_plugin("no_such_plugin_module")
    with pytest.raises(ValueError, match="exactly one of fn and builder"):
        register_op("x")


def test_plugins_from_the_current_folder_and_plugins_that_fail(tmp_path, monkeypatch):
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    (tmp_path / "here_plugin.py").write_text(
        "import torch\nfrom torchmark.ops.registry import register_op\n"
        "register_op('test.here', fn=torch.neg)\n")
    load_plugin("here_plugin")  # found in the current folder, as `python -m` would
    assert resolve("test.here").build([], {}, "cpu")(torch.ones(1)).item() == -1.0
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('no GPU here')\n")
    with pytest.raises(ValueError, match="--plugin broken_plugin: importing it raised "
                                         "RuntimeError: no GPU here"):
        load_plugin("broken_plugin")


def test_a_plugin_given_as_a_file_path_and_one_that_registers_nothing(tmp_path, capsys):
    import copy

    from torchmark.cli.main import main

    plugin = tmp_path / "copy.py"  # named like a standard module: it does not replace it
    plugin.write_text("import torch\nfrom torchmark.ops.registry import register_op\n"
                      "register_op('test.from_file', fn=torch.abs)\n")
    assert load_plugin(str(plugin)) == 1
    import sys

    assert sys.modules["copy"] is copy
    assert resolve("test.from_file").build([], {}, "cpu")(-torch.ones(1)).item() == 1.0
    with pytest.raises(ValueError, match="no such file 'nope.py'; give a module name"):
        load_plugin("nope.py")
    config = tmp_path / "c.json"
    config.write_text('{"torch.neg": {"config": [{"input": [{"args": [{"type": "tensor", '
                      '"shape": [2]}]}]}]}}')
    assert main(["ops", "-c", str(config), "--plugin", "colorsys", "--list"]) == 0
    assert "note: --plugin colorsys registered no operator" in capsys.readouterr().err
    with pytest.raises(LookupError, match="registered with register_op \\(in a module given "
                                          "with --plugin\\)"):
        resolve("mine.op")
