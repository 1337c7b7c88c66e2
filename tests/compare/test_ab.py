"""A/B comparison: the statistics of ab_test, the pairing, and `torchmark ab`."""

from __future__ import annotations

import csv
import io
import json
import time

import numpy as np
import pytest

from torchmark.cli.main import main
from torchmark.compare.ab import ab_test, pair_measurements
from torchmark.core.task_spec import TaskSpec
from torchmark.timing.files import save_measurements
from torchmark.timing.measurement import Measurement


def measurement(times, label="mul", sub_label="128", env=None, description=None, threads=1,
                number=1):
    spec = TaskSpec(stmt="x * y", setup="pass", label=label, sub_label=sub_label, env=env,
                    description=description, num_threads=threads)
    return Measurement(number, [t * number for t in times], spec)


def normal(mean, sd, n, seed):
    return list(np.random.default_rng(seed).normal(mean, sd, n))


def test_paired_verdicts_keep_their_false_alarm_rate():
    """Identical sides, lognormal noise: at 95%, few verdicts, whatever the pair count."""
    rng = np.random.default_rng(21)
    for n in (6, 8, 12, 30):
        verdicts = [ab_test(measurement(list(rng.lognormal(0, 0.1, n))),
                            measurement(list(rng.lognormal(0, 0.1, n))), paired=True).verdict
                    for _ in range(300)]
        assert sum(v in ("faster", "slower") for v in verdicts) / 300 <= 0.07, n


# -- ab_test ------------------------------------------------------------------------------
def test_a_clear_speed_up_is_faster_with_an_interval_around_the_ratio():
    result = ab_test(measurement(normal(10e-6, 0.2e-6, 40, 1)),
                     measurement(normal(8e-6, 0.2e-6, 40, 2)))
    assert result.verdict == "faster"
    assert result.ratio == pytest.approx(0.8, abs=0.02)
    assert result.ci_low < result.ratio < result.ci_high < 1
    assert result.p_value < 1e-6
    assert result.describe_verdict().startswith("faster by ")
    assert "faster by" in str(result) and "95% CI" in str(result)


def test_a_clear_slow_down_is_slower():
    result = ab_test(measurement(normal(1e-3, 1e-5, 20, 3)),
                     measurement(normal(1.3e-3, 1e-5, 20, 4)))
    assert result.verdict == "slower" and result.change == pytest.approx(0.3, abs=0.02)
    assert 1 < result.ci_low


def test_same_distribution_rarely_gives_a_verdict():
    """The false-positive rate of the verdict stays near 1 - confidence."""
    verdicts = [ab_test(measurement(normal(5e-6, 0.5e-6, 30, 2 * i)),
                        measurement(normal(5e-6, 0.5e-6, 30, 2 * i + 1)), resamples=500).verdict
                for i in range(100)]
    false_positives = sum(v in ("faster", "slower") for v in verdicts)
    assert false_positives <= 12, verdicts


def test_a_significant_change_smaller_than_min_effect_is_the_same():
    a, b = measurement(normal(1.0, 1e-4, 50, 5)), measurement(normal(1.005, 1e-4, 50, 6))
    assert ab_test(a, b, min_effect=0).verdict == "slower"
    result = ab_test(a, b)  # min_effect 1%: the whole interval within it
    assert result.verdict == "same"
    assert result.describe_verdict() == "same (+0.5%)"


def test_the_interval_is_reproducible_and_follows_the_seed():
    a, b = measurement(normal(1.0, 0.1, 15, 7)), measurement(normal(1.1, 0.1, 15, 8))
    first, again = ab_test(a, b), ab_test(a, b)
    assert (first.ci_low, first.ci_high) == (again.ci_low, again.ci_high)
    other = ab_test(a, b, seed=1)
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    wider = ab_test(a, b, confidence=0.99)
    assert wider.ci_low <= first.ci_low and first.ci_high <= wider.ci_high


def test_times_are_per_run_whatever_the_block_size():
    a = measurement([2e-6, 2.1e-6, 1.9e-6, 2e-6], number=1000)
    b = measurement([1e-6, 1.1e-6, 0.9e-6, 1e-6], number=10)
    assert ab_test(a, b).ratio == pytest.approx(0.5)


def test_pairs_cancel_drift_that_hides_a_difference_from_two_medians():
    """The machine's speed wanders 1x to 3x; B is always 5% slower than A beside it."""
    drift = np.random.default_rng(19).uniform(1e-6, 3e-6, 30)
    noise = np.random.default_rng(20).normal(1, 0.005, 30)
    a, b = measurement(list(drift)), measurement(list(drift * 1.05 * noise))
    assert ab_test(a, b).verdict == "unsure"
    paired = ab_test(a, b, paired=True)
    assert paired.verdict == "slower" and paired.paired
    assert paired.ratio == pytest.approx(1.05, abs=0.005)
    assert paired.ci_low < 1.05 < paired.ci_high and paired.p_value < 1e-5
    assert paired.to_dict()["paired"] is True
    with pytest.raises(ValueError, match="as many baseline as candidate times, got 30 and 3"):
        ab_test(a, measurement([1, 2, 3]), paired=True)


def test_too_few_samples_gives_no_interval():
    result = ab_test(measurement([1.0, 1.1, 1.0, 1.1]), measurement([2.0, 2.1, 2.2]))
    assert result.verdict == "unmeasured"
    assert "too few samples for an interval (4 and 3" in result.judged.reason
    assert np.isnan(result.ci_low) and result.ratio == pytest.approx(2.1 / 1.05)
    paired = ab_test(measurement([1, 1, 1, 1, 1]), measurement([2, 2, 2, 2, 2]), paired=True)
    assert paired.verdict == "unmeasured"  # 5 pairs cannot give a 95% interval
    assert "no interval" in str(result) and "nan" not in str(result)


def test_many_samples_stay_fast():
    a, b = measurement(normal(1.0, 0.1, 20_000, 9)), measurement(normal(1.0, 0.1, 20_000, 10))
    start = time.perf_counter()
    result = ab_test(a, b)
    assert time.perf_counter() - start < 30
    assert result.ci_low < 1 < result.ci_high


@pytest.mark.parametrize("kwargs, message", [
    ({"confidence": 1.0}, "confidence must be in (0, 1)"),
    ({"confidence": 0}, "confidence must be in (0, 1)"),
    ({"min_effect": -0.1}, "min_effect must be in [0, 10)"),
    ({"resamples": 10}, "resamples must be an int >= 100"),
    ({"resamples": 1000.0}, "resamples must be an int >= 100"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        ab_test(measurement([1, 2, 3]), measurement([1, 2, 3]), **kwargs)


def test_bad_measurements_are_named():
    with pytest.raises(TypeError, match=r"ab_test: candidate: builtins.list is not a "
                                        r"Measurement \(torchmark's or torch"):
        ab_test(measurement([1, 2, 3]), [1, 2, 3])
    with pytest.raises(ValueError, match="the baseline measurement holds no times"):
        ab_test(measurement([]), measurement([1, 2, 3]))
    with pytest.raises(ValueError, match="baseline's median time is zero"):
        ab_test(measurement([0, 0, 0]), measurement([1, 2, 3]))
    nan = Measurement(1, [1.0, float("nan"), 2.0], measurement([1]).task_spec)
    with pytest.raises(ValueError, match="candidate measurement holds a negative, NaN"):
        ab_test(measurement([1, 2, 3]), nan)


def test_torch_measurements_are_taken_as_compare_takes_them():
    from torch.utils.benchmark import Measurement as TorchMeasurement
    from torch.utils.benchmark.utils.common import TaskSpec as TorchTaskSpec

    def theirs(times, env):
        return TorchMeasurement(1, times, TorchTaskSpec("x * y", "pass", env=env))

    a, b = theirs(normal(1.0, 0.01, 20, 21), "a"), theirs(normal(2.0, 0.01, 20, 22), "b")
    assert ab_test(a, b).verdict == "slower"
    pairs, _, _ = pair_measurements([a], [b])
    assert [name for name, _, _ in pairs] == ["x * y"]


# -- pairing ------------------------------------------------------------------------------
def test_pairs_by_task_ignoring_the_tag_that_names_the_side():
    before = [measurement([1, 2, 3], sub_label="128", env="before"),
              measurement([1, 2, 3], sub_label="4096", env="before"),
              measurement([1, 2, 3], sub_label="only-a", env="before")]
    after = [measurement([1, 2, 3], sub_label="4096", env="after"),
             measurement([1, 2, 3], sub_label="128", env="after"),
             measurement([1, 2, 3], sub_label="only-b", env="after")]
    pairs, only_a, only_b = pair_measurements(before, after)
    assert [(name, a.sub_label, b.sub_label) for name, a, b in pairs] == [
        ("mul / 128", "128", "128"), ("mul / 4096", "4096", "4096")]
    assert only_a == ["mul / only-a"] and only_b == ["mul / only-b"]


def test_a_field_that_varies_within_a_side_stays_in_the_key():
    """As in ops results: the file's name is the description, the pass is the env."""
    a = [measurement([1, 2, 3], env=p, description="run-a") for p in ("forward", "backward")]
    b = [measurement([4, 5, 6], env=p, description="run-b") for p in ("backward", "forward")]
    pairs, only_a, only_b = pair_measurements(a, b)
    assert [(name, x.env, y.env) for name, x, y in pairs] == [
        ("mul / 128 / forward", "forward", "forward"),
        ("mul / 128 / backward", "backward", "backward")]
    assert not only_a and not only_b


def spec_measurement(times, **fields):
    spec = TaskSpec(**{"stmt": "x * x", "setup": "pass", **fields})
    return Measurement(1, list(times), spec)


def test_cases_differing_only_in_setup_or_statement_stay_apart():
    sizes = [spec_measurement([1, 2, 3], setup=f"x = torch.ones({n})", env=env)
             for env in ("before", "after") for n in (10, 100000)]
    pairs, only_a, only_b = pair_measurements(sizes[:2], sizes[2:])
    assert [name for name, _, _ in pairs] == ["x * x [setup: x = torch.ones(10)]",
                                              "x * x [setup: x = torch.ones(100000)]"]
    assert [(a.setup, b.setup) for _, a, b in pairs] == [
        ("x = torch.ones(10)",) * 2, ("x = torch.ones(100000)",) * 2]
    a = [spec_measurement([1, 2, 3], stmt="x + 1", sub_label="s", env="before")]
    b = [spec_measurement([1, 2, 3], stmt="x - 1", sub_label="s", env="after")]
    pairs, only_a, only_b = pair_measurements(a, b)
    assert not pairs and only_a == ["s [stmt: x + 1]"] and only_b == ["s [stmt: x - 1]"]


def test_only_one_field_names_the_side():
    a = [spec_measurement([1, 2, 3], label="mul", sub_label="128", num_threads=1)]
    b = [spec_measurement([1, 2, 3], label="add", sub_label="4096", num_threads=4)]
    pairs, only_a, only_b = pair_measurements(a, b)
    assert not pairs and only_a == ["128 / 1 thread"] and only_b == ["4096 / 4 threads"]


def test_empty_and_missing_fields_are_the_same_and_names_are_one_line():
    a = [spec_measurement([1, 2, 3], stmt="y = x\ny.sum()", description="", env="A")]
    b = [spec_measurement([1, 2, 3], stmt="y = x\ny.sum()", description=None, env="B")]
    pairs, _, _ = pair_measurements(a, b)
    assert [name for name, _, _ in pairs] == ["y = x y.sum()"]


def test_replicates_are_pooled_and_thread_counts_named():
    a = [measurement([1, 2], threads=1), measurement([3, 4], threads=1),
         measurement([5, 6], threads=2)]
    b = [measurement([1, 1, 1], threads=1), measurement([2, 2, 2], threads=2)]
    pairs, _, _ = pair_measurements(a, b)
    assert [name for name, _, _ in pairs] == ["mul / 128 / 1 thread", "mul / 128 / 2 threads"]
    assert sorted(pairs[0][1].times) == [1, 2, 3, 4]


# -- the command --------------------------------------------------------------------------
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ab_files(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_measurements(a, [measurement(normal(10e-6, 0.1e-6, 20, 11), sub_label="fast"),
                          measurement(normal(10e-6, 0.1e-6, 20, 12), sub_label="same"),
                          measurement(normal(10e-6, 0.1e-6, 20, 13), sub_label="gone")])
    save_measurements(b, [measurement(normal(13e-6, 0.1e-6, 20, 14), sub_label="fast"),
                          measurement(normal(10e-6, 0.1e-6, 20, 15), sub_label="same")])
    return a, b


def test_cli_prints_a_table_and_fails_above_a_slow_down(capsys, ab_files):
    a, b = ab_files
    code, out, err = run(capsys, "ab", str(a), str(b))
    assert code == 0, err
    lines = out.splitlines()
    # two cases compared: each at 97.5%, so the two together hold at 95%
    assert lines[1].split() == ["case", "baseline", "candidate", "ratio", "97.5%", "interval",
                                "p", "verdict"]
    assert any(line.startswith("mul / fast") and "slower by 3" in line for line in lines)
    assert any(line.startswith("mul / same") and "unsure (" in line for line in lines)
    assert "only in the baseline: mul / gone" in out
    assert lines[-2] == "1 slower, 1 unsure"
    assert lines[-1].startswith("note: the two sides were measured at different times")
    code, _, err = run(capsys, "ab", str(a), str(b), "--fail-above", "20%")
    assert code == 1 and "1 case(s) slower by more than 20.0%: mul / fast" in err
    # 'mul / gone' ran in the baseline only (as when it failed in the candidate's run)
    code, _, err = run(capsys, "ab", str(a), str(b), "--fail-above", "0.4")
    assert code == 1 and "slower" not in err
    assert "1 case(s) of the baseline not checked against --fail-above (missing from the " \
           "candidate, or not comparable): mul / gone" in err
    assert run(capsys, "ab", str(b), str(a), "--fail-above", "40%")[0] == 0  # a new case
    # one threshold syntax: a bare number of 1 or more is ambiguous, as for `gate`
    code, _, err = run(capsys, "ab", str(a), str(b), "--fail-above", "20")
    assert code == 2 and "20 is ambiguous: write 20% or a fraction such as 0.2" in err


def test_cli_machine_readable_formats(capsys, ab_files):
    a, b = ab_files
    code, out, _ = run(capsys, "ab", str(a), str(b), "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["verdict"] for r in rows] == ["slower", "unsure"]
    assert rows[0]["ratio"] == pytest.approx(1.3, abs=0.03) and rows[0]["baseline_samples"] == 20
    code, out, _ = run(capsys, "ab", str(a), str(b), "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert [row["name"] for row in table] == ["mul / fast", "mul / same"]
    assert float(table[0]["ratio"]) == pytest.approx(rows[0]["ratio"], rel=1e-5)
    code, out, _ = run(capsys, "ab", str(a), str(b), "--format", "markdown")
    assert "|---|---:|---:|---:|---|---:|---|" in out


def test_cli_lists_what_it_did_not_compare_in_every_format(capsys, tmp_path, ab_files):
    a, b = ab_files
    code, out, err = run(capsys, "ab", str(a), str(b), "--format", "jsonl")
    assert code == 0 and "only in the baseline: mul / gone" in err
    assert all(json.loads(line) for line in out.splitlines())  # stdout stays valid JSON lines
    other = tmp_path / "other.json"
    save_measurements(other, [measurement([1, 2, 3, 4, 5], label="add", sub_label="z")])
    for extra in ([], ["--fail-above", "5%"]):  # refused as `gate` refuses them
        code, out, err = run(capsys, "ab", str(a), str(other), *extra)
        assert code == 2 and "hold no case in common" in err and not out


def test_cli_refuses_one_ops_file(capsys, tmp_path):
    path = tmp_path / "ops.jsonl"
    path.write_text(json.dumps({"type": "header", "schema": "torchmark.ops.results",
                                "version": 1}) + "\n")
    code, _, err = run(capsys, "ab", str(path))
    assert code == 2 and "an ops results file holds one run" in err


def test_cli_one_file_with_two_envs(capsys, tmp_path):
    path = tmp_path / "ab.json"
    save_measurements(path, [measurement(normal(1.0, 0.01, 10, 16), env="before"),
                             measurement(normal(0.5, 0.01, 10, 17), env="after")])
    code, out, err = run(capsys, "ab", str(path))
    assert code == 0, err
    assert out.startswith("baseline: before; candidate: after;")
    assert "faster by 5" in out


def test_cli_errors(capsys, tmp_path, ab_files):
    a, b = ab_files
    code, _, err = run(capsys, "ab", str(a), str(b), str(a))
    assert code == 2 and "give one or two files, got 3" in err
    code, _, err = run(capsys, "ab", str(a))
    assert code == 2 and "must hold measurements of exactly two envs" in err
    code, _, err = run(capsys, "ab", str(a), str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json' is not a run id" in err and "(no such file)" in err
    zero = tmp_path / "zero.json"
    save_measurements(zero, [measurement([0.0, 0.0, 0.0], sub_label="fast"),
                             measurement(normal(10e-6, 0.1e-6, 20, 18), sub_label="same")])
    code, out, _ = run(capsys, "ab", str(zero), str(b))
    assert code == 0  # the case that cannot be compared is named; the other is compared
    assert "not compared: mul / fast: the baseline's median time is zero" in out
    assert "mul / same" in out


# -- interleaved measurement --------------------------------------------------------------
def test_measure_ab_interleaves_blocks_and_tells_a_clear_difference(monkeypatch):
    import torchmark as benchmark

    small = benchmark.Timer("sum(range(50))", label="sum")
    large = benchmark.Timer("sum(range(5000))", label="sum")
    calls = []
    for side, timer in (("A", small), ("B", large)):
        original = timer._timeit
        monkeypatch.setattr(timer, "_timeit", lambda n, side=side, original=original: (
            calls.append(side), original(n))[1])
    result = benchmark.measure_ab(small, large, min_run_time=0.05, min_blocks=6)
    assert result.verdict == "slower" and result.ratio > 5
    a, b = result.baseline, result.candidate
    assert len(a.times) >= 6 and len(b.times) >= 6
    assert sum(a.raw_times) >= 0.05 and sum(b.raw_times) >= 0.05
    timed = calls[-(len(a.times) + len(b.times)):]
    assert timed[:8] == list("ABBAABBA")
    # blocks sized to take about as long: the cheaper statement gets many more runs a
    # block (its work is 1/100; unsized blocks would hold as many runs on each side).
    # Their durations are not compared: a loaded machine's sizing estimates put them
    # 8x apart in either direction (2 of 5 loops beside other timing jobs)
    assert a.number_per_run > 4 * b.number_per_run, (a.number_per_run, b.number_per_run)
    assert result.paired and result.to_dict()["paired"]


def test_measure_ab_argument_errors():
    import torchmark as benchmark

    t = benchmark.Timer("pass")
    with pytest.raises(ValueError, match="the same Timer"):
        benchmark.measure_ab(t, t)
    with pytest.raises(TypeError, match="candidate must be a Timer, got str"):
        benchmark.measure_ab(t, "pass")
    with pytest.raises(ValueError, match="min_blocks must be a positive int"):
        benchmark.measure_ab(t, benchmark.Timer("pass"), min_blocks=0)


def test_json_summary_has_no_nan():
    text = json.dumps(ab_test(measurement([1.0, 1.1]), measurement([2.0, 2.1])).to_dict(),
                      allow_nan=False)
    assert json.loads(text)["ci_low"] is None


def test_timeit_vs_prints_both_and_a_verdict(capsys):
    code, out, err = run(capsys, "timeit", "sum(range(10))", "--vs", "sum(range(3000))",
                         "--min-run-time", "0.05")
    assert code == 0, err
    assert out.startswith("sum(range(10))\n") and "\nsum(range(3000))\n" in out
    assert out.splitlines()[-1].startswith(
        "candidate / baseline (--vs 'sum(range(3000))' / 'sum(range(10))', median of ")
    assert "slower by" in out.splitlines()[-1]
    code, _, err = run(capsys, "timeit", "pass", "--vs", "pass", "--save", "x.json",
                       "--env", "A")
    assert code == 2 and "does not take --save, --env" in err


def test_cli_says_why_a_case_has_too_few_samples(capsys, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_measurements(a, [measurement([1e-6, 1.1e-6], sub_label="short")])
    save_measurements(b, [measurement([2e-6, 2.1e-6, 2.2e-6], sub_label="short")])
    code, out, _ = run(capsys, "ab", str(a), str(b))
    assert code == 0 and "too few samples: 1 case(s) have as few as 2 time(s)" in out
    assert "needs 5" in out and "--exec-mode discrete" in out
    code, out, err = run(capsys, "ab", str(a), str(b), "--format", "csv")
    assert "too few samples: 1 case(s)" in err and "too few" not in out.splitlines()[0]
    # a CI gate that cannot tell does not pass (the candidate here is 2x slower)
    code, _, err = run(capsys, "ab", str(a), str(b), "--fail-above", "5%")
    assert code == 1 and "1 case(s) not measured well enough for a verdict" in err


def test_an_ops_file_from_before_thread_counts_were_kept_still_pairs(tmp_path, capsys):
    from torchmark.ops import RunOptions, config_from_data
    from torchmark.ops import run as run_ops

    config = config_from_data({"torch.neg": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [64]}]}]}]}})
    for name in ("old", "new"):
        run_ops(config, RunOptions(warmup=1, iterations=8), out=tmp_path / f"{name}.jsonl")
    lines = (tmp_path / "old.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    del header["threads"]  # as written before the header recorded the count used
    (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    code, out, _ = run(capsys, "ab", str(tmp_path / "old.jsonl"), str(tmp_path / "new.jsonl"))
    assert code == 0 and "torch.neg" in out and "only in" not in out


def _runs(median: float, spread: float, n: int = 40, seed: int = 0) -> Measurement:
    rng = np.random.default_rng(seed)
    times = median * (1 + spread * (rng.random(n) - 0.5))  # IQR about spread / 2
    return Measurement(1, list(times), TaskSpec(stmt="f(x)", setup="pass"))


def test_a_sequential_change_within_the_runs_spread_is_unsure():
    """Two runs one after the other: drift between them is not controlled, so a change
    is called only far beyond their spread (3 x the sum of IQR / median)."""
    from torchmark.verdicts.drift import SEQUENTIAL_SPREADS

    a, b = _runs(1e-6, 0.04), _runs(1.05e-6, 0.04, seed=1)  # 5% apart, ~2% IQR each
    r = ab_test(a, b)
    assert r.p_value < 0.01 and r.ci_low > 1  # significant within the runs ...
    assert r.drift_margin == pytest.approx(SEQUENTIAL_SPREADS * (a.iqr / a.median
                                                                 + b.iqr / b.median), rel=0.05)
    assert r.verdict == "unsure"  # ... but not beyond what drift can do
    assert r.describe_verdict().startswith("unsure (+") and \
        "within what two runs of the same code differ by" in r.describe_verdict()
    # a table's cell: the change and the interval that decided; the notes say why
    assert r.brief_verdict() == f"unsure ({r.change:+.1%} {r.judged.interval()})"
    assert r.judged.lower < 1 < r.judged.upper
    far = ab_test(a, _runs(1.5e-6, 0.04, seed=2))
    assert far.verdict == "slower"
    paired = ab_test(a, b, paired=True)  # side by side: no drift margin
    assert paired.drift_margin == 0 and paired.verdict == "slower"


def test_a_paired_result_prints_the_ratio_its_verdict_is_about():
    a = _runs(1.848e-6, 0.02)
    b = Measurement(1, [t * 1.014 for t in a.times], a.task_spec)
    text = str(ab_test(a, b, paired=True))
    assert "candidate / baseline = median ratio of 40 paired blocks 1.014" in text
    assert "slower by 1.4%" in text and "->" not in text


class _Source:
    """A statement of a fixed cost a run whose timed blocks some pauses lengthen."""

    def __init__(self, per_run: float, pauses: list[float]) -> None:
        self.per_run, self.pauses = per_run, list(pauses)

    def estimate_block_size(self, min_run_time: float) -> int:
        return max(1, round(min_run_time / 10 / self.per_run))

    def time_block(self, number: int) -> float:
        return number * self.per_run * (self.pauses.pop(0) if self.pauses else 1.0)

    def clock_overhead(self) -> float:
        return 1e-8


def test_interleaved_statements_of_one_cost_run_one_count():
    """Statements of one cost run one count though pauses lengthened most of one side's
    estimate blocks (the fastest block of each side is what it costs); statements 4x
    apart run counts 4x apart. Then real Timers: blocks interleaved, as many a side."""
    import torchmark
    from torchmark.compare.interleave import block_numbers, interleaved_blocks

    a, b = _Source(1e-6, []), _Source(1e-6, [3.0, 1.6, 2.5, 1.0, 4.0])
    first, second = block_numbers((a, b), 0.05)
    assert first == second
    a, b = _Source(1e-6, []), _Source(4e-6, [])
    first, second = block_numbers((a, b), 0.05)
    assert first == 4 * second
    setup = "x = torch.ones(128); y = torch.ones(128)"
    ma, mb = interleaved_blocks(torchmark.Timer("x * y", setup), torchmark.Timer("x * y", setup),
                                min_run_time=0.05, min_blocks=6)
    assert len(ma.times) == len(mb.times) >= 6


def test_the_drift_margin_is_symmetric_and_unsure_passes_a_gate(tmp_path, capsys):
    """In log space: a 2.4x speedup is as far from 1 as a 2.4x slowdown; and a change
    the gate cannot tell from drift is unsure, which passes (as `gate` passes it)."""
    a = _runs(1e-6, 0.8, n=60)
    faster, slower = ab_test(a, _runs(1e-6 / 2.4, 0.8, n=60, seed=1)), \
        ab_test(a, _runs(2.4e-6, 0.8, n=60, seed=1))
    assert faster.drift_margin > 1  # a margin no speedup could pass by |ratio - 1|
    assert {faster.verdict, slower.verdict} in ({"faster", "slower"}, {"unsure"})
    base, cand = tmp_path / "a.json", tmp_path / "b.json"
    save_measurements(base, [_runs(1e-6, 0.2, n=40)])
    save_measurements(cand, [_runs(1.25e-6, 0.2, n=40, seed=3)])
    r = ab_test(_runs(1e-6, 0.2, n=40), _runs(1.25e-6, 0.2, n=40, seed=3))
    assert r.verdict == "unsure"
    assert main(["ab", str(base), str(cand), "--fail-above", "5%"]) == 0
    assert capsys.readouterr().err == ""


def test_no_setup_pairs_with_no_setup_however_written():
    """A stored side says "pass" where a results file says "" (or "   "): the same case."""
    import dataclasses

    def with_setup(m, setup):
        return Measurement(m.number_per_run, m.raw_times,
                           dataclasses.replace(m.task_spec, setup=setup), m.metadata)

    a = with_setup(measurement([1e-6] * 6, env="a"), "pass")
    b = with_setup(measurement([1e-6] * 6, env="b"), "")
    other = with_setup(measurement([1e-6] * 6, env="b"), "x = 1")
    pairs, only_a, only_b = pair_measurements([a], [b])
    assert len(pairs) == 1 and only_a == only_b == []
    assert len(pair_measurements([a], [other])[0]) == 0  # a real setup still tells apart


def test_sides_told_apart_by_their_threads_are_no_runs_of_one_build():
    """Two files of one clean commit and env label, timed at 1 and 4 threads: the build
    does not record the thread count, so their 4x change is judged as it is."""
    from torchmark.cli.ab_cmd import compare_sides

    def timed(threads, scale, seed):
        rng = np.random.default_rng(seed)
        return Measurement(1, list(scale * (1 + 0.01 * rng.random(50))),
                           TaskSpec(stmt="torch.mm(a, b)", setup="pass", label="mm",
                                    num_threads=threads),
                           {"build": "one"})

    results, *_ = compare_sides([[timed(1, 4.0, 1)], [timed(4, 1.0, 2)]], 0.95, 0.05, 0)
    assert [r.verdict for r in results] == ["faster"]
    results, *_ = compare_sides([[timed(1, 4.0, 1)], [timed(1, 1.0, 2)]], 0.95, 0.05, 0)
    assert [r.verdict for r in results] == ["unsure"]  # only the build tells them apart
