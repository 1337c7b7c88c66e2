"""`suite run --resume-run RUN`: a suite run killed with SIGKILL leaves a store that opens
with every finished case whole, and resuming it from the store runs the rest into the
same run, no case twice."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from torchmark.cli.main import main
from torchmark.cli.store_options import resumed_cases
from torchmark.store import Store

DEFS = str(Path(__file__).resolve().parents[1] / "suite" / "defs_small.py")
CASES = {f"case {i} [py explicit t1]" for i in range(8)}  # defs_small's "many" cases


def suite_argv(out: Path, db: str) -> list[str]:
    return ["suite", "run", "--definitions", DEFS, "--no-instructions", "--workers", "1",
            "--min-run-time", "0.2", "--out", str(out), "--db", db]


def case_lines(path: Path) -> dict[str, dict]:
    from torchmark.suite.results import read_records

    return {x["id"]: x for x in read_records(path)}


def kill_when_stored(argv: list[str], store: Store, at_least: int) -> None:
    """Run `torchmark ARGV` and SIGKILL it, with everything it started, once the store holds
    `at_least` finished cases (before it finishes them all)."""
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            runs = store.runs()
            if runs and len(store.finished_cases(runs[0]["id"])) >= at_least:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no clean-up: not the footer, not the run's end
        proc.wait()


@pytest.mark.slow
def test_a_killed_suite_run_resumes_from_the_store(store_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", "many")
    store = Store(store_url)  # the schema made before the run starts
    kill_when_stored(suite_argv(tmp_path / "first.jsonl", store_url), store, at_least=3)
    store.close()

    store = Store(store_url)  # it opens
    [run] = store.runs()
    assert run["status"] == "running"  # killed: never marked finished
    rows = store.results(run=run["id"], samples=True)
    stored = [row["case_id"] for row in rows]
    assert 3 <= len(stored) < len(CASES) and len(stored) == len(set(stored))
    in_file = case_lines(tmp_path / "first.jsonl")  # a case is written, then stored
    for row in rows:  # each finished case whole: its samples as measured, no failure
        assert row["metric"] == "wall" and row["failure"] is None
        assert row["samples"] == in_file[row["case_id"]]["wall"]["times"]
    store.close()

    rest = tmp_path / "rest.jsonl"
    assert main([*suite_argv(rest, store_url), "--resume-run", str(run["id"])]) == 0
    store = Store(store_url)
    [resumed] = store.runs()
    cases = [row["case_id"] for row in store.results(run=run["id"])]
    assert resumed["id"] == run["id"] and resumed["status"] == "ok"
    assert sorted(cases) == sorted(CASES)  # each case once: none twice, none missing
    store.close()
    # the file holds the whole run: the cases finished before (as stored) and the rest
    rest_lines = case_lines(rest)
    assert set(rest_lines) == CASES
    for row in rows:
        assert rest_lines[row["case_id"]]["wall"]["times"] == row["samples"]
    assert f"{len(stored)} already in run {run['id']};" in capsys.readouterr().out  # not rerun


def test_resume_run_needs_the_store_and_a_run_it_holds(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", "many")
    db = f"sqlite:///{tmp_path / 's.db'}"
    out = tmp_path / "r.jsonl"
    assert main([*suite_argv(out, db), "--resume-run", "1", "--no-store"]) == 2
    assert "--resume-run reads the store: drop --no-store" in capsys.readouterr().err
    assert main([*suite_argv(out, db), "--resume-run", "7"]) == 2  # no store yet
    assert "no store at " in capsys.readouterr().err
    Store(db).close()  # a store, without that run
    assert main([*suite_argv(out, db), "--resume-run", "7"]) == 2
    err = capsys.readouterr().err
    assert "--resume-run 7: the store at " in err and "holds no run 7" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()  # refused before any file was made
    assert Store(db).runs() == []


def test_a_run_another_command_made_is_not_resumed(tmp_path):
    """`ops --resume-run` of a `timeit` run: refused before anything is written (it
    once failed half-way, leaving the timeit run marked failed with ops' results)."""
    import dataclasses

    import click

    from torchmark.cli.store_options import resumed_cases
    from torchmark.core.provenance import Provenance
    from torchmark.store import Store

    db = str(tmp_path / "other.db")
    store = Store(db)
    run = store.start_run(dataclasses.replace(
        Provenance.capture(), command=("torchmark", "timeit", "x + 1")), status="ok")
    with pytest.raises(click.UsageError, match="`torchmark timeit` made that run"):
        resumed_cases(db, False, run, "ops")
    assert resumed_cases(db, False, run, "timeit") == set()
    assert store.runs(limit=None)[0]["status"] == "ok"


def test_a_failed_case_measured_again_in_a_resumed_run_is_held_once(tmp_path):
    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Failure, Result
    from torchmark.store.recorder import RunRecorder

    db = str(tmp_path / "again.db")
    case = Case(id="timeit:boom", frontend="timeit", stmt="boom()", label="b")
    failed = Result(case=case, metric="wall", unit="s", number_per_run=1, samples=(),
                    failure=Failure("ZeroDivisionError"))
    fine = Result(case=case, metric="wall", unit="s", number_per_run=1,
                  samples=(1.0, 1.1, 0.9))
    store = Store(db)
    run = store.start_run(Provenance.capture())
    store.record([failed], run)
    store.finish_run(run, "failed")
    with RunRecorder(db, resume_run=run) as recorder:
        recorder.add([fine])
    [row] = store.results(run=run)
    assert row["failure"] is None and row["n"] == 3


def test_a_run_another_live_process_runs_is_not_resumed_twice(tmp_path):
    """A run whose tags name a live process of this machine (the command running it, or
    another --resume-run) is refused, before any file is touched and again as it is
    reopened; once that process is gone it resumes, and the resumer claims it."""
    import socket
    import subprocess

    from torchmark.core.errors import UsageError
    from torchmark.core.provenance import Provenance
    from torchmark.store.recorder import RunRecorder

    db = str(tmp_path / "claimed.db")
    store = Store(db)
    other = subprocess.Popen(["sleep", "60"])
    try:
        run = store.start_run(dataclasses.replace(
            Provenance.capture(), command=("torchmark", "ops", "-c", "x.json")),
            tags={"process": {"host": socket.gethostname(), "pid": other.pid}})
        with pytest.raises(click.UsageError, match=f"process {other.pid} on this machine"):
            resumed_cases(db, False, run, "ops")
        with pytest.raises(UsageError, match=f"run {run} is being run by process"):
            store.reopen_run(run)
        with pytest.raises(UsageError):
            RunRecorder(db, resume_run=run).__enter__()
        from torchmark.core.procs import process_start
        from torchmark.store.store import running_process, this_process

        claim = {**this_process(), "pid": other.pid}
        if "since" in claim:  # Linux: the process's start tells a pid given again
            assert running_process({"process": claim}) is None  # (this one's start)
            claim["since"] = process_start(other.pid)[0]
            assert running_process({"process": claim}) == other.pid
            assert running_process({"process": {**claim, "boot": "another"}}) is None
    finally:
        other.kill()
        other.wait()
    assert resumed_cases(db, False, run, "ops") == set()
    with RunRecorder(db, resume_run=run) as recorder:
        assert recorder.run_id == run
    [row] = store.runs(limit=None)
    assert row["tags"]["process"]["pid"] == os.getpid()
    with RunRecorder(db) as fresh:  # a new run names its process too
        pass
    assert Store(db).runs_page(run=fresh.run_id)[0][0]["tags"]["process"]["pid"] == \
        os.getpid()
