"""Google Benchmark's JSON into the store (store/formats/google_benchmark.py), from files
that the google_benchmark Python bindings write (`--benchmark_out_format=json`)."""

from __future__ import annotations

import copy
import json
import statistics
import subprocess
import sys
import textwrap

import pytest

from torchmark.cli.main import main
from torchmark.store import Store
from torchmark.store.formats import FORMATS, detect_format, google_benchmark, nvbench

pytest.importorskip("google_benchmark")

SCRIPT = textwrap.dedent("""
    import itertools

    import google_benchmark as benchmark

    CALLS = itertools.count()

    @benchmark.register
    def sum_list(state):
        while state:
            sum(range(100))

    @benchmark.register
    @benchmark.option.arg(8)
    @benchmark.option.arg(64)
    def join(state):
        n = state.range(0)
        while state:
            "".join(["a"] * n)
        state.counters["items"] = n
        state.counters["call"] = next(CALLS)

    @benchmark.register
    @benchmark.option.arg_names(["n", "m"])
    @benchmark.option.args([3, 4])
    @benchmark.option.use_real_time()
    def named(state):
        state.set_label("small")
        while state:
            pass

    @benchmark.register
    def broken(state):
        state.skip_with_error("no device here")
        while state:
            pass

    benchmark.main()
    """)
CASES = {"sum_list", "join/8", "join/64", "named/n:3/m:4/real_time", "broken"}
RUNS = {"a.json": ["--benchmark_repetitions=5"], "b.json": ["--benchmark_repetitions=5"],
        "aggregates.json": ["--benchmark_repetitions=5",
                            "--benchmark_report_aggregates_only=true"],
        "single.json": ["--benchmark_time_unit=us"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Google Benchmark's files, by name (RUNS), written at once."""
    folder = tmp_path_factory.mktemp("google-benchmark")
    (folder / "bench.py").write_text(SCRIPT)
    procs = [subprocess.Popen(
        [sys.executable, "bench.py", f"--benchmark_out={name}",
         "--benchmark_out_format=json", "--benchmark_min_time=0.01s", *flags],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for name, flags in
        RUNS.items()]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    return {name: folder / name for name in RUNS}


def entries(path, run_type="iteration"):
    """run_name -> the file's entries of that run_type."""
    out: dict[str, list] = {}
    for entry in json.loads(path.read_text())["benchmarks"]:
        if entry["run_type"] == run_type:
            out.setdefault(entry["run_name"], []).append(entry)
    return out


def rows(db):
    """case name -> its stored row (with samples and extra)."""
    return {r["stmt"]: r for r in Store(str(db)).results(samples=True)}


def imported(path, db):
    return main(["import", str(path), "--from", "google-benchmark", "--db", str(db)])


def test_repetitions_are_the_raw_samples(files, tmp_path, capsys):
    path, db = files["a.json"], tmp_path / "s.db"
    assert google_benchmark.detect(path, json.loads(path.read_text()))
    assert not nvbench.detect(path, json.loads(path.read_text()))
    assert imported(path, db) == 0
    found, runs = rows(db), entries(path)
    assert set(found) == CASES
    for name in CASES - {"broken"}:
        row, times = found[name], [e["real_time"] * 1e-9 for e in runs[name]]
        assert row["n"] == 5 and row["median"] == pytest.approx(statistics.median(times))
        assert row["number_per_run"] == min(e["iterations"] for e in runs[name])
        assert row["threads"] == 1 and len(row["extra"]["cpu_time"]) == 5
    assert found["broken"]["n"] == 0 and found["broken"]["failure"] == "no device here"
    counters = found["join/64"]["extra"]["counters"]  # each repetition's own
    assert counters["items"] == [64] * 5 and len(set(counters["call"])) == 5
    assert counters["call"] == [e["call"] for e in runs["join/64"]]
    assert found["named/n:3/m:4/real_time"]["extra"]["label"] == "small"
    params = Store(str(db)).case_params()
    assert params[found["join/8"]["case_id"]] == {"args": [8]}
    assert params[found["named/n:3/m:4/real_time"]["case_id"]] == {
        "args": [3, 4], "arg_names": ["n", "m"], "real_time": True}
    context = json.loads(path.read_text())["context"]
    provenance = next(google_benchmark.read(path)).provenance
    assert provenance.machine.hostname == context["host_name"]
    assert provenance.torchmark_version == f"google-benchmark {context['library_version']}"
    assert provenance.fingerprint == {
        "build.type": context["library_build_type"], "cpu.threads": context["num_cpus"],
        "cpu.mhz": context["mhz_per_cpu"], "cpu.scaling": context["cpu_scaling_enabled"],
        "os.aslr": context["aslr_enabled"], "load.1m": context["load_avg"][0]}
    capsys.readouterr()
    assert imported(path, db) == 0
    assert "0 results added" in capsys.readouterr().out and len(rows(db)) == len(CASES)


def test_aggregates_only_give_the_stated_statistics(files, tmp_path):
    path, db = files["aggregates.json"], tmp_path / "s.db"
    assert imported(path, db) == 0
    found, aggregates = rows(db), entries(path, "aggregate")
    assert set(found) == CASES and found["broken"]["failure"] == "no device here"
    for name in CASES - {"broken"}:
        stated = {e["aggregate_name"]: e["real_time"] * 1e-9 for e in aggregates[name]}
        assert found[name]["n"] == 5 and found[name]["median"] == stated["median"]
        assert found[name]["mean"] == stated["mean"] and found[name]["min"] is None
        assert found[name]["extra"]["stated"] == {
            "n": 5, "mean": stated["mean"], "stdev": stated["stddev"],
            "median": stated["median"]}


def test_a_table_beside_stated_statistics_shows_the_means_the_verdict_compares(files,
                                                                              tmp_path,
                                                                              capsys):
    """Raw repetitions against aggregates only: the verdict is of the means (Welch), so
    the table shows the means, said in its metric column, and its change is theirs."""
    from torchmark.regressions.gate import gate

    db = str(tmp_path / "s.db")
    assert imported(files["a.json"], db) == 0
    assert imported(files["aggregates.json"], db) == 0
    store = Store(db)
    report = gate(store.result_records(run=1), store.result_records(run=2))
    measured = [row for row in report.rows if row.kind != "failed"]
    assert measured and all(row.means for row in measured)
    for row in measured:
        assert row.candidate / row.baseline == pytest.approx(row.verdict.ratio)
    capsys.readouterr()
    main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db])
    assert "wall (means)" in capsys.readouterr().out
    # ab of the same runs compares the same statistics: the same verdicts and intervals
    assert main(["ab", "run:1", "run:2", "--db", db, "--format", "jsonl",
                 "--min-effect", "0.05"]) == 0
    judged = {row["name"]: row for row in map(json.loads,
                                              capsys.readouterr().out.splitlines())}
    for row in measured:
        ab = judged[row.title]
        assert (ab["verdict"], ab["lower"], ab["upper"]) == pytest.approx(
            (row.kind, row.verdict.lower, row.verdict.upper)), row.title


def test_a_run_without_repetitions_is_one_sample(files, tmp_path):
    path, db = files["single.json"], tmp_path / "s.db"
    assert imported(path, db) == 0
    found, runs = rows(db), entries(path)
    assert runs["sum_list"][0]["time_unit"] == "us"
    assert found["sum_list"]["n"] == 1
    assert found["sum_list"]["median"] == pytest.approx(runs["sum_list"][0]["real_time"] * 1e-6)


def test_the_gate_and_regressions_read_two_imported_runs(files, tmp_path):
    db = str(tmp_path / "s.db")
    assert imported(files["a.json"], db) == 0 and imported(files["b.json"], db) == 0
    # times of this machine, and a case that failed on both sides: 0 or 1, never 2
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db]) in (0, 1)
    assert main(["regressions", "--db", db]) in (0, 1)


def test_detected_without_from(files, tmp_path):
    for module in FORMATS.values():  # detection asks every format's reader
        pytest.importorskip(module)
    assert detect_format(files["a.json"]) == "google-benchmark"
    assert main(["import", str(files["a.json"]), "--db", str(tmp_path / "s.db")]) == 0
    assert set(rows(tmp_path / "s.db")) == CASES


def test_a_name_spells_its_parameters_and_threads(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"context": {}, "benchmarks": [
        {"name": "BM_copy/8/min_time:0.5s/repeats:3/process_time/real_time/threads:4",
         "run_type": "iteration", "threads": 4, "iterations": 10, "real_time": 2.5,
         "cpu_time": 9.0, "time_unit": "ms"}]}))
    [result] = google_benchmark.read(path)
    assert result.case.threads == 4 and result.samples == (0.0025,)
    assert result.case.params == {"args": [8], "min_time": "0.5s", "repeats": 3,
                                  "process_time": True, "real_time": True}


def _set(key, value):
    def mutate(doc):
        doc["benchmarks"][2][key] = value
    return mutate


MALFORMED = {
    "truncated": (None, "not a google-benchmark JSON file"),
    "a time of the wrong type": (_set("real_time", "fast"),
                                 "benchmarks[2].real_time must be a number, got 'fast'"),
    "a negative time": (_set("real_time", -3.5), "benchmarks[2].real_time must be >= 0"),
    "an unknown time_unit": (_set("time_unit", "ps"),
                             "benchmarks[2].time_unit must be one of ns, us, ms, s, got 'ps'"),
    "an unknown run_type": (_set("run_type", "warmup"),
                            "run_type must be 'iteration' or 'aggregate', got 'warmup'"),
    "benchmarks not a list": (lambda doc: doc.update(benchmarks={}),
                              "benchmarks must be list"),
    "an empty name": (_set("name", ""), "benchmarks[2].name is empty"),
    "no iterations": (_set("iterations", 0), "iterations must be at least 1, got 0"),
}


@pytest.mark.parametrize("problem", MALFORMED)
def test_a_malformed_file_is_refused_and_nothing_stored(files, tmp_path, capsys, problem):
    path, db = tmp_path / "bad.json", tmp_path / "s.db"
    text = files["a.json"].read_text()
    mutate, message = MALFORMED[problem]
    if mutate is None:
        path.write_text(text[:len(text) // 2])
    else:
        doc = copy.deepcopy(json.loads(text))
        mutate(doc)
        path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert imported(path, db) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not db.exists() or Store(str(db)).info()["results"] == 0
