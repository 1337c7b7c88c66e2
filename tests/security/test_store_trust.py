"""A store a team can trust: what a security review found in import, export, the store's
writes, secrets, file writes, locks, workers and text leaving torchmark, each reproduced
and refused (issue 36)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.core.results_file import results_text
from torchmark.store import Store

pytest_plugins = ["pytester"]

CASE = Case(id="timeit:x", frontend="timeit", stmt="x * y", label="mul")


def cli(*args: str, cwd: str | None = None, env: dict | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmark", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, **(env or {})})


def results_file(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in
                            [{"schema": "torchmark.results", "version": 1}, *records]))
    return path


def good(**changes) -> dict:
    record = Result(case=CASE, metric="wall", samples=(1e-6, 1.1e-6, 1.2e-6, 1e-6, 1e-6),
                    provenance=Provenance.capture(command=["timeit"])).to_dict()
    for key, value in changes.items():
        target = record
        *path, last = key.split(".")
        for part in path:
            target = target[part]
        target[last] = value
    return record


# -- import: bounds before reading, all or nothing ---------------------------------------
def test_import_refuses_pipes_devices_and_missing_files_before_the_store_exists(tmp_path,
                                                                               capsys):
    db = tmp_path / "s.db"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    for path, message in ((fifo, "is a pipe, not a regular file"),
                          ("/dev/zero", "is a device, not a regular file"),
                          (tmp_path, "is a directory"),
                          (tmp_path / "nope.jsonl", "nope.jsonl: no such file")):
        assert main(["import", str(path), "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert time.monotonic() - started < 30  # nothing waited on the pipe
    assert not db.exists()  # the store is not created for a file it refuses
    big = tmp_path / "big.jsonl"
    results_file(big, [good()])
    assert main(["import", str(big), "--db", str(db), "--max-size", "100"]) == 2
    assert "larger than" in capsys.readouterr().err and not db.exists()


@pytest.mark.parametrize("change, message", [
    ({"samples": [1e-6, -1e-6]}, "a sample is zero or negative"),
    ({"samples": [0.0, 0.0]}, "a sample is zero or negative"),
    ({"case.threads": "many"}, "threads must be an int"),
    ({"number_per_run": 10 ** 30}, "number_per_run"),  # past 2**53 (a float to orjson)
    ({"unit": {"a": 1}}, "unit must be 's' for wall"),
    ({"provenance.started": "2099-01-01T00:00:00+0000"}, "is in the future"),
    ({"provenance.started": "junk"}, "started must be a date and time"),
    ({"samples": "x"}, "'samples' must be a list of finite numbers"),
])
def test_a_poisoned_record_is_refused_by_its_line_and_nothing_is_stored(tmp_path, capsys,
                                                                       change, message):
    db = f"sqlite:///{tmp_path / 's.db'}"
    path = results_file(tmp_path / "bad.jsonl", [good(), good(**change)])
    assert main(["import", str(path), "--db", db]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl: line 3: " in err and message in err, err
    store = Store(db)
    assert store.info()["runs"] == 0 and store.info()["results"] == 0
    store.close()
    results_file(path, [good()])  # mended: the file imports
    assert main(["import", str(path), "--db", db]) == 0
    assert main(["report", "-o", str(tmp_path / "r.html"), "--db", db]) == 0


def test_a_killed_import_leaves_nothing_and_the_file_imports_again(tmp_path):
    db = tmp_path / "s.db"
    base = Provenance.capture(command=["timeit"])
    lines = [results_text([])]
    for k in range(60):  # 60 runs of 1,000 results
        import dataclasses

        provenance = dataclasses.replace(base, started=f"2026-01-01T00:{k:02d}:00+0000")
        lines.append(results_text([Result(case=Case(id=f"timeit:{i}", frontend="timeit",
                                                    stmt=f"f({i})"),
                                          metric="wall", samples=(1e-6 * (1 + i % 7),) * 5,
                                          provenance=provenance)
                                   for i in range(1000)], header=False))
    path = tmp_path / "many.jsonl"
    path.write_text("".join(lines))
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", "import", str(path),
                             "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not db.exists():
        time.sleep(0.05)
    time.sleep(1.0)  # importing, inside its one transaction
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    store = Store(f"sqlite:///{db}")
    assert store.info()["results"] == 0 and store.info()["runs"] == 0
    assert store.import_file(path) == 60_000  # the file was never marked imported
    assert store.import_file(path) == 0
    store.close()


def test_export_then_import_gives_the_same_runs_results_and_samples(tmp_path, capsys):
    """Every front-end's output stored, exported, imported into an empty store: the same
    runs (start, machine, commit, env; how each ended, when, and its tags), cases,
    metrics and samples. A run still running when exported is interrupted once imported,
    and its process's claim is left behind."""
    import sqlalchemy as sa

    from torchmark.records import load_results
    from torchmark.store import schema

    db = f"sqlite:///{tmp_path / 'a.db'}"
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
    for path in sorted(fixtures.iterdir()):  # ops, replay, suite, measurements, counts
        assert main(["import", str(path), "--db", db]) == 0
    for env in ("cpu-a", "cpu-b"):
        assert main(["timeit", "x * 2", "-s", "x = torch.ones(8)", "--min-run-time", "0.02",
                     "--db", db, "--env", env]) == 0
    store = Store(db)
    [first, second] = [r["id"] for r in store.runs(env="cpu-a") + store.runs(env="cpu-b")]
    with store.engine.begin() as conn:  # one interrupted and resumed, one still running
        conn.execute(schema.runs.update().where(schema.runs.c.id == first).values(
            status="interrupted", tags={"resumed": [{"at": "2026-11-01T00:00:00Z"}]}))
        conn.execute(schema.runs.update().where(schema.runs.c.id == second).values(
            status="running", ended=None, tags={"process": {"host": "h", "pid": 1},
                                                "cluster_run": first}))
    store.close()
    assert main(["export", "-o", str(tmp_path / "all.jsonl"), "--db", db]) == 0
    copy = f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["import", str(tmp_path / "all.jsonl"), "--db", copy]) == 0
    capsys.readouterr()

    def content(url: str) -> tuple:
        store = Store(url)
        runs = sorted((r["started"], r["machine"], r["git_commit"], r["env"], r["results"],
                       r["ended"], {k: v for k, v in r["tags"].items()
                                    if k not in ("imported_from", "process", "cluster_run")},
                       "interrupted" if r["status"] == "running" else r["status"])
                      for r in store.runs() if r["results"])
        results = sorted((r.case.id, r.metric, r.samples, r.case.title)
                         for _, results in store.iter_runs_results() for r in results)
        store.close()
        return runs, results

    assert content(db) == content(copy) and len(content(db)[1]) > 10
    copied = {r["env"]: r for r in Store(copy).runs() if r["env"]}
    assert copied["cpu-a"]["status"] == "interrupted" and copied["cpu-a"]["tags"]["resumed"]
    assert copied["cpu-b"]["status"] == "interrupted"  # it runs nowhere now
    assert "process" not in copied["cpu-b"]["tags"]  # nor a run id of the other store:
    assert "cluster_run" not in copied["cpu-b"]["tags"]  # it names no run of this one
    with Store(copy).engine.connect() as conn:  # stated ends kept, as the store spells them
        ends = set(conn.execute(sa.select(schema.runs.c.ended)).scalars())
    assert ends and all(end is None or end.endswith("Z") for end in ends)
    # and importing the export into the store it came from adds nothing
    assert main(["import", str(tmp_path / "all.jsonl"), "--db", db]) == 0
    assert "0 results added" in capsys.readouterr().out
    assert load_results(tmp_path / "all.jsonl")  # any reader takes it


@pytest.mark.parametrize("state, message", [
    ({"status": "bogus"}, "run: status must be one of ok, failed, interrupted, got 'bogus'"),
    ({"status": "ok", "ended": "2999-01-01T00:00:00Z"}, "run: ended must be an ISO time no "
                                                         "later than now"),
    ({"status": "ok", "tags": ["x"]}, "run: tags must be an object"),
    ({"status": "ok", "tags": {"x": "y" * 70_000}}, "run: tags must be an object of finite "
                                                     "JSON values, at most"),
    ({"status": "ok", "tags": {"x": float("nan")}}, "run: tags must be an object of finite"),
    ({"status": "ok", "ended": "2001-01-01T00:00:00Z"}, "run: ended (2001-01-01T00:00:00Z) "
                                                         "is before the run started"),
])
def test_a_run_line_s_state_is_checked_before_anything_is_stored(tmp_path, capsys, state,
                                                                 message):
    from torchmark.core.results_file import RunState

    path = tmp_path / "state.jsonl"
    result = Result(case=Case(id="timeit:a", frontend="timeit", stmt="f()"), metric="wall",
                    samples=(1e-6,) * 3, provenance=Provenance.capture())
    path.write_text(results_text([result], run=RunState("ok")))
    lines = path.read_text().splitlines()
    run_line = json.loads(lines[1])
    run_line["run"] = state
    path.write_text("\n".join([lines[0], json.dumps(run_line), *lines[2:]]) + "\n")
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", str(path), "--db", db]) == 2
    err = capsys.readouterr().err
    assert f"line 2: {message}" in err and err.count("\n") == 1
    assert Store(db).info()["results"] == 0


def test_an_ops_file_recorded_live_imports_as_nothing(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 's.db'}"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.neg": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [[8, 64, 8]], "__range__": ["shape"]}]}]}]}}))
    assert main(["ops", "-c", str(config), "-o", str(tmp_path / "r"), "-i", "5", "-w", "1",
                 "--quiet", "--db", db]) == 0
    capsys.readouterr()
    assert main(["import", str(tmp_path / "r.jsonl"), "--db", db]) == 0
    assert "0 results added" in capsys.readouterr().out


# -- maintenance ------------------------------------------------------------------------
def test_runs_delete_prune_and_an_online_backup_with_its_write_ahead_log(tmp_path, capsys):
    db = tmp_path / "s.db"
    store = Store(f"sqlite:///{db}")
    for k in range(50):
        run = store.start_run(Provenance.capture(command=["timeit"]))
        store.record([Result(case=CASE, metric="wall", samples=(1e-6 * (k + 1),))], run)
        store.finish_run(run)
    assert Path(f"{db}-wal").exists()  # committed rows still in the write-ahead log
    assert main(["db", "backup", str(tmp_path / "copy.db"), "--db", str(db)]) == 0
    assert Store(f"sqlite:///{tmp_path / 'copy.db'}").info()["runs"] == 50
    assert main(["runs", "delete", "3", "run:4", "--db", str(db)]) == 2  # no terminal
    assert "confirm with --yes" in capsys.readouterr().err
    assert main(["runs", "delete", "3", "run:4", "--yes", "--db", str(db)]) == 0
    assert store.info()["runs"] == 48 and store.info()["results"] == 48
    assert main(["db", "prune", "--before", "2020-01-01", "--yes", "--db", str(db)]) == 0
    assert "no run" in capsys.readouterr().out
    assert main(["db", "prune", "--before", "2999-01-01", "--db", str(db)]) == 2  # asks
    assert main(["db", "prune", "--before", "2999-01-01", "--yes", "--db", str(db)]) == 0
    assert "48 run(s) removed" in capsys.readouterr().out and store.info()["results"] == 0
    store.close()


# -- secrets ----------------------------------------------------------------------------
@pytest.mark.parametrize("url, masked", [
    ("postgresql+psycopg://u:pw@h/db", "postgresql+psycopg://u:***@h/db"),
    ("postgresql://u@h/db?sslmode=require&PASSWORD=a%26b&x=1",
     "postgresql://u@h/db?sslmode=require&PASSWORD=***&x=1"),
    ("postgresql://u@h/db?pass%77ord=pw", "postgresql://u@h/db?pass%77ord=***"),  # decoded
    ("postgresql://u@h/db?sslpassword=k", "postgresql://u@h/db?sslpassword=***"),
    ("postgresql://u@h/db?application_name=passwords", "postgresql://u@h/db?"
                                                       "application_name=passwords")])
def test_url_passwords_are_masked_in_either_place(url, masked):
    from torchmark.core.secrets import mask

    assert mask(f"--db {url} and more") == f"--db {masked} and more"


@pytest.mark.parametrize("form", ["user", "query"])
def test_no_password_is_stored_or_printed(tmp_path, form):
    db = tmp_path / "s.db"
    secret = "Sup3rS3cret"
    url = f"postgresql+psycopg://bench:{secret}@127.0.0.1:1/bench" if form == "user" else \
        f"postgresql+psycopg://bench@127.0.0.1:1/bench?sslmode=disable&password={secret}"
    proc = cli("timeit", "x * 2", "-s", "x = torch.ones(8)", "--min-run-time", "0.02",
               "--db", url)
    assert secret not in proc.stdout + proc.stderr
    assert "not recorded in the store" in proc.stderr and "***" in proc.stderr
    proc = cli("db", "info", "--db", url)
    assert proc.returncode == 1 and secret not in proc.stdout + proc.stderr
    proc = cli("timeit", "x * 2", "-s", "x = torch.ones(8)", "--min-run-time", "0.02",
               "--db", str(db), "--label", url)
    store = Store(f"sqlite:///{db}")
    [run] = store.runs()
    assert secret not in json.dumps(run["command"]) and "***" in json.dumps(run["command"])
    assert secret not in json.dumps(store.result_records(run=run["id"])[0].provenance.to_dict())
    store.close()
    assert main(["runs", "--json", "--db", str(db)]) == 0
    store = Store(f"sqlite:///{db}")  # a resume's command line is kept masked too
    store.reopen_run(run["id"], ["torchmark", "ops", "--resume-run", "1", "--db", url])
    [resumed] = store.runs()[0]["tags"]["resumed"]
    assert secret not in json.dumps(resumed) and "***" in json.dumps(resumed)
    store.close()


def test_ray_workers_do_not_get_the_store_url():
    from torchmark.executors.node import measurement_settings

    settings = measurement_settings({"TORCHMARK_DB": "postgresql://u:pw@h/db",
                                     "TORCH_HOME": "/x", "OMP_NUM_THREADS": "1"})
    assert "TORCHMARK_DB" not in settings and settings["OMP_NUM_THREADS"] == "1"


# -- file writes and locks --------------------------------------------------------------
def test_a_planted_link_never_redirects_a_write(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    db = f"sqlite:///{tmp_path / 's.db'}"
    Store(db).close()
    for name in (".out.html.partial", f".out.html.{os.getpid()}.tmp"):
        (tmp_path / name).symlink_to(victim)
    assert main(["report", "-o", str(tmp_path / "out.html"), "--db", db]) == 0
    assert victim.read_text() == "keep me" and (tmp_path / "out.html").stat().st_size > 0
    # a results file: saved whole, never through the link planted at a lock's name
    (tmp_path / ".r.json.lock").symlink_to(victim)
    proc = cli("timeit", "x * 2", "-s", "x = torch.ones(8)", "--min-run-time", "0.02",
               "--save", str(tmp_path / "r.json"), "--no-store")
    assert proc.returncode == 2 and "a symbolic link" in proc.stderr
    assert proc.stderr.count("\n") == 1 and victim.read_text() == "keep me"


def test_lock_files_go_with_their_holder(tmp_path):
    out = tmp_path / "r.json"
    assert main(["timeit", "x * 2", "-s", "x = torch.ones(8)", "--min-run-time", "0.02",
                 "--save", str(out), "--no-store"]) == 0
    assert out.exists() and not list(tmp_path.glob(".*.lock"))


# -- workers never import from the current folder ---------------------------------------
def test_a_torch_py_planted_in_the_folder_is_never_imported(tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "torch.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n"
                                       "raise SystemExit('planted torch.py imported')\n")
    command = Path(sys.executable).with_name("torchmark")  # the installed command
    proc = subprocess.run([str(command), "timeit", "sum(range(10))", "--processes", "2",
                           "--min-run-time", "0.05", "--no-store"], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


# -- text leaving torchmark -------------------------------------------------------------
def test_names_are_neutralised_for_terminals_csv_and_markdown(tmp_path, capsys):
    from torchmark.core.neutralise import csv_cell, markdown_text, terminal_text

    evil = "\x1b]0;pwned\x07\x1b]52;c;Y3VybA==\x07"
    assert "\x1b" not in terminal_text(evil) and "\\x1b" in terminal_text(evil)
    assert csv_cell("=HYPERLINK(\"http://x\")") == "'=HYPERLINK(\"http://x\")"
    assert csv_cell("@cmd") == "'@cmd" and csv_cell(3.5) == 3.5
    md = markdown_text("<img src=x onerror=alert(1)> @everyone | x")
    assert "<img" not in md and "@everyone" not in md and "\\|" in md
    db = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(db)
    case = Case(id="timeit:evil", frontend="timeit", stmt="f()", label=evil + "=cmd")
    for scale in (1.0, 1.0):
        run = store.start_run(Provenance.capture(command=["timeit"]))
        store.record([Result(case=case, metric="wall",
                             samples=tuple(scale * 1e-6 * (1 + k / 100) for k in range(9)))],
                     run)
        store.finish_run(run)
    store.close()
    for argv in (["runs"], ["show", "1"], ["gate", "--baseline", "1", "--candidate", "2"],
                 ["history", "timeit:evil"]):
        main([*argv, "--db", db])
        out = capsys.readouterr()
        assert "\x1b]" not in out.out + out.err, argv
    md = tmp_path / "gate.md"
    main(["gate", "--baseline", "1", "--candidate", "2", "--db", db, "--max-slowdown", "0",
          "--markdown", str(md)])


# -- smaller holes ----------------------------------------------------------------------
def test_an_empty_or_device_db_is_refused_and_leaves_nothing(tmp_path, capsys):
    assert main(["runs", "--db", ""]) == 2
    assert "--db: an empty URL" in capsys.readouterr().err
    before = set(os.listdir("/dev"))
    main(["timeit", "pass", "--min-run-time", "0.01", "--db", "/dev/null"])
    capsys.readouterr()
    assert set(os.listdir("/dev")) <= before  # no lock or journal beside /dev/null


def test_a_baseline_file_with_a_bad_record_stops_pytest_with_one_line(tmp_path, pytester):
    baseline = results_file(tmp_path / "base.jsonl", [good(**{"case.threads": "many"})])
    pytester.makepyfile(test_x="def test_x(torchmark):\n    torchmark(sum, [1, 2])\n")
    out = pytester.runpytest_subprocess(f"--torchmark-baseline={baseline}",
                                        "--torchmark-no-store")
    assert out.ret == 4  # a usage error, before any test
    text = out.stderr.str() + out.stdout.str()
    assert "threads must be an int" in text and "Traceback" not in text


def test_replay_of_a_missing_trace_records_nothing(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["replay", str(tmp_path / "nope.json"), "--db", db]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists() or Store(db).info()["runs"] == 0
