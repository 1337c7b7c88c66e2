"""`torchmark gate` on constructed stores: a clear slowdown, a clear speed-up, noise
only, an instruction-count step; and how its references resolve."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from torchmark.cli.main import main
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.records import save_results
from torchmark.store import Store

CASES = [Case(id=f"timeit:c{i}", frontend="timeit", stmt=f"torch.add(x, {i})",
              label="add", sub_label=f"n={i}") for i in range(4)]
COUNTED = Case(id="callgrind:c", frontend="callgrind", stmt="torch.add(x, 1)", label="add")


def wall(case: Case, median: float, seed: int, noise: float = 0.01, n: int = 30) -> Result:
    rng = np.random.default_rng(seed)
    samples = median * (1 + noise * rng.standard_normal(n))
    return Result(case=case, metric="wall", samples=tuple(samples), number_per_run=100,
                  unit="s")


def counts(value: float) -> Result:
    return Result(case=COUNTED, metric="instructions", samples=(value,) * 3, unit="instructions")


def record(store: Store, results: list[Result], commit: str, env: str = "ci") -> int:
    provenance = dataclasses.replace(Provenance.capture(env=env), git_commit=commit,
                                     git_dirty=False)
    run = store.start_run(provenance)
    store.record(results, run)
    store.finish_run(run, "ok")
    return run


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'gate.db'}"


def gate(db: str, *args: str) -> int:
    return main(["gate", "--db", db, *args])


def test_a_clear_slowdown_fails_and_writes_a_markdown_table(db, tmp_path, capsys):
    store = Store(db)
    base = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "aaaa1111")
    slower = [wall(c, 1e-5 * (1.25 if i == 2 else 1.0), 10 + i) for i, c in enumerate(CASES)]
    cand = record(store, slower, "bbbb2222")
    md = tmp_path / "gate.md"
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--markdown", str(md)) == 1
    out = capsys.readouterr()
    assert "1 slower, 3 unsure" in out.out and "1 case(s) slower" in out.err
    text = md.read_text()
    assert "| add: n=2 | wall |" in text and "+24.9%" in text and "n=1" not in text
    # the same comparison named by commit, and by `latest`
    assert gate(db, "--baseline", "commit:aaaa", "--candidate", "latest") == 1
    # a threshold above the step passes
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--max-slowdown", "40%") == 0


def test_a_clear_speedup_passes(db, capsys):
    store = Store(db)
    base = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1")
    cand = record(store, [wall(c, 0.7e-5, 20 + i) for i, c in enumerate(CASES)], "b2")
    assert gate(db, "--baseline", f"run:{base}", "--candidate", f"run:{cand}") == 0
    assert "4 faster" in capsys.readouterr().out


def test_noise_only_passes(db, capsys):
    """Ten candidate runs of the same build against one baseline, 3% noise: no alarm."""
    store = Store(db)
    base = record(store, [wall(c, 1e-5, i, noise=0.03) for i, c in enumerate(CASES)], "a1")
    for k in range(10):
        cand = record(store, [wall(c, 1e-5, 100 * k + i, noise=0.03)
                              for i, c in enumerate(CASES)], "a1")
        assert gate(db, "--baseline", str(base), "--candidate", str(cand)) == 0


def test_instruction_counts_are_gated_exactly(db, capsys):
    store = Store(db)
    base = record(store, [counts(1_000_000)], "a1")
    up = record(store, [counts(1_008_000)], "b2")  # +0.8%: exact, so a real step
    assert gate(db, "--baseline", str(base), "--candidate", str(up), "--metric",
                "instructions", "--max-slowdown", "0.5%") == 1
    assert "+0.8%" in capsys.readouterr().out
    assert gate(db, "--baseline", str(base), "--candidate", str(up),
                "--max-slowdown", "1%") == 0


def test_a_file_side_holding_a_case_under_two_env_labels_is_refused(db, tmp_path, capsys):
    """`timeit --env before` then `--env after` into one file: a side would pool before
    and after (the gate read a 55% slowdown as unsure and passed); ab compares them."""
    path = tmp_path / "both.jsonl"
    for env, median in (("before", 1e-5), ("after", 1.5e-5)):
        provenance = Provenance.capture(env=env)
        save_results(path, [dataclasses.replace(wall(dataclasses.replace(c, env=env), median,
                                                     i), provenance=provenance)
                            for i, c in enumerate(CASES)])  # as timeit --env writes them
    capsys.readouterr()
    assert gate(db, "--baseline", str(path), "--candidate", str(path)) == 2
    err = capsys.readouterr().err
    assert f"{path}: holds add: n=0 under several env labels (after, before)" in err
    assert main(["ab", str(path)]) == 0 and "4 slower" in capsys.readouterr().out


def test_refs_by_env_and_file_and_case_patterns(db, tmp_path):
    store = Store(db)
    record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1", env="before")
    slower = [wall(c, 1.5e-5 if i == 0 else 1e-5, 30 + i) for i, c in enumerate(CASES)]
    record(store, slower, "a1", env="after")
    assert gate(db, "--baseline", "env:before", "--candidate", "env:after") == 1
    assert gate(db, "--baseline", "env:before", "--candidate", "env:after",
                "--cases", "add: n=[123]", "--glob") == 0
    # a title is found as it is, without --glob: brackets are no pattern
    assert gate(db, "--baseline", "env:before", "--candidate", "env:after",
                "--cases", "add: n=0") == 1
    assert gate(db, "--baseline", "env:before", "--candidate", "env:after",
                "--cases", "add: n=[123]") == 2
    path = tmp_path / "cand.jsonl"
    save_results(path, slower)
    assert gate(db, "--baseline", "env:before", "--candidate", str(path)) == 1


def test_two_runs_of_one_build_are_never_slower_in_any_command(db, capsys, tmp_path):
    """The same clean commit, torch, machine and env label twice, one case 2x slower in
    the second run (a process lottery on a busy machine): gate, compare, ab and the
    dashboard's comparison all say unsure, naming the one build; a run at another
    commit with the same change is slower everywhere."""
    from torchmark.report import views

    store = Store(db)
    first = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "same1111")
    twice = [wall(c, 2e-5 if i == 0 else 1e-5, 10 + i) for i, c in enumerate(CASES)]
    again = record(store, twice, "same1111")
    other = record(store, twice, "other222")
    for cand, kind, code in ((again, "unsure", 0), (other, "slower", 1)):
        assert gate(db, "--baseline", str(first), "--candidate", str(cand)) == code
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if "n=0" in line)
        assert kind in row and ("one build" in out) == (kind == "unsure")
        assert main(["compare", str(first), str(cand), "--db", db]) == 0
        row = next(line for line in capsys.readouterr().out.splitlines()
                   if "n=0" in line and "%" in line)
        assert kind in row
        assert main(["ab", str(first), str(cand), "--db", db, "--format", "jsonl"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert next(r for r in rows if "n=0" in r["name"])["verdict"] == kind
        page = views.compare_view(store, first, cand)
        assert next(r for r in page["rows"] if r["case"] == "add: n=0")["verdict"] == kind
        files = []
        for run in (first, cand):  # the runs as results files, their provenance kept
            files.append(str(tmp_path / f"run{run}.jsonl"))
            save_results(files[-1], store.result_records(run=run))
        assert main(["ab", *files]) == 0
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if "n=0" in line and "[" in line)
        assert kind in row and ("runs of one build" in out) == (kind == "unsure")


def test_a_case_failed_in_the_candidate_is_failed_in_gate_and_ab_alike(db, capsys,
                                                                       tmp_path):
    """Case 1 failed in the candidate run: gate and ab (on the runs, and on their
    results files) both call it failed, judge the other cases as one family of four
    (the same intervals), and fail a --fail-above / the gate."""
    from torchmark.core.result import Failure

    store = Store(db)
    base = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1")
    failed = Result(case=CASES[1], metric="wall", unit="s", number_per_run=100, samples=(),
                    failure=Failure("RuntimeError: boom"))
    cand = record(store, [wall(c, 1.02e-5, 20 + i) if i != 1 else failed
                          for i, c in enumerate(CASES)], "b2")
    assert gate(db, "--baseline", str(base), "--candidate", str(cand)) == 1
    out = capsys.readouterr().out
    gated = {line.split()[1]: line for line in out.splitlines() if "n=" in line}
    assert "failed" in gated["n=1"]
    files = []
    for run in (base, cand):
        files.append(str(tmp_path / f"run{run}.jsonl"))
        save_results(files[-1], store.result_records(run=run))
    for sides in ([str(base), str(cand), "--db", db], files):
        assert main(["ab", *sides, "--format", "jsonl", "--fail-above", "0.05"]) == 1
        captured = capsys.readouterr()
        rows = {r["name"]: r for r in map(json.loads, captured.out.splitlines())}
        assert len(rows) == 4 and "only in the baseline" not in captured.err
        failed_row = next(r for name, r in rows.items() if "n=1" in name)
        assert failed_row["verdict"] == "failed" and failed_row["candidate_median"] is None
        assert "1 case(s) failed in the candidate" in captured.err
        for name, row in rows.items():  # each interval the gate's: a family of four
            if "n=1" in name:
                continue
            shown = next(line for key, line in gated.items() if key in name)
            assert row["verdict"] in shown
            assert f"[{row['lower'] - 1:+.1%}, {row['upper'] - 1:+.1%}]" in shown
    save_results(files[1], store.result_records(run=cand))  # the case failed twice: one
    save_results(files[0], store.result_records(run=base))  # row still, no time made up
    assert main(["ab", *files, "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["verdict"], r["candidate_median"]) for r in rows if "n=1" in r["name"]] == \
        [("failed", None)]
    assert main(["show", str(cand), "--db", db]) == 0  # named as its table names it
    assert "add: n=1: failed: RuntimeError: boom" in capsys.readouterr().out
    assert main(["compare", *files]) == 0  # a blank cell, and why
    assert "failed in " + files[1] + ": add / n=1: RuntimeError: boom" in \
        capsys.readouterr().out
    assert main(["ab", str(base), str(cand), "--db", db]) == 0
    table = capsys.readouterr().out
    cells = re.split(r"\s{2,}", next(line for line in table.splitlines()
                                     if "n=1" in line).strip())
    assert cells[2] == "failed" and cells[-1] == "failed", cells


def test_an_env_label_gives_each_case_from_its_newest_run_holding_it(db):
    """Run 3 measured cases 0 and 1 again, run 2 case 2, run 1 all four: env:ci is case 0
    and 1 from run 3, case 2 from run 2, case 3 from run 1 (read through the runs' packed
    medians, so only these results are read)."""
    from torchmark.regressions.refs import resolve_side

    store = Store(db)
    first = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1")
    second = record(store, [wall(CASES[2], 2e-5, 7)], "a2")
    third = record(store, [wall(c, 3e-5, 8 + i) for i, c in enumerate(CASES[:2])]
                   + [counts(1e6)], "a3")
    record(store, [wall(CASES[0], 9e-5, 20)], "a4", env="other")
    side = resolve_side("env:ci", store)
    assert side.runs == (third, second, first)
    by_case = {r.case.id: (r.metric, round(float(np.median(r.samples)) / 1e-5))
               for r in side.results}
    assert by_case == {CASES[0].id: ("wall", 3), CASES[1].id: ("wall", 3),
                       CASES[2].id: ("wall", 2), CASES[3].id: ("wall", 1),
                       COUNTED.id: ("instructions", 1e11)}
    assert len(side.results) == 5


@pytest.mark.parametrize("args, message", [
    (["--baseline", "nosuch", "--candidate", "latest"], "is not a run id"),
    (["--baseline", "run:99", "--candidate", "latest"], "holds no finished run"),
    (["--baseline", "missing.json", "--candidate", "latest"], "missing.json: no such file"),
    (["--baseline", "run:1", "--candidate", "run:2", "--metric", "device"], "no case in common"),
    (["--baseline", "latest", "--candidate", "run:2"], "latest and run:2 are the same run (2)"),
    (["--baseline", "latest", "--candidate", "latest", "--max-slowdown", "-3"], "max-slowdown"),
    (["--baseline", "latest", "--candidate", "latest", "--max-slowdown", "1"],
     "1 is ambiguous: write 1% or a fraction such as 0.01"),
])
def test_usage_errors_exit_2(db, capsys, args, message):
    store = Store(db)
    record(store, [wall(CASES[0], 1e-5, 0)], "a1")
    record(store, [wall(CASES[0], 1e-5, 1)], "a2")
    assert gate(db, *args) == 2
    assert message in capsys.readouterr().err


def test_compare_of_two_stored_runs_gives_each_case_a_verdict(db, capsys):
    store = Store(db)
    base = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1")
    cand = record(store, [wall(c, 1e-5 * (1.3 if i == 0 else 1.0), 40 + i)
                          for i, c in enumerate(CASES)], "b2")
    assert main(["compare", f"run:{base}", f"run:{cand}", "--db", db]) == 0
    out = capsys.readouterr().out
    verdicts = [line for line in out.splitlines() if line.startswith("add: n=")
                and "[wall]:" not in line]
    assert len(verdicts) == 4
    assert verdicts[0].startswith("add: n=0") and "+29.8%" in verdicts[0] and \
        verdicts[0].endswith("slower")
    assert sum(v.endswith("unsure") for v in verdicts) == 3
    # the gate at the same threshold says the same, case by case
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--max-slowdown", "1%") == 1
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("add: n=") and "[wall]:" not in line]
    assert sorted(rows) == sorted(verdicts)


def test_an_ambiguous_commit_prefix_is_refused(db, capsys):
    store = Store(db)
    record(store, [wall(CASES[0], 1e-5, 0)], "abc111")
    record(store, [wall(CASES[0], 1e-5, 1)], "abc222")
    assert gate(db, "--baseline", "commit:abc", "--candidate", "latest") == 2
    assert "commit:abc is ambiguous: it begins 2 commits" in capsys.readouterr().err
    assert gate(db, "--baseline", "commit:abc1", "--candidate", "commit:abc2") == 0


def test_a_case_that_was_not_measured_fails_the_gate_unless_allowed(db, tmp_path, capsys):
    """A 7.4x slowdown measured with too few samples for an interval is unmeasured: it
    fails the gate (a gate never passes what it could not check)."""
    store = Store(db)
    base = record(store, [wall(CASES[0], 1e-5, 0, n=12)], "a1")
    cand = record(store, [wall(CASES[0], 7.4e-5, 1, n=3)], "b2")  # 7.4x, 3 samples
    md = tmp_path / "gate.md"
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--markdown", str(md)) == 1
    out = capsys.readouterr()
    assert "1 unmeasured" in out.out and "+642.0%" in out.out
    assert "add: n=0 [wall]: unmeasured: too few samples for an interval (12 and 3; 5 a " \
           "side needed)" in out.out
    assert "gate: 1 case(s) unmeasured" in out.err
    assert "1 case(s) failed the gate" in md.read_text() and "unmeasured" in md.read_text()
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--allow-unmeasured") == 0


def test_a_case_missing_from_the_candidate_fails_the_gate_unless_allowed(db, tmp_path,
                                                                        capsys):
    """The candidate's run lacks a case of the baseline (its benchmark was not run): not
    measured there, so it fails the gate, as `ab --fail-above` fails it; --cases for the
    part measured, or --allow-unmeasured, lets the rest pass."""
    store = Store(db)
    base = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1")
    cand = record(store, [wall(c, 1e-5, 10 + i) for i, c in enumerate(CASES[:3])], "b2")
    md = tmp_path / "gate.md"
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--markdown", str(md)) == 1
    out = capsys.readouterr()
    assert "only in the baseline: add: n=3 [wall]" in out.out
    assert "gate: 1 case(s) missing from the candidate (not measured there" in out.err
    assert "Missing from the candidate (not measured there): add: n=3 [wall]" in \
        md.read_text()
    assert main(["ab", str(base), str(cand), "--fail-above", "5%", "--db", db]) == 1
    assert gate(db, "--baseline", str(base), "--candidate", str(cand),
                "--allow-unmeasured") == 0
    assert gate(db, "--baseline", str(base), "--candidate", str(cand), "--cases",
                "add: n=[012]", "--glob") == 0


def test_a_results_file_and_a_side_of_the_store_pair_in_every_command(db, tmp_path, capsys):
    """A results file of the `before` run against env:after of the store: ab and compare
    pair its cases as gate does, with the gate's verdicts."""
    store = Store(db)
    before = record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], "a1",
                    env="before")
    record(store, [wall(c, 2e-5 if i == 0 else 1e-5, 10 + i) for i, c in enumerate(CASES)],
           "b2", env="after")
    path = str(tmp_path / "before.jsonl")
    save_results(path, store.result_records(run=before))
    assert gate(db, "--baseline", path, "--candidate", "env:after") == 1
    verdicts = [line.split()[-1] for line in capsys.readouterr().out.splitlines()
                if line.startswith("add: n=") and "[wall]:" not in line]  # not the reasons
    assert main(["ab", path, "env:after", "--db", db, "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["verdict"] for r in rows) == sorted(verdicts) and len(rows) == 4
    assert main(["ab", "env:after", path, "--db", db, "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4  # either way round


def test_the_same_runs_on_both_sides_are_refused_by_every_command(db, capsys, tmp_path,
                                                                   monkeypatch):
    store = Store(db)
    for commit in ("a1", "b2"):
        record(store, [wall(c, 1e-5, i) for i, c in enumerate(CASES)], commit)
    for argv in (["gate", "--baseline", "latest", "--candidate", "2"], ["ab", "1", "1"],
                 ["ab", "latest", "run:2"], ["compare", "2", "latest"]):
        assert main([*argv, "--db", db]) == 2, argv
        captured = capsys.readouterr()
        assert "are the same run (" in captured.err and "%" not in captured.out, argv
    record(store, [wall(CASES[0], 1e-5, 9, n=12)], "c3", env="other")  # run 3
    record(store, [wall(CASES[1], 1e-5, 8, n=12)], "d4", env="other")  # run 4: no case of 3
    for argv in (["gate", "--baseline", "3", "--candidate", "4"], ["ab", "3", "4"],
                 ["compare", "3", "4"]):
        assert main([*argv, "--db", db]) == 2, argv
        assert "hold no case in common" in capsys.readouterr().err, argv
    pytest.importorskip("starlette", reason="the serve extra is not installed")
    from torchmark.server.app import create_app

    dashboard = create_app(store, None).state.dashboard
    for a, b, message in (("3", "4", "no case in common"), ("2", "run:2", "the same run")):
        with pytest.raises(Exception, match=message) as refused:
            dashboard.compare({"a": a, "b": b})
        assert type(refused.value).__name__ == "BadRequest"  # a 400
    monkeypatch.chdir(tmp_path)  # a file named as a side: the dashboard never reads it
    (tmp_path / "env:other").write_text("not results")
    assert dashboard.compare({"a": "1", "b": "env:other"})["candidate_runs"] == [4, 3]


def test_sides_from_two_machines_are_named_and_warned_about(db, capsys):
    store = Store(db)
    here = Provenance.capture(env="ci")
    there = dataclasses.replace(here, machine=dataclasses.replace(here.machine,
                                                                 hostname="elsewhere"))
    for provenance, seed in ((here, 0), (there, 1)):
        run = store.start_run(dataclasses.replace(provenance, git_commit="a1"))
        store.record([wall(CASES[0], 1e-5, seed)], run)
        store.finish_run(run, "ok")
    assert gate(db, "--baseline", "1", "--candidate", "2") == 0
    out = capsys.readouterr()
    assert "candidate: 2 (run 2 on elsewhere)" in out.out
    assert "warning: the two sides ran on different machines" in out.err


def test_kernel_and_batch_time_are_gated_apart_from_device_time(db, capsys):
    """The GPU quantities (docs/gpu.md) are metrics of their own: stored, gated and read
    back as Measurements each in its own column."""
    store = Store(db)
    case = CASES[0]

    def gpu(metric: str, median: float, seed: int) -> Result:
        return dataclasses.replace(wall(case, median, seed), metric=metric)

    base = record(store, [gpu("device", 1e-5, 1), gpu("kernel", 8e-6, 2),
                          gpu("batch", 9e-6, 3)], "aaaa1111")
    cand = record(store, [gpu("device", 1e-5, 4), gpu("kernel", 1e-5, 5),
                          gpu("batch", 9e-6, 6)], "bbbb2222")
    assert gate(db, "--baseline", str(base), "--candidate", str(cand), "--metric",
                "batch") == 0
    capsys.readouterr()
    assert gate(db, "--baseline", str(base), "--candidate", str(cand)) == 1
    out = capsys.readouterr().out
    assert "1 slower" in out and "kernel" in out
    measurements = Store(db).measurements(cand)
    assert sorted(m.quantity for m in measurements) == ["batch", "device", "kernel"]
    from torchmark import Compare

    text = str(Compare(measurements))
    assert "[kernel]" in text and "[batch]" in text and "[device]" in text
    assert main(["history", "--db", db, "--metric", "kernel", case.id]) == 0
    assert "kernel" in capsys.readouterr().out


def over_processes(case: Case, medians: list[float], spread: float = 0.001) -> Result:
    """A run timed over len(medians) processes (`timeit --processes`): 10 samples each
    around its median, the medians in the metadata as measure_in_processes keeps them."""
    samples = tuple(m * (1 + spread * (i - 5)) for m in medians for i in range(10))
    return Result(case=case, metric="wall", samples=samples, number_per_run=100, unit="s",
                  extra={"metadata": {"processes": {"count": len(medians),
                                                    "medians": medians}}})


def test_runs_over_processes_are_gated_on_their_processes_medians():
    from torchmark.regressions.gate import compare_case

    base = [1.0e-5, 1.05e-5, 1.1e-5, 1.15e-5, 1.2e-5]
    # four processes 10% slower, one that drew a fast layout: the pooled samples'
    # bootstrap interval lies past 5%, the processes' interval reaches
    # below 1: they do not show it
    drawn = over_processes(CASES[0], [m * 1.1 for m in base[1:]] + [1.0e-5])
    row = compare_case(over_processes(CASES[0], base), drawn, 0.05)
    assert row.kind == "unsure" and row.verdict.low < 1.0 < row.verdict.high
    assert row.verdict.method.startswith("Hodges-Lehmann ratio of 5 and 5 processes")
    slow = over_processes(CASES[0], [m * 1.3 for m in base])
    row = compare_case(over_processes(CASES[0], base), slow, 0.05)
    assert row.kind == "slower" and row.verdict.ratio == pytest.approx(1.3, rel=0.01)
    few = compare_case(over_processes(CASES[0], base[:3]), over_processes(CASES[0], base[:3]),
                       0.05)
    assert few.kind == "unmeasured" and "too few processes" in few.verdict.reason


def test_the_drift_comes_from_the_case_s_a_a_history(db, capsys):
    """Tight runs whose medians wander 5% from one run of the same commit to the next: a
    4% step reads slower by the runs' own spreads, unsure once the store's A/A history
    shows how far two runs of the same code differ."""
    store = Store(db)
    rng = np.random.default_rng(3)
    case = CASES[0]
    first = record(store, [wall(case, 1e-5, 0, noise=0.002)], "aaaa1111")
    cand = record(store, [wall(case, 1.04e-5, 1, noise=0.002)], "bbbb2222")
    assert gate(db, "--baseline", str(first), "--candidate", str(cand),
                "--max-slowdown", "3%") == 1
    assert "3 x the two runs' spreads" in capsys.readouterr().out
    for k in range(6):  # the candidate's commit, measured again and again
        record(store, [wall(case, 1.04e-5 * float(np.exp(rng.normal(0, 0.05))), 10 + k,
                            noise=0.002)], "bbbb2222")
    assert gate(db, "--baseline", str(first), "--candidate", str(cand),
                "--max-slowdown", "3%") == 0
    out = capsys.readouterr().out
    assert "1 unsure" in out and " history  unsure" in out
    # compare of the same two runs says the same
    assert main(["compare", f"run:{first}", f"run:{cand}", "--db", db,
                 "--threshold", "3%"]) == 0
    assert "1 unsure" in capsys.readouterr().out


def test_calibrate_adds_a_a_runs_and_prints_each_case_s_drift(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["timeit", "x * 2", "-s", "x = torch.ones(64)", "--db", db,
                 "--min-run-time", "0.05"]) == 0
    capsys.readouterr()
    assert main(["calibrate", "--runs", "4", "--min-run-time", "0.05", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "runs 2, 3, 4, 5 added" in out
    assert "x * 2  wall" in out and "(A/A history: 3 pairs of runs of one build; few: a " \
        "wide bound, which more rounds (`torchmark calibrate`) narrow)" in out
    assert main(["calibrate", "--cases", "nothing", "--db", db]) == 2


def test_remeasure_measures_an_unmeasured_candidate_until_it_has_an_interval(db, capsys):
    from torchmark.records import from_measurement
    from torchmark.timing.timer_class import Timer

    # 0.5 s: blocks of up to 27 ms (the block-size search's 10,000 calls on a busy
    # machine) are still 18, an interval's 5 and more (0.1 s gave 4 at times)
    measured = from_measurement(Timer("x * 2", "x = torch.ones(64)").blocked_autorange(
        min_run_time=0.5))
    assert len(measured.samples) >= 10
    store = Store(db)
    base = record(store, [measured], "a1")
    cand = record(store, [dataclasses.replace(measured, samples=measured.samples[:3])], "b2")
    assert gate(db, "--baseline", str(base), "--candidate", str(cand)) == 1
    assert "1 unmeasured" in capsys.readouterr().out
    gate(db, "--baseline", str(base), "--candidate", str(cand), "--remeasure")
    out = capsys.readouterr()
    assert "re-measured here until an interval exists: 1 case(s)" in out.err
    assert "1 unmeasured" not in out.out and "x * 2  wall" in out.out


def test_cases_under_one_label_are_told_apart_in_the_table(db, capsys):
    """Statements timed under one --label, no sub-label: each row says its statement."""
    shared = [Case(id=f"timeit:s{i}", frontend="timeit", stmt=stmt, label="ops3")
              for i, stmt in enumerate(["x * y", "x + y"])]
    store = Store(db)
    for commit in ("a" * 40, "b" * 40):
        record(store, [wall(case, 1e-6, seed=i) for i, case in enumerate(shared)], commit)
    store.close()
    assert gate(db, "--baseline", "run:1", "--candidate", "run:2") == 0
    rows = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()
            if line.startswith("ops3")]
    assert sorted(rows) == ["ops3 / x * y", "ops3 / x + y"]
    assert gate(db, "--baseline", "run:1", "--candidate", "run:2", "--cases",
                "ops3 / x + y") == 0  # the name the table gives it names it
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "1 same"  # that case alone (named "ops3" when alone)


def test_a_damaged_results_file_is_refused_but_a_torn_last_line_passed_over(
        db, tmp_path, capsys):
    """A line in the middle that is not JSON (a damaged baseline) names itself, exit 2:
    never read as a file with a case fewer. A torn last line (a killed run) is skipped."""
    path = tmp_path / "base.jsonl"
    save_results(path, [wall(case, 1e-6, seed=i) for i, case in enumerate(CASES)])
    lines = path.read_text().splitlines()
    whole = len([x for x in lines if x.strip()])
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join(lines[:2] + ['{"garbage'] + lines[2:]) + "\n")
    assert gate(db, "--baseline", str(damaged), "--candidate", str(path)) == 2
    assert "damaged.jsonl: line 3: not a JSON object" in capsys.readouterr().err
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(lines) + "\n" + lines[-1][:len(lines[-1]) // 2])
    assert gate(db, "--baseline", str(torn), "--candidate", str(path)) == 0
    out = capsys.readouterr().out  # every case judged (same data: unsure, not slower)
    assert out.splitlines()[-1] == f"{len(CASES)} unsure" and whole >= len(CASES)


def test_latest_and_an_env_label_name_a_newest_run_that_failed(db, capsys):
    """A run that failed is the newest run: `latest` and `env:LABEL` name it, and its
    failure fails the gate (they skipped it and judged the older run's times: exit 0)."""
    from torchmark.core.result import Failure

    store = Store(db)
    base = record(store, [wall(CASES[0], 1e-5, 1)], "a" * 40, env="main")
    record(store, [wall(CASES[0], 1e-5, 2)], "b" * 40)
    provenance = dataclasses.replace(Provenance.capture(env="ci"), git_commit="c" * 40,
                                     git_dirty=False)
    broken = store.start_run(provenance)
    store.record([Result(case=CASES[0], metric="wall",
                         failure=Failure("RuntimeError: boom"))], broken)
    store.finish_run(broken, "failed")
    store.close()
    for candidate in ("latest", "env:ci"):
        capsys.readouterr()
        assert gate(db, "--baseline", str(base), "--candidate", candidate) == 1, candidate
        out = capsys.readouterr().out
        assert f"(run {broken} on" in out and "failed" in out, out


def test_a_timeit_that_fails_saves_its_failure_and_the_file_side_fails(tmp_path, capsys,
                                                                       monkeypatch):
    """`timeit --save F` of a statement that raises writes its failure to F; appended
    after older samples of the case, the newest failed attempt is the file side's (the
    gate judged the older samples and passed)."""
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    args = ["timeit", "-s", "import math, os; x = float(os.environ['X'])", "math.sqrt(x)",
            "--min-run-time", "0.02", "--no-store", "--save"]
    monkeypatch.setenv("X", "2")
    assert main([*args, str(base)]) == 0 and main([*args, str(cand)]) == 0
    monkeypatch.setenv("X", "-1")  # math domain error: the same case, failing
    assert main([*args, str(cand)]) == 1
    capsys.readouterr()
    assert main(["gate", "--baseline", str(base), "--candidate", str(cand)]) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "only in" not in out
