"""What the dashboard's pages show (report/views.py), on the report tests' store: a
comparison a page at a time gives the gate's verdicts, a long history is reduced with its
change points kept, runs filter and page, search finds names and parameters."""

from __future__ import annotations

import pytest
from store_builder import build_store

from torchmark.regressions.gate import gate
from torchmark.regressions.refs import resolve_side
from torchmark.report import views


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_store(f"sqlite:///{tmp_path_factory.mktemp('views') / 's.db'}", cases=12,
                       runs=30, step_case=4, step_at=15)


def test_a_comparison_page_gives_the_gate_s_verdicts(store):
    report = gate(resolve_side("run:15", store).results, resolve_side("run:16", store).results,
                  max_slowdown=0.05)
    expected = {r.case_id: (r.kind, r.verdict.lower, r.verdict.upper) for r in report.rows}
    seen = {}
    for page in (1, 2, 3):
        data = views.compare_view(store, 15, 16, page=page, per_page=5)
        assert data["total"] == 12 and len(data["rows"]) == (5 if page < 3 else 2)
        seen.update({r["case_id"]: (r["verdict"], r["low"], r["high"]) for r in data["rows"]})
    assert seen == expected
    first = views.compare_view(store, 15, 16, per_page=5)["rows"][0]
    assert first["case"] == "mul: n=4" and first["verdict"] == "slower"  # largest first
    by_case = views.compare_view(store, 15, 16, sort="case", per_page=12)["rows"]
    assert [r["case"] for r in by_case][:3] == ["mul: n=0", "mul: n=1", "mul: n=2"]


def test_sides_of_several_runs_are_judged_as_the_gate_judges_them(tmp_path):
    """A commit measured twice (its samples pooled) and an env label whose newest run
    lacks a case (taken from the run before): the page's verdicts, intervals and medians
    are the gate's on the sides refs.py resolves, for the CLI and the dashboard alike."""
    import dataclasses


    many = build_store(f"sqlite:///{tmp_path / 'many.db'}", cases=6, runs=4, step_case=2,
                       step_at=3)
    again = [dataclasses.replace(r, samples=tuple(x * 1.02 for x in r.samples))
             for r in many.result_records(run=4)]
    provenance = dataclasses.replace(many.result_records(run=4)[0].provenance,
                                     env="after", git_dirty=False)
    for results in (again, again[:3]):  # the commit's second run; then a partial one
        run = many.start_run(provenance)
        many.record(results, run)
        many.finish_run(run, "ok")
    for ref in ("commit:0003", "env:after"):
        base, cand = resolve_side("run:3", many), resolve_side(ref, many)
        assert len(cand.runs) == (3 if ref.startswith("commit") else 2)
        assert len(cand.results) == 6
        report = gate(base.results, cand.results, max_slowdown=0.05)
        expected = {r.case_id: (r.kind, r.verdict.lower, r.verdict.upper, r.candidate)
                    for r in report.rows}
        data = views.compare_view(many, 3, cand, per_page=50)
        assert data["candidate"] == ref and data["candidate_runs"] == list(cand.runs)
        assert {r["case_id"]: (r["verdict"], r["low"], r["high"], r["candidate"])
                for r in data["rows"]} == expected
    single = views.compare_view(many, 3, resolve_side("run:4", many))
    assert single["candidate"] == 4 and single["rows"] == views.compare_view(many, 3, 4)["rows"]


def test_a_long_history_is_reduced_with_its_change_points_kept(store):
    data = views.case_view(store, "timeit:case4", max_points=8)
    [series] = data["series"]
    assert series["reduced"] and series["runs"] == 30 and len(series["points"]) <= 10
    assert sum(len(p["runs"]) for p in series["points"]) == 30
    [change] = series["changes"]
    assert series["points"][change["at"]]["runs"] == [change["first_bad"]] == [16]
    assert series["points"][0]["subject"] == "Change number 0"
    whole = views.case_view(store, "timeit:case4")["series"][0]
    assert not whole["reduced"] and len(whole["points"]) == 30
    assert views.case_view(store, "no:such") is None


def test_runs_filter_and_page(store):
    assert views.runs_view(store, per_page=7)["total"] == 30
    assert [r["id"] for r in views.runs_view(store, per_page=7, page=5)["runs"]] == [2, 1]
    assert [r["id"] for r in views.runs_view(store, commit="0007")["runs"]] == [8]
    assert views.runs_view(store, command="no-such-word")["total"] == 0
    run = views.run_view(store, 16, per_page=5)
    assert run["total"] == 12 and len(run["results"]) == 5 and run["run"]["id"] == 16
    assert "cpu.model" in run["fingerprint"] and views.run_view(store, 999) is None


def test_search_finds_names_and_parameters(store):
    assert [c["title"] for c in views.search_view(store, "N=11")["cases"]] == ["mul: n=11"]
    assert views.search_view(store, "torch.mul(x, 3)")["cases"][0]["case_id"] == \
        "timeit:case3"
    assert views.search_view(store, "  ")["cases"] == []


def test_the_slower_cases_of_a_page_are_explained_by_the_caller_s_explainer(store):
    asked = []

    def explainer(before, after):
        asked.append([r.case.title for r in after])
        return [["a made-up explanation"]]

    data = views.compare_view(store, 15, 16, per_page=5, explainer=explainer)
    assert asked == [["mul: n=4"]] and data["explanations"] == [["a made-up explanation"]]
    assert views.compare_view(store, 1, 2, explainer=explainer)["explanations"] == []


def test_the_store_wide_detection_runs_in_a_child_from_a_relative_store(store, tmp_path,
                                                                         monkeypatch):
    from torchmark.server.changes_cache import ChangesCache
    from torchmark.store import Store

    store.backup(tmp_path / "copy.db")
    monkeypatch.chdir(tmp_path)  # the child starts elsewhere: it must find the same file
    cache = ChangesCache(Store("sqlite:///copy.db"))
    changes, status = cache.get()
    assert [c.key for c in changes if c.kind == "regression"] == ["timeit:case4@16/wall"]
    assert status["scan_seconds"] > 0


def test_machines_are_traces_of_one_plot_on_one_commit_axis(tmp_path):
    import dataclasses
    import datetime as dt

    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'two.db'}")
    case = Case(id="timeit:add", frontend="timeit", stmt="x + y", label="add", sub_label="n")
    base = Provenance.capture(env="ci")
    other = dataclasses.replace(base, machine=dataclasses.replace(base.machine,
                                                                  hostname="box-b"))
    # machine A: commits 0..9, commit 3 measured twice; machine B: commits 5..11
    plan = [(base, k) for k in range(10)] + [(base, 3)] + [(other, k) for k in range(5, 12)]
    for provenance, k in plan:
        when = (dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)
                + dt.timedelta(hours=k)).isoformat()
        run = store.start_run(dataclasses.replace(
            provenance, git_commit=f"{k:04d}" + "ef" * 18, git_dirty=False,
            git_commit_date=when, git_commit_subject=f"Change {k}", started=when))
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=10,
                             samples=(1e-5, 1.1e-5, 1.2e-5))], run)
    data = views.case_view(store, "timeit:add")
    [plot] = data["plots"]
    first, second = (data["series"][i] for i in plot["series"])
    assert {first["machine"], second["machine"]} >= {"box-b"} and len(plot["series"]) == 2
    a, b = (first, second) if second["machine"] == "box-b" else (second, first)
    assert len(plot["labels"]) == 13  # commits 0..11, commit 3 twice
    at_a = {p["commit"][:4]: [] for p in a["points"]}
    for p in a["points"]:
        at_a[p["commit"][:4]].append(p["x"])
    assert len(at_a["0003"]) == 2 and len(set(at_a["0003"])) == 2  # two runs: two places
    assert all(at_a[p["commit"][:4]][0] == p["x"] for p in b["points"]
               if p["commit"][:4] in at_a)  # one commit on two machines: one place
    assert [p["x"] for p in b["points"]] == sorted(p["x"] for p in b["points"])
    assert plot["labels"][b["points"][-1]["x"]].startswith("0011")


def test_the_command_filter_takes_several_words_and_a_comparison_ranks_by_size(tmp_path):
    import dataclasses

    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'words.db'}")
    cases = [Case(id=f"timeit:c{i}", frontend="timeit", stmt=f"f({i})", label="f",
                  sub_label=f"n={i}") for i in range(3)]
    for run, factors in enumerate(((1, 1, 1), (1.1, 0.5, 1.0))):
        provenance = dataclasses.replace(Provenance.capture(),
                                         command=("bench.py", "--size", str(run + 8)))
        run_id = store.start_run(provenance)
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=1,
                             samples=tuple(1e-3 * factor * (1 + 0.001 * k)
                                           for k in range(10)))
                      for case, factor in zip(cases, factors, strict=True)], run_id)
    assert views.runs_view(store, command="bench.py 9")["total"] == 1
    assert views.runs_view(store, command="9 bench.py")["total"] == 1
    assert views.runs_view(store, command="bench.py 7")["total"] == 0
    rows = views.compare_view(store, 1, 2)["rows"]
    assert [r["case"] for r in rows] == ["f: n=1", "f: n=0", "f: n=2"]  # 2x faster first


def test_a_run_s_medians_are_kept_while_the_run_is_unchanged(tmp_path):
    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'medians.db'}")

    def result(i: int, level: float) -> Result:
        case = Case(id=f"timeit:m{i}", frontend="timeit", stmt=f"g({i})", label="g")
        return Result(case=case, metric="wall", unit="s", number_per_run=1,
                      samples=(level, level, level))

    run = store.start_run(Provenance.capture())
    store.record([result(0, 1.0)], run)
    first = store.run_medians(run)
    assert store.run_medians(run) is first  # kept
    store.record([result(1, 2.0)], run)  # the run still being written
    assert store.run_medians(run).as_dict() == {("timeit:m0", "wall"): 1.0,
                                                ("timeit:m1", "wall"): 2.0}
    store.delete_runs([run])
    again = store.start_run(Provenance.capture())
    assert again == run  # SQLite gives the id again
    store.record([result(0, 3.0), result(1, 4.0)], again)
    assert store.run_medians(again).as_dict() == {("timeit:m0", "wall"): 3.0,
                                                  ("timeit:m1", "wall"): 4.0}


def test_a_comparison_page_of_more_than_a_thousand_cases_reads_them_all(tmp_path):
    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'many.db'}")
    cases = [Case(id=f"timeit:k{i:04d}", frontend="timeit", stmt=f"h({i})", label="h",
                  sub_label=f"n={i}") for i in range(1100)]
    for level in (1.0, 1.0):
        run = store.start_run(Provenance.capture())
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=1,
                             samples=tuple(level * (1 + 0.001 * k) for k in range(5)))
                      for case in cases], run)
    data = views.compare_view(store, 1, 2, per_page=2000)  # the report's A/B reads so
    assert data["total"] == len(data["rows"]) == 1100
    assert len(store.result_records(run=1, cases=[c.id for c in cases])) == 1100


def test_a_result_s_samples_are_thinned_to_at_most_the_most_shown():
    from torchmark.report.views import MAX_SAMPLES_SHOWN, samples_shown

    for n in (1, MAX_SAMPLES_SHOWN, MAX_SAMPLES_SHOWN + 1, 2 * MAX_SAMPLES_SHOWN - 1, 10_000):
        shown = samples_shown("c", "t", "wall", "s", [float(i) for i in range(n)])["samples"]
        assert 0 < len(shown) <= MAX_SAMPLES_SHOWN and shown[0] == 0.0
        assert len(shown) > MAX_SAMPLES_SHOWN // 2 or n < MAX_SAMPLES_SHOWN // 2


def test_the_run_before_is_one_that_shares_a_case(tmp_path):
    """The run page's "compare with the run before" names the newest earlier run on the
    machine and env that holds one of its cases (not another command's run)."""
    from torchmark.core.result import Case, Result
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'before.db'}")

    def run_of(prefix: str) -> int:
        case = Case(id=f"{prefix}:c", frontend="timeit", stmt=prefix, label=prefix)
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=1,
                             samples=(1.0, 1.1, 0.9))])
        return max(r["id"] for r in store.runs(limit=None))

    first, other, second = run_of("ops"), run_of("timeit"), run_of("ops")
    assert store.previous_run(second) == first
    assert store.previous_run(other) is None and store.previous_run(first) is None


def test_a_case_that_never_measured_shows_its_failures(tmp_path):
    from torchmark.core.result import Case, Failure, Result
    from torchmark.report.views import case_view
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'failing.db'}")
    case = Case(id="timeit:boom", frontend="timeit", stmt="1 / 0", label="boom")
    for _ in range(2):
        store.record([Result(case=case, metric="wall", unit="s", number_per_run=1,
                             samples=(), failure=Failure("ZeroDivisionError: division"))])
    view = case_view(store, "timeit:boom", detected=[])
    assert view["series"] == [] and len(view["failures"]) == 2
    assert view["failures"][0]["failure"].startswith("ZeroDivisionError")
    assert view["failures"][0]["run"] > view["failures"][1]["run"]  # newest first


def test_a_run_s_command_line_is_shown_as_it_can_be_pasted_back():
    from torchmark.report.views import run_row

    run = {"id": 1, "started": "2026-11-29T00:00:00Z", "status": "ok", "git_commit": None,
           "git_dirty": None, "torch_version": "2.13.0", "machine": None, "env": None,
           "command": ["torchmark", "timeit", "x * y", "-s", "import m"]}
    assert run_row(run, {})["command"] == "torchmark timeit 'x * y' -s 'import m'"
