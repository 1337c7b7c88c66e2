"""A command's results are never lost to a SQLite store whose write lock another process
holds for long (an import of a large file): they wait, and are stored when it is free,
or written to a results file that `torchmark import` stores."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from torchmark.cli.main import main
from torchmark.core.errors import UsageError
from torchmark.core.result import Case, Result
from torchmark.store import Store
from torchmark.store.recorder import RunRecorder


def _results(n: int) -> list[Result]:
    return [Result(case=Case(id=f"timeit:c{i}", frontend="timeit", stmt=f"f({i})"),
                   metric="wall", unit="s", number_per_run=1,
                   samples=(1.0 + i, 1.1 + i, 0.9 + i)) for i in range(n)]


def _hold_write_lock(path) -> sqlite3.Connection:
    """Another process's long write, as SQLite sees it: its write lock, held."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def _locked_store(tmp_path, monkeypatch, wait: str):
    """A new store whose write lock is held, TORCHMARK_STORE_WAIT=`wait`: its path and
    the lock's holder."""
    db = tmp_path / "busy.db"
    Store(str(db)).close()
    monkeypatch.setenv("TORCHMARK_STORE_WAIT", wait)
    return db, _hold_write_lock(db)


def test_results_wait_for_the_lock_and_are_stored_when_it_is_free(tmp_path, monkeypatch,
                                                                   capsys):
    db, holder = _locked_store(tmp_path, monkeypatch, "120")
    with RunRecorder(str(db)) as recorder:  # its run cannot start yet
        assert recorder.run_id is None
        recorder.add(_results(2))
        recorder.add(_results(3)[2:])
        assert recorder.recorded == 0 and len(recorder.pending) == 3
        threading.Timer(2.0, holder.rollback).start()  # the import ends as the command does
    err = capsys.readouterr().err
    store = Store(str(db))
    [run] = store.runs(limit=None)
    assert "the store is busy" in err and f"free again: run {run['id']} recorded" in err
    assert run["status"] == "ok"
    assert sorted(r["case_id"] for r in store.results(run=run["id"])) == \
        ["timeit:c0", "timeit:c1", "timeit:c2"]


def test_a_lock_held_past_the_wait_leaves_a_file_that_import_stores(tmp_path, monkeypatch,
                                                                     capsys):
    db, holder = _locked_store(tmp_path, monkeypatch, "1")
    with RunRecorder(str(db)) as recorder:
        recorder.add(_results(4))
    holder.rollback()
    err = capsys.readouterr().err
    [spilled] = tmp_path.glob("torchmark-unrecorded-*.jsonl")
    assert f"4 result(s) written to {spilled}" in err and "torchmark import" in err
    assert Store(str(db)).runs(limit=None) == []
    assert main(["import", str(spilled), "--db", str(db)]) == 0
    assert sorted(r["case_id"] for r in Store(str(db)).results()) == \
        [f"timeit:c{i}" for i in range(4)]


def test_a_lock_taken_mid_run_neither_stalls_the_run_nor_loses_its_results(
        tmp_path, monkeypatch, capsys):
    """The run started and stored its first results; then another process takes the
    lock for good: the next results wait (no minute-long stall), land in a file at the
    end, and the run that stays "running" is named."""
    import time

    db = tmp_path / "busy.db"
    monkeypatch.setenv("TORCHMARK_STORE_WAIT", "1")
    began = time.monotonic()
    with RunRecorder(str(db)) as recorder:
        recorder.add(_results(1))
        assert recorder.recorded == 1
        holder = _hold_write_lock(db)
        recorder.add(_results(3)[1:])
        recorder.add(_results(4)[3:])
    holder.rollback()
    assert time.monotonic() - began < 15
    err = capsys.readouterr().err
    [spilled] = tmp_path.glob("torchmark-unrecorded-*.jsonl")
    [run] = Store(str(db)).runs(limit=None)
    assert f"run {run['id']} stays \"running\"" in err and run["status"] == "running"
    assert main(["import", str(spilled), "--db", str(db)]) == 0
    imported = Store(str(db)).results()
    assert sorted(r["case_id"] for r in imported) == [f"timeit:c{i}" for i in range(4)]
    assert {r["machine"] for r in imported} == {run["machine"]}


def test_a_resumed_run_s_results_keep_its_machine_when_written_to_a_file(
        tmp_path, monkeypatch):
    from torchmark.core.provenance import Provenance

    db = tmp_path / "busy.db"
    store = Store(str(db))
    run = store.start_run(Provenance.capture())
    store.record(_results(1), run)
    store.finish_run(run, "interrupted")
    machine = store.runs(limit=None)[0]["machine"]
    monkeypatch.setenv("TORCHMARK_STORE_WAIT", "0")
    holder = _hold_write_lock(db)
    with RunRecorder(str(db), resume_run=run) as recorder:
        recorder.add(_results(2)[1:])
    holder.rollback()
    [spilled] = tmp_path.glob("torchmark-unrecorded-*.jsonl")
    assert main(["import", str(spilled), "--db", str(db)]) == 0
    assert {r["machine"] for r in Store(str(db)).results()} == {machine}


def test_ctrl_c_while_waiting_for_the_store_writes_the_results_to_a_file(
        tmp_path, monkeypatch, capsys):
    db, holder = _locked_store(tmp_path, monkeypatch, "600")
    recorder = RunRecorder(str(db)).__enter__()
    recorder.add(_results(2))
    tries = []
    flush = recorder._flush

    def interrupted(wait, status=None):  # the second try of the wait: Ctrl-C
        tries.append(wait)
        if len(tries) == 3:
            raise KeyboardInterrupt
        return flush(wait, status)

    monkeypatch.setattr(recorder, "_flush", interrupted)
    with pytest.raises(KeyboardInterrupt):
        recorder.__exit__(None, None, None)
    holder.rollback()
    err = capsys.readouterr().err
    assert "waiting up to 600 s" in err and "the wait was interrupted" in err
    assert len(list(tmp_path.glob("torchmark-unrecorded-*.jsonl"))) == 1


def test_a_bad_store_wait_is_named_before_anything_is_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHMARK_STORE_WAIT", "soon")
    with pytest.raises(UsageError, match="TORCHMARK_STORE_WAIT must be a finite number of seconds >= 0, got 'soon'"):
        RunRecorder(str(tmp_path / "s.db")).__enter__()


def test_several_files_are_parsed_before_the_write_lock_is_taken(tmp_path, monkeypatch):
    """An import of several files in one transaction parses each file read whole before
    it takes the store's write lock: another writer is never kept waiting on a parse."""
    import json

    import torchmark.store.formats as formats

    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"context": {"date": "2026-11-01T10:00:00+00:00"},
                                    "benchmarks": [
            {"name": f"BM_{name}", "run_type": "iteration", "iterations": 10,
             "real_time": 2.5, "cpu_time": 2.4, "time_unit": "ms"}]}))
        paths.append(str(path))
    db = tmp_path / "s.db"
    Store(str(db)).close()
    free_while_parsing = []
    original = formats.read_foreign

    def read_foreign(path, name):  # another writer tries the lock, without waiting
        other = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.rollback()
            free_while_parsing.append(True)
        except sqlite3.OperationalError:
            free_while_parsing.append(False)
        finally:
            other.close()
        return original(path, name)

    monkeypatch.setattr(formats, "read_foreign", read_foreign)
    store = Store(str(db))
    assert [added for added, _, _ in store.import_files(
        paths, formats=["google-benchmark"] * 2)] == [1, 1]
    assert free_while_parsing == [True, True]


def test_an_import_waits_for_the_lock_says_so_and_fails_in_one_line(tmp_path, monkeypatch,
                                                                    capsys):
    from torchmark.core.results_file import save_results

    path = tmp_path / "r.jsonl"
    save_results(path, _results(3), append=False)
    db, holder = _locked_store(tmp_path, monkeypatch, "1")
    assert main(["import", str(path), "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "waiting up to 1 s" in err and "stayed busy for 1 s" in err
    assert "nothing imported" in err and "unexpected" not in err
    monkeypatch.setenv("TORCHMARK_STORE_WAIT", "60")
    threading.Timer(2.0, holder.rollback).start()  # the other import ends meanwhile
    assert main(["import", str(path), "--db", str(db)]) == 0
    assert "3 results added" in capsys.readouterr().out


def test_results_after_the_store_failed_follow_the_first_into_its_file(tmp_path, capsys,
                                                                       monkeypatch):
    """A write that fails (a connection lost, a disk error): that batch goes to a file,
    and so does every batch after it (a pytest session records test by test)."""
    from torchmark.core.results_file import read_results

    db = tmp_path / "s.db"
    results = _results(4)
    with RunRecorder(str(db)) as recorder:
        recorder.add(results[:1])
        record = recorder.store.record

        def broken(*args, **kwargs):
            monkeypatch.setattr(recorder.store, "record", record)
            raise OSError("disk I/O error")

        monkeypatch.setattr(recorder.store, "record", broken)
        for result in results[1:]:
            recorder.add([result])
    [spilled] = tmp_path.glob("torchmark-unrecorded-*.jsonl")
    assert [r.case.id for r in read_results(spilled)] == [r.case.id for r in results[1:]]
    assert [r["case_id"] for r in Store(str(db)).results()] == ["timeit:c0"]
    assert "and any that follow" in capsys.readouterr().err


def test_a_ctrl_c_just_after_a_write_was_stored_stores_it_once(tmp_path, monkeypatch):
    """A Ctrl-C that comes after a write's transaction committed, before the recorder
    knew: the run's end stores the rest of what is pending, not that write again."""
    db = tmp_path / "s.db"
    recorder = RunRecorder(str(db)).__enter__()
    record = recorder.store.record

    def committed_then_interrupted(results, run_id=None, **kwargs):
        record(results, run_id, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(recorder.store, "record", committed_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        recorder.add(_results(2))
    monkeypatch.setattr(recorder.store, "record", record)
    recorder.pending += _results(3)[2:]  # measured meanwhile: stored at the end
    recorder.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)
    store = Store(str(db))
    [run] = store.runs()
    assert run["status"] == "interrupted"
    assert sorted(r["case_id"] for r in store.results()) == \
        ["timeit:c0", "timeit:c1", "timeit:c2"]
    assert recorder.recorded == 3
