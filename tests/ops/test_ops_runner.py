"""Running configs: failures recorded, resume, backward timing, the JSON-lines schema."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from torchmark.cli.main import main
from torchmark.ops import RunOptions, config_from_data, load_config, read_records, run

from conftest import say_made_with_torch

EXAMPLES = Path(__file__).parents[2] / "examples" / "ops"
QUICK = RunOptions(warmup=1, iterations=3)


def t(*shape, **extra):
    return {"type": "tensor", "shape": list(shape), **extra}


MIXED = {"torch.mm": {"config": [{"input": [
    {"args": [t(4, 8), t(8, 2)]},
    {"args": [t(4, 8), t(3, 2)]},  # the op rejects these shapes
    {"args": [t(2, 2), t(2, 2)]}]}]}}


def test_param_configs_run_unchanged():
    for name, count in (("simple_add.json", 1), ("simple_mm.json", 1), ("mm_sweep.json", 121)):
        config = load_config(EXAMPLES / name)
        options = RunOptions(warmup=1, iterations=1, stop_id="torch.mm|0|0|0_3") \
            if count > 1 else QUICK
        records = run(config, options)
        assert all(r["status"] == "ok" for r in records), records[0]["error"]
        assert len(records) == (3 if count > 1 else 1)


def test_a_failing_config_in_the_middle_is_recorded_and_the_others_run(tmp_path):
    out = tmp_path / "r.jsonl"
    records = run(config_from_data(MIXED), QUICK, out=out)
    assert [r["status"] for r in records] == ["ok", "failed", "ok"]
    assert records[1]["error"].startswith("RuntimeError: ")
    assert "cannot be multiplied" in records[1]["error"]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line.get("type", line.get("schema")) for line in lines] == \
        ["header", *["torchmark.result"] * 3, "footer"]  # a Result each: forward only
    assert read_records(out) == records
    assert lines[-1]["ok"] == 2 and lines[-1]["failed"] == 1


def test_an_operator_calling_sys_exit_fails_its_case_only(tmp_path):
    import sys

    from torchmark.ops.registry import register_op

    def leaves(x):
        sys.exit(7)

    register_op("test.exits", fn=leaves)
    config = config_from_data({"test.exits": {"config": [{"input": [{"args": [t(2)]}]}]},
                               "torch.neg": {"config": [{"input": [{"args": [t(2)]}]}]}})
    records = run(config, QUICK, out=tmp_path / "r.jsonl")
    assert [(r["op"], r["status"]) for r in records] == [("test.exits", "failed"),
                                                         ("torch.neg", "ok")]
    assert records[0]["error"] == "SystemExit: 7"


def test_jsonl_schema(tmp_path):
    out = tmp_path / "r.jsonl"
    run(config_from_data(MIXED), QUICK, out=out)
    header = json.loads(out.read_text().splitlines()[0])
    first = read_records(out)[0]
    assert header["schema"] == "torchmark.ops.results" and header["version"] == 2
    assert header["run_options"]["iterations"] == 3
    assert header["threads"] == 1  # no --threads: 1, as torch's Timer
    assert {"torch", "python", "cpu", "device", "git_commit"} <= set(header["system"])
    assert first["op"] == "torch.mm" and first["id"] == "torch.mm|0|0|0"
    assert first["config"]["input"]["args"][0] == {"type": "tensor", "shape": [4, 8],
                                                   "dtype": "float"}
    forward = first["metrics"]["forward"]
    assert len(forward["times"]) == 3 and forward["median"] > 0
    assert set(forward) >= {"times", "median", "mean", "min", "max", "iterations", "memory"}
    assert "rss_growth_bytes" in forward["memory"]
    assert first["metrics"]["work"]["flops"] == 2 * 4 * 8 * 2
    assert first["metrics"]["work"]["tflops"] > 0


def test_resume_continues_an_interrupted_file(tmp_path):
    out = tmp_path / "r.jsonl"
    run(config_from_data(MIXED), QUICK, out=out)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # killed mid-write
    records = run(config_from_data(MIXED), QUICK, resume=out)
    assert [r["id"] for r in records] == ["torch.mm|0|0|1", "torch.mm|0|0|2"]
    ids = [r["id"] for r in read_records(out)]
    assert ids == ["torch.mm|0|0|0", "torch.mm|0|0|1", "torch.mm|0|0|2"]


def test_resume_keeps_a_whole_last_record_without_its_newline(tmp_path):
    out = tmp_path / "r.jsonl"
    run(config_from_data(MIXED), QUICK, out=out)
    lines = out.read_text().splitlines()[:3]  # header and two records, no footer
    out.write_text("\n".join(lines))  # the last record whole, its newline lost
    records = run(config_from_data(MIXED), QUICK, resume=out)
    assert [r["id"] for r in records] == ["torch.mm|0|0|2"]
    ids = [r["id"] for r in read_records(out)]
    assert ids == ["torch.mm|0|0|0", "torch.mm|0|0|1", "torch.mm|0|0|2"]


def test_resume_refuses_files_it_did_not_write(tmp_path):
    other = tmp_path / "other.jsonl"
    run(config_from_data({"torch.add": {"config": [{"input": [{"args": [t(4), t(4)]}]}]}}),
        QUICK, out=other)
    with pytest.raises(ValueError, match=r"holds 1 case\(s\) this config does not have "
                                         r"\(e.g. 'torch.add\|0\|0\|0'\)"):
        run(config_from_data(MIXED), QUICK, resume=other)
    saved = tmp_path / "m.json"
    saved.write_text('[\n{"version": 1}\n]\n')
    with pytest.raises(ValueError, match="m.json: line 1: not a JSON object"):
        run(config_from_data(MIXED), QUICK, resume=saved)
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not a text file"):
        run(config_from_data(MIXED), QUICK, resume=binary)
    assert other.read_text().count("\n") == 3 and saved.read_text().count("\n") == 3


def test_resume_refuses_a_changed_config(tmp_path):
    out = tmp_path / "r.jsonl"
    run(config_from_data(MIXED), QUICK, out=out)
    changed = json.loads(json.dumps(MIXED).replace("[4, 8]", "[5, 8]"))
    assert changed != MIXED
    with pytest.raises(ValueError, match=r"case torch.mm\|0\|0\|0 was recorded with another"):
        run(config_from_data(changed), QUICK, resume=out)
    assert len(read_records(out)) == 3  # the file is untouched


def test_resume_refuses_a_file_made_with_another_torch(tmp_path):
    out = tmp_path / "r.jsonl"
    run(config_from_data(MIXED), QUICK, out=out)
    say_made_with_torch(out, "1.0.0")
    with pytest.raises(ValueError, match=r"run with torch 1\.0\.0, this is torch"):
        run(config_from_data(MIXED), QUICK, resume=out)


def test_resume_and_stop_ids():
    config = config_from_data(MIXED)
    records = run(config, RunOptions(warmup=0, iterations=1, resume_id="torch.mm|0|0|1",
                                     stop_id="torch.mm|0|0|2"))
    assert [r["id"] for r in records] == ["torch.mm|0|0|1"]
    with pytest.raises(ValueError, match="--stop-id 'torch.mm|9' is not a case"):
        run(config, RunOptions(stop_id="torch.mm|9"))
    with pytest.raises(ValueError, match=r"--stop-id 'torch.mm\|0\|0\|0' is the first case"):
        run(config, RunOptions(stop_id="torch.mm|0|0|0"))


def test_backward_is_timed_on_its_own():
    config = config_from_data({"torch.nn.functional.relu": {"config": [{"input": [
        {"args": [t(64, 64)]}]}]}, "torch.add": {"config": [{"input": [
            {"args": [t(4, requires_grad=False), t(4, requires_grad=False)]}]}]}})
    relu, add = run(config, RunOptions(warmup=1, iterations=4, backward=True))
    assert relu["status"] == "ok"
    assert len(relu["metrics"]["backward"]["times"]) == 4
    assert relu["metrics"]["backward"]["median"] > 0
    assert add["status"] == "failed" and "no gradient history" in add["error"]
    assert add["error"].startswith("backward: ValueError")
    assert len(add["metrics"]["forward"]["times"]) == 4  # the forward's figures are kept
    assert "backward" not in add["metrics"]


def test_modules_built_once_per_build_spec():
    config = config_from_data({"torch.nn.Linear": {"config": [{
        "build": [{"args": [{"type": "int", "value": 8}, {"type": "int", "value": 4}]}],
        "input": [{"args": [t(2, 8)]}, {"args": [t(16, 8)]}]}]}})
    records = run(config, QUICK)
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert records[0]["metrics"]["work"]["flops"] == 2 * 2 * 4 * 8


@pytest.mark.parametrize("mode", ["discrete", "continuous"])
def test_cpu_exec_modes(mode):
    records = run(config_from_data(MIXED), RunOptions(warmup=1, iterations=5, exec_mode=mode))
    times = records[0]["metrics"]["forward"]["times"]
    assert len(times) == (5 if mode == "discrete" else 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the errors without CUDA")
@pytest.mark.parametrize("kwargs, fragment", [
    (dict(exec_mode="continuous_events"), "continuous_events needs a CUDA device"),
    (dict(l2_flush=True), "--l2-flush needs a CUDA device"),
    (dict(cuda_graph=True), "--cuda-graph needs a CUDA device"),
    (dict(device="cuda"), "CUDA is not available"),
    (dict(device="tpu"), "device must be cpu, cuda or cuda:N"),
    (dict(iterations=0), "iterations must be an int >= 1"),
])
def test_option_errors_without_cuda(kwargs, fragment):
    with pytest.raises(ValueError) as e:
        run(config_from_data(MIXED), RunOptions(**kwargs))
    assert fragment in str(e.value)


def test_yaml_config(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("torch.add:\n  config:\n    - input:\n        - args:\n"
                      "            - {type: tensor, shape: [8]}\n"
                      "            - {type: float, value: 2.5}\n")
    records = run(load_config(config), QUICK)
    assert records[0]["status"] == "ok"
    bad = tmp_path / "bad.yaml"
    bad.write_text("torch.add: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(bad)


def test_cli_list_run_resume_and_profile(tmp_path, capsys):
    config = tmp_path / "mixed.json"
    config.write_text(json.dumps(MIXED))
    assert main(["ops", "-c", str(EXAMPLES / "mm_sweep.json"), "--list"]) == 0
    captured = capsys.readouterr()
    listed = captured.out.splitlines()
    assert len(listed) == 121 and listed[0] == "torch.mm|0|0|0_0\t128x64 float, 64x32 float"
    prefix = tmp_path / "out"
    assert main(["ops", "-c", str(config), "-w", "1", "-i", "2", "-o", str(prefix),
                 "--profile"]) == 1  # one config failed
    out = capsys.readouterr().out
    assert "2 ok, 1 failed" in out and "torch.mm" in out
    assert Path(f"{prefix}.trace.json").exists()
    assert len(read_records(f"{prefix}.jsonl")) == 3
    assert main(["ops", "-c", str(config), "-w", "1", "-i", "2", "--resume",
                 f"{prefix}.jsonl", "--quiet"]) == 0
    assert "0 ok, 0 failed" in capsys.readouterr().out
    # other options than the file was made with: refused, naming them
    assert main(["ops", "-c", str(config), "-w", "1", "-i", "3", "--resume",
                 f"{prefix}.jsonl", "--quiet"]) == 2
    assert "iterations 2 -> 3" in capsys.readouterr().err


def test_a_case_failing_in_the_profile_pass_is_left_out_of_the_trace(tmp_path, capsys,
                                                                      monkeypatch):
    # an op that fails only on its later calls (an intermittent OOM, say): measured, then
    # failing under the profiler; the trace keeps the other cases, and a resumed run's
    # trace lands beside the file resumed
    from torchmark.ops.registry import register_op

    calls = []

    def flaky(x):
        calls.append(1)
        if len(calls) > 4:
            raise RuntimeError("out of memory (simulated)")
        return x + 1

    register_op("test.flaky", fn=flaky)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"test.flaky": {"config": [{"input": [{"args": [t(2)]}]}]},
                                  "torch.neg": {"config": [{"input": [{"args": [t(2)]}]}]}}))
    prefix = tmp_path / "r"
    assert main(["ops", "-c", str(config), "-w", "1", "-i", "3", "-o", str(prefix),
                 "--profile", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert f"trace: {prefix}.trace.json" in captured.out
    assert "test.flaky|0|0|0 failed in the --profile pass, left out of the trace: " \
        "RuntimeError: out of memory (simulated)" in captured.err
    trace = Path(f"{prefix}.trace.json").read_text()
    assert "torch.neg|0|0|0" in trace
    footer = json.loads(Path(f"{prefix}.jsonl").read_text().splitlines()[-1])
    assert footer["trace_file"] == f"{prefix}.trace.json"
    assert list(footer["profile_failed"]) == ["test.flaky|0|0|0"]
    monkeypatch.chdir(tmp_path.parent)
    resumed = tmp_path / "resumed"
    Path(f"{prefix}.jsonl").rename(f"{resumed}.jsonl")
    assert main(["ops", "-c", str(config), "-w", "1", "-i", "3", "--resume",
                 f"{resumed}.jsonl", "--profile", "--quiet"]) == 0
    assert Path(f"{resumed}.trace.json").exists()
    assert not Path("ops-results.trace.json").exists()


@pytest.mark.skipif(shutil.which("ncu") is not None, reason="ncu is installed")
def test_nsight_missing_gives_a_clear_message(tmp_path, capsys):
    config = tmp_path / "mixed.json"
    config.write_text(json.dumps(MIXED))
    assert main(["ops", "-c", str(config), "--ncu", "-d", "cuda"]) == 2
    assert "ncu (Nsight Compute) is not installed" in capsys.readouterr().err


def test_inplace_ops_and_aten_packets_run_with_the_default_config():
    config = config_from_data({
        "torch.Tensor.add_": {"config": [{"input": [{"args": [t(4), t(4)]}]}]},
        "aten::add": {"config": [{"input": [{"args": [t(4), t(4)]}]}]}})
    records = run(config, RunOptions(warmup=1, iterations=2, exec_mode="continuous"))
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    assert records[0]["metrics"]["forward"]["iterations"] == 2  # calls the mean covers


def test_compile_happens_outside_the_timed_calls_even_without_warmup(monkeypatch):
    import time as time_module

    from torchmark.ops.executor import measure

    def fake_compile(fn):  # stands in for torch.compile: the first call is the slow one
        calls = []

        def compiled(*args, **kwargs):
            if not calls:
                time_module.sleep(0.3)
            calls.append(1)
            return fn(*args, **kwargs)
        return compiled

    monkeypatch.setattr(torch, "compile", fake_compile)
    options = RunOptions(warmup=0, iterations=3, compile=True)
    metrics, _ = measure(torch.relu, [torch.ones(4)], {}, options)
    assert max(metrics["forward"]["times"]) < 0.1


def test_compile_compiles_every_case_past_dynamos_recompile_limit(monkeypatch):
    # every case's wrapper shares one code object: without a reset between cases, dynamo
    # stops compiling after its recompile limit (8) and later cases silently run eager
    graphs = []

    def backend(gm, example_inputs):  # records what dynamo compiled, runs it as is
        graphs.append(gm)
        return gm.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn: real_compile(fn, backend=backend))
    ops = ["add", "sub", "mul", "div", "maximum", "minimum", "atan2", "hypot", "fmod",
           "remainder", "copysign"]
    config = config_from_data({f"torch.{op}": {"config": [{"input": [
        {"args": [t(8), t(8)]}]}]} for op in ops})
    records = run(config, RunOptions(warmup=1, iterations=2, compile=True))
    assert [r["status"] for r in records] == ["ok"] * len(ops)
    assert len(graphs) >= len(ops)


def test_an_output_path_that_is_a_folder_is_one_line(tmp_path, capsys):
    from torchmark.cli.main import main

    config = tmp_path / "c.json"
    config.write_text(json.dumps(MIXED))
    (tmp_path / "out.jsonl").mkdir()
    assert main(["ops", "-c", str(config), "-i", "1", "-w", "0", "-o",
                 str(tmp_path / "out")]) == 2  # refused before anything runs
    err = capsys.readouterr().err
    assert "out.jsonl: is a folder" in err and "Traceback" not in err


def test_sigterm_ends_a_run_with_its_footer(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    config = tmp_path / "long.json"
    ranged = {"type": "tensor", "shape": [[16, 64, 1], 32], "__range__": ["shape"]}
    config.write_text(json.dumps({"torch.mm": {"config": [{"input": [{"args": [
        ranged, {"type": "tensor", "shape": [32, 16]}]}]}]}}))  # 49 cases
    out = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", "ops", "-c", str(config),
                             "-i", "300", "-w", "1", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or
                                           out.read_text().count('"type": "record"') < 2):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "terminated" in err
    footer = json.loads(out.read_text().splitlines()[-1])
    assert footer["type"] == "footer" and footer["complete"] is False and footer["not_run"] > 0


@pytest.mark.parametrize("mode, restored", [("discrete", True), ("continuous", False)])
def test_in_place_ops_start_every_call_from_the_same_inputs(mode, restored):
    from torchmark.ops.executor import measure

    x, seen = torch.ones(4), []

    def halve(t):  # an in-place op: each call would otherwise see half the last value
        seen.append(float(t[0]))
        return t.mul_(0.5)

    metrics, _ = measure(halve, [x], {}, RunOptions(warmup=3, iterations=4, exec_mode=mode),
                         in_place=True)
    assert metrics["forward"]["inputs_restored"] is restored
    if restored:
        assert seen == [1.0] * 7  # 3 warm-up calls, 4 timed
    else:  # one timer spans the calls: nothing can be put back between them
        assert seen[3:] == [0.5, 0.25, 0.125, 0.0625]
    unchanged, _ = measure(torch.abs, [torch.ones(4)], {}, QUICK, in_place=True)
    assert "inputs_restored" not in unchanged["forward"]  # nothing changed, nothing saved


def test_in_place_ops_with_backward_start_from_fresh_inputs_without_history():
    # x.mul_(w) where only w requires grad: x takes autograd history from each call; kept,
    # the next call chained onto it (add_: every backward walked all earlier calls;
    # mul_: "backward through the graph a second time")
    from torchmark.ops.executor import measure

    for op in (torch.Tensor.mul_, torch.Tensor.add_):
        x, w, seen = torch.full((4,), 2.0), torch.ones(4, requires_grad=True), []

        def step(a, b, op=op, seen=seen):
            seen.append((float(a[0]), a.grad_fn is None))
            return op(a, b)

        metrics, _ = measure(step, [x, w], {}, RunOptions(warmup=2, iterations=5,
                                                           backward=True), in_place=True)
        assert len(metrics["backward"]["times"]) == 5
        assert seen == [(2.0, True)] * len(seen) and len(seen) == 2 + 5 + 2 + 5


def test_compare_puts_ops_results_side_by_side(tmp_path, capsys):
    from torchmark.cli.main import main
    from torchmark.ops.as_measurements import ops_measurements

    config = config_from_data(MIXED)
    run(config, QUICK, out=tmp_path / "before.jsonl")
    run(config, RunOptions(warmup=1, iterations=3, backward=True), out=tmp_path / "after.jsonl")
    after = ops_measurements(tmp_path / "after.jsonl")
    assert {m.env for m in after} == {"forward", "backward"} and len(after) == 4  # 2 ok
    assert all(m.description == "after" and m.label == "torch.mm" for m in after)
    assert {m.num_threads for m in after} == {1}  # the count used: 1 by default
    run(config, RunOptions(warmup=1, iterations=1, threads=2), out=tmp_path / "two.jsonl")
    assert {m.num_threads for m in ops_measurements(tmp_path / "two.jsonl")} == {2}
    assert main(["compare", str(tmp_path / "before.jsonl"), str(tmp_path / "after.jsonl"),
                 "--format", "csv"]) == 0
    _, *rows = capsys.readouterr().out.strip().splitlines()  # long format: a row a cell
    assert sum(",before," in r for r in rows) == 2 and sum(",after," in r for r in rows) == 4
    for name in ("a", "b"):  # two files of one name: columns named by their paths
        (tmp_path / name).mkdir()
        run(config, QUICK, out=tmp_path / name / "ops-results.jsonl")
    assert main(["compare", str(tmp_path / "a" / "ops-results.jsonl"),
                 str(tmp_path / "b" / "ops-results.jsonl"), "--format", "csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[1:]
    assert sum(f",{tmp_path / 'a' / 'ops-results'}," in r for r in rows) == 2
    assert sum(f",{tmp_path / 'b' / 'ops-results'}," in r for r in rows) == 2


def test_in_place_ops_that_change_the_shape_start_from_the_same_shape():
    from torchmark.ops.executor import measure

    shapes = []

    def grow(t):  # unsqueeze_ adds a dimension to its input on every call
        shapes.append(tuple(t.shape))
        return t.unsqueeze_(0)

    measure(grow, [torch.ones(4)], {}, RunOptions(warmup=2, iterations=3), in_place=True)
    assert shapes == [(4,)] * 5
    config = config_from_data({f"torch.Tensor.{op}": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": shape, "requires_grad": False}, *extra]}]}]}
        for op, shape, extra in (("t_", [3, 5], []), ("squeeze_", [1, 4], []),
                                 ("resize_", [3, 5], [{"type": "int", "value": 8}]))})
    records = run(config, RunOptions(warmup=2, iterations=3))
    assert [r["status"] for r in records] == ["ok"] * 3, [r["error"] for r in records]


def test_ops_that_overwrite_their_input_are_not_restored():
    from torchmark.ops.throughput import changes_inputs

    assert changes_inputs("torch.Tensor.mul_") and changes_inputs("aten::add_.Tensor")
    assert not changes_inputs("torch.Tensor.copy_") and not changes_inputs("torch.add")


def test_non_finite_numbers_in_a_config_are_written_as_strict_json(tmp_path):
    out = tmp_path / "r.jsonl"
    config = json.loads('{"torch.clamp": {"config": [{"input": [{"args": '
                        '[{"type": "tensor", "shape": [4]}], '
                        '"kwargs": {"min": {"type": "float", "value": -Infinity}, '
                        '"max": {"type": "float", "value": NaN}}}]}]}}')
    records = run(config_from_data(config), QUICK, out=out)
    assert [r["status"] for r in records] == ["ok"]

    def refuse(word):
        raise AssertionError(f"{word} in a results line")

    for line in out.read_text().splitlines():
        json.loads(line, parse_constant=refuse)
    assert read_records(out)[0]["config"]["input"]["kwargs"] == {
        "min": {"type": "float", "value": "-inf"}, "max": {"type": "float", "value": "nan"}}
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:1]) + "\n")
    assert run(config_from_data(config), QUICK, resume=out)[0]["status"] == "ok"
    out.write_text("\n".join(lines[:2]) + "\n")  # resume matches the case despite the NaN
    assert run(config_from_data(config), QUICK, resume=out) == []


def test_a_first_call_far_above_the_rest_is_noted():
    from torchmark.ops.executor import notes

    steady = [1e-5] * 9
    note = notes([5e-5, *steady], 1)["note"]
    assert note.startswith("the first timed call took 5.0x") and "raise --warmup" in note
    assert notes([1.2e-5, *steady], 1) == {}  # a little slower: said nothing
    both = notes([5e-5, *steady], 1, {"note": "launch gaps"})["note"]
    assert both.endswith("; launch gaps")


def test_a_failed_case_is_its_passes_failed_and_the_gate_calls_it_so(tmp_path, capsys):
    """An op that fails in the candidate run: its failed results carry the ids of its
    passes (#forward, #backward), as its measured results do, so the gate says
    `failed` (never "missing", which --allow-unmeasured lets through)."""
    from torchmark.core.provenance import Provenance
    from torchmark.ops.registry import register_op
    from torchmark.ops.results_file import record_results
    from torchmark.store import Store

    broken = {"now": False}

    def flaky(x):
        if broken["now"]:
            raise RuntimeError("planted failure")
        return x * 2

    register_op("test.flaky", fn=flaky)
    config = config_from_data({"test.flaky": {"config": [{"input": [
        {"args": [t(8, requires_grad=True)]}]}]}})
    options = RunOptions(warmup=1, iterations=6, backward=True)
    header = {"run_options": {"backward": True, "device": "cpu"}}
    db = str(tmp_path / "s.db")
    store, made = Store(db), {}
    for name, fails in (("before", False), ("after", True)):
        broken["now"] = fails
        [record] = run(config, options)
        results = record_results(record, header)
        made[name] = {r.case.id: r.ok for r in results}
        run_id = store.start_run(Provenance.capture(env=name))
        store.record(results, run_id)
        store.finish_run(run_id)
    assert set(made["before"]) == set(made["after"]) and len(made["after"]) == 2
    assert all(made["before"].values()) and not any(made["after"].values())
    assert main(["gate", "--baseline", "env:before", "--candidate", "env:after",
                 "--db", db, "--allow-unmeasured", "--allow-env-diff"]) == 1
    out = capsys.readouterr().out
    assert out.count("failed") >= 2 and "only in" not in out
