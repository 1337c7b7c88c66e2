"""Globals that cross into the counted process: the caller's own classes and functions
(defined in its __main__) and what they read there. Packed in one process, loaded in
another with a fresh __main__, as the counted process does (no valgrind needed)."""

import pickle
import subprocess
import sys
import textwrap
import warnings

CALLER = '''
import pickle, sys
import torch
from torch import nn
from torchmark.callgrind.globals_bridge import pack_globals

SCALE = 3

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * SCALE

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return helper(self.block(x))

def helper(y):
    return y.relu() + SCALE

def scaled(x):
    return x * SCALE

torch.manual_seed(0)
net, x = Net(), torch.ones(2, 4)
plan = pack_globals({"net": net, "scaled": scaled, "add": torch.add, "x": x}, sys.argv[1])
with open(sys.argv[2], "wb") as f:
    pickle.dump((plan, net(x).sum().item()), f)
'''

COUNTED = '''
import pickle, sys, types
import torch
from torchmark.callgrind.globals_bridge import load_globals

main = types.ModuleType("__main__")  # the counted process's own __main__
sys.modules["__main__"] = main
with open(sys.argv[1], "rb") as f:
    plan, expected = pickle.load(f)
load_globals(plan, main.__dict__)
ns = main.__dict__
assert abs(ns["net"](ns["x"]).sum().item() - expected) < 1e-5
assert ns["scaled"](ns["x"]).sum().item() == 24.0
assert ns["add"](ns["x"], ns["x"]).sum().item() == 16.0
print("loaded")
'''


def test_the_callers_classes_and_what_they_read_cross_over(tmp_path):
    caller, counted = tmp_path / "caller.py", tmp_path / "counted.py"
    caller.write_text(CALLER)
    counted.write_text(COUNTED)
    plan = tmp_path / "plan.pkl"
    for argv in ([caller, tmp_path / "globals", plan], [counted, plan]):
        proc = subprocess.run([sys.executable, *map(str, argv)], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert "loaded" in proc.stdout
    entries, _ = pickle.loads(plan.read_bytes())
    sent = {e["name"]: e["kind"] for e in entries}
    assert sent["SCALE"] == "pickle" and sent["helper"] == "source" and sent["nn"] == "module"


def test_a_lambda_is_refused_with_the_reason(tmp_path):
    script = tmp_path / "lam.py"
    script.write_text(textwrap.dedent('''
        from torchmark.callgrind.globals_bridge import pack_globals
        lam = lambda v: v * 2
        try:
            pack_globals({"lam": lam}, "unused")
        except ValueError as e:
            print(e)
    '''))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert "a lambda cannot be sent by its source" in proc.stdout, proc.stderr


def test_copy_if_callgrind_says_how_its_value_travels():
    import torch

    from torchmark import CopyIfCallgrind
    from torchmark.callgrind.globals_bridge import Serialization

    with warnings.catch_warnings():  # TorchScript's deprecation notice
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(torch.nn.Linear(2, 2))
    assert CopyIfCallgrind(scripted).serialization is Serialization.TORCH_JIT
    assert CopyIfCallgrind(torch.nn.Linear(2, 2)).serialization is Serialization.TORCH
    assert CopyIfCallgrind(torch.ones(2)).serialization is Serialization.TORCH
    assert CopyIfCallgrind({"a": 1}).serialization is Serialization.PICKLE


def test_unit_to_english_takes_torchs_keyword():
    import torchmark

    assert torchmark.unit_to_english(u="ns") == "nanosecond"
    assert torchmark.select_unit(5) == ("s", 1) and isinstance(torchmark.select_unit(5)[1], int)


def test_the_modules_a_request_imports_are_named(tmp_path):
    import json

    import torch

    from torchmark.callgrind.globals_bridge import modules_needed, pack_globals

    plan = pack_globals({"m": torch.nn.Sequential(torch.nn.Linear(2, 2)), "j": json,
                         "dumps": json.dumps, "x": torch.ones(2)}, tmp_path)
    setup = "from a.b import c\nfrom . import d\nimport e.f, g\ndef h():\n    import i"
    assert modules_needed(plan, setup) == [
        "a.b", "e.f", "g", "i", "torch.nn.modules.container", "torch.nn.modules.linear",
        "json", "torch"]
    assert modules_needed([], "x +") == []  # a syntax error is reported when it runs
