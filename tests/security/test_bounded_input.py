"""Files from others are read within bounds: regular files only, a size cap, nesting and
YAML aliases limited, shapes checked before any allocation, values echoed short. Each
refusal is exit 2 with one line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

from torchmark.cli.main import main

DEEP = "[" * 10_000 + "]" * 10_000


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """A command that got past validation writes its default results here, not in the
    checkout."""
    monkeypatch.chdir(tmp_path)


def one_line_exit_2(capsys, argv, *fragments):
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and "RecursionError" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def yaml_bomb(levels=9, width=9):
    """The billion-laughs document: ~600 bytes, width**levels strings once expanded."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    previous = "a"
    for name in "bcdefghijk"[:levels - 1]:
        refs = ", ".join(f"*{previous}" for _ in range(width))
        lines.append(f"{name}: &{name} [{refs}]")
        previous = name
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("command", [["ops", "-c"], ["compare"], ["ab", "-"], ["replay"],
                                     ["suite", "compare", "-"], ["callgrind-diff", "-"]])
def test_deep_nesting_is_exit_2_not_a_recursion_error(tmp_path, capsys, command):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    argv = [a if a != "-" else str(path) for a in command] + [str(path)]
    if command[0] in ("suite",) or command == ["ab", "-"]:
        argv = [*command[:-1], str(path), str(path)]
    if command[0] == "callgrind-diff":
        argv = ["callgrind-diff", str(path), str(path)]
    one_line_exit_2(capsys, argv, "nested deeper than")


def test_deep_yaml_and_a_deep_line_in_a_results_file(tmp_path, capsys):
    path = tmp_path / "deep.yaml"
    path.write_text(DEEP)
    one_line_exit_2(capsys, ["ops", "-c", str(path)], "deep.yaml", "nested deeper than")
    results = tmp_path / "r.jsonl"
    results.write_text('{"type": "header", "schema": "torchmark.ops.results"}\n' + DEEP + "\n")
    one_line_exit_2(capsys, ["compare", str(results)], "line 2", "nested deeper than")


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_only_regular_files_are_read(tmp_path, capsys, special):
    if special == "fifo":
        path = tmp_path / "c.json"
        os.mkfifo(path)  # no writer: opening it for reading would block forever
    elif special == "folder":
        path = tmp_path / "c.json"
        path.mkdir()
    else:
        path = special
    what = {"/dev/zero": "is a device", "fifo": "is a pipe", "folder": "is a "}[special]
    one_line_exit_2(capsys, ["ops", "-c", str(path)], what)  # click names a folder itself
    one_line_exit_2(capsys, ["replay", str(path)], what)


def test_the_size_cap_refuses_before_reading(tmp_path, capsys):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: 65 MiB that take no disk
        f.truncate(65 << 20)
    one_line_exit_2(capsys, ["ops", "-c", str(big)], "larger than the 64.0 MiB input limit",
                    "--max-input-size")
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [2]}] * 2}]}]}, "pad": "x" * 4096}))
    one_line_exit_2(capsys, ["--max-input-size", "1k", "ops", "-c", str(small)],
                    "larger than the 1.0 KiB input limit")


def test_the_size_cap_from_the_environment(tmp_path, capsys, monkeypatch):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": "torchmark.measurements", "version": 1,
                                "measurements": [], "pad": "x" * 5000}))
    monkeypatch.setenv("TORCHMARK_MAX_INPUT_SIZE", "2k")
    one_line_exit_2(capsys, ["compare", str(path)], "larger than the 2.0 KiB input limit")


def test_a_gzip_bomb_trace_is_refused_as_it_inflates(tmp_path, capsys):
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(b"[" + b" " * (200 << 20) + b"]"))  # 200 MiB of spaces
    assert path.stat().st_size < 1 << 20
    one_line_exit_2(capsys, ["replay", str(path)], "decompresses to more than")


MEMORY_BOUNDED = textwrap.dedent("""
    import resource, sys, time
    import yaml, pydantic  # imported before the limit: what parsing needs
    from torchmark.core.errors import LimitError
    from torchmark.ops.loading import load_config
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    used = int(status["VmSize"].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + (200 << 20), resource.RLIM_INFINITY))
    started = time.perf_counter()
    try:
        load_config(sys.argv[1])
    except LimitError as e:
        print(f"refused in {time.perf_counter() - started:.3f} s: {e}")
    else:
        print("loaded")
""")


@pytest.mark.parametrize("name, text, fragment", [
    ("bomb.yaml", yaml_bomb(), "YAML aliases would expand"),
    ("recursive.yaml", "a: &x [*x]\n", "refers to a node that contains it"),
    ("recursive2.yaml", "a: &x {k: [1, *x]}\n", "refers to a node that contains it"),
    ("wide.yaml", yaml_bomb(levels=3, width=120), "more than 100 YAML aliases"),
    ("deep.yaml", DEEP, "nested deeper than"),
    ("deep.json", DEEP, "nested deeper than"),
])
def test_bombs_are_refused_within_200_mb_and_a_second(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    if name == "bomb.yaml":
        assert len(text) < 700
    proc = subprocess.run([sys.executable, "-c", MEMORY_BOUNDED, str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.strip()
    assert out.startswith("refused in ") and fragment in out, out
    assert float(out.split()[2]) < 1.0, out


def test_a_deep_trace_is_read_in_linear_time(tmp_path):
    """Every aten node once walked all its ancestors: a chain of plain nodes with aten
    leaves under the deepest took 3.7 s at 0.4 MB, a day at 64 MiB."""
    import time

    from torchmark.replay.trace import load_trace

    def node(i, name, parent):
        return {"id": i, "name": name, "ctrl_deps": parent, "attrs": [],
                "inputs": {"values": [], "shapes": [], "types": []},
                "outputs": {"values": [], "shapes": [], "types": []}}

    n = 20_000
    nodes = [node(1, "root", 0)] + [node(i, f"f{i}", i - 1) for i in range(2, n // 2)]
    nodes += [node(i, "aten::relu", n // 2 - 1) for i in range(n // 2, n)]
    nodes.append(node(n, "aten::add", n - 1))  # under an aten node: not top-level
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": nodes}))
    started = time.perf_counter()
    ops = load_trace(path).top_level_ops()
    assert time.perf_counter() - started < 10
    assert len(ops) == n // 2 and {o.name for o in ops} == {"aten::relu"}


def test_a_tensor_of_a_million_dimensions_is_refused_at_validation(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"torch.relu": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [1] * 1_000_000}]}]}]}}))
    line = one_line_exit_2(capsys, ["ops", "-c", str(path)], "dimensions")
    assert len(line) < 1000


def test_a_tensor_larger_than_the_machine_is_refused_before_allocating(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"torch.relu": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [1 << 20, 1 << 20, 1 << 10]}]}]}]}}))
    one_line_exit_2(capsys, ["ops", "-c", str(path)], "more than the", "of this machine")


def test_huge_values_are_echoed_short(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.relu": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": ["x" * 1_000_000]}]}]}]}}))
    main(["ops", "-c", str(config)])
    err = capsys.readouterr().err
    assert 0 < len(err) < 2000 and "..." in err
    huge = "x" * 1_000_000
    measurement = {"schema": "torchmark.measurement", "version": 1, "number_per_run": 1,
                   "raw_times": [1.0], "task_spec": {"stmt": "x"}}
    for bad in ({"version": huge}, {"schema": huge},
                {"measurements": [{**measurement, "raw_times": [huge]}]},
                {"measurements": [{**measurement, "number_per_run": huge}]},
                {"measurements": [{**measurement, "task_spec": {"stmt": 1, "label": [huge]}}]}):
        path = tmp_path / "m.json"
        path.write_text(json.dumps({"schema": "torchmark.measurements", "version": 1,
                                    "measurements": [], **bad}))
        line = one_line_exit_2(capsys, ["compare", str(path)])
        assert len(line) < 1000, line[:2000]


def test_ctrl_c_while_importing_exits_130_with_one_line(tmp_path):
    """SIGINT at moments after the command line starts importing (torch takes seconds):
    the child says when torchmark's entry point is loaded (the interpreter's own
    start-up, before torchmark's first line, is Python's), then imports the CLI."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = ("import sys; import torchmark.cli.entry as entry; print('loaded', flush=True); "
            "sys.exit(entry.main())")
    for delay in (0.0, 0.05, 0.3, 0.8):
        proc = subprocess.Popen([sys.executable, "-c", code, "ops", "-c", "/nonexistent"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, preexec_fn=_deliverable_sigint)
        assert proc.stdout.readline().strip() == "loaded"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if "no such file" in err:  # it got through the import and failed on the file
            assert proc.returncode in (2, 130), (delay, err)  # first; Ctrl-C came after
            continue
        if "torchmark" not in err and err.rstrip().endswith("KeyboardInterrupt"):
            continue  # before entry.main() was called (a loaded machine): the -c line's
        assert proc.returncode == 130, (delay, err)
        assert err.strip() == "torchmark: error: interrupted", (delay, err)


def _deliverable_sigint():
    from conftest import deliverable_sigint

    deliverable_sigint()
