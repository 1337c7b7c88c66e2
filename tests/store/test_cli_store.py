"""The commands record into the store as they go, and the store commands read it back."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from torchmark.cli.main import main
from torchmark.store import Store, schema
from torchmark.store.store import HEAD

from conftest import deliverable_sigint, exit_of

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def test_timeit_records_and_the_store_commands_read_it(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    args = ["timeit", "x * y", "-s", "x = torch.ones(8); y = torch.ones(8)",
            "--min-run-time", "0.02", "--label", "mul", "--db", db]
    assert main(args) == 0 and main(args) == 0
    assert main([*args, "--no-store"]) == 0  # not recorded
    capsys.readouterr()
    assert main(["runs", "--db", db, "--json"]) == 0
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(runs) == 2 and {r["status"] for r in runs} == {"ok"}
    assert all(r["results"] == 1 and r["command"][1] == "timeit" for r in runs)
    assert main(["show", str(runs[0]["id"]), "--db", db]) == 0
    assert "x * y" in capsys.readouterr().out
    case = Store(db).results()[0]["case_id"]
    assert main(["history", case, "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{case} [wall]") and out.count(" us ") == 2
    assert main(["history", "mul*", "--glob", "--db", db]) == 0  # a pattern of names
    assert capsys.readouterr().out == out
    assert main(["show", f"run:{runs[0]['id']}", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("[--")  # labelled: "mul"'s title bar
    assert main(["show", "latest", "--db", db, "--format", "json"]) == 0  # the newest run
    assert {json.loads(line)["run_id"] for line in capsys.readouterr().out.splitlines()} \
        == {runs[0]["id"]} and runs[0]["id"] == max(r["id"] for r in runs)
    assert main(["timeit", "x + 1", "-s", "x = 2", "--min-run-time", "0.02", "--db", db]) == 0
    capsys.readouterr()
    assert main(["show", "latest", "--db", db]) == 0  # no label: the run's title, not none
    title = capsys.readouterr().out.splitlines()[0]
    assert title.startswith("[--") and title.split()[1:3] == ["run", str(runs[0]["id"] + 1)]
    assert main(["db", "info", "--db", db, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["runs"], info["results"], info["schema"]) == (3, 3, HEAD)


def test_a_timeit_whose_statement_raises_stores_why(tmp_path, capsys):
    db = str(tmp_path / "raises.db")
    assert main(["timeit", "1 / 0", "--min-run-time", "0.01", "--label", "div",
                 "--db", db]) == 1
    assert "ZeroDivisionError" in capsys.readouterr().err
    store = Store(db)
    [run] = store.runs()
    [row] = store.results(run=run["id"])
    assert run["status"] == "failed" and "ZeroDivisionError" in row["failure"]


def test_import_is_idempotent_from_the_command_line(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    files = [str(p) for p in sorted(FORMATS.iterdir())]
    assert main(["import", *files, "--db", db]) == 0
    first = capsys.readouterr().out
    assert main(["import", *files, "--db", db]) == 0
    # 15 results in the files, 2 of them the same measurement in two formats: stored once
    assert "0 results added" in capsys.readouterr().out and "13 results added" in first


def test_an_interrupted_ops_run_keeps_its_finished_cases(tmp_path):
    db = tmp_path / "s.db"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [[8, 8 * 200, 8]], "__range__": ["shape"]},
        {"type": "tensor", "shape": [1]}]}]}]}}))
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", "ops", "-c", str(config),
                             "-o", str(tmp_path / "r"), "-i", "2000", "-w", "1", "--quiet",
                             "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=deliverable_sigint,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if db.exists():
            try:
                if Store(str(db)).info()["results"] >= 3:
                    break
            except Exception:  # the schema being made
                continue
    proc.send_signal(signal.SIGINT)
    _, err = exit_of(proc, timeout=60)
    assert proc.returncode == 130
    assert b"run 1 keeps the results it finished; the same command with --resume-run 1 " \
        b"runs the rest\n" in err
    store = Store(str(db))
    [run] = store.runs()
    assert run["status"] == "interrupted"
    recorded = {r["case_id"].split("@")[0] for r in store.results()}
    from torchmark.ops.results_file import read_records

    in_file = {x["id"] for x in read_records(tmp_path / "r.jsonl")}
    # the file and the store agree, but for the case a Ctrl-C may catch between writing
    # its line and recording it (--resume from the file runs it again)
    assert 3 <= len(recorded) < 200 and recorded <= in_file
    assert len(in_file - recorded) <= 1
    # resumed from the store: the rest is recorded into the same run, no case twice
    store.close()
    assert main(["ops", "-c", str(config), "-o", str(tmp_path / "rest"), "-i", "2000",
                 "-w", "1", "--quiet", "--db", str(db), "--resume-run", "1"]) == 0
    store = Store(str(db))
    [run] = store.runs()
    cases = [r["case_id"] for r in store.results()]
    assert run["status"] == "ok" and len(cases) == len(set(cases)) == 200
    [resumed] = run["tags"]["resumed"]  # when and by which command line, kept with the run
    assert resumed["command"][:2] == ["torchmark", "ops"] and "--resume-run" in \
        resumed["command"] and resumed["at"] > run["started"]
    from torchmark.report.views import run_view

    assert run_view(store, 1)["run"]["resumed"] == [
        {"at": resumed["at"], "command": " ".join(resumed["command"])}]
    # the resumed run's file holds the whole run: the cases stored before the interrupt
    # too, each once
    rest = [x["id"] for x in read_records(tmp_path / "rest.jsonl")]
    assert len(rest) == len(set(rest)) == 200
    footer = json.loads((tmp_path / "rest.jsonl").read_text().splitlines()[-1])
    assert (footer["ok"], footer["skipped"], footer["complete"], footer["not_run"]) == \
        (200, 0, True, 0)  # the cases carried over are records of the file, not skipped


def test_compare_ab_and_export_read_runs_of_the_store(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    for size in (8, 8):
        assert main(["timeit", "x * y", "-s", f"x = torch.ones({size}); y = x.clone()",
                     "--min-run-time", "0.05", "--label", "mul", "--db", db]) == 0
    capsys.readouterr()
    assert main(["compare", "run:1", "2", "--db", db, "--no-color"]) == 0
    table = capsys.readouterr().out
    assert "run 1" in table and "run 2" in table  # a column a run
    assert main(["ab", "run:1", "run:2", "--db", db]) == 0
    assert "candidate: run:2" in capsys.readouterr().out
    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"all.{fmt}"
        assert main(["export", "--format", fmt, "-o", str(out), "--db", db]) == 0
        assert "2 results ->" in capsys.readouterr().out
    missing = tmp_path / "no" / "such" / "all.jsonl"  # named as given, not its temporary
    assert main(["export", "-o", str(missing), "--db", db]) == 2
    assert capsys.readouterr().err == (f"torchmark: error: cannot write {missing}: no such "
                                       f"file or directory ({missing.parent})\n")
    lines = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert lines[0] == {"schema": "torchmark.results", "version": 1}  # a results file
    # each run's line holds its provenance once, its results follow it
    assert [line["schema"].split(".")[1] for line in lines[1:]] == ["run", "result"] * 2
    rows = [line for line in lines if line["schema"] == "torchmark.result"]
    assert len(rows) == 2 and len(rows[0]["samples"]) == rows[0]["summary"]["n"] > 0
    assert lines[1]["provenance"]["command"][1] == "timeit"
    header = (tmp_path / "all.csv").read_text().splitlines()[0]
    assert header.startswith("title,run_id,started,case_id")
    assert main(["compare", "run:9", "--db", db]) == 2
    assert "'run:9': the store at" in capsys.readouterr().err
    # runs labelled before and after (two fields differ: the env and the run) still pair
    for env in ("before", "after"):
        assert main(["timeit", "x * y", "-s", "x = torch.ones(8); y = x.clone()",
                     "--min-run-time", "0.05", "--label", "mul", "--env", env,
                     "--db", db]) == 0
    capsys.readouterr()
    assert main(["compare", "run:3", "run:4", "--db", db, "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "run 3 (before)" in out and "run 4 (after)" in out
    assert "no cases in common" not in out and "only in the baseline" not in out
    # the sides `gate` reads: latest, env:LABEL, commit:SHA (its runs pooled)
    assert main(["compare", "env:before", "latest", "--db", db, "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "env:before (run 3)" in out and "latest (run 4) (after)" in out
    assert "baseline: env:before (run 3" in out and "candidate: latest (run 4" in out
    assert main(["ab", "env:before", "env:after", "--db", db]) == 0
    assert "candidate: env:after" in capsys.readouterr().out
    store = Store(db)
    with store.engine.begin() as conn:  # runs 2 and 3 made at one commit, run 4 at another
        for run, commit in ((2, "ab" * 20), (3, "ab" * 20), (4, "cd" * 20)):
            conn.execute(sa.update(schema.runs).where(schema.runs.c.id == run)
                         .values(git_commit=commit))
    assert main(["compare", "commit:abab", "commit:cdcd", "--db", db, "--no-color",
                 "--allow-env-diff"]) == 0
    out = capsys.readouterr().out
    assert "commit:abab (runs 3, 2)" in out and "2 runs of the commit pooled" in out
    assert main(["compare", "commit:ffff", "1", "--db", db]) == 2
    assert "'commit:ffff': the store at" in capsys.readouterr().err


def test_import_offers_exactly_the_formats_there_are_readers_of():
    from torchmark.cli.import_cmd import FORMAT_NAMES
    from torchmark.store.formats import FORMATS

    assert FORMAT_NAMES == tuple(FORMATS)  # kept apart so `import --help` loads no reader


def test_ab_and_compare_pair_the_sides_of_runs_by_their_env_label(tmp_path, capsys):
    """A side of the store takes its runs' env label as its tag, whatever its results'
    own env (an ops result has none): `ab`, `compare` and `gate` pair the same cases,
    for env:LABEL sides and for a commit's runs of several labels, pooled."""
    import dataclasses

    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result

    db = str(tmp_path / "s.db")
    store = Store(db)
    rng = np.random.default_rng(0)
    for env, commit in (("machA", "ab" * 20), ("machB", "ab" * 20), ("machB", "cd" * 20)):
        run = store.start_run(dataclasses.replace(Provenance.capture(env=env),
                                                  git_commit=commit))
        store.record([Result(case=Case(id=f"{frontend}:x", frontend=frontend, stmt="x + y",
                                       label=frontend, env=case_env),
                             metric="wall", unit="s", number_per_run=10,
                             samples=tuple(1e-6 * (1 + 0.01 * rng.standard_normal(20))))
                      for frontend, case_env in (("ops", None), ("timeit", env))], run)
        store.finish_run(run, "ok")
    store.close()
    def counts(out: str) -> str:  # the verdicts' count line
        [line] = [x for x in out.splitlines()
                  if re.fullmatch(r"\d+ \w+(, \d+ \w+)*", x)]
        return line

    for a, b in (("env:machA", "env:machB"), ("commit:abab", "commit:cdcd"),
                 ("env:machA", "run:3")):
        said = []
        for argv in (["gate", "--baseline", a, "--candidate", b, "--max-slowdown", "1%"],
                     ["compare", a, b, "--threshold", "1%"],
                     ["ab", a, b, "--min-effect", "1%"]):
            assert main([*argv, "--db", db, "--allow-env-diff"]) == 0
            said.append(counts(capsys.readouterr().out))
        assert said[0] == said[1] == said[2] and sum(  # each case paired, one verdict
            int(n) for n in re.findall(r"\d+", said[0])) == 2, said


def test_ops_labels_its_run_with_env(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [8]}, {"type": "tensor", "shape": [8]}]}]}]}}))
    db = str(tmp_path / "s.db")
    for env in ("before", "after"):
        assert main(["ops", "-c", str(config), "-o", str(tmp_path / env), "-i", "5", "-w",
                     "1", "--quiet", "--env", env, "--db", db]) == 0
    assert [run["env"] for run in Store(db).runs()] == ["after", "before"]
    assert main(["runs", "--db", db]) == 0
    assert f"ops -c {config} -o {tmp_path / 'after'}"[:40] in capsys.readouterr().out


def test_sides_of_the_store_in_compare_are_read_as_gate_reads_them(tmp_path, capsys):
    """A mistyped --db is refused, not made; an env label may hold a "/"; a side whose
    cases all failed is named, with where its failures are judged."""
    import dataclasses

    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Failure, Result

    assert main(["compare", "latest", "1", "--db", str(tmp_path / "typo.db")]) == 2
    assert "no store at" in capsys.readouterr().err and not (tmp_path / "typo.db").exists()
    db = str(tmp_path / "s.db")
    store = Store(db)
    case = Case(id="timeit:x", frontend="timeit", stmt="x + y", label="add")
    for env, failed in (("torch2.5/cu121", False), ("torch2.6/cu124", False),
                        ("broken", True)):
        run = store.start_run(dataclasses.replace(Provenance.capture(env=env)))
        store.record([Result(case=case, metric="wall", unit="s", failure=Failure("boom"))
                      if failed else Result(case=case, metric="wall", unit="s",
                                            number_per_run=10, samples=(1e-6,) * 10)], run)
        store.finish_run(run, "ok")
    store.close()
    assert main(["compare", "env:torch2.5/cu121", "env:torch2.6/cu124", "--db", db,
                 "--no-color"]) == 0
    assert "1 same" in capsys.readouterr().out
    # a side whose case failed: its verdict says so, as gate's does
    assert main(["compare", "1", "env:broken", "--db", db]) == 0
    assert "failed" in capsys.readouterr().out.splitlines()[-1]


def test_the_runs_table_drops_only_torchmark_s_own_name():
    from torchmark.cli.runs_cmd import _command

    assert _command(["torchmark", "timeit", "x + 1"]) == "timeit 'x + 1'"
    assert _command(["pytest", "-q", "tests"]) == "pytest -q tests"
    assert _command(None) == ""


def test_a_resumed_ops_run_measures_again_a_record_whose_backward_failed(tmp_path, capsys):
    """argmax's forward is measured and its backward fails (its output has no gradient):
    --resume-run measures the record again, both passes, and the run holds each pass
    once; a record that passed is not measured again."""
    db, config = str(tmp_path / "s.db"), tmp_path / "c.json"
    config.write_text(json.dumps({op: {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [16, 16]}]}]}]} for op in ("torch.sin", "torch.argmax")}))
    options = ["ops", "-c", str(config), "-i", "20", "-w", "1", "--quiet", "--backward",
               "--db", db]
    assert main([*options, "-o", str(tmp_path / "first")]) == 1
    store = Store(db)

    def rows() -> dict[str, tuple[int, bool]]:
        found = {}
        for row in store.results():
            place = row["case_id"].split("|")[0] + "#" + row["case_id"].split("#")[-1]
            assert place not in found  # each pass held once
            found[place] = (row["id"], row["failure"] is None)
        return found

    before = rows()
    first = {r.case.id.split("|")[0] + "#" + r.case.id.split("#")[-1]: r.samples
             for r in store.result_records(run=1)}
    assert {place: ok for place, (_, ok) in before.items()} == {
        "torch.sin#forward": True, "torch.sin#backward": True,
        "torch.argmax#forward": True, "torch.argmax#backward": False}
    capsys.readouterr()
    assert main([*options, "-o", str(tmp_path / "rest"), "--resume-run", "1"]) == 1
    out, err = capsys.readouterr()
    assert "1 ok, 1 failed" in out  # the whole run: sin carried over
    assert "failed torch.argmax" in err and "torch.sin" not in err  # argmax measured again
    assert rows().keys() == before.keys()  # each pass held once
    samples = {r.case.id.split("|")[0] + "#" + r.case.id.split("#")[-1]: r.samples
               for r in store.result_records(run=1)}
    assert samples["torch.sin#forward"] == first["torch.sin#forward"]  # kept as it was


def test_a_run_measured_in_child_processes_records_torch_s_build(tmp_path):
    """`timeit --vs` measures in child processes; its run's fingerprint still holds
    torch's build and thread settings (they are read from an imported torch only, and
    the command had not imported it)."""
    db = str(tmp_path / "s.db")
    done = subprocess.run([sys.executable, "-m", "torchmark", "timeit", "-s", "x = 1",
                           "x + 1", "--vs", "x + 2", "--min-run-time", "0.01", "--db", db],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    store = Store(db)
    provenance = store.run_provenance(store.runs()[0]["id"])
    store.close()
    import torch

    assert provenance["torch_git"] == torch.version.git_version
    assert provenance["environment"]["torch.version"] == torch.__version__
    assert "threads.intra_op" in provenance["environment"]
