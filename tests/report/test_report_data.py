"""What the report draws of a large store: every series scanned for changes, at most
MAX_SERIES_DRAWN of them drawn (those with a change first), each its newest
MAX_POINTS_DRAWN runs, and the page told what was left out."""

from __future__ import annotations

import pytest
from store_builder import build_store

from torchmark.report import data as report_data


@pytest.fixture
def store(tmp_path):
    store = build_store(f"sqlite:///{tmp_path / 's.db'}", cases=6, runs=24, step_case=4,
                        step_at=20, samples=12)
    yield store
    store.close()


def test_a_large_store_is_drawn_in_part_and_says_so(store, monkeypatch):
    pytest.importorskip("ruptures")
    monkeypatch.setattr(report_data, "MAX_SERIES_DRAWN", 2)
    monkeypatch.setattr(report_data, "MAX_POINTS_DRAWN", 10)
    data = report_data.gather(store)
    assert data["drawn"] == {"series": 6, "series_drawn": 2, "max_points": 10,
                             "points_cut": 2}
    [change] = [c for c in data["changes"] if c["kind"] == "regression"]
    assert change["case"] == "mul: n=4"  # found among all six series
    titles = [s["title"] for s in data["series"]]
    assert "mul: n=4" in titles and len(titles) == 2  # the changed one drawn
    drawn = next(s for s in data["series"] if s["title"] == "mul: n=4")
    assert drawn["reduced"] and drawn["runs"] == 24 and len(drawn["points"]) <= 10
    [step] = drawn["changes"]  # its two runs either side kept as points of their own
    assert drawn["points"][step["at"]]["runs"] == [step["first_bad"]]
    assert drawn["points"][step["at"] - 1]["runs"] == [step["last_good"]]
    assert sum(len(p["runs"]) for p in drawn["points"]) == 24


def test_a_small_store_is_drawn_whole(store):
    pytest.importorskip("ruptures")
    data = report_data.gather(store)
    assert data["drawn"]["series_drawn"] == data["drawn"]["series"] == 6
    assert data["drawn"]["points_cut"] == 0
    assert all(len(s["points"]) == s["runs"] == 24 and not s["reduced"]
               for s in data["series"])


def test_the_a_b_section_is_the_dashboard_s_comparison(store, monkeypatch):
    from torchmark.report import views

    data = report_data.gather(store, ab=(20, 21))
    page = views.compare_view(store, 20, 21, per_page=100)
    assert data["ab"]["rows"] == [{key: row[key] for key in data["ab"]["rows"][0]}
                                  for row in page["rows"]]
    assert data["ab"]["rows"][0]["case"] == "mul: n=4" and \
        data["ab"]["rows"][0]["verdict"] == "slower"
    only = report_data.gather(store, ab=(20, 21), cases=["mul: n=4", "mul: n=5"])["ab"]
    assert sorted(row["case"] for row in only["rows"]) == ["mul: n=4", "mul: n=5"]
    monkeypatch.setattr(report_data, "MAX_AB_CASES", 2)
    cut = report_data.gather(store, ab=(20, 21))["ab"]
    assert cut["total"] == 6 and len(cut["rows"]) == 2


def test_the_whole_store_is_detected_as_its_cases_read_whole_are(store, monkeypatch):
    """Without a filter the report detects as the dashboard's feed does (a chunk of
    cases at a time); every case named gives the same changes, series and drawing."""
    pytest.importorskip("ruptures")
    from torchmark.regressions import rescan

    monkeypatch.setattr(rescan, "CHUNK", 2)  # three chunks of the six cases
    monkeypatch.setattr(report_data, "CHUNK", 2)
    monkeypatch.setattr(report_data, "MAX_SERIES_DRAWN", 3)
    store.mark_change(case_id="timeit:case4", metric="wall", first_bad_run=21,
                      mark="acknowledged", note="known")
    whole = report_data.gather(store)
    named = report_data.gather(store, cases=sorted(store.case_titles()))
    assert whole["changes"] == named["changes"] and whole["changes"]
    assert whole["changes"][0]["mark"] == "acknowledged"
    assert whole["drawn"] == named["drawn"] == {"series": 6, "series_drawn": 3,
                                                "max_points": report_data.MAX_POINTS_DRAWN,
                                                "points_cut": 0}
    assert [s["title"] for s in whole["series"]] == [s["title"] for s in named["series"]]


def test_the_default_a_b_pair_skips_a_newest_run_that_shares_no_case(store, capsys):
    """A newest run of other cases (a `timeit --vs` run) shares none with the runs
    before it: the A/B view takes the newest pair that does, and `--ab` naming such a
    run is refused as `compare` refuses it."""
    import dataclasses

    from torchmark.cli.main import main
    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result

    run = store.start_run(dataclasses.replace(Provenance.capture(),
                                              started="2026-10-02T12:00:00+00:00"))
    store.record([Result(case=Case(id="timeit:other", frontend="timeit", stmt="other"),
                         metric="wall", samples=(1e-6,) * 5)], run)
    store.finish_run(run, "ok")
    ab = report_data.gather(store)["ab"]
    assert (ab["baseline"], ab["candidate"]) == (run - 2, run - 1) and ab["total"] == 6
    assert main(["report", "--db", store.url, "-o", str(store.url[10:]) + ".html",
                 "--ab", str(run - 1), str(run)]) == 2
    assert "hold no case in common" in capsys.readouterr().err
