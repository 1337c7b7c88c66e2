"""pyperf's JSON files, written by pyperf itself here (a tiny budget: a few tenths of a
second each), imported into the store: each benchmark a case, its values (calibration
runs and warmups left out) the samples; a malformed file refused whole."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.core.provenance import Provenance
from torchmark.store import Store

pyperf = pytest.importorskip("pyperf", reason="pyperf writes the files imported here")

BUDGET = ["-q", "-p", "2", "-n", "3", "-l", "10", "-w", "1"]  # 2 workers, 3 values each
SUITE = """
import pyperf
runner = pyperf.Runner()
runner.timeit("sum100", "sum(range(100))")
runner.timeit("sorted", "sorted(x)", setup="x = list(range(200, 0, -1))")
runner.bench_func("listcomp", lambda: [i for i in range(50)], inner_loops=10)
"""


def pyperf_cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pyperf", *args], check=True,
                   capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """pyperf's files: one timeit benchmark twice, a Runner's suite of three, a suite
    gzipped by `pyperf convert --add`, a calibrated run and a tracemalloc one."""
    folder = tmp_path_factory.mktemp("pyperf")
    out = {name: folder / f"{name}.json" for name in
           ("timeit", "again", "other", "suite", "calibrated", "memory")}
    for name in ("timeit", "again"):
        pyperf_cli("timeit", *BUDGET, "-o", str(out[name]), "sum(range(100))")
    pyperf_cli("timeit", *BUDGET, "--name", "other", "-o", str(out["other"]),
               "sum(range(200))")
    script = folder / "suite.py"
    script.write_text(SUITE)
    subprocess.run([sys.executable, str(script), *BUDGET, "-o", str(out["suite"])],
                   check=True, capture_output=True, timeout=120)
    out["combined"] = folder / "combined.json.gz"
    pyperf_cli("convert", str(out["timeit"]), "--add", str(out["other"]),
               "-o", str(out["combined"]))
    pyperf_cli("timeit", "-q", "-p", "2", "-n", "2", "-w", "1", "--min-time", "0.0005",
               "-o", str(out["calibrated"]), "sum(range(100))")
    pyperf_cli("timeit", *BUDGET, "--tracemalloc", "-o", str(out["memory"]), "x = [0] * 1000")
    return out


def stored_results(db: str) -> list:
    return Store(db).result_records() if Path(db).exists() else []


@pytest.mark.parametrize("name", ["timeit", "suite", "combined", "calibrated", "memory"])
def test_a_pyperf_file_imports_as_its_benchmarks(files, name, tmp_path, capsys):
    path = files[name]
    suite = pyperf.BenchmarkSuite.load(str(path))
    metadata = suite.get_metadata()
    for db, how in ((str(tmp_path / "auto.db"), []), (str(tmp_path / "from.db"),
                                                       ["--from", "pyperf"])):
        assert main(["import", str(path), *how, "--db", db]) == 0
        assert main(["import", str(path), *how, "--db", db]) == 0  # twice: nothing added
        out = capsys.readouterr().out
        assert f"{len(suite)} result" in out and "0 results added" in out
        results = {r.case.stmt: r for r in stored_results(db)}
        assert sorted(results) == sorted(suite.get_benchmark_names())
        for bench in suite.get_benchmarks():
            result = results[bench.get_name()]
            assert result.case.frontend == "pyperf"
            assert result.metric == ("memory" if bench.get_unit() == "byte" else "wall")
            assert len(result.samples) == bench.get_nvalue()  # warmups left out
            assert result.summary.median == pytest.approx(bench.median(), rel=1e-12)
            assert result.number_per_run == bench.get_total_loops()  # loops x inner loops
            provenance = result.provenance
            assert provenance.machine.hostname == metadata["hostname"]
            assert provenance.torchmark_version == f"pyperf {metadata['perf_version']}"
            assert provenance.fingerprint["cpu.model"] == metadata["cpu_model_name"]
            assert provenance.fingerprint["cpu.threads"] == metadata["cpu_count"]
            # pyperf names an affinity only when it is restricted: otherwise all CPUs, as
            # torchmark's own unpinned run records it (a pinned run is told apart)
            assert provenance.fingerprint["cpu.affinity"] == metadata.get(
                "cpu_affinity", Provenance.capture().fingerprint["cpu.affinity"])
            # spelled as torchmark's own run on this Python spells it (the files were
            # written by this Python): "CPython 3.11.7", not "cpython 3.11.7 (64-bit)"
            assert provenance.fingerprint["python.version"] == \
                Provenance.capture().fingerprint["python.version"]
        assert len(Store(db).runs()) == 1  # a suite's benchmarks: one run


def test_timeit_statements_are_cases_and_calibration_runs_are_left_out(files):
    from torchmark.store.formats.pyperf import read

    [timeit], [calibrated], [memory] = (list(read(files[name]))
                                        for name in ("timeit", "calibrated", "memory"))
    # `pyperf timeit` names every statement "timeit": the statement tells them apart
    assert timeit.case.id == calibrated.case.id != memory.case.id
    assert timeit.case.params == {"timeit_stmt": "'sum(range(100))'"}
    runs = json.loads(files["calibrated"].read_text())["benchmarks"][0]["runs"]
    assert "values" not in runs[0] and "calibrate_loops" in runs[0]["metadata"]
    assert len(calibrated.samples) == sum(len(run.get("values", ())) for run in runs)


def test_the_gate_and_regressions_judge_imported_runs(files, tmp_path, capsys):
    db = str(tmp_path / "s.db")
    for name in ("timeit", "again"):
        assert main(["import", str(files[name]), "--db", db]) == 0
    capsys.readouterr()
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db]) in (0, 1)
    out = capsys.readouterr().out
    assert "candidate: run:2" in out and "timeit" in out
    assert main(["regressions", "--db", db]) in (0, 1)
    captured = capsys.readouterr()
    assert "series checked" in captured.out + captured.err


def _refused(path: Path, tmp_path: Path, capsys, *how: str) -> str:
    """The one line `torchmark import` refuses `path` with (exit 2, nothing stored)."""
    db = str(tmp_path / f"{path.stem}.db")
    assert main(["import", str(path), *how, "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"torchmark: error: {path}: ")
    assert stored_results(db) == []
    return err


def test_malformed_pyperf_files_are_refused(files, tmp_path, capsys):
    good = json.loads(files["timeit"].read_text())

    def variant(name: str, change) -> Path:
        document = json.loads(json.dumps(good))
        change(document)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document))
        return path

    truncated = tmp_path / "truncated.json"
    text = files["timeit"].read_text()
    # cut inside the first key's name (a JSON object's first quote opens one), so that the
    # error does not depend on what this machine's metadata made the file
    truncated.write_text(text[:text.index('"') + 2])
    assert "not a pyperf JSON file (Unterminated string" in _refused(
        truncated, tmp_path, capsys, "--from", "pyperf")
    gzipped = tmp_path / "truncated.json.gz"
    gzipped.write_bytes(gzip.compress(files["timeit"].read_bytes())[:200])
    assert "a damaged gzip file" in _refused(gzipped, tmp_path, capsys, "--from", "pyperf")
    run = ("benchmarks", 0, "runs", 0)
    for name, change, problem in (
            ("texts", lambda d: _at(d, run).update(values=["fast"]),
             "benchmarks[0].runs[0].values must be a list of finite numbers >= 0"),
            ("negative", lambda d: _at(d, run)["values"].append(-1e-7),
             "benchmarks[0].runs[0].values must be a list of finite numbers >= 0"),
            ("zero", lambda d: _at(d, run)["values"].append(0),
             "a sample is zero or negative (0.0)"),
            ("loops", lambda d: d["metadata"].update(loops="ten"),
             "benchmarks[0].runs[0].loops must be int, got 'ten'"),
            ("unit", lambda d: d["metadata"].update(unit="integer"),
             "benchmarks[0].runs[0]: unit 'integer' is neither 'second' nor 'byte'"),
            ("unnamed", lambda d: d["metadata"].pop("name"),
             "benchmarks[0].metadata.name must be str, got None"),
            ("no_values", lambda d: [r.pop("values") for r in _at(d, run[:3])],
             "benchmarks[0] (timeit): no values (calibration runs only)"),
            ("no_benchmarks", lambda d: d.update(benchmarks=[]), "no benchmarks")):
        assert problem in _refused(variant(name, change), tmp_path, capsys), name


def _at(document, keys):
    for key in keys:
        document = document[key]
    return document
