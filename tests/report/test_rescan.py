"""The dashboard's store-wide detection kept current (regressions/rescan.py): after new
results only their cases are detected again, and the changes are always those a whole
scan finds; a mark is applied without detecting anything."""

from __future__ import annotations

import dataclasses
import datetime as dt
import pickle
import time

import numpy as np
import pytest
from store_builder import build_store

from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.regressions.history import scan
from torchmark.regressions.rescan import StoreDetection


@pytest.fixture
def store(tmp_path):
    return build_store(f"sqlite:///{tmp_path / 's.db'}", cases=12, runs=30, step_case=4,
                       step_at=15, step_every=5)


def _same(detection: StoreDetection, store) -> list[str]:
    """The keys of the changes, after checking they equal a whole scan's."""
    whole = [c.to_dict() for c in scan(store, improvements=True)]
    assert [c.to_dict() for c in detection.changes(improvements=True)] == whole
    return [change["key"] for change in whole]


def _add_runs(store, case_index: int, runs: int, level: float) -> None:
    """`runs` more runs (after the builder's, on its machine and env) of one case."""
    rng = np.random.default_rng(1)
    case = Case(id=f"timeit:case{case_index}", frontend="timeit",
                stmt=f"torch.mul(x, {case_index})", label="mul", sub_label=f"n={case_index}")
    base = Provenance.capture(env="ci")
    for k in range(runs):
        when = dt.datetime(2026, 11, 1, k, tzinfo=dt.timezone.utc).isoformat()
        run = store.start_run(dataclasses.replace(base, git_commit=f"{k:04d}" + "cd" * 18,
                                                  git_commit_date=when, started=when))
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=100,
                             samples=tuple(level * (1 + 0.01 * rng.standard_normal(40))))],
                     run)
        store.finish_run(run, "ok")


def test_only_the_changed_cases_are_detected_again_and_the_changes_stay_a_scan_s(store):
    detection = StoreDetection()
    assert detection.update(store) == 12
    first = _same(detection, store)
    assert {key.split("@")[0] for key in first} == {f"timeit:case{i}" for i in (0, 4, 5, 10)}
    assert detection.update(store) == 0

    _add_runs(store, 7, 10, 8e-5 * 1.6)  # case 7 (8e-5 s) 60% slower for 10 new runs
    assert detection.update(store) == 1
    now = _same(detection, store)
    running = store.start_run(Provenance.capture(env="ci"))
    assert detection.update(store) == 0  # a run without results yet
    store.finish_run(running, "ok")
    assert detection.update(store) == 0  # a run that ended is the same run
    assert [key for key in now if key not in first] == ["timeit:case7@31/wall"]

    store.delete_runs([31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 16])  # every case's run 16
    assert detection.update(store) == 12
    assert _same(detection, store) != first  # the changes at run 16 moved to run 17

    again = pickle.loads(pickle.dumps(detection))
    assert [c.to_dict() for c in again.changes()] == \
        [c.to_dict() for c in detection.changes()]
    assert len(pickle.dumps(detection)) < 100_000


def test_a_mark_is_applied_without_detecting_and_new_results_detect_their_cases(store,
                                                                                 tmp_path):
    from torchmark.server.changes_cache import ChangesCache

    cache = ChangesCache(store)
    changes, status = cache.get()
    assert status["cases_detected"] == 12
    change = next(c for c in changes if c.key == "timeit:case4@16/wall")
    computed = status["computed_at"]
    store.mark_change(case_id="timeit:case4", metric="wall", first_bad_run=16,
                      mark="acknowledged", note="expected: new kernel")
    cache.marks_changed()
    changes, status = cache.get()
    marked = next(c for c in changes if c.key == change.key)
    assert (marked.mark, marked.note) == ("acknowledged", "expected: new kernel")
    assert status["computed_at"] == computed  # nothing detected again

    _add_runs(store, 7, 10, 8e-5 * 1.6)
    cache.checked = 0.0  # as if REFRESH_S had passed
    cache.get()
    deadline = time.monotonic() + 120
    while cache.refreshing and time.monotonic() < deadline:
        time.sleep(0.1)
    changes, status = cache.get()
    assert status["cases_detected"] == 1 and status["computed_at"] > computed
    assert "timeit:case7@31/wall" in [c.key for c in changes]
    assert next(c for c in changes if c.key == change.key).mark == "acknowledged"
    assert [c.key for c in changes] == [c.key for c in scan(store, improvements=True)]


def test_worker_processes_detect_what_one_process_detects(store, monkeypatch):
    from torchmark.regressions import rescan

    monkeypatch.setattr(rescan, "CHUNK", 5)  # three chunks of the twelve cases
    alone, together = StoreDetection(), StoreDetection()
    assert alone.update(store) == together.update(store, workers=2) == 12
    assert [c.to_dict() for c in together.changes(improvements=True)] == \
        [c.to_dict() for c in alone.changes(improvements=True)]
    assert together.by_case == alone.by_case


def test_runs_deleted_and_their_ids_given_again_detect_every_case_again(store):
    from torchmark.server.changes_cache import ChangesCache

    detection, cache = StoreDetection(), ChangesCache(store)
    detection.update(store)
    before = cache.store_version()
    newest = [run["id"] for run in store.runs(limit=5)]
    store.delete_runs(newest)
    _add_all(store, 5)  # five new runs of every case: SQLite gives them the five ids
    assert sorted(run["id"] for run in store.runs(limit=5)) == sorted(newest)
    assert cache.store_version() != before
    assert detection.update(store) == 12
    _same(detection, store)


def _add_all(store, runs: int) -> None:
    """`runs` more runs of the builder's twelve cases, 40% slower (a new level)."""
    rng = np.random.default_rng(2)
    base = Provenance.capture(env="ci")
    cases = [Case(id=f"timeit:case{i}", frontend="timeit", stmt=f"torch.mul(x, {i})",
                  label="mul", sub_label=f"n={i}") for i in range(12)]
    for k in range(runs):
        when = dt.datetime(2026, 12, 1, k, tzinfo=dt.timezone.utc).isoformat()
        run = store.start_run(dataclasses.replace(base, git_commit=f"{k:04d}" + "ee" * 18,
                                                  git_commit_date=when, started=when))
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=100,
                             samples=tuple(1.4e-5 * (1 + i % 10) *
                                           (1 + 0.01 * rng.standard_normal(40))))
                      for i, case in enumerate(cases)], run)
        store.finish_run(run, "ok")


def test_the_detection_of_a_store_file_that_is_gone_is_removed(tmp_path):
    """Each served store leaves a detection in the private folder: one of a SQLite file
    since deleted (a test's, a scratch store's) goes at the next write, not a week later."""
    import os

    from torchmark.server.changes_cache import _forget_old

    kept_store = tmp_path / "kept.db"
    kept_store.write_bytes(b"")
    files = {}
    for name, store_file in (("kept", kept_store), ("gone", tmp_path / "gone.db")):
        pickle_path = tmp_path / f"serve-changes-{os.getuid()}-{name}.pickle"
        pickle_path.write_bytes(b"state")
        (tmp_path / f"{pickle_path.name}.lock").write_bytes(b"")
        (tmp_path / f"{pickle_path.name}.store").write_text(str(store_file))
        files[name] = pickle_path
    _forget_old(tmp_path)
    assert files["kept"].exists() and not files["gone"].exists()
    assert not (tmp_path / f"{files['gone'].name}.lock").exists()
    assert not (tmp_path / f"{files['gone'].name}.store").exists()


def test_what_was_checked_is_counted_as_regressions_counts_it(tmp_path):
    """The feed says what it could not judge: series too short to tell a change, and the
    runs left out for their few samples (the CLI's `N series checked (...)`)."""
    from torchmark.regressions.history import few_runs, load_series

    store = build_store(f"sqlite:///{tmp_path / 's.db'}", cases=3, runs=12, step_case=1,
                        step_at=6)
    _add_runs(store, 0, 2, 1.0)  # 14 runs of case 0; cases 1, 2 keep 12
    small = build_store(f"sqlite:///{tmp_path / 'small.db'}", cases=2, runs=5)
    for built in (store, small):
        detection = StoreDetection()
        detection.update(built)
        series = load_series(built)
        assert detection.checked() == {
            "series": len(series), "short": sum(len(s.points) < 8 for s in series),
            "min_runs": 8, "left_out_runs": sum(len(few_runs(s)) for s in series)}
    assert detection.checked()["short"] == 2  # the small store: both series too short
