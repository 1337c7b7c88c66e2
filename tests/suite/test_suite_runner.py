"""The suite runner for real: worker processes, valgrind hosts, C++ bundles, failures,
timeouts and resume."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.suite.loading import load_cases
from torchmark.suite.results import read_records
from torchmark.suite.runner import RunOptions, SuiteRunner
from torchmark.suite.timer_args import TimerArgs

from conftest import deliverable_sigint, requires_valgrind, say_made_with_torch

DEFS = str(Path(__file__).parent / "defs_small.py")
requires_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                       reason="no C++ compiler")


def cases_for(mode, monkeypatch):
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", mode)
    return load_cases(DEFS)


@requires_valgrind
@requires_compiler
@pytest.mark.slow
def test_end_to_end_with_a_raising_and_an_aborting_case(tmp_path, monkeypatch):
    cases = cases_for("e2e", monkeypatch)
    ids = [c.id for c in cases]
    assert ids == ["py [py eager fwd t1]", "cpp [cpp eager fwd t1]", "jit [py eager fwd t1]",
                   "jit [py jit fwd t1]", "raises [py explicit t1]", "aborts [py explicit t1]"]
    out = tmp_path / "results.jsonl"
    seen = []
    summary = SuiteRunner(cases, out, RunOptions(workers=2, min_run_time=0.05, retries=0),
                          on_record=seen.append).run()
    assert (summary.total, summary.ok, summary.failed) == (6, 4, 2)
    records = {r["id"]: r for r in read_records(out)}
    assert set(records) == set(ids) and len(seen) == 6
    for case_id in ids[:4]:
        r = records[case_id]
        assert r["status"] == "ok", r["error"]
        assert r["wall"]["median"] > 0 and r["wall"]["times"]
        counts = r["instructions"]
        assert len(counts["repeats"]) == 5 and counts["number"] == 100
        assert counts["median"] > 10_000 and counts["per_run"] == counts["median"] / 100
    assert records["cpp [cpp eager fwd t1]"]["timer_args"]["language"] == "cpp"
    assert records["raises [py explicit t1]"]["status"] == "failed"
    assert "boom from the case" in records["raises [py explicit t1]"]["error"]
    aborted = records["aborts [py explicit t1]"]
    assert aborted["status"] == "failed" and "signal 6" in aborted["error"]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "footer"
    assert lines[-1]["ok"] == 4 and lines[-1]["failed"] == 2


def test_a_hanging_case_times_out_and_the_others_go_on(tmp_path, monkeypatch):
    cases = cases_for("hang", monkeypatch)
    started = time.perf_counter()
    summary = SuiteRunner(cases, tmp_path / "r.jsonl",
                          RunOptions(workers=1, min_run_time=0.05, timeout=5, retries=0,
                                     instructions=False)).run()
    assert time.perf_counter() - started < 60
    by_id = {r["id"]: r for r in summary.records}
    assert by_id["hangs [py explicit t1]"]["status"] == "failed"
    assert "timed out after 5 s" in by_id["hangs [py explicit t1]"]["error"]
    assert by_id["ok [py explicit t1]"]["status"] == "ok"


def test_a_case_failing_in_the_parent_is_recorded_not_lost(tmp_path):
    from torchmark.suite import TimerArgs, materialize

    cases = materialize({"broken": TimerArgs("x +"), "fine": TimerArgs("1 + 1")})
    summary = SuiteRunner(cases[:1], tmp_path / "r.jsonl",
                          RunOptions(workers=1, wall=False)).run()  # fails before valgrind
    assert (summary.ok, summary.failed) == (0, 1)
    assert summary.records[0]["error"].startswith("SyntaxError")


def test_resume_after_an_interrupted_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", "many")
    out = tmp_path / "results.jsonl"
    argv = ["suite", "run", "--definitions", DEFS, "--no-instructions", "--workers", "1",
            "--min-run-time", "0.2", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "torchmark.cli.main", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=dict(os.environ))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().count('"type": "case"') >= 3:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # interrupted mid-run, without any clean-up
    proc.wait()
    first = read_records(out)
    assert 3 <= len(first) < 8
    with open(out, "a") as f:
        f.write('{"type": "case", "id": "case 7 [py explic')  # a torn last line
    assert main([*argv, "--resume"]) == 0
    text = capsys.readouterr()
    assert f"{len(first)} already in" in text.out
    records = read_records(out)
    ids = [r["id"] for r in records]
    assert sorted(ids) == sorted(f"case {i} [py explicit t1]" for i in range(8))
    assert len(ids) == len(set(ids)) == 8  # nothing measured twice
    assert all(r["status"] == "ok" for r in records)
    headers = [json.loads(line) for line in out.read_text().splitlines()
               if line.startswith('{"type": "header"')]
    assert [h["resumed"] for h in headers] == [False, True]
    for line in out.read_text().splitlines():  # the torn line was cut, not buried
        json.loads(line)


def test_a_case_in_flight_when_interrupted_is_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", "hang")
    out = tmp_path / "results.jsonl"
    argv = ["suite", "run", "--definitions", DEFS, "--workers", "1", "--min-run-time", "0.05",
            "--out", str(out), "--filter", "hangs"]
    log = tmp_path / "stderr.txt"  # a file, not an unread pipe that could fill and block
    with open(log, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "torchmark.cli.main", *argv],
                                stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True, env=dict(os.environ),
                                preexec_fn=deliverable_sigint)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out.exists() and "header" in out.read_text()):
        time.sleep(0.05)
    time.sleep(2)  # the case is sleeping in its wall-time worker
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        masks = [line for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn"))]
        log.write_text(log.read_text() + f"\nchild signal masks: {masks}")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"no exit 60 s after SIGINT; stderr: {log.read_text()[-2000:]}") from None
    assert code == 130, log.read_text()[-2000:]
    assert time.monotonic() - began < 15  # its processes are killed, not waited out
    assert read_records(out) == []  # it did not fail: it was stopped; --resume runs it
    footer = json.loads(out.read_text().splitlines()[-1])
    assert footer["interrupted"] and footer["failed"] == 0


def test_resume_runs_failed_cases_again_and_refuses_other_options(tmp_path):
    from torchmark.suite.materialize import materialize

    cases = materialize({"broken": TimerArgs("x +"), "fine": TimerArgs("1 + 1")})
    out = tmp_path / "r.jsonl"
    options = RunOptions(workers=1, instructions=False, min_run_time=0.01)
    summary = SuiteRunner(cases, out, options).run()
    assert (summary.ok, summary.failed) == (1, 1)
    again = SuiteRunner(cases, out, options, resume=True)
    assert [c.id for c in again.cases] == [cases[0].id]  # the failed one, not the ok one
    with pytest.raises(ValueError, match=r"other options \(instructions False -> True\)"):
        SuiteRunner(cases, out, RunOptions(workers=1, min_run_time=0.01), resume=True)


def test_resume_runs_a_changed_definition_again_and_refuses_another_torch(tmp_path):
    from torchmark.suite.materialize import materialize

    out = tmp_path / "r.jsonl"
    options = RunOptions(workers=1, instructions=False, min_run_time=0.01)
    SuiteRunner(materialize({"a": TimerArgs("1 + 1"), "b": TimerArgs("2 + 2")}), out,
                options).run()
    changed = materialize({"a": TimerArgs("1 + 1"), "b": TimerArgs("3 * 3")})
    again = SuiteRunner(changed, out, options, resume=True)
    assert [c.id for c in again.cases] == ["b [py explicit t1]"]  # same id, new code: its record is stale
    say_made_with_torch(out, "1.0.0")
    with pytest.raises(ValueError, match=r"run with torch 1\.0\.0, this is torch"):
        SuiteRunner(changed, out, options, resume=True)


def test_suite_list_cli(capsys):
    assert main(["suite", "list", "--filter", "^Training/simple.*cpp jit"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "Training/simple [cpp jit fwd t1]", "Training/simple [cpp jit fwd t2]",
        "Training/simple [cpp jit fwd+bwd t1]", "Training/simple [cpp jit fwd+bwd t2]"]
    assert main(["suite", "list", "--filter", "Reduction/sum", "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["timer_args"]["language"] for r in rows] == ["python", "cpp"]
    assert main(["suite", "list", "--filter", "Reduction/sum", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows  # one document
    assert main(["suite", "run", "--filter", "no such case"]) == 2
    assert main(["suite", "list", "--definitions", "/nonexistent.py"]) == 2


def test_a_compile_error_no_snippet_owns_is_narrowed_down_by_halving(monkeypatch):
    # when the compiler's error cannot be traced to a snippet, the bundle is halved until
    # the snippet that breaks it fails alone and every other one builds
    import torchmark.cpp.compile_cache as compile_cache
    from torchmark.suite import materialize
    from torchmark.suite.runner import _build_bundle

    builds = []

    class Builder:
        def build_bundle(self, snippets):
            builds.append(len(snippets))
            if any("broken" in stmt for stmt, _, _ in snippets):
                raise compile_cache.BundleCompileError("failed", "snippet.cpp:3:1: error: x",
                                                       {})
            return Path("/lib.so")

    monkeypatch.setattr(compile_cache, "default_builder", lambda: Builder())
    cases = materialize({f"c{i}": TimerArgs("broken;" if i == 5 else f"int v{i} = {i};",
                                            language="cpp") for i in range(8)})
    libraries, failures = _build_bundle(cases)
    assert [c.id for c, _ in failures] == ["c5 [cpp explicit t1]"]
    assert "snippet.cpp:3:1: error: x" in failures[0][1]
    assert sorted(libraries) == sorted(c.id for c in cases if not c.id.startswith("c5"))
    assert builds == [8, 4, 4, 2, 1, 1, 2]  # 7 builds, not one a case
    # a failure of the compiler itself (every build fails, no snippet named) stops early
    builds.clear()

    class BrokenCompiler:
        def build_bundle(self, snippets):
            builds.append(len(snippets))
            raise compile_cache.BundleCompileError("failed", "cc1plus: out of memory", {})

    monkeypatch.setattr(compile_cache, "default_builder", lambda: BrokenCompiler())
    libraries, failures = _build_bundle(cases)
    assert libraries == {} and len(failures) == 8 and builds == [8, 4, 2, 1, 1]
    assert all("cc1plus: out of memory" in why for _, why in failures)


def test_a_wall_worker_whose_parent_was_killed_removes_its_log(tmp_path):
    # the parent removes the log when it closes the worker; a killed parent cannot
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from torchmark.suite.workers import WallWorker\n"
        "w = WallWorker()\n"
        "w._start()\n"
        "print(w._log, w._child.proc.pid, flush=True)\n"
        "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    log, pid = parent.stdout.readline().split()
    assert Path(log).exists()
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    assert not Path(log).exists()
