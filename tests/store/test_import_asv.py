"""`torchmark import --from asv`: a results folder the real asv wrote (two commits, one
with --record-samples), its machine folder and one result file, into a store."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.core.result import Stated
from torchmark.store import Store
from torchmark.store.formats import FORMATS, asv

BENCHMARKS = '''
from asv_runner.benchmarks.mark import SkipNotImplemented


class Sum:
    params = ([10, 1000], ["list", "range"])
    param_names = ["n", "kind"]

    def time_sum(self, n, kind):
        if n == 1000 and kind == "list":
            raise SkipNotImplemented  # asv writes NaN
        sum(range(n))


def peakmem_list():
    [0] * 100_000


def mem_list():
    return [0] * 1000


def track_answer():
    return 42


def time_fails():
    raise ValueError("fails")  # asv writes null
'''
CONFIG = {"version": 1, "project": "pkg", "repo": ".", "branches": ["master"],
          "environment_type": "existing", "benchmark_dir": "benchmarks",
          "env_dir": "env", "results_dir": "results", "html_dir": "html"}
# imported: 3 combinations of time_sum (the 4th skipped), mem_list, peakmem_list
IMPORTED = {"bench.Sum.time_sum(10, 'list')", "bench.Sum.time_sum(10, 'range')",
            "bench.Sum.time_sum(1000, 'range')", "bench.mem_list", "bench.peakmem_list"}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """asv's results folder after two commits were run: the first with its raw samples
    (--record-samples), the second with its statistics only."""
    root = tmp_path_factory.mktemp("asv")
    project = root / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "benchmarks").mkdir()
    (project / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (project / "benchmarks" / "__init__.py").write_text("")
    (project / "benchmarks" / "bench.py").write_text(BENCHMARKS)
    (project / "asv.conf.json").write_text(json.dumps(CONFIG))
    env = {**os.environ, "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # ~/.asv-machine.json lands in root

    def run(*args: str) -> str:
        return subprocess.run(args, cwd=project, env=env, check=True, text=True,
                              capture_output=True).stdout

    def asv_run(*options: str) -> None:
        commit = run("git", "rev-parse", "HEAD").strip()
        done = subprocess.run([sys.executable, "-m", "asv", "run", "--python=same",
                               f"--set-commit-hash={commit}", "-a", "repeat=3", "-a",
                               "number=1", "-a", "warmup_time=0", *options], cwd=project,
                              env=env, text=True, capture_output=True, timeout=120)
        assert done.returncode == 2, done.stdout[-2000:]  # 2: time_fails failed

    run("git", "init", "-q", "-b", "master")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "one")
    run(sys.executable, "-m", "asv", "machine", "--yes")  # this machine, as asv sees it
    asv_run("--record-samples")
    (project / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    run("git", "commit", "-qam", "two")
    asv_run()
    assert len(list(machine_folder(project / "results").glob("*-*.json"))) == 2
    return project / "results"


def machine_folder(results: Path) -> Path:
    [folder] = [p for p in results.iterdir() if p.is_dir()]
    return folder


def asv_files(results: Path) -> list[dict]:
    """asv's result files, oldest first."""
    documents = [json.loads(p.read_text())
                 for p in machine_folder(results).glob("*-*.json")]
    return sorted(documents, key=lambda d: min(row[d["result_columns"].index("started_at")]
                                               for row in d["results"].values()))


def stored(db: str) -> int:
    return Store(db).info()["results"] if Path(db).exists() else 0


def test_a_results_folder_imports_a_run_a_commit_as_asv_wrote_them(results, tmp_path,
                                                                   capsys):
    db = str(tmp_path / "s.db")
    assert asv.detect(results, None) and asv.detect(machine_folder(results), None)
    assert main(["import", str(results), "--from", "asv", "--db", db]) == 0
    assert "10 results added" in capsys.readouterr().out
    records = Store(db).result_records()
    documents = asv_files(results)
    runs = sorted({r.provenance.git_commit: r.provenance for r in records}.values(),
                  key=lambda p: p.started)
    assert [p.git_commit for p in runs] == [d["commit_hash"] for d in documents]
    for provenance, document in zip(runs, documents, strict=True):
        machine = document["params"]  # machine.json's, as `asv machine --yes` found them
        assert (provenance.machine.hostname, provenance.machine.cpu_model,
                provenance.machine.cores, provenance.machine.memory_bytes) \
            == (machine["machine"], machine["cpu"] or "unknown", int(machine["num_cpu"]),
                int(machine["ram"]))
        assert provenance.env == document["env_name"]
        system, kernel = machine["os"].split(" ", 1)
        assert provenance.fingerprint == {key: value for key, value in {
            "cpu.model": machine["cpu"], "cpu.threads": int(machine["num_cpu"]),
            "cpu.arch": machine["arch"], "memory.bytes": int(machine["ram"]),
            "os.system": system, "os.kernel": kernel, "asv.env": document["env_name"]}
            .items() if value}
    for number, document in enumerate(documents):
        mine = [r for r in records if r.provenance.git_commit == document["commit_hash"]]
        assert {r.case.title for r in mine} == IMPORTED
        column = {name: i for i, name in enumerate(document["result_columns"])}
        for result in mine:
            row = document["results"][result.case.stmt]
            if result.case.stmt != "bench.Sum.time_sum":
                assert (result.metric, result.samples) == ("memory",
                                                           (row[column["result"]][0],))
                assert result.extra["asv_type"] in ("memory", "peakmemory")
                assert "not bytes torch allocated" in result.extra["measures"]
                # an RSS reading moves from run to run: stated, not an exact count
                assert (Stated.of(result) is not None) == \
                    (result.extra["asv_type"] == "peakmemory")
                continue
            assert result.metric == "wall" and list(result.case.params) == ["n", "kind"]
            i = [(n, kind) for n in row[column["params"]][0]  # asv's combinations, in order
                 for kind in row[column["params"]][1]].index(tuple(result.case.params.values()))
            if number == 0:  # --record-samples: asv's samples, its result their median
                samples = row[column["samples"]][i]
                assert result.samples == tuple(samples) and Stated.of(result) is None
                assert math.isclose(result.summary.median, row[column["result"]][i])
            else:  # asv's statistics
                q25, q75 = row[column["stats_q_25"]][i], row[column["stats_q_75"]][i]
                assert Stated.of(result) == Stated(row[column["stats_repeat"]][i],
                                                   row[column["result"]][i], None,
                                                   row[column["result"]][i], q75 - q25)
    skipped = documents[0]["results"]["bench.Sum.time_sum"][0][2]
    assert math.isnan(skipped) and documents[0]["results"]["bench.time_fails"][0] is None
    assert "bench.track_answer" in documents[0]["results"]  # and left out

    assert main(["import", str(results), "--from", "asv", "--db", db]) == 0
    assert "0 results added" in capsys.readouterr().out
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db]) in (0, 1)
    capsys.readouterr()
    main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db,
          "--metric", "memory", "--allow-unmeasured"])
    rows: dict[str, str] = {}
    for line in capsys.readouterr().out.splitlines():  # the table's rows, then reasons
        if line.startswith("bench."):
            rows.setdefault(line.split()[0], line)
    assert rows["bench.peakmem_list"].endswith("unmeasured")  # one RSS reading a side
    assert "exact" in rows["bench.mem_list"]
    assert main(["regressions", "--db", db]) in (0, 1)


def test_a_machine_folder_and_a_result_file_import_alone(results, tmp_path, capsys):
    db = str(tmp_path / "s.db")
    machine = machine_folder(results)
    newest = max(machine.glob("*-*.json"), key=lambda p: p.stat().st_mtime)
    assert asv.detect(newest, json.loads(newest.read_text()))
    assert not asv.detect(results / "benchmarks.json",
                          json.loads((results / "benchmarks.json").read_text()))
    folder_db = str(tmp_path / "folder.db")
    assert main(["import", str(machine), "--from", "asv", "--db", folder_db]) == 0
    assert main(["import", str(newest), "--from", "asv", "--db", db]) == 0
    assert (stored(folder_db), stored(db)) == (10, 5)
    assert main(["import", str(newest), "--from", "asv", "--db", folder_db]) == 0
    assert "0 results added" in capsys.readouterr().out  # the folder held them
    if all(importlib.util.find_spec(module) for module in FORMATS.values()):
        detected = str(tmp_path / "detected.db")
        assert main(["import", str(results), "--db", detected]) == 0  # format detected
        assert stored(detected) == 10


def test_a_machine_a_person_described_is_read_as_written(results, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    for file in machine_folder(copy).glob("*-*.json"):
        document = json.loads(file.read_text())
        document["params"].update(machine="box", cpu="Test CPU", num_cpu="4", ram="16GB",
                                  os="Linux 6.1.0", arch="x86_64")
        file.write_text(json.dumps(document))
    provenance = next(asv.read(copy)).provenance
    assert (provenance.machine.hostname, provenance.machine.memory_bytes) == \
        ("box", 16 * 2**30)
    assert {k: v for k, v in provenance.fingerprint.items() if k != "asv.env"} == {
        "cpu.model": "Test CPU", "cpu.threads": 4, "cpu.arch": "x86_64",
        "memory.bytes": 16 * 2**30, "os.system": "Linux", "os.kernel": "6.1.0"}


def broken_copies(results: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Malformed copies of the results folder, and a result file without benchmarks.json
    above it: name -> (the path to import, what the refusal says)."""
    copies = {}
    for name in ("types", "counts", "truncated", "no_benchmarks"):
        copies[name] = tmp_path / name
        shutil.copytree(results, copies[name])

    def set_result(name: str, benchmark: str, values: list) -> None:
        file = next(machine_folder(copies[name]).glob("*-*.json"))
        document = json.loads(file.read_text())
        document["results"][benchmark][0] = values  # the result column
        file.write_text(json.dumps(document))

    set_result("types", "bench.mem_list", ["8k"])
    set_result("counts", "bench.Sum.time_sum", [1e-6, 1e-6, 1e-6])
    file = next(machine_folder(copies["truncated"]).glob("*-*.json"))
    file.write_text(file.read_text()[:200])
    (copies["no_benchmarks"] / "benchmarks.json").unlink()
    lone = tmp_path / "lone" / "box" / file.name  # no benchmarks.json above it
    lone.parent.mkdir(parents=True)
    shutil.copy(next(machine_folder(results).glob("*-*.json")), lone)
    return {"types": (copies["types"], "['bench.mem_list'][0].result must be a number"),
            "counts": (copies["counts"], "3 results for 4 parameter combinations"),
            "truncated": (copies["truncated"], "not a asv JSON file"),
            "no_benchmarks": (copies["no_benchmarks"], "no benchmarks.json at"),
            "single_file": (lone, "no benchmarks.json at")}


def test_malformed_results_are_refused_in_one_line_and_nothing_is_stored(results, tmp_path,
                                                                        capsys):
    for name, (path, problem) in broken_copies(results, tmp_path).items():
        db = str(tmp_path / f"{name}.db")
        assert main(["import", str(path), "--from", "asv", "--db", db]) == 2, name
        err = capsys.readouterr().err.strip()
        assert problem in err and len(err.splitlines()) == 1, (name, err)
        assert stored(db) == 0
