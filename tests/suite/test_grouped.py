"""Derivation rules: which cases each kind of definition yields, and what they run."""

import pytest

from torchmark.suite import AutoLabels, GroupedModules, GroupedSetup, GroupedStmts, TimerArgs


def modes(benchmark):
    return [(c.auto_labels.language, c.auto_labels.runtime, c.auto_labels.autograd,
             c.auto_labels.num_threads) for c in benchmark.cases()]


SETUP = GroupedSetup(py_setup="x = torch.ones(4)\nw = torch.ones(4, requires_grad=True)",
                     cpp_setup="auto x = torch::ones({4});\n"
                               "auto w = torch::ones({4}, torch::requires_grad());")


def test_plain_statement_gives_eager_forward_per_language():
    b = GroupedStmts("x + 1", "x + 1;", GroupedSetup("x = torch.ones(4)", "auto x = torch::ones({4});"))
    assert modes(b) == [("python", "eager", "forward", 1), ("cpp", "eager", "forward", 1)]
    py, cpp = (c.timer_args for c in b.cases())
    assert py == TimerArgs("x + 1", "x = torch.ones(4)", "", 1, "python")
    assert cpp == TimerArgs("x + 1;", "auto x = torch::ones({4});", "", 1, "cpp")


def test_one_language_only():
    assert modes(GroupedStmts(py_stmt="x")) == [("python", "eager", "forward", 1)]
    assert modes(GroupedStmts(cpp_stmt="x;")) == [("cpp", "eager", "forward", 1)]


def test_thread_counts_multiply_the_cases():
    b = GroupedStmts("x", num_threads=(1, 2, 4))
    assert [m[3] for m in modes(b)] == [1, 2, 4]
    assert [c.timer_args.num_threads for c in b.cases()] == [1, 2, 4]


def test_signature_with_torchscript_and_autograd_gives_every_combination():
    b = GroupedStmts("y = (x * w).sum()", "auto y = (x * w).sum();", SETUP,
                     signature="f(x, w) -> y", torchscript=True, autograd=True)
    assert modes(b) == [
        (lang, rt, ag, 1) for lang in ("python", "cpp") for rt in ("eager", "jit")
        for ag in ("forward", "forward+backward")]
    by_mode = {(c.auto_labels.language, c.auto_labels.runtime, c.auto_labels.autograd): c
               for c in b.cases()}
    eager_bwd = by_mode["python", "eager", "forward+backward"].timer_args
    assert eager_bwd.stmt == "y = (x * w).sum()\ny.backward()"
    jit_py = by_mode["python", "jit", "forward"]
    assert jit_py.timer_args.stmt == "y = jit_model(x, w)"
    assert "torch.jit.load(" in jit_py.timer_args.setup
    assert str(jit_py.scripted.path) in jit_py.timer_args.setup
    jit_cpp = by_mode["cpp", "jit", "forward+backward"]
    assert jit_cpp.scripted == jit_py.scripted  # one model for Python and C++
    assert "torch::jit::load(" in jit_cpp.timer_args.setup
    assert "#include <torch/script.h>" in jit_cpp.timer_args.global_setup
    assert jit_cpp.timer_args.stmt.endswith("y.backward();")
    assert "jit_model.forward(jit_inputs).toTensor()" in jit_cpp.timer_args.stmt
    assert by_mode["cpp", "eager", "forward+backward"].timer_args.stmt == \
        "auto y = (x * w).sum();\ny.backward();"
    assert all(c.scripted is None for c in b.cases() if c.auto_labels.runtime == "eager")


def test_autograd_without_torchscript():
    b = GroupedStmts("y = x * w", signature="f(x, w) -> y", autograd=True)
    assert modes(b) == [("python", "eager", "forward", 1),
                        ("python", "eager", "forward+backward", 1)]


def test_modules_derive_the_call_from_the_signature():
    b = GroupedModules("model = torch.nn.Linear(4, 2)", "auto model = torch::nn::Linear(4, 2);",
                       GroupedSetup("x = torch.ones(3, 4)", "auto x = torch::ones({3, 4});"),
                       signature="f(x) -> y", torchscript=True)
    assert modes(b) == [("python", "eager", "forward", 1), ("python", "jit", "forward", 1),
                        ("cpp", "eager", "forward", 1), ("cpp", "jit", "forward", 1)]
    py, py_jit, cpp, _ = (c.timer_args for c in b.cases())
    assert py.stmt == "y = model(x)"
    assert py.setup == "x = torch.ones(3, 4)\nmodel = torch.nn.Linear(4, 2)"
    assert cpp.stmt == "auto y = model->forward(x);"
    assert cpp.setup.endswith("auto model = torch::nn::Linear(4, 2);")
    assert py_jit.stmt == "y = jit_model(x)"


def test_global_setup_reaches_the_cpp_cases():
    b = GroupedStmts("x", "f();", GroupedSetup(global_setup="int f() { return 1; }"))
    py, cpp = (c.timer_args for c in b.cases())
    assert cpp.global_setup == "int f() { return 1; }"
    assert py.global_setup == ""


def test_torchscript_model_scripts_and_saves(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path))
    b = GroupedStmts("y = x * w", setup=SETUP, signature="f(x, w) -> y", torchscript=True)
    jit_case = [c for c in b.cases() if c.auto_labels.runtime == "jit"][0]
    assert not jit_case.scripted.path.exists()
    path = jit_case.scripted.ensure()
    assert path.exists() and str(tmp_path) in str(path)
    m = jit_case.timer_args.timer().timeit(3)
    assert m.median > 0


def test_a_saved_model_is_scripted_again_by_a_new_run(tmp_path, monkeypatch):
    # the key covers the setup's text, not the user code it imports: a model saved by an
    # earlier run (process) must not be reused once that code changed
    import sys

    import torch

    import torchmark.suite.scripted as scripted

    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "user_net.py").write_text("def model(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    b = GroupedModules("from user_net import model", setup=SETUP, signature="f(x) -> y",
                       torchscript=True)
    jit = next(c for c in b.cases() if c.auto_labels.runtime == "jit")
    ones = torch.ones(2)
    assert torch.jit.load(str(jit.scripted.ensure()))(ones).tolist() == [2.0, 2.0]
    (tmp_path / "user_net.py").write_text("def model(x):\n    return x + x + x\n")
    assert torch.jit.load(str(jit.scripted.ensure()))(ones).tolist() == [2.0, 2.0]  # same run
    monkeypatch.setattr(scripted, "_SCRIPTED_HERE", set())  # as a new process starts
    monkeypatch.delitem(sys.modules, "user_net")
    assert torch.jit.load(str(jit.scripted.ensure()))(ones).tolist() == [3.0, 3.0]


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(), "give py_stmt, cpp_stmt or both"),
    (dict(py_stmt="y = x", torchscript=True), "torchscript=True needs a signature"),
    (dict(py_stmt="y = x", autograd=True), "autograd=True needs a signature"),
    (dict(cpp_stmt="auto y = x;", signature="f(x) -> y", torchscript=True), "needs py_stmt"),
    (dict(py_stmt="z = x", signature="f(x) -> y"), "never assigns 'y'"),
    (dict(py_stmt="y = (", signature="f(x) -> y"), "not valid Python"),
    (dict(cpp_stmt="auto z = x;", signature="f(x) -> y"), "never defines 'y'"),
    (dict(py_stmt="x", num_threads=0), "num_threads"),
    (dict(py_stmt="x", num_threads=2.0), "num_threads must be a positive int"),
    (dict(cpp_stmt="auto z = x; // y", signature="f(x) -> y"), "never defines 'y'"),
    (dict(py_stmt="y = x * w", signature="f(x) -> y", torchscript=True),
     "py_stmt uses 'w', which the signature does not pass in"),
    (dict(py_stmt="x", num_threads=(1, 1)), "twice"),
    (dict(py_stmt="x", setup="x = 1"), "must be a GroupedSetup"),
    (dict(py_stmt="x", setup=GroupedSetup(global_setup="int g;")), "no C++ side"),
    (dict(py_stmt="y = = x"), "py_stmt is not valid Python: invalid syntax (line 1: 'y = = x')"),
    (dict(py_stmt="x", torchscript="no"), "torchscript must be True or False, got 'no'"),
    (dict(py_stmt="x", autograd=1), "autograd must be True or False"),
    (dict(cpp_stmt="#include <vector>\nx;"),
     "C++ stmt, line 1: '#include <vector>' would land inside a function; put it in "
     "global_setup"),
])
def test_stmts_errors(kwargs, fragment):
    with pytest.raises(ValueError, match="GroupedStmts") as e:
        GroupedStmts(**kwargs)
    assert fragment in str(e.value)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(py_model_setup="model = 1"), "a signature is required"),
    (dict(signature="f(x) -> y"), "give py_model_setup"),
    (dict(py_model_setup="net = 1", signature="f(x) -> y"), "never assigns 'model'"),
    (dict(cpp_model_setup="auto net = 1;", signature="f(x) -> y"), "never defines 'model'"),
    (dict(cpp_model_setup="auto model = 1;", signature="f(x) -> y", torchscript=True),
     "needs py_model_setup"),
    (dict(py_model_setup="model = torch.nn.ReLU()", signature="f(x) -> None", autograd=True),
     "autograd=True needs a signature naming the output"),
])
def test_modules_errors(kwargs, fragment):
    with pytest.raises(ValueError, match="GroupedModules") as e:
        GroupedModules(**kwargs)
    assert fragment in str(e.value)


def test_a_signature_returning_none_keeps_no_output(tmp_path, monkeypatch):
    # as upstream's standard definitions write in-place statements: `f(x, y) -> None`
    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path))
    b = GroupedStmts("x += w", "x += w;", SETUP, signature="f(x, w) -> None",
                     torchscript=True)
    stmts = {(c.auto_labels.language, c.auto_labels.runtime): c.timer_args.stmt
             for c in b.cases()}
    assert stmts[("python", "eager")] == "x += w"
    assert stmts[("python", "jit")] == "jit_model(x, w)"
    assert stmts[("cpp", "jit")].splitlines()[-1] == "jit_model.forward(jit_inputs);"
    jit = next(c for c in b.cases() if c.auto_labels.runtime == "jit")
    jit.scripted.ensure()
    assert jit.timer_args.timer().timeit(3).median > 0
    m = GroupedModules("model = torch.nn.ReLU(inplace=True)", "auto model = torch::nn::ReLU();",
                       SETUP, signature="f(x) -> None")
    assert [c.timer_args.stmt for c in m.cases()] == ["model(x)", "model->forward(x);"]
    with pytest.raises(ValueError, match="autograd=True needs a signature naming the output"):
        GroupedStmts("x += w", signature="f(x, w) -> None", autograd=True)


def test_models_may_be_functions_imports_or_classes_the_setup_defines(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path))
    for model_setup in ("def model(x):\n    return x.relu()",
                        "from torch.nn.functional import relu as model"):
        b = GroupedModules(model_setup, setup=SETUP, signature="f(x) -> y")
        assert b.cases()[0].timer_args.timer().timeit(3).median > 0
    # TorchScript reads the source of what it scripts: a class the setup defines has one
    cls = ("class Twice(torch.nn.Module):\n    def forward(self, x):\n        return 2 * x\n"
           "model = Twice()")
    b = GroupedModules(cls, setup=SETUP, signature="f(x) -> y", torchscript=True)
    jit = next(c for c in b.cases() if c.auto_labels.runtime == "jit")
    jit.scripted.ensure()
    assert jit.timer_args.timer().timeit(3).median > 0


def test_setup_python_is_checked_when_defined():
    with pytest.raises(ValueError, match=r"GroupedSetup: py_setup is not valid Python: .* "
                                         r"\(line 2: 'y = \('\)"):
        GroupedSetup(py_setup="x = 1\ny = (")
    with pytest.raises(ValueError, match=r"GroupedSetup: C\+\+ setup, line 2: '#include "
                                         r"<map>' would land inside a function"):
        GroupedSetup(cpp_setup="int a = 0;\n#include <map>")


def test_a_python_definition_with_cpp_setup_gets_a_cpp_torchscript_case():
    # the scripted model is saved so that C++ can load it too: C++ setup alone suffices
    b = GroupedStmts("y = x * w", setup=SETUP, signature="f(x, w) -> y", torchscript=True)
    assert [c.auto_labels.short for c in b.cases()] == ["py eager fwd t1", "py jit fwd t1",
                                                        "cpp jit fwd t1"]
    cpp = b.cases()[-1].timer_args
    assert cpp.language == "cpp" and "torch::jit::load" in cpp.setup
    assert cpp.stmt.endswith("jit_model.forward(jit_inputs);")
    no_cpp = GroupedStmts("y = x * w", setup=GroupedSetup(SETUP.py_setup),
                          signature="f(x, w) -> y", torchscript=True)
    assert [c.auto_labels.short for c in no_cpp.cases()] == ["py eager fwd t1",
                                                             "py jit fwd t1"]


def test_a_statement_that_does_not_script_says_arguments_are_tensors(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHMARK_CACHE_DIR", str(tmp_path))
    b = GroupedStmts("y = x.sum(dim)", setup=GroupedSetup("x = torch.ones(4)\ndim = 0"),
                     signature="f(x, dim) -> y", torchscript=True)
    jit = next(c for c in b.cases() if c.scripted is not None)
    with pytest.raises(RuntimeError, match=r"(?s)as forward\(x, dim\) failed: .*as a Tensor"):
        jit.scripted.ensure()


def test_timer_args_validation():
    from torchmark.timing.timer_class import Language

    assert TimerArgs("x", language="c++").language == "cpp"
    assert TimerArgs("x;", language=Language.CPP).language == "cpp"
    assert TimerArgs("x;", language="cpp").setup == ""  # the default "pass" is Python
    assert TimerArgs("x", language=Language.PYTHON).setup == "pass"
    with pytest.raises(ValueError, match="language"):
        TimerArgs("x", language="rust")
    with pytest.raises(ValueError, match="num_threads"):
        TimerArgs("x", num_threads=0)
    with pytest.raises(ValueError, match="global_setup is for C\\+\\+"):
        TimerArgs("x", global_setup="int x;")
    assert TimerArgs.from_dict(TimerArgs("x", "y").to_dict()) == TimerArgs("x", "y")
    assert AutoLabels(num_threads=2).short == "py eager fwd t2"
