"""Two runs never write one results file at once: the second is refused at once (exit 2,
naming the file and the other process), so no record is lost, no line torn, and no case
resumed twice."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import pytest

from torchmark.core.errors import BusyError
from torchmark.core.results_lock import ResultsLock

CASES = 12


def config(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [[8, 8 * CASES, 8]], "__range__": ["shape"]},
        {"type": "tensor", "shape": [1]}]}]}]}}))
    return path


def start(*args):
    from conftest import deliverable_sigint

    return subprocess.Popen([sys.executable, "-m", "torchmark", "ops", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=deliverable_sigint)


def records(path):
    from torchmark.ops.results_file import read_records

    for line in path.read_text().splitlines():
        json.loads(line)  # every line parses
    return read_records(path)


@pytest.mark.slow
def test_four_runs_then_four_resumes_on_one_file(tmp_path):
    cfg, out = config(tmp_path), tmp_path / "r.jsonl"
    runs = [start("-c", str(cfg), "-o", str(out), "-i", "200", "-w", "1") for _ in range(4)]
    results = [(p.wait(timeout=180), p.stderr.read()) for p in runs]
    assert all(code in (0, 2) for code, _ in results), results
    assert any(code == 0 for code, _ in results)
    for code, err in results:  # a run that came while another wrote was refused at once
        if code == 2:
            assert "another torchmark run is writing it (pid " in err and str(out) in err
            assert len(err.strip().splitlines()) == 1, err
    ids = [r["id"] for r in records(out)]
    assert len(ids) == len(set(ids)) == CASES

    # as a killed run leaves it: the last records and the footer never written
    lines = out.read_text().splitlines()
    kept = lines[:1 + CASES - 5]
    out.write_text("\n".join(kept) + "\n" + kept[-1][: len(kept[-1]) // 2])  # a torn line
    resumes = [start("-c", str(cfg), "--resume", str(out), "-i", "200", "-w", "1")
               for _ in range(4)]
    results = [(p.wait(timeout=180), p.stderr.read()) for p in resumes]
    assert all(code in (0, 2) for code, _ in results), results
    ids = [r["id"] for r in records(out)]
    assert len(ids) == len(set(ids)) == CASES, sorted(ids)  # every case exactly once


def test_a_lock_is_released_when_its_holder_dies(tmp_path):
    out = tmp_path / "r.jsonl"
    code = ("import sys, time; from torchmark.core.results_lock import ResultsLock;"
            f"held = ResultsLock({str(out)!r}).acquire(); print('held', flush=True);"
            "time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(BusyError, match=r"pid \d+"):
        ResultsLock(out).acquire()
    holder.kill()
    holder.wait()
    ResultsLock(out).acquire().release()  # the kernel let it go with the process


def test_suite_and_replay_refuse_a_held_file(tmp_path):
    from torchmark.replay import record, replay
    from torchmark.suite.materialize import materialize
    from torchmark.suite.runner import RunOptions, SuiteRunner
    from torchmark.suite.timer_args import TimerArgs

    out = tmp_path / "r.jsonl"
    with ResultsLock(out):
        runner = SuiteRunner(materialize({"a": TimerArgs("1 + 1")}), out,
                             RunOptions(workers=1, min_run_time=0.01))
        with pytest.raises(BusyError):
            runner.run()
        import torch

        trace = tmp_path / "t.json"
        with record(trace, with_timing=False):
            torch.ones(3).add(1)
        with pytest.raises(BusyError):
            replay(trace, iterations=1, out=out)
    assert not out.exists() or out.stat().st_size == 0


def _append(path, start, count):
    from torchmark.timing.files import save_measurements

    from conftest import make_measurement

    for i in range(start, start + count):
        save_measurements(path, [make_measurement(1e-6, stmt=f"case {i}")], append=True)


def test_concurrent_saves_keep_every_measurement(tmp_path):
    from torchmark.timing.files import load_measurements

    path = tmp_path / "m.json"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append, args=(path, 10 * i, 10)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    stmts = sorted(m.task_spec.stmt for m in load_measurements(path))
    assert stmts == sorted(f"case {i}" for i in range(40))


def test_two_paths_to_one_file_meet_at_one_lock(tmp_path):
    real = tmp_path / "r.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with ResultsLock(real):
        with pytest.raises(BusyError):
            ResultsLock(link).acquire()
