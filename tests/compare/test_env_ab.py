"""A/B across Python environments (`ab_environments`, `torchmark ab --python A --python
B`): real second environments, each a throw-away venv whose site-packages point at this
one's (so torch imports there) and hold its own `abmod` module."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.compare.ab import ab_test, counts_test
from torchmark.compare.env_ab import ab_environments, default_labels
from torchmark.core.task_spec import TaskSpec
from torchmark.store.store import Store
from torchmark.timing.measurement import Measurement

from conftest import requires_valgrind

STMT, SETUP = "abmod.f()", "import abmod"
WORK = "def f():\n    return sum(range({n}))\n"
# gives up (exit status 3, a line on stderr) once the estimates are over: mid-run
CRASHING = """import os, sys
calls = 0
def f():
    global calls
    calls += 1
    if calls > 30000:
        sys.stderr.write("abmod: giving up after 30000 calls\\n")
        sys.stderr.flush()
        os._exit(3)
    return sum(range(1000))
"""


def make_env(folder: Path, module: str | None, torch: bool = True) -> str:
    """A venv without pip at `folder` (its python returned): this interpreter's
    site-packages on its path (through a .pth) unless not `torch`, and `abmod.py`
    holding `module`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next((folder / "lib").glob("python*/site-packages"))
    if torch:
        (site / "parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    if module is not None:
        (site / "abmod.py").write_text(module)
    return str(folder / "bin" / "python")


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    root = tmp_path_factory.mktemp("envs")
    return {"fast": make_env(root / "fast", WORK.format(n=1000)),
            "same": make_env(root / "same", WORK.format(n=1000)),
            "slow": make_env(root / "slow", WORK.format(n=3000)),
            "crashing": make_env(root / "crashing", CRASHING),
            "notorch": make_env(root / "notorch", None, torch=False)}


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_big_slowdown_reads_slower_and_both_sides_are_recorded(capsys, envs, tmp_path):
    db = tmp_path / "store.db"
    code, out, err = run(capsys, "ab", "--python", envs["fast"], "--python", envs["slow"],
                         STMT, "-s", SETUP, "--min-run-time", "0.3", "--worker-pairs", "3",
                         "--db", str(db))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"A (baseline):  fast: {envs['fast']} (CPython ")
    assert ", torch 2." in lines[0]
    assert lines[1].startswith(f"B (candidate): slow: {envs['slow']} (CPython ")
    assert lines[2].startswith("3 worker pairs, each a fresh process in each environment ")
    assert lines[3].startswith("baseline: fast; candidate: slow; 3 worker pairs in turn, ")
    row = next(line for line in lines if line.startswith(STMT))
    assert "slower by" in row, out  # the verdict engine's, over the worker pairs
    ratio = float(row.split()[5])
    assert ratio > 1.5, row  # 3x the work, and the call's own cost
    pair_ratios = [float(x) for x in lines[2].split("ratios ")[1].split(",")[0].split()]
    median = float(lines[2].split("median ")[1])
    assert len(pair_ratios) == 3 and median == sorted(pair_ratios)[1]
    # the pairs' median and the pooled quads' agree (a loaded machine: 4.35 and 3.50)
    assert median == pytest.approx(ratio, rel=0.35)
    store = Store(f"sqlite:///{db}")
    try:
        runs = {r["env"]: r for r in store.runs()}
        assert set(runs) == {"fast", "slow"}
        assert {k: v for k, v in runs["slow"]["tags"].items() if k != "process"} == {
            "ab": "candidate", "ab_baseline_run": runs["fast"]["id"]}
        assert runs["fast"]["machine"] == runs["slow"]["machine"]
        results = {r["run_env"]: r for r in store.results(samples=True)}
        assert results["fast"]["case_id"] == results["slow"]["case_id"]  # one case, 2 envs
        # every pair's blocks (cut to an even count), at least 12 a side each
        assert len(results["fast"]["samples"]) == len(results["slow"]["samples"]) >= 36
        assert results["slow"]["median"] / results["fast"]["median"] == \
            pytest.approx(ratio, rel=0.35)
        assert results["fast"]["torch_version"] and results["fast"]["metric"] == "wall"
    finally:
        store.close()


def test_identical_environments_read_no_change_in_abba_order(envs):
    sides: list[int] = []
    r = ab_environments(envs["fast"], envs["same"], STMT, SETUP, min_run_time=0.3,
                        min_effect=0.05, callback=lambda side, n, s: sides.append(side),
                        worker_pairs=3)
    # one pair of processes can read identical environments apart (docs/ab.md); three
    # pairs' median cannot unless two of them do
    assert r.verdict in ("same", "unsure"), str(r)
    assert r.ab.paired and r.ab.abba and len(r.pairs) == 3
    assert r.ab.replicate_ratios == tuple(p.ratio for p in r.pairs)
    a, b = r.ab.baseline, r.ab.candidate
    assert a.number_per_run == b.number_per_run  # one cost: one count a block
    for pair in r.pairs:  # each pair whole A B B A quads, 12 blocks a side at least
        assert len(pair.baseline.times) == len(pair.candidate.times) >= 12
        assert len(pair.baseline.times) % 2 == 0
    assert len(a.times) == sum(len(p.baseline.times) for p in r.pairs)
    assert sum(a.raw_times) >= 0.3
    assert sides[:8] == [0, 1, 1, 0, 0, 1, 1, 0] and len(sides) == 2 * len(a.times)
    assert [s.label for s in r.sides] == ["fast", "same"]
    assert r.sides[0].cpus and r.sides[0].cpus == r.sides[1].cpus
    assert a.task_spec.env == "fast" and b.task_spec.env == "same"
    (ra,), (rb,) = r.results()
    assert ra.provenance.env == "fast" and rb.provenance.env == "same"
    assert ra.case.id == rb.case.id and list(ra.samples) == list(a.times)


def test_a_worker_pair_times_whole_quads():
    """interleave(whole_quads=True) stops on an even block count, so no A B B A quad is
    cut short or spans two worker pairs."""
    from torchmark.compare.interleave import interleave

    class Source:
        def __init__(self, seconds: float) -> None:
            self.seconds = seconds

        def time_block(self, number: int) -> float:
            return self.seconds * number

    sources = (Source(0.3), Source(0.3))
    plain = interleave(sources, [1, 1], min_run_time=0.5, min_blocks=1)
    whole = interleave(sources, [1, 1], min_run_time=0.5, min_blocks=1, whole_quads=True)
    assert [len(t) for t in plain] == [2, 2]
    assert [len(t) for t in whole] == [2, 2]
    plain = interleave(sources, [1, 1], min_run_time=0.1, min_blocks=1)
    whole = interleave(sources, [1, 1], min_run_time=0.1, min_blocks=1, whole_quads=True)
    assert [len(t) for t in plain] == [1, 1] and [len(t) for t in whole] == [2, 2]


@pytest.mark.parametrize("kwargs, message", [
    ({"worker_pairs": 0}, "worker_pairs must be an int >= 1, got 0"),
    ({"worker_pairs": 3, "metric": "instructions"}, "worker_pairs is for wall time"),
])
def test_bad_worker_pairs_are_refused_before_any_worker_starts(kwargs, message):
    from torchmark.core.errors import UsageError

    with pytest.raises(UsageError, match=re.escape(message)):
        ab_environments("/nonexistent/python", "/nonexistent/python", **kwargs)


@requires_valgrind
@pytest.mark.valgrind
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="no C compiler for the client-request helper")
@pytest.mark.slow
def test_instruction_counts_come_from_each_environment_and_compare_exactly(capsys, envs,
                                                                          tmp_path):
    db = tmp_path / "store.db"
    code, out, err = run(capsys, "ab", "--python", envs["fast"], "--python", envs["slow"],
                         STMT, "-s", SETUP, "--metric", "instructions", "--number", "10",
                         "--format", "jsonl", "--db", str(db), "--fail-above", "50%")
    assert code == 1, err  # slower by far more than 50%
    row = json.loads(out)
    assert row["verdict"] == "slower" and row["metric"] == "instructions"
    assert row["p_value"] is None and row["baseline_samples"] == 2
    assert 2.5 < row["ratio"] < 3.5 and row["ci_low"] > 2.5
    assert row["baseline_env"] == "fast" and row["candidate_env"] == "slow"
    assert "1 case(s) slower by more than 50.0%" in err
    store = Store(f"sqlite:///{db}")
    try:
        results = {r["run_env"]: r for r in store.results(samples=True)}
        assert set(results) == {"fast", "slow"}
        assert results["fast"]["metric"] == "instructions"
        assert results["slow"]["median"] > 2.5 * results["fast"]["median"]
    finally:
        store.close()


def test_exact_counts_verdicts():
    spec = TaskSpec(stmt="f()", setup="pass")

    def counts(*values):
        return Measurement(10, [v * 10 for v in values], spec)

    same = counts_test(counts(100, 104), counts(100.2, 104.1))
    assert same.verdict == "same" and same.exact and same.paired
    slower = counts_test(counts(100, 104), counts(103, 107.2))
    assert slower.verdict == "slower" and slower.ratio == pytest.approx(1.0302, abs=1e-3)
    assert "exact: slower by 3.0%" in str(slower)
    # pairs that disagree on the direction: no verdict, whatever their median says
    mixed = counts_test(counts(100, 100, 100), counts(90, 110, 112))
    assert mixed.ci_low < 1 < mixed.ci_high and mixed.verdict == "unsure"
    assert json.loads(json.dumps(slower.to_dict(), allow_nan=False))["p_value"] is None
    with pytest.raises(ValueError, match="as many baseline as candidate"):
        counts_test(counts(1, 2), counts(1))


def test_abba_quads_cancel_an_order_effect_that_pairs_turn_into_two_modes():
    """The block that runs second in its pair is 4% faster (pairs alternate A B, B A):
    per-pair ratios of a 3% slowdown sit around 0.99 and 1.07, and their interval covers
    1; a quad's ratio (two pairs, one of each order) is the 3% itself."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = 80
    a = 1.0 + 0.002 * rng.standard_normal(n)
    second = np.where(np.arange(n) % 2 == 0, 0.96, 1.0)  # A-first pairs: B runs second
    first = np.where(np.arange(n) % 2 == 0, 1.0, 0.96)
    a = a * first
    b = 1.03 * (1.0 + 0.002 * rng.standard_normal(n)) * second
    spec = TaskSpec(stmt="f()", setup="pass")
    ma, mb = Measurement(1, list(a), spec), Measurement(1, list(b), spec)
    pairs = ab_test(ma, mb, paired=True)
    quads = ab_test(ma, mb, paired=True, abba=True)
    assert pairs.verdict == "unsure" and pairs.ci_low < 1 < pairs.ci_high
    assert quads.verdict == "slower" and quads.ratio == pytest.approx(1.03, abs=0.003)
    assert quads.abba and "median ratio of 40 ABBA quads" in str(quads)
    with pytest.raises(ValueError, match="give paired=True too"):
        ab_test(ma, mb, abba=True)


def test_a_change_the_median_worker_pair_does_not_show_is_unsure():
    """Pooled quads read 3% slower; whether that is called hangs on the pairs' ratios."""
    import numpy as np

    rng = np.random.default_rng(1)
    a = 1.0 + 0.002 * rng.standard_normal(60)
    b = 1.03 * (1.0 + 0.002 * rng.standard_normal(60))
    spec = TaskSpec(stmt="f()", setup="pass")
    sides = Measurement(1, list(a), spec), Measurement(1, list(b), spec)
    pooled = ab_test(*sides, paired=True, abba=True)
    assert pooled.verdict == "slower"
    agree = ab_test(*sides, paired=True, abba=True,
                    replicate_ratios=(1.031, 0.97, 1.028, 1.2, 1.03))
    assert agree.verdict == "slower" and agree.replicate_median == pytest.approx(1.03)
    one_pair = ab_test(*sides, paired=True, abba=True,
                       replicate_ratios=(1.001, 0.999, 1.15, 1.0, 1.002))
    assert one_pair.verdict == "unsure"
    assert one_pair.describe_verdict().startswith("unsure (+3.0% ") and \
        "the median of 5 replicates moved +0.1% only: " in one_pair.describe_verdict()
    assert one_pair.brief_verdict() == "unsure (+3.0%; median of replicates +0.1%)"
    assert one_pair.to_dict()["replicate_ratios"] == [1.001, 0.999, 1.15, 1.0, 1.002]
    assert pooled.to_dict()["replicate_ratios"] == [] and math.isnan(pooled.replicate_median)


def test_bad_interpreters_exit_2_with_one_line_naming_them(capsys, envs, tmp_path):
    missing = str(tmp_path / "nowhere" / "python")
    code, out, err = run(capsys, "ab", "--python", envs["fast"], "--python", missing, STMT)
    assert code == 2 and err == f"torchmark: error: env B ({missing}): no such file\n"
    text = tmp_path / "python"
    text.write_text("not a program")
    code, _, err = run(capsys, "ab", "--python", str(text), "--python", envs["fast"], STMT)
    assert code == 2 and err == f"torchmark: error: env A ({text}): not an executable file\n"
    code, _, err = run(capsys, "ab", "--python", envs["fast"], "--python", envs["notorch"],
                       STMT, "--no-store")
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"torchmark: error: env B ({envs['notorch']}): cannot import torch "
                          "(ModuleNotFoundError: No module named 'torch')")
    code, _, err = run(capsys, "ab", "--python", "/bin/true", "--python", envs["fast"], STMT,
                       "--no-store")
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("torchmark: error: env A (/bin/true): did not start (exit status 0)")


def test_a_worker_that_dies_mid_run_is_named_with_its_output(capsys, envs):
    code, out, err = run(capsys, "ab", "--python", envs["fast"], "--python",
                         envs["crashing"], STMT, "-s", SETUP, "--min-run-time", "2",
                         "--worker-pairs", "1", "--no-store")
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == "torchmark: the worker's output ended with:"
    assert "  abmod: giving up after 30000 calls" in lines
    assert lines[-1] == (f"torchmark: error: env B ({envs['crashing']}): the worker exited "
                         "with status 3 during a block: abmod: giving up after 30000 calls")


def test_the_statement_failing_in_one_environment_is_named(capsys, envs):
    code, _, err = run(capsys, "ab", "--python", envs["fast"], "--python", envs["slow"],
                       "abmod.g()", "-s", SETUP, "--worker-pairs", "1", "--no-store")
    assert code == 1
    assert err == (f"torchmark: error: env A ({envs['fast']}): the block-size estimate "
                   "raised AttributeError: module 'abmod' has no attribute 'g'\n")


@pytest.mark.parametrize("args, message", [
    (["--python", "python", "x"], "give --python exactly twice (baseline first), got 1"),
    (["--python", "python", "--python", "python", "--env-label", "a", "x"],
     "give --env-label twice (baseline first) or not at all, got 1"),
    (["--python", "python", "--python", "python", "--number", "5", "x"],
     "--number: for --metric instructions"),
    (["--python", "python", "--python", "python", "--metric", "instructions",
      "--min-run-time", "1", "x"], "--min-run-time: for wall time"),
    (["--python", "python", "--python", "python", "x ="], "the statement, line 1: "
                                                          "SyntaxError"),
    (["a.json", "b.json", "--metric", "instructions", "-s", "pass"],
     "--setup, --metric: for an A/B across environments only"),
    (["a.json", "b.json", "--worker-pairs", "3"],
     "--worker-pairs: for an A/B across environments only"),
    (["--python", "python", "--python", "python", "--metric", "instructions",
      "--worker-pairs", "3", "x"], "--worker-pairs: for wall time"),
])
def test_mixing_the_two_modes_is_refused(capsys, args, message):
    code, _, err = run(capsys, "ab", *args)
    assert code == 2 and message in err


def test_a_saved_file_given_with_python_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("before.json").write_text("{}")
    code, _, err = run(capsys, "ab", "--python", "python", "--python", "python",
                       "before.json")
    assert code == 2 and "with --python the arguments are the statement, but " \
        "'before.json' is a file" in err


@pytest.mark.parametrize("a, b, labels", [
    ("/x/envA/bin/python", "/x/envB/bin/python", ("envA", "envB")),
    ("/w/proj1/.venv/bin/python", "/w/proj2/.venv/bin/python",
     ("proj1/.venv", "proj2/.venv")),
    ("/usr/bin/python3.11", "/usr/bin/python3.12", ("python3.11", "python3.12")),
    ("/w/.venv/bin/python", "/w/.venv/bin/python", (".venv (A)", ".venv (B)")),
])
def test_default_labels_tell_the_interpreters_apart(a, b, labels):
    assert default_labels(a, b) == labels
