"""The `torchmark` command: timeit, compare, demo, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.timing.files import load_measurements, save_measurements

from compare.fixtures_compare import ab_results


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_timeit_prints_measurement_and_saves(capsys, tmp_path):
    path = tmp_path / "m.json"
    code, out, err = run(capsys, "timeit", "y = x * 2", "-s", "x = torch.ones(8)",
                         "--min-run-time", "0.02", "--label", "L", "--env", "A",
                         "--save", str(path))
    assert code == 0, err
    assert out.startswith("L\nsetup: x = torch.ones(8)\n")
    assert "per measurement" in out or "runs," in out
    code, out, err = run(capsys, "timeit", "pass", "--min-run-time", "0.01", "--save", str(path))
    assert code == 0 and "(2 measurements)" in out
    held = load_measurements(path)
    assert [m.task_spec.env for m in held] == ["A", None]
    assert held[0].task_spec.label == "L"


def test_timeit_threads_option(capsys):
    code, out, _ = run(capsys, "timeit", "pass", "-t", "2", "--min-run-time", "0.01")
    assert code == 0 and "2 threads" in out


def test_compare_formats(capsys, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    results = ab_results()
    save_measurements(a, results[:3])
    save_measurements(b, results[3:])
    code, out, _ = run(capsys, "compare", str(a), str(b))
    assert code == 0
    assert "(environment A: mul/sum)" in out and "(environment B: bmm)" in out
    assert "\033[" not in out  # not a terminal: no colour
    assert "20000" in out  # trimmed by default
    code, md, _ = run(capsys, "compare", str(a), str(b), "--format", "markdown")
    assert code == 0 and md.startswith("**Batched dot**")
    code, text, _ = run(capsys, "compare", str(a), "--format", "csv")
    assert code == 0 and text.splitlines()[0].startswith("label,num_threads")
    code, out, _ = run(capsys, "compare", str(a), "--color")
    assert "\033[" in out


def test_compare_keeps_files_with_the_same_task_apart(capsys, tmp_path):
    from conftest import make_measurement

    before, after = tmp_path / "before.json", tmp_path / "after.json"
    save_measurements(before, [make_measurement(4e-6)])
    save_measurements(after, [make_measurement(2e-6)])
    code, out, _ = run(capsys, "compare", str(before), str(after), "--no-color")
    assert code == 0
    header = next(line for line in out.splitlines() if "|" in line)
    assert header.split("|")[1:] == ["  before  ", "  after"]  # a column per file
    row = next(line for line in out.splitlines() if line.strip().startswith("f(x)"))
    assert [round(float(c)) for c in row.split("|")[1:]] == [4, 2]  # not pooled in one cell
    # measurements with descriptions keep their columns: the file goes into the env
    described = tmp_path / "described.json"
    save_measurements(described, [make_measurement(3e-6, description="fp32")])
    save_measurements(tmp_path / "other.json", [make_measurement(5e-6, description="fp32")])
    code, out, _ = run(capsys, "compare", str(described), str(tmp_path / "other.json"))
    assert code == 0 and "(described)" in out and "(other)" in out
    # files whose cells differ are shown as they are
    code, out, _ = run(capsys, "compare", str(before), str(described))
    assert code == 0 and "before" not in out


@pytest.mark.parametrize("argv, message", [
    (["timeit"], "Missing argument"),
    (["timeit", "x +"], "SyntaxError"),
    (["timeit", "pass", "-t", "0"], "--threads"),
    (["timeit", "pass", "--min-run-time", "abc"], "--min-run-time"),
    (["compare", "/no/such/file.json"], "no such file"),
    (["compare"], "Missing argument"),
    (["nonsense"], "No such command"),
    (["demo", "--device", "tpu"], "--device"),
    (["timeit", "pass", "--device", "cuda:x"], "expected cpu, cuda or cuda:N"),
    (["timeit", "pass", "-t", "100000"], "1<=x<=1024"),  # torch would segfault
    (["timeit", "pass", "--l2", "hot", "--rsd", "0.1"], "--l2, --rsd: for GPU time only"),
    (["timeit", "pass", "--min-run-time", "nan"], "'nan' is not a finite number"),
    (["suite", "run", "--timeout", "inf"], "'inf' is not a finite number"),
    (["ops", "-c", "x.json", "--threads", "5000"], "--threads"),
    (["timeit", "--setup"], "requires an argument. (see 'torchmark timeit --help')"),
    (["suite", "run", "--workers"], "(see 'torchmark suite run --help')"),
    (["--db", "x.db", "runs"], "a command's options go after its name"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("torchmark: error: ")
    assert message in err
    assert "Traceback" not in err


def test_compare_bad_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "compare", str(bad))
    assert code == 2 and "not valid JSON" in err
    bad.write_text(json.dumps({"hello": 1}))
    code, _, err = run(capsys, "compare", str(bad))
    assert code == 2 and "not a torchmark measurements file" in err


def test_demo_quick_prints_table_and_saves(capsys, tmp_path):
    code, out, err = run(capsys, "demo", "--quick", "--min-run-time", "0.005", "--device", "cpu",
                         "--out", str(tmp_path))
    assert code == 0, err
    assert "Batched dot" in out and "mul/sum" in out and "bmm" in out
    assert "1 threads:" in out
    assert "Is bmm faster than mul/sum?" in out
    verdicts = [line for line in out.splitlines() if line.startswith("  bmm against mul/sum")]
    assert [line.split(":")[0] for line in verdicts] == [
        "  bmm against mul/sum, [1, 1024]", "  bmm against mul/sum, [1024, 1024]"]
    assert all(re.search(r"p = [^:]+: (faster|slower|same|unsure)", line)
               for line in verdicts)
    saved = list(tmp_path.glob("batched_dot-*.jsonl"))
    assert len(saved) == 1
    ms = load_measurements(saved[0])
    assert {m.task_spec.description for m in ms} == {"mul/sum", "bmm"}


def test_console_script_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torchmark.cli.main", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for command in ("timeit", "compare", "demo"):
        assert command in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "torchmark.cli.main", "timeit"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_the_console_script_imports_the_user_s_modules_from_the_current_folder(tmp_path):
    """`torchmark timeit "f()" -s "import mymodule"` in the project's folder finds the
    module, as `python -m torchmark` does (a console script's import path lacks it)."""
    import shutil

    script = shutil.which("torchmark", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the torchmark console script is not installed beside this Python")
    (tmp_path / "user_module_here.py").write_text("def f():\n    return sum(range(10))\n")
    proc = subprocess.run([script, "timeit", "user_module_here.f()", "-s",
                           "import user_module_here", "--no-store", "--min-run-time",
                           "0.01"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "user_module_here.f()" in proc.stdout


def test_fuzz_table_and_jsonl(capsys):
    code, out, err = run(capsys, "fuzz", "example", "--seed", "0", "-n", "3")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "fuzzer example, seed 0: 3 cases"
    assert lines[1].split()[:3] == ["case", "k0", "k1"]
    assert lines[3].split()[:4] == ["0", "725", "257", "725"]
    code, out, _ = run(capsys, "fuzz", "binary", "-n", "2", "--format", "jsonl")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["case"] for r in records] == [0, 1]
    assert records[0]["params"]["k0"] == 64
    assert records[0]["tensors"]["x"]["shape"] == [64, 473, 144]
    assert records[0]["tensors"]["x"]["contiguous"] is False


def test_fuzz_user_fuzzer_and_errors(capsys):
    code, out, _ = run(capsys, "fuzz", "torchmark.fuzzing.catalog:example_fuzzer", "-n", "1")
    assert code == 0 and "725" in out
    code, out, _ = run(capsys, "fuzz", "sparse_unary", "-n", "2")
    assert code == 0 and "sparse (" in out
    code, out, _ = run(capsys, "fuzz", "BinaryOpFuzzer", "-n", "1")  # torch's class name
    assert code == 0 and "fuzzer BinaryOpFuzzer, seed 0" in out
    for argv, message in ((["fuzz", "nope"], "unknown fuzzer 'nope'"),
                          (["fuzz", "os:path"], "refused: it is a module, not a Fuzzer"),
                          (["fuzz", "os:system"], "refused: it is a builtin_function"),
                          (["fuzz", "subprocess:run"], "without a `seed` parameter"),
                          (["fuzz", "torchmark.op_fuzzers.catalog:import_user_module"],
                           "a function defined in torchmark.core.user_modules"),
                          (["fuzz", "torchmark.op_fuzzers.catalog:_builtin"], "not a public"),
                          (["fuzz", "torchmark.fuzzing.catalog:torch"], "refused: it is a "
                                                                     "module"),
                          (["fuzz", "no_such_module:x"], "cannot load fuzzer"),
                          (["fuzz", "example", "-n", "0"], "-n")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and message in err and err.count("\n") == 1


def test_malformed_ops_results_and_unforeseen_failures_are_one_line(capsys, tmp_path,
                                                                    monkeypatch):
    path = tmp_path / "ops.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in (
        {"type": "header", "schema": "torchmark.ops.results", "version": 1},
        {"type": "record", "id": "a|0", "op": "torch.add", "status": "ok",
         "config": {"input": {}}, "metrics": {"forward": "fast"}})) + "\n")
    code, _, err = run(capsys, "compare", str(path))
    assert code == 2 and "record 'a|0' is malformed (AttributeError" in err
    assert err.count("\n") == 1

    def unforeseen(files, db=None, sides=None, failed=False):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("torchmark.cli.measurement_files.read_measurement_files", unforeseen)
    code, _, err = run(capsys, "compare", str(path))
    assert code == 1 and err.count("\n") == 1
    assert "ZeroDivisionError: division by zero (unexpected; TORCHMARK_DEBUG=1" in err
    monkeypatch.setenv("TORCHMARK_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["compare", str(path)])


def test_user_code_that_raises_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "raising_defs.py").write_text('raise RuntimeError("broken on purpose")\n')
    (tmp_path / "raising_factory.py").write_text(
        "def make(seed):\n    raise KeyError('boom')\n"
        "from torchmark import Fuzzer, FuzzedParameter, FuzzedTensor\n"
        "def bad_constraint(seed):\n"
        "    return Fuzzer([FuzzedParameter('k', 1, 8, distribution='uniform')],\n"
        "                  [FuzzedTensor('x', size=('k',))],\n"
        "                  constraints=[lambda k: 1 / 0], seed=seed)\n"
        "def exits(seed):\n    raise SystemExit(9)\n")
    for argv, message in (
            (["suite", "list", "--definitions", "raising_defs.py"],
             "--definitions raising_defs.py: running it raised RuntimeError: broken on purpose"),
            (["fuzz", "raising_defs:X"],
             "importing raising_defs raised RuntimeError: broken on purpose"),
            (["fuzz", "raising_factory:make"], "calling it with seed=0 raised KeyError"),
            (["fuzz", "raising_factory:exits"], "calling it with seed=0 raised SystemExit: 9"),
            (["fuzz", "raising_factory:bad_constraint"],
             "drawing case 0 raised ZeroDivisionError")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and message in err and err.count("\n") == 1, err


def test_outputs_of_another_kind_are_refused_before_anything_runs(capsys, tmp_path):
    measurements = tmp_path / "t.json"
    save_measurements(measurements, [])
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [4]}, {"type": "tensor", "shape": [4]}]}]}]}}))
    before = measurements.read_text()
    (tmp_path / "notes.jsonl").write_text("some notes\n")
    for argv in (["callgrind", "pass", "--save", str(tmp_path / "notes.jsonl")],
                 ["ops", "-c", str(config), "-o", str(tmp_path / "notes")],
                 ["suite", "run", "--out", str(measurements), "--no-instructions"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and "refusing to replace it" in err and out == "", (argv, err)
    code, out, err = run(capsys, "suite", "run", "--out", str(measurements))
    assert "is a 'torchmark.results' file; refusing to replace it with suite" in err
    assert measurements.read_text() == before
    code, out, err = run(capsys, "callgrind", "pass", "--save", str(tmp_path / "notes.jsonl"))
    assert "is not a torchmark file; refusing to replace it with instruction counts" in err
    # an ops results file is replaced (documented), a missing folder is made
    code, _, err = run(capsys, "ops", "-c", str(config), "-i", "1", "-w", "0", "--quiet",
                       "-o", str(tmp_path / "new" / "run"))
    assert code == 0, err
    code, _, err = run(capsys, "ops", "-c", str(config), "-i", "1", "-w", "0", "--quiet",
                       "-o", str(tmp_path / "new" / "run"))
    assert code == 0, err
    # an ops run and a replay do not replace each other's results (one schema, two kinds)
    trace = tmp_path / "t.et.json"
    trace.write_text("{}")
    code, _, err = run(capsys, "replay", str(trace), "-o", str(tmp_path / "new" / "run"))
    assert code == 2 and "is a 'torchmark.ops.results' file; refusing" in err
    # and resuming a replay's results as an ops run says what the file is
    (tmp_path / "replay.jsonl").write_text(json.dumps(
        {"type": "header", "schema": "torchmark.ops.results", "source": "replay"}) + "\n")
    code, _, err = run(capsys, "ops", "-c", str(config), "-o", str(tmp_path / "replay"))
    assert code == 2 and "'torchmark.ops.results/replay' file; refusing" in err
    code, _, err = run(capsys, "ops", "-c", str(config), "--resume",
                       str(tmp_path / "replay.jsonl"))
    assert code == 2 and "it holds a replay's results" in err
    assert err.startswith("torchmark: error: ") and err.count("\n") == 1  # no bar, no blank


def test_timeit_saves_into_an_empty_file(capsys, tmp_path):
    path = tmp_path / "empty.json"
    path.touch()
    code, out, err = run(capsys, "timeit", "pass", "--min-run-time", "0.01", "--save", str(path))
    assert code == 0, err
    assert len(load_measurements(path)) == 1


def test_fuzz_streams_cases_keeps_a_fuzzers_own_seed_and_prints_dtypes(capsys, tmp_path,
                                                                       monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_fuzzers.py").write_text(
        "import torch\n"
        "from torchmark import Fuzzer, FuzzedParameter, FuzzedTensor\n"
        "ready = Fuzzer([FuzzedParameter('n', 1, 100, distribution='uniform')],\n"
        "               [FuzzedTensor('x', size=('n',))], seed=123)\n"
        "def late(seed):\n"
        "    seen = []  # the fifth draw raises\n"
        "    return Fuzzer([FuzzedParameter('n', 1, 100, distribution='uniform')],\n"
        "                  [FuzzedTensor('x', size=('n',))],\n"
        "                  constraints=[lambda n: seen.append(n) or len(seen) < 5 or 1 / 0],\n"
        "                  seed=seed)\n"
        "def typed(seed):\n"
        "    return Fuzzer([FuzzedParameter('dtype', distribution={torch.float32: 0.5,\n"
        "                                                         torch.float16: 0.5})],\n"
        "                  [FuzzedTensor('x', size=(4,))], seed=seed)\n")
    code, out, _ = run(capsys, "fuzz", "my_fuzzers:ready", "-n", "2")
    assert code == 0 and out.startswith("fuzzer my_fuzzers:ready, seed 123: 2 cases")
    code, _, err = run(capsys, "fuzz", "my_fuzzers:ready", "--seed", "5")
    assert code == 2 and "a ready-made Fuzzer with its own seed (123)" in err
    # a case that raises keeps the ones drawn before it, in both formats
    code, out, err = run(capsys, "fuzz", "my_fuzzers:late", "-n", "100", "--format", "jsonl")
    kept = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and len(kept) == 4 and "raised ZeroDivisionError" in err
    assert f"drawing case {len(kept)} raised" in err
    code, out, err = run(capsys, "fuzz", "my_fuzzers:late", "-n", "100")
    assert code == 2 and f"seed 0: {len(kept)} cases" in out
    code, out, _ = run(capsys, "fuzz", "my_fuzzers:typed", "-n", "3", "--format", "jsonl")
    assert code == 0 and {json.loads(line)["params"]["dtype"] for line in out.splitlines()} \
        <= {"torch.float32", "torch.float16"}


def test_a_ctrl_c_a_library_turned_into_its_own_error_is_still_an_interrupt(monkeypatch,
                                                                            capsys):
    """pydantic-core, building a validator when Ctrl-C came, raised its SchemaError
    instead: exit 130 with one line, as any Ctrl-C."""
    import os
    import signal

    import torchmark.cli.main as cli_main

    def interrupted_inside(argv):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, through the CLI's handler
            time.sleep(5)  # the handler raises here at once
        except KeyboardInterrupt:
            raise RuntimeError("Error building validator") from None

    monkeypatch.setattr(cli_main, "_invoke", interrupted_inside)
    # Ctrl-C as a terminal delivers it, whatever an earlier test in this worker left
    # (a handler of its own, SIGINT ignored or blocked: the signal then never came)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        assert cli_main.main(["ops", "-c", "x"]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    assert capsys.readouterr().err.strip() == "torchmark: error: interrupted"
