"""The result store on SQLite and on a real PostgreSQL: recording, queries, imports,
concurrent writers, a writer killed mid-run, schema versions."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from torchmark.cli.main import main
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Failure, Result
from torchmark.store import HEAD, Store, StoreError, schema
from torchmark.store.result_rows import KEY_AT, RESULT_VALUES, case_row, result_values

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def result(i: int, n: int = 10, metric: str = "wall") -> Result:
    case = Case(id=f"timeit:case{i % 7}", frontend="timeit", stmt=f"x * {i % 7}",
                params={"shape": [4, i % 7]})
    return Result(case=case, metric=metric, samples=tuple(1e-6 * (1 + k / 100)
                                                          for k in range(n)),
                  number_per_run=100)


def test_record_and_read_back(store_url):
    store = Store(store_url)
    assert store.schema_version() == HEAD
    run = store.start_run(tags={"branch": "main"})
    failed = Result(case=Case(id="ops:bad", frontend="ops", stmt="torch.mm"),
                    metric="wall", failure=Failure("RuntimeError: shapes", "tail"))
    assert store.record([result(1), result(2, n=1000), failed], run) == 3
    store.finish_run(run, "ok")
    [listed] = store.runs()
    assert listed["id"] == run and listed["results"] == 3 and listed["status"] == "ok"
    assert listed["tags"] == {"branch": "main"}
    rows = store.results(run=run, samples=True)
    assert [len(r["samples"]) for r in rows] == [10, 1000, 0]
    assert rows[1]["samples"][-1] == pytest.approx(1e-6 * 10.99)
    assert rows[2]["failure"] == "RuntimeError: shapes" and rows[2]["median"] is None
    history = store.history("timeit:case1")
    assert len(history) == 1 and history[0]["median"] == pytest.approx(rows[0]["median"])
    info = store.info()
    assert (info["runs"], info["results"], info["cases"], info["machines"]) == (1, 3, 3, 1)
    store.close()


def test_every_legacy_format_imports_once(store_url, tmp_path):
    for p in sorted(FORMATS.iterdir()):  # each format alone holds results
        alone = Store(f"sqlite:///{tmp_path / (p.name + '.db')}")
        assert alone.import_file(p) > 0, p.name
        alone.close()
    store = Store(store_url)
    added = {p.name: store.import_file(p) for p in sorted(FORMATS.iterdir())}
    again = {p.name: store.import_file(p) for p in sorted(FORMATS.iterdir())}
    assert set(again.values()) == {0}  # idempotent: nothing added twice
    # (files of one measurement in two formats: their results are stored once)
    assert store.info()["results"] == sum(added.values()) > 0
    ops_run = next(r for r in store.runs() if "ops_results" in r["tags"]["imported_from"])
    assert ops_run["torch_version"] == "2.13.0+cpu"  # from the file's header, not this run
    store.close()


def test_a_file_two_runs_saved_to_imports_as_two_runs_and_not_twice(store_url, tmp_path):
    import dataclasses

    from torchmark import Timer
    from torchmark.core.provenance import Provenance
    from torchmark.records import results_of
    from torchmark.timing.files import save_measurements

    store = Store(store_url)
    path = tmp_path / "ab.json"
    before = Provenance.capture(env="before", command=["timeit"])
    after = dataclasses.replace(before, env="after", started="2026-01-02T03:04:05+0000")
    for provenance, stmt in ((before, "x * 2"), (after, "x + x")):  # as timeit --save
        m = Timer(stmt, "x = torch.ones(4)").blocked_autorange(min_run_time=0.01)
        run = store.start_run(provenance)
        store.record(results_of([m]), run)
        store.finish_run(run)
        save_measurements(path, [m], append=True, provenance=provenance)
    assert store.import_file(path) == 0  # both already recorded when they were saved
    assert store.info()["results"] == 2
    store.close()
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert fresh.import_file(path) == 2
    assert sorted((r["env"], r["results"]) for r in fresh.runs()) == \
        [("after", 1), ("before", 1)]  # one run a provenance, not one run for the file
    assert fresh.import_file(path) == 0
    fresh.close()


def test_a_failure_like_one_a_moment_before_is_kept_with_its_new_run(store_url, tmp_path):
    """Two runs a few seconds apart on one machine, each with new samples of one case and
    the same failure of another (a benchmark that raises, run twice in CI): both are
    stored whole, and the gate finds the candidate's failure; a run recorded live and
    imported again from its file still adds nothing."""
    import dataclasses

    from torchmark.records import save_results

    store = Store(store_url)
    base = Provenance.capture(env="ci", command=["bench"])
    broken = Case(id="timeit:broken", frontend="timeit", stmt="boom()")
    files = []
    for k, start in enumerate(("2026-01-02T03:04:05+0000", "2026-01-02T03:04:09+0000")):
        provenance = dataclasses.replace(base, started=start)
        ran = [dataclasses.replace(result(1), samples=tuple(1e-6 * (1 + k + j / 100)
                                                           for j in range(10)),
                                   provenance=provenance),
               Result(case=broken, metric="wall", failure=Failure("RuntimeError: boom"),
                      provenance=provenance)]
        files.append(tmp_path / f"run{k}.jsonl")
        save_results(files[-1], ran)
        assert store.import_file(files[-1]) == 2
    assert [r["results"] for r in store.runs()] == [2, 2]
    assert main(["gate", "--db", store_url, "--baseline", "run:1", "--candidate",
                 "run:2"]) == 1
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(files[1].read_bytes() + b"\n")  # another file, the same run
    assert store.import_file(copy) == 0
    store.close()


def test_an_import_of_several_files_stores_all_or_nothing(store_url, tmp_path, capsys):
    """One bad file among several, first or last: nothing is stored (one transaction);
    the same files without it import whole, and a file given twice counts once."""
    good = str(FORMATS / "measurements.json")
    bad = tmp_path / "bad.json"
    bad.write_text((FORMATS / "measurements.json").read_text().replace("[", "[NaN, ", 2))
    for files in ([good, str(bad)], [str(bad), good]):
        assert main(["import", *files, "--db", store_url]) == 2
        assert "bad.json" in capsys.readouterr().err
        assert Store(store_url).info()["results"] == 0
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["import", good, good, str(empty), "--db", store_url]) == 0
    added = Store(store_url).info()["results"]
    out = capsys.readouterr().out.splitlines()
    assert added > 0 and f"{added} result" in out[-1]
    assert out[1].endswith("0 results (already in the store)")  # given twice
    assert out[2].endswith("empty.json: 0 results (the file holds none)")


def run_together(processes) -> None:
    """Start the processes at once and wait for each to exit cleanly."""
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=300)
        assert p.exitcode == 0


def _record_many(url: str, worker: int, runs: int, per_run: int) -> None:
    store = Store(url)
    for _ in range(runs):
        run = store.start_run()
        store.record([result(worker * 1000 + i) for i in range(per_run)], run)
        store.finish_run(run)
    store.close()


def test_four_processes_record_at_once(store_url):
    Store(store_url).close()  # the schema exists before they race
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_record_many, args=(store_url, w, 5, 20))
               for w in range(4)]
    run_together(workers)
    store = Store(store_url)
    info = store.info()
    assert (info["runs"], info["results"]) == (20, 400)
    assert info["bytes"] > 0  # the SQLite file's, the PostgreSQL database's
    assert all(r["results"] == 20 for r in store.runs())
    store.close()


def _import(url: str, path: str, added) -> None:
    store = Store(url)
    added.put(store.import_file(path))
    store.close()


def test_four_processes_import_one_file_at_once(store_url, tmp_path):
    """One adds the file's results; the others, finding its import key taken when they
    commit, add nothing and say so (0), as a second import does: no error."""
    source = Store(f"sqlite:///{tmp_path / 'source.db'}")
    for _ in range(3):
        run = source.start_run()
        source.record([result(i) for i in range(30)], run)
        source.finish_run(run)
    source.close()
    path = tmp_path / "runs.jsonl"
    assert main(["export", "--format", "jsonl", "-o", str(path), "--db",
                 str(tmp_path / "source.db")]) == 0
    Store(store_url).close()  # the schema exists before they race
    context = multiprocessing.get_context("spawn")
    added = context.Queue()
    importers = [context.Process(target=_import, args=(store_url, str(path), added))
                 for _ in range(4)]
    run_together(importers)
    assert sorted(added.get(timeout=10) for _ in importers) == [0, 0, 0, 90]
    store = Store(store_url)
    assert store.info()["results"] == 90
    store.close()


WRITER = """
import sys, time
from torchmark.core.result import Case, Result
from torchmark.store import Store
store = Store(sys.argv[1])
case = Case(id="timeit:k", frontend="timeit", stmt="pass")
for i in range(100000):
    run = store.start_run()
    store.record([Result(case=case, metric="wall", samples=(1e-6,) * 1000)] * 10, run)
    store.finish_run(run)
    if i == 3:
        print("writing", flush=True)
"""


def test_a_writer_killed_mid_run_leaves_a_store_that_opens(store_url):
    Store(store_url).close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, store_url],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "writing"
    time.sleep(0.5)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    store = Store(store_url)
    info = store.info()
    assert info["results"] == 10 * info["runs"] or info["results"] % 10 == 0
    assert info["results"] >= 40  # every committed transaction is there, whole
    running = [r for r in store.runs() if r["status"] == "running"]
    assert len(running) <= 1  # the one the kill interrupted, if any
    store.close()


def test_a_newer_schema_is_refused(store_url):
    store = Store(store_url)
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()
    with pytest.raises(StoreError, match="newer torchmark"):
        Store(store_url)


def _store_at(path: Path, revision: str) -> str:
    """The URL of a new SQLite store at `path` made at schema `revision`."""
    from alembic import command
    from alembic.config import Config

    import torchmark.store.store as store_module

    url = f"sqlite:///{path}"
    engine = sa.create_engine(url)
    config = Config()
    config.set_main_option("script_location",
                           str(Path(store_module.__file__).with_name("migrations")))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    engine.dispose()
    return url


def _add_as_written_then(old: Store, run: int, results: list[Result]) -> None:
    """`results` (and their cases) under `run` of a store at an older schema, as
    torchmark wrote them then: only the columns its results table has."""
    table = sa.Table("results", sa.MetaData(), autoload_with=old.engine)
    with old.engine.begin() as conn:
        old.insert_case_rows(conn, [case_row(r.case) for r in results])
        conn.execute(table.insert(), [
            {k: v for k, v in dict(zip(RESULT_VALUES, result_values(r), strict=True),
                                   run_id=run, recorded="2026-01-01T00:00:00.000000Z",
                                   warnings=[], extra={}).items() if k in table.c}
            for r in results])


def test_the_first_schema_upgrades_to_the_head(tmp_path, capsys):
    """A store made at the first revision (0001) opens at the head; an older SQLite one
    is copied aside before it is upgraded, and the upgrade said on stderr."""
    url = _store_at(tmp_path / "old.db", "0001")
    old = Store(url, upgrade=False)  # results written at the first schema
    run = old.start_run(status="ok")
    _add_as_written_then(old, run, [result(1), result(2)])  # no content key
    old.close()
    store = Store(url)
    assert store.schema_version() == HEAD
    assert (tmp_path / "old.db.schema-0001.bak").exists()
    assert capsys.readouterr().err == (  # said: a command that only reads may upgrade it
        f"torchmark: upgrading the store at {tmp_path / 'old.db'} from schema 0001 to "
        f"{HEAD}, a copy of it kept at {tmp_path / 'old.db.schema-0001.bak'}\n")
    Store(url)
    assert capsys.readouterr().err == ""  # once
    assert len(store.result_records(run=run)) == 2  # kept through the upgrade
    with store.engine.connect() as conn:  # 0004 packed the finished run's medians
        assert conn.execute(sa.select(schema.run_medians.c.results)).all() == [(2,)]
        from torchmark.store import run_medians

        packed = run_medians.from_packed(conn, run_medians.version(conn, run), {})
        assert packed is not None  # as the run is: used
        assert packed.as_dict() == store.run_medians(run).as_dict()
        assert len(packed.keys) == 2
    # 0003 gave the old rows their content keys: importing them again adds nothing
    with store.engine.connect() as conn:
        here = Provenance.capture()
        wanted = [(result_values(r)[KEY_AT], r.metric, store.run_start(here),
                   here.machine.hostname) for r in (result(1), result(2))]
        assert store.held_results(conn, wanted) == {0, 1}
    store.mark_change(case_id="timeit:case1", metric="wall", first_bad_run=run,
                      mark="dismissed", note="a noisy neighbour")  # 0002's table
    assert store.change_marks()[("timeit:case1", "wall", run)]["mark"] == "dismissed"
    store.close()


def test_the_packed_medians_that_hold_are_kept_through_0007(tmp_path):
    """0007 counts a run's result writes: a run's medians packed before it are marked as
    of the run when they hold for it as it is, and never used for a run whose results
    changed after they were packed."""
    from alembic import command
    from alembic.config import Config

    import torchmark.store.store as store_module
    from torchmark.store import run_medians

    url = _store_at(tmp_path / "old.db", "0003")
    old = Store(url, upgrade=False)
    runs = [old.start_run(status="ok") for _ in range(2)]
    for run in runs:
        _add_as_written_then(old, run, [result(1), result(2)])
    config = Config()
    config.set_main_option("script_location",
                           str(Path(store_module.__file__).with_name("migrations")))
    with old.engine.begin() as conn:  # 0004 packs both runs
        config.attributes["connection"] = conn
        command.upgrade(config, "0006")
    _add_as_written_then(old, runs[1], [result(3)])  # by hand, after packing: the packed row no longer holds
    old.close()
    store = Store(url)
    with store.engine.connect() as conn:
        marks = dict(conn.execute(sa.select(schema.run_medians.c.run_id,
                                            schema.run_medians.c.result_writes)).all())
        assert marks == {runs[0]: 0, runs[1]: None}
        assert run_medians.from_packed(conn, run_medians.version(conn, runs[0]), {})
        assert run_medians.from_packed(conn, run_medians.version(conn, runs[1]), {}) is None
    assert len(store.run_medians(runs[1]).keys) == 3  # read from its results
    store.close()


def test_0008_gives_the_results_stored_before_their_quartiles(tmp_path):
    """0008 keeps each result's quartiles in columns: those of the results stored before
    it are computed from their samples, exactly as a writer computes them now (any
    number of samples; none for a failure), and a history's points read without the
    samples are those read with them."""
    from torchmark.core.result import quartiles
    from torchmark.regressions.history import load_series

    url = _store_at(tmp_path / "old.db", "0007")
    old = Store(url, upgrade=False)
    run = old.start_run(status="ok")
    made = [Result(case=Case(id=f"timeit:q{k}", frontend="timeit", stmt=f"q({k})"),
                   metric="wall", samples=tuple(1e-6 * (1 + ((7 * i) % k) / 3)
                                                for i in range(k)))
            for k in (1, 2, 3, 10, 13, 300)]
    made.append(Result(case=Case(id="timeit:failed", frontend="timeit", stmt="f()"),
                       metric="wall", failure=Failure("RuntimeError: no")))
    _add_as_written_then(old, run, made)  # as torchmark 0007 wrote them: no quartiles
    odd = Result(case=Case(id="timeit:odd", frontend="timeit", stmt="o()"), metric="wall",
                 samples=(1.0,))
    _add_as_written_then(old, run, [odd])
    with old.engine.begin() as conn:  # not as torchmark writes samples: no whole float64
        conn.execute(sa.text("UPDATE results SET samples = :bad WHERE case_id = 'timeit:odd'"),
                     {"bad": b"\0" * 5})
    old.close()
    store = Store(url)  # upgraded all the same
    with store.engine.connect() as conn:
        held = {row.case_id: (row.q1, row.q3) for row in conn.execute(
            sa.select(schema.results.c.case_id, schema.results.c.q1, schema.results.c.q3))}
        assert "results_case_points" in {i["name"] for i in
                                         sa.inspect(conn).get_indexes("results")}
    assert held.pop("timeit:odd") == (None, None)
    assert held == {r.case.id: quartiles(r.samples) or (None, None) for r in made}
    # a result recorded now: its quartiles as the migration computed the old ones
    store.record([dataclasses.replace(made[3], case=Case(id="timeit:new", frontend="timeit",
                                                          stmt="n()"))], run)
    rows, _ = store.series_rows(cases=["timeit:new"], samples=False)
    assert (rows[0].q1, rows[0].q3) == held["timeit:q10"] and rows[0].packed is None
    ids = sorted(held) + ["timeit:new"]
    with_samples = load_series(store, cases=ids)
    without = load_series(store, cases=ids, samples=False)
    assert [s.points for s in without] == [s.points for s in with_samples]
    assert all(s.samples is None for s in without) and len(without) == 7
    # a result written without quartiles (a torchmark before 0008 still running as the
    # store was upgraded): its band from its samples where they are read
    with store.engine.begin() as conn:
        conn.execute(schema.results.update().where(schema.results.c.case_id == "timeit:q10")
                     .values(q1=None, q3=None))
    [series] = load_series(store, cases=["timeit:q10"])
    assert (series.points[0].low, series.points[0].high) == held["timeit:q10"]
    # SQLite reads a case's points from the index alone, with statistics or without
    query = "SELECT id, case_id, metric, unit, median, n, NULL, run_id, q1, q3 FROM " \
            "results WHERE failure IS NULL AND median IS NOT NULL AND case_id IN (?)"
    with store.engine.connect() as conn:
        for analyzed in (False, True):
            if analyzed:
                conn.exec_driver_sql("ANALYZE")
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {query}", ("timeit:q3",)).all()
            assert "COVERING INDEX results_case_points" in str(plan), (analyzed, plan)
    store.close()


def test_an_upgrade_that_only_adds_to_a_sqlite_store_makes_no_copy(tmp_path, capsys):
    """0006 adds an index on PostgreSQL only and 0007 two columns: a SQLite store at 0005
    opens at the head without a copy of the whole file, and without saying so."""
    url = _store_at(tmp_path / "old.db", "0005")
    assert Store(url).schema_version() == HEAD
    assert not list(tmp_path.glob("*.bak")) and capsys.readouterr().err == ""


def _open(url: str) -> None:
    Store(url).close()


def test_four_processes_open_a_new_store_at_once(store_url):
    """One creates the schema; the others wait for it and find it done."""
    context = multiprocessing.get_context("spawn")
    openers = [context.Process(target=_open, args=(store_url,)) for _ in range(4)]
    run_together(openers)
    assert Store(store_url).schema_version() == HEAD


def test_user_code_records_a_timers_measurements_and_reads_a_table(store_url):
    """record() takes what the Timer returns (torch's Measurements too); table() gives
    columns a DataFrame takes as they are."""
    import torch.utils.benchmark as torch_benchmark

    from torchmark.store.store import TABLE_COLUMNS
    from torchmark.timing.timer_class import Timer

    ours = Timer("x + 1", "x = torch.ones(4)", label="add").blocked_autorange(
        min_run_time=0.05)
    theirs = torch_benchmark.Timer("x + 1", "x = torch.ones(4)", label="add",
                                   description="torch").blocked_autorange(min_run_time=0.05)
    store = Store(store_url)
    assert store.record([ours, theirs]) == 2
    table = store.table()
    assert len(table["median"]) == 2 and table["label"] == ["add", "add"]
    assert tuple(table) == TABLE_COLUMNS
    assert all(m > 0 for m in table["median"])
    store.close()


def test_an_imported_file_joins_the_machine_the_store_knows(tmp_path):
    """A results file's header names its machine without its memory size; imported on
    a store that knows that machine, its run is that machine's (one series, not two)."""
    import dataclasses
    import json

    from torchmark.core.provenance import Machine, Provenance

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    here = Provenance.capture()
    here = dataclasses.replace(here, machine=Machine(
        hostname="benchbox", cpu_model="AMD EPYC", cores=2, memory_bytes=8 << 30))
    store.record([result(1)], store.start_run(here))
    lines = (FORMATS / "ops_results.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["system"].update(host="benchbox", cpu="AMD EPYC", cpus=2)
    path = tmp_path / "ops.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert store.import_file(path) > 0
    assert {run["machine"] for run in store.runs()} == {here.machine_fingerprint}
    store.close()


def test_a_time_bound_is_the_store_s_utc_text_whatever_its_spelling(tmp_path, capsys):
    """A time with a fraction of a second and an offset is turned into UTC (it was kept
    as written, and compared as text with the store's UTC times); a time past what UTC
    can hold is a usage error (it was an OverflowError)."""
    from torchmark.core.errors import UsageError
    from torchmark.store.store import _utc, time_bound

    assert time_bound("2026-11-01T09:00:00.5+02:00") == "2026-11-01T07:00:00.500000Z"
    assert time_bound("2026-11-01T09:00:00") == "2026-11-01T09:00:00.000000Z"
    assert _utc("2026-11-29T19:00:51.611792+02:00") == "2026-11-29T17:00:51.611792Z"
    with pytest.raises(UsageError, match="beyond the times a store holds"):
        time_bound("9999-12-31T23:59:59-05:00")
    db = str(tmp_path / "s.db")
    Store(db).close()
    assert main(["runs", "--since", "9999-12-31T23:59:59-05:00", "--db", db]) == 2
    assert "beyond the times" in capsys.readouterr().err


def test_json_a_store_holds_is_read_whatever_parser_reads_it(store_url):
    """JSON columns are read by orjson, and what it refuses (an integer beyond 64 bits;
    on SQLite a NaN, which Python's json writes) by json: a row never breaks a page."""
    store = Store(store_url)
    run = store.start_run(status="ok")
    store.record([result(1), result(2)], run)
    odd = {"huge": 2**70, **({"odd": float("nan")} if store.dialect == "sqlite" else {})}
    with store.engine.begin() as conn:
        conn.execute(schema.results.update().where(schema.results.c.case_id == "timeit:case2")
                     .values(extra=odd))
    from torchmark.core.jsonl import loads

    assert store.engine.dialect._json_deserializer is loads  # orjson, with its fallback
    extras = {r.case.id: r.extra for r in store.result_records(run=run)}
    assert extras["timeit:case2"]["huge"] == 2**70
    if store.dialect == "sqlite":
        assert extras["timeit:case2"]["odd"] != extras["timeit:case2"]["odd"]  # NaN
    assert extras["timeit:case1"] == result(1).extra


def test_a_run_page_is_the_database_s_order_of_the_run_s_results(store_url):
    """run_results_page orders a run's keys in Python (its database sorted every result
    for each page): the pages, laid end to end, are the run's results in the order the
    database's ORDER BY label, sub-label, case id, metric gives (missing labels where
    that database puts NULL), each once."""
    store = Store(store_url)
    run = store.start_run(status="ok")
    results = [Result(case=Case(id=f"timeit:k{i:02d}", frontend="timeit", stmt=f"f({i})",
                                label=[None, "add", "mul", "add"][i % 4],
                                sub_label=[None, f"n={i % 5}"][i % 3 > 0]),
                      metric=metric, samples=(1e-6 * (1 + i),) * 3)
               for i in range(23) for metric in ("wall", "device")[:1 + (i % 2)]]
    store.record(results, run)
    res, c = schema.results, schema.cases
    with store.engine.connect() as conn:
        expected = [tuple(row) for row in conn.execute(
            sa.select(res.c.case_id, res.c.metric).join(c, c.c.id == res.c.case_id)
            .where(res.c.run_id == run)
            .order_by(c.c.label, c.c.sub_label, res.c.case_id, res.c.metric))]
    pages = [store.run_results_page(run, offset, 7) for offset in range(0, 42, 7)]
    assert {total for _, total in pages} == {len(results)}
    shown = [(row["case_id"], row["metric"]) for rows, _ in pages for row in rows]
    assert shown == expected and len(shown) == len(results)
    first = pages[0][0][0]
    assert set(first) >= {"case_id", "metric", "unit", "n", "median", "iqr", "label",
                          "sub_label", "frontend", "stmt", "threads", "failure"}


def test_a_few_cases_series_are_their_runs_rows_in_the_runs_order(store_url):
    """series_rows for a few cases reads their rows by the case index alone and orders
    them by their runs' start here: the same rows, in the same order, and the same runs,
    as the store-wide read (a join, ordered by the database) gives for those cases."""
    store = Store(store_url)
    a, b = (Result(case=Case(id=f"timeit:{name}", frontend="timeit", stmt=name),
                   metric="wall", samples=(1e-6 * k, 2e-6 * k, 3e-6 * k))
            for name, k in (("a", 1), ("b", 2)))
    failed = Result(case=a.case, metric="wall", failure=Failure("RuntimeError: x", ""))
    # run ids out of start order; b alone in the middle run; a failure left out
    for hour, recorded in ((5, [a]), (3, [b]), (1, [a, failed]), (4, [a, b])):
        run = store.start_run(dataclasses.replace(
            Provenance.capture(), started=f"2026-09-01T{hour:02d}:00:00+00:00"))
        store.record(recorded, run)
        store.finish_run(run, "ok")
    rows, runs = store.series_rows(cases=["timeit:a"])
    everything, all_runs = store.series_rows()
    assert rows == [row for row in everything if row.case_id == "timeit:a"]
    assert [runs[row.run_id].started[11:13] for row in rows] == ["01", "04", "05"]
    assert runs == {row.run_id: all_runs[row.run_id] for row in rows}
    assert store.series_rows(cases=["timeit:none"]) == ([], {})
    # a case in 2 runs 20 apart: its runs read by id, the same as in the store-wide read
    c = dataclasses.replace(a, case=Case(id="timeit:c", frontend="timeit", stmt="c"))
    for k in range(20):
        run = store.start_run(dataclasses.replace(
            Provenance.capture(), started=f"2026-09-02T{k:02d}:00:00+00:00"))
        store.record([c, b] if k in (0, 19) else [b], run)
        store.finish_run(run, "ok")
    rows, runs = store.series_rows(cases=["timeit:c"])
    everything, all_runs = store.series_rows()
    assert rows == [row for row in everything if row.case_id == "timeit:c"] and len(rows) == 2
    assert runs == {row.run_id: all_runs[row.run_id] for row in rows}
    store.close()


def test_a_postgresql_connection_the_server_closed_is_replaced(postgres, monkeypatch):
    """A pooled connection is pinged only after it sat idle (PING_AFTER_IDLE_S): one
    the server ended meanwhile is replaced, not handed to a page that then fails."""
    import torchmark.store.store as store_module

    store = Store(postgres.new_database())
    run = store.start_run(Provenance.capture())
    assert store.runs()[0]["id"] == run
    with store.engine.connect() as conn:  # the pool now holds this one connection
        mine = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    monkeypatch.setattr(store_module, "PING_AFTER_IDLE_S", 0.05)
    with sa.create_engine(postgres.url(), isolation_level="AUTOCOMMIT").connect() as admin:
        assert admin.exec_driver_sql(f"SELECT pg_terminate_backend({mine})").scalar()
    time.sleep(0.2)
    assert store.runs()[0]["id"] == run  # a new connection, after a failed ping
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != mine
    store.close()


def test_a_pages_reads_share_one_connection(store_url):
    """Within one_connection, a thread's reads check out one connection (a page's dozen
    reads took one each); writes take their own, and another thread is not pinned."""
    import threading

    store = Store(store_url)
    run = store.start_run(Provenance.capture())
    store.record([Result(case=Case(id="timeit:a", frontend="timeit", stmt="a"),
                         metric="wall", samples=(1.0, 1.1, 1.2))], run)
    checkouts = []
    sa.event.listen(store.engine, "checkout", lambda *_: checkouts.append(1))

    def reads() -> None:
        store.runs()
        store.case_titles()
        store.result_records(run=run)
        store.hostnames()

    reads()
    alone = len(checkouts)
    checkouts.clear()
    with store.one_connection():
        reads()
        with store.one_connection():  # nested: the outer one's
            reads()
        other = threading.Thread(target=reads)
        other.start()
        other.join()
    assert alone >= 4 and len(checkouts) == 1 + alone
    store.close()
