"""Runs over several fresh processes (compare/processes.py) and their comparison by
per-process medians (compare/replicates.py, ab_test): the exact statistics on known
values, the verdicts on constructed runs, and real worker processes."""

import math

import pytest

from torchmark.compare.ab import ab_test
from torchmark.compare.processes import measure_in_processes
from torchmark.core.errors import UsageError
from torchmark.core.task_spec import TaskSpec
from torchmark.timing.measurement import Measurement
from torchmark.verdicts.replicates import exact_u_p, shift_interval, u_counts


def test_the_u_distribution_is_counted_exactly():
    assert u_counts(2, 3) == (1, 1, 2, 2, 2, 1, 1)  # the 10 orderings of 2 and 3 values
    assert sum(u_counts(5, 5)) == math.comb(10, 5) and u_counts(5, 5)[:4] == (1, 1, 2, 3)
    # complete separation of 5 and 5: 2 orderings of 252, two-sided
    assert exact_u_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert exact_u_p([1, 2, 3, 4, 5], [1.5, 2.5, 3.5, 4.5, 5.5]) == pytest.approx(0.6905, abs=1e-4)
    assert exact_u_p([1, 2, 3, 4, 5, 6], [3.5, 7, 8, 9]) == pytest.approx(1 / 15)
    assert exact_u_p([1, 1], [1, 1]) == 1.0  # ties: half a pair each
    # one tie: U = 0.5, taken at U = 1 (the less extreme side): 4 / 252, as scipy's exact
    assert exact_u_p([1, 2, 3, 4, 5], [5, 6, 7, 8, 9]) == pytest.approx(4 / 252)
    assert exact_u_p([], [1.0]) == 1.0


def test_the_shift_and_its_interval_come_from_the_pairwise_differences():
    # 5 and 5 at 95%: P(U < 3) = 4/252 <= 2.5%, so the 3rd smallest and 3rd largest
    estimate, low, high = shift_interval([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.95)
    assert (estimate, low, high) == (5.0, 2.0, 8.0)  # differences 1, 2, 2, 3, ... 8, 8, 9
    assert math.isnan(shift_interval([1, 2, 3], [6, 7, 8], 0.95)[1])  # 3 and 3: none at 95%
    assert not math.isnan(shift_interval([1, 2, 3, 4], [6, 7, 8, 9], 0.95)[1])


def run(medians, spread=0.002):
    """A run of len(medians) processes: 20 blocks of 1000 runs each around its median,
    each process's own spread (IQR / median) recorded as measure_in_processes does."""
    times = [m * 1000 * (1 + spread * ((i % 5) - 2)) for m in medians for i in range(20)]
    first = Measurement(1000, times[:20], TaskSpec("f(x)", "pass"))
    spreads = [first.iqr / first.median] * len(medians)
    return Measurement(1000, times, TaskSpec("f(x)", "pass", label="f"), metadata={
        "processes": {"count": len(medians), "medians": medians, "spreads": spreads}})


def test_runs_over_processes_are_judged_by_their_process_medians():
    base = run([10e-6, 12e-6, 10.5e-6, 11e-6, 11.5e-6])
    # the same five draws in another order: the processes tell nothing apart, however
    # many samples each holds
    same = ab_test(base, run([11.5e-6, 10e-6, 11e-6, 12e-6, 10.5e-6]))
    assert same.processes == (5, 5) and same.verdict == "unsure"
    assert same.ratio == pytest.approx(1.0) and same.p_value == pytest.approx(1.0)
    assert "ratio of the 5 and 5 processes' medians" in str(same)
    assert same.to_dict()["processes"] == [5, 5]
    # every process of the candidate slower than every one of the baseline, by 30%
    slower = ab_test(base, run([m * 1.3 for m in [10e-6, 12e-6, 10.5e-6, 11e-6, 11.5e-6]]))
    assert slower.verdict == "slower" and slower.p_value == pytest.approx(2 / 252)
    assert slower.ratio == pytest.approx(1.3, rel=0.01)
    assert slower.ci_low > 1.0
    # processes alike, but each one noisy (IQR 4% of its median): 10% is within 3 times
    # the sum of the two runs' own spreads, and drift between the runs could do it
    tight = [10e-6, 10.01e-6, 10.02e-6, 10.03e-6, 10.04e-6]
    drifted = ab_test(run(tight, 0.02), run([m * 1.1 for m in tight], 0.02))
    assert drifted.p_value < 0.01 and drifted.drift_margin == pytest.approx(0.24, rel=0.05)
    assert drifted.verdict == "unsure" and \
        "within what two runs of the same code differ by" in drifted.describe_verdict()
    few = ab_test(run([10e-6, 11e-6, 12e-6]), run([20e-6, 21e-6, 22e-6]))
    assert few.verdict == "unmeasured" and "too few processes" in few.judged.reason
    # a one-process run on one side: the samples are compared, as before
    single = Measurement(1000, [t * 1.3 for t in base.raw_times[:20]], base.task_spec)
    assert ab_test(base, single).processes == (0, 0)


def test_two_runs_over_processes_in_one_file_pool_their_processes():
    from torchmark.compare.ab import pair_measurements

    a1, a2 = run([10e-6, 11e-6, 12e-6]), run([10.5e-6, 11.5e-6])
    b = run([20e-6, 21e-6, 22e-6, 23e-6, 24e-6])
    [(_, pooled, _)], _, _ = pair_measurements([a1, a2], [b])
    assert pooled.process_medians == [10e-6, 11e-6, 12e-6, 10.5e-6, 11.5e-6]
    assert ab_test(pooled, b).processes == (5, 5)
    huge = run([1e300] * 5)  # medians a file may hold: a ratio past a float is inf
    assert ab_test(run([1e-300] * 5), huge).ratio == math.inf
    # a file claiming more processes than a run takes is not believed (the exact test's
    # cost grows with the square of the count a side), nor are runs pooled past that
    assert run([1e-5] * 65).process_medians == []
    [(_, many, _)], _, _ = pair_measurements([run([1e-5] * 40), run([1e-5] * 40)], [b])
    assert many.process_medians == [] and ab_test(many, b).processes == (0, 0)


def test_measure_in_processes_times_each_in_a_fresh_worker():
    blocks = []
    m = measure_in_processes("sum(range(100))", processes=3, min_run_time=0.15,
                             label="sums", callback=lambda k, n, s: blocks.append(k))
    meta = m.metadata["processes"]
    assert meta["count"] == 3 and len(meta["medians"]) == 3 and len(meta["cpus"]) == 3
    assert m.process_medians == meta["medians"] and all(t > 0 for t in m.process_medians)
    assert sorted(set(blocks)) == [0, 1, 2] and blocks == sorted(blocks)  # one after another
    assert blocks.count(0) >= 5 and len(m.raw_times) == len(blocks)
    assert m.label == "sums" and "3 processes, their medians" in m.summary()


@pytest.mark.parametrize("kwargs, message", [
    (dict(processes=0), "processes must be an int from 1 to 64"),
    (dict(processes=True), "processes must be an int from 1 to 64"),
    (dict(processes=65), "processes must be an int from 1 to 64"),
    (dict(min_run_time=0), "min_run_time must be a number above 0"),
    (dict(stmt=b"x"), "stmt must be a str"),
])
def test_bad_arguments_are_refused_before_any_worker_starts(kwargs, message):
    with pytest.raises(UsageError, match=message):
        measure_in_processes(**{"stmt": "pass", **kwargs})


def test_a_statement_that_fails_names_the_process():
    from torchmark.core.errors import MeasurementError

    with pytest.raises(MeasurementError, match=r"process 1 of 2.*ZeroDivisionError"):
        measure_in_processes("1 / 0", processes=2, min_run_time=0.05)


def test_timeit_processes_runs_saved_and_stored_are_compared_by_their_processes(
        tmp_path, capsys):
    import json

    from torchmark.cli.main import main

    files, db = [tmp_path / "a.json", tmp_path / "b.json"], str(tmp_path / "runs.db")
    for f in files:
        assert main(["timeit", "--processes", "2", "--min-run-time", "0.1", "--db", db,
                     "--save", str(f), "sum(range(100))"]) == 0
        assert "2 processes, their medians" in capsys.readouterr().out
    assert main(["ab", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "compared by their processes' medians" in out
    # 2 and 2 processes give no interval at 95%: the verdict says so, and how to get one
    assert "too few processes" in out and "`timeit --processes 5` or more" in out
    for sides in (list(map(str, files)), ["run:1", "run:2"]):  # the store keeps them too
        assert main(["ab", *sides, "--db", db, "--format", "jsonl"]) == 0
        line = json.loads(capsys.readouterr().out.splitlines()[0])
        assert line["processes"] == [2, 2] and line["verdict"] == "unmeasured"


@pytest.mark.parametrize("extra, message", [
    (["--device", "cuda"], "--processes times wall time on the host"),
    (["--vs", "x + 2"], "it does not take --processes"),
    (["--processes", "0"], "0 is not in the range 1<=x<=64"),
])
def test_timeit_processes_refusals(extra, message, capsys):
    from torchmark.cli.main import main

    args = ["timeit", "-s", "x = 1", "x + 1", "--no-store"]
    args += extra if extra[0] == "--processes" else ["--processes", "2", *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err
