"""`torchmark regressions` over a store's history: listing, marks, and --confirm
re-measuring real cases."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

from torchmark.cli.main import main
from torchmark.core.provenance import Provenance
from torchmark.records import from_measurement
from torchmark.store import Store
from torchmark.timing.timer_class import Timer


def history(db: str, result, scales: list[float]) -> None:
    """One run an hour for each scale: `result`'s samples times that scale."""
    store = Store(db)
    base = Provenance.capture(env="ci")
    first = dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc)
    for k, scale in enumerate(scales):
        provenance = dataclasses.replace(base, git_commit=f"{k:02d}" + "c" * 38,
                                         started=(first + dt.timedelta(hours=k)).isoformat())
        run = store.start_run(provenance)
        store.record([dataclasses.replace(result, samples=tuple(
            s * scale for s in result.samples))], run)
        store.finish_run(run, "ok")
    store.close()


@pytest.fixture(scope="module")
def measured():
    """A real measurement of a small statement, the level every history is built from."""
    m = Timer("x * 2", "x = torch.ones(64)").blocked_autorange(min_run_time=0.2)
    return from_measurement(m)


def test_lists_a_step_with_its_runs_and_marks_it(tmp_path, measured, capsys):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    history(db, measured, [1.0] * 12 + [1.5] * 12)
    assert main(["regressions", "--db", db, "--json"]) == 0
    [change] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert change["kind"] == "regression" and 1.4 < change["ratio"] < 1.6
    assert (change["last_good"]["run_id"], change["first_bad"]["run_id"]) == (12, 13)
    assert change["first_bad"]["commit"].startswith("12")
    assert change["recovered_at"] is None and change["mark"] is None
    assert main(["regressions", "--db", db, "--dismiss", change["key"],
                 "--note", "a noisy neighbour"]) == 0
    capsys.readouterr()
    assert main(["regressions", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "dismissed" in out and "+50.0%" in out
    assert main(["regressions", "--db", db, "--dismiss", "nosuch@1/wall"]) == 2


def test_a_step_that_went_back_is_listed_as_recovered(tmp_path, measured, capsys):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    history(db, measured, [1.0] * 12 + [1.5] * 12 + [1.0] * 12)
    assert main(["regressions", "--db", db, "--json"]) == 0
    [change] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert change["recovered_at"]["run_id"] == 25


def test_a_machine_change_is_not_a_regression(tmp_path, measured, capsys):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    history(db, measured, [1.0] * 12)
    store = Store(db)
    other = Provenance.capture(env="ci")
    other = dataclasses.replace(other, machine=dataclasses.replace(
        other.machine, hostname="elsewhere", cpu_model="another CPU"))
    for k in range(12):  # 50% slower, on another machine
        run = store.start_run(dataclasses.replace(
            other, started=f"2026-09-02T{k:02d}:00:00+00:00"))
        store.record([dataclasses.replace(measured, samples=tuple(
            s * 1.5 for s in measured.samples))], run)
        store.finish_run(run, "ok")
    assert main(["regressions", "--db", db]) == 0
    assert capsys.readouterr().out.strip() == "no change detected"


def test_confirm_remeasures_and_marks_each_suspect(tmp_path, measured, capsys):
    """One history says the case got 2x slower and it measures at that new level now:
    confirmed. Another says it got 2x slower but it measures at the old level now (the
    slow runs were a disturbed machine): not confirmed."""
    real = f"sqlite:///{tmp_path / 'real.db'}"
    history(real, measured, [0.5] * 10 + [1.0] * 10)  # now at the new level
    assert main(["regressions", "--db", real, "--confirm", "--min-run-time", "0.2",
                 "--json"]) == 0
    out = capsys.readouterr()
    [change] = [json.loads(line) for line in out.out.splitlines()]
    assert change["mark"] == "confirmed", out.err
    ghost = f"sqlite:///{tmp_path / 'ghost.db'}"
    history(ghost, measured, [1.0] * 10 + [2.0] * 10)  # now back at the old level
    assert main(["regressions", "--db", ghost, "--confirm", "--min-run-time", "0.2",
                 "--json"]) == 0
    out = capsys.readouterr()
    [change] = [json.loads(line) for line in out.out.splitlines()]
    assert change["mark"] == "not-confirmed", out.err
