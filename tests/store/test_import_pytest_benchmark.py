"""pytest-benchmark's files, written by pytest-benchmark itself in a subprocess (a
tiny budget), imported: its JSON (raw data) and its storage folder (statistics only);
gate and regressions over them; an export of the imported runs reads back equal; a
malformed file refused whole."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from torchmark.cli.main import main
from torchmark.core.result import Stated
from torchmark.store import Store

TESTS = """
import pytest

@pytest.mark.parametrize("n", [10, 100])
def test_sum(benchmark, n):
    benchmark(sum, range(n))

def test_sorted(benchmark):
    benchmark.group = "sorting"
    benchmark(sorted, list(range(50, 0, -1)))
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Two sessions of pytest-benchmark: --benchmark-json files and a .benchmarks folder."""
    folder = tmp_path_factory.mktemp("pb")
    (folder / "test_bench.py").write_text(TESTS)
    # without this session's xdist variables: pytest-benchmark turns itself off on them
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    for name in ("first", "second"):
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:torchmark",
                        "-p", "no:cacheprovider", "-p", "no:xdist",
                        f"--benchmark-json={folder / name}.json", f"--benchmark-save={name}",
                        "--benchmark-max-time=0.02", "--benchmark-min-rounds=5",
                        "test_bench.py"], cwd=folder, check=True, capture_output=True,
                       timeout=120, env=env)
    return folder


def test_json_files_import_with_their_raw_data(written, tmp_path, capsys):
    db = str(tmp_path / "s.db")
    first = json.loads((written / "first.json").read_text())
    assert main(["import", str(written / "first.json"), str(written / "second.json"),
                 "--db", db]) == 0  # detected
    assert "6 results added" in capsys.readouterr().out
    store = Store(db)
    records = {r.case.stmt: r for r in store.result_records(run=1)}
    for bench in first["benchmarks"]:
        result = records[bench["fullname"]]
        assert result.case.frontend == "pytest-benchmark"
        assert result.case.params == (bench["params"] or {})
        assert list(result.samples) == bench["stats"]["data"]
        assert result.number_per_run == bench["stats"]["iterations"]
        assert statistics.median(result.samples) == pytest.approx(bench["stats"]["median"])
    assert records["test_bench.py::test_sorted"].case.label.startswith("sorting: ")
    provenance = records["test_bench.py::test_sorted"].provenance
    assert provenance.machine.hostname == first["machine_info"]["node"]
    assert provenance.fingerprint["cpu.threads"] == first["machine_info"]["cpu"]["count"]
    assert main(["import", str(written / "first.json"), "--db", db]) == 0
    assert "(already in the store)" in capsys.readouterr().out
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db,
                 "--max-slowdown", "50%"]) in (0, 1)
    table = capsys.readouterr().out
    assert all(name in table for name in ("test_sum[10]", "test_sum[100]", "test_sorted"))
    assert main(["regressions", "--db", db]) in (0, 1)


def test_the_storage_folder_imports_stated_statistics(written, tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["import", str(written / ".benchmarks"), "--db", db]) == 0
    assert "6 results added" in capsys.readouterr().out
    saved = sorted((written / ".benchmarks").rglob("0001_*.json"))[0]
    bench = json.loads(saved.read_text())["benchmarks"][0]
    result = next(r for r in Store(db).result_records(run=1)
                  if r.case.stmt == bench["fullname"])
    stated = Stated.of(result)
    assert stated is not None and stated.n == bench["stats"]["rounds"]
    assert (stated.mean, stated.stdev, stated.median) == (
        bench["stats"]["mean"], bench["stats"]["stddev"], bench["stats"]["median"])
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db,
                 "--max-slowdown", "50%"]) in (0, 1)
    out = capsys.readouterr().out
    assert "too few samples" not in out  # judged from the stated statistics


def test_an_export_of_imported_runs_reads_back_equal(written, tmp_path, capsys):
    db, again = str(tmp_path / "s.db"), str(tmp_path / "again.db")
    assert main(["import", str(written / "first.json"), str(written / ".benchmarks"),
                 "--db", db]) == 0
    out = tmp_path / "export.jsonl"
    assert main(["export", "-o", str(out), "--db", db]) == 0
    assert main(["import", str(out), "--db", again]) == 0

    def held(path):
        return sorted((r.case.id, r.metric, r.samples, json.dumps(r.extra, sort_keys=True),
                       r.provenance.to_json()) for r in Store(path).result_records())

    # 3 raw results of first.json and the 3 stated of the second session's save (the
    # first session's save is first.json's twin: not stored again)
    assert held(db) == held(again) and len(held(db)) == 6


@pytest.mark.parametrize("change, problem", [
    (lambda d: d["benchmarks"][0]["stats"].update(data=[1e-6, -1.0]), "data"),
    (lambda d: d["benchmarks"][0].update(stats="fast"), "stats must be dict"),
    (lambda d: d.update(benchmarks={}), "benchmarks must be list"),
    (lambda d: d["benchmarks"][0]["stats"]["data"].append(1e308), "past 1e+15 s"),
    (lambda d: d["benchmarks"][0]["stats"].update(data=[1e308] * 5), "bad.json: "),
    (lambda d: d.update(datetime="yesterday"), "datetime 'yesterday' is not a time"),
    (lambda d: d.update(datetime="2999-01-01T00:00:00+00:00"), "is in the future"),
    (lambda d: d["benchmarks"][0]["stats"].update(iterations=0),
     "iterations must be at least 1, got 0"),
])
def test_malformed_files_are_refused_whole(written, tmp_path, capsys, change, problem):
    data = json.loads((written / "first.json").read_text())
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    db = str(tmp_path / "s.db")
    assert main(["import", str(bad), "--from", "pytest-benchmark", "--db", db]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and problem in err[0]
    assert not Store(db).result_records()


def test_a_truncated_file_is_refused(written, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text((written / "first.json").read_text()[:500])
    assert main(["import", str(bad), "--from", "pytest-benchmark",
                 "--db", str(tmp_path / "s.db")]) == 2
    assert "not a pytest-benchmark JSON file" in capsys.readouterr().err


def test_links_in_a_storage_folder_are_not_followed(written, tmp_path, capsys):
    import shutil

    folder = tmp_path / "storage"
    shutil.copytree(written / ".benchmarks", folder)
    machine = next(p for p in folder.iterdir() if p.is_dir())
    (machine / "0009_outside.json").symlink_to(written / "first.json")  # a file elsewhere
    (folder / "elsewhere").symlink_to(written, target_is_directory=True)
    db = str(tmp_path / "s.db")
    assert main(["import", str(folder), "--db", db]) == 0
    assert "6 results added" in capsys.readouterr().out  # the two saved files only


def test_max_size_is_the_limit_of_a_file_read_whole(written, tmp_path, capsys):
    """A pytest-benchmark JSON is read whole: `import --max-size` is its limit (above the
    64 MiB input limit it raises, below it it lowers), and a refusal names the option
    that would raise it."""
    db = str(tmp_path / "s.db")
    path = str(written / "first.json")
    assert main(["--max-input-size", "1K", "import", path, "--db", db]) == 2
    assert "raise it with --max-input-size" in capsys.readouterr().err
    assert main(["--max-input-size", "1K", "import", path, "--max-size", "10M",
                 "--db", db]) == 0
    assert main(["import", str(written / "second.json"), "--max-size", "1K", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "raise it with --max-size" in err and len(err.strip().splitlines()) == 1
    from torchmark.core.bounded_input import DEFAULT_MAX_BYTES, max_bytes

    assert max_bytes() == DEFAULT_MAX_BYTES  # the limit held for that command line only


def test_a_session_written_twice_is_one_run_whichever_file_comes_first(written, tmp_path,
                                                                         capsys):
    """pytest-benchmark writes a session twice (--benchmark-json with raw data,
    --benchmark-save without): the second file adds nothing, in either order; the
    other session still adds its own."""
    saved = sorted((written / ".benchmarks").rglob("*first*.json"))
    assert len(saved) == 1
    for order in ([written / "first.json", saved[0]], [saved[0], written / "first.json"]):
        db = str(tmp_path / f"{order[0].name}.db")
        assert main(["import", str(order[0]), "--db", db]) == 0
        capsys.readouterr()
        assert main(["import", str(order[1]), "--db", db]) == 0
        assert "0 results added" in capsys.readouterr().out
        assert main(["import", str(written / "second.json"), "--db", db]) == 0
        assert "3 results added" in capsys.readouterr().out
        assert len(Store(db).runs(limit=None)) == 2
