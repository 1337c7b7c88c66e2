"""The HTML report opened in a real browser (Debian's Chromium driven by playwright): no
console errors, no network requests, every plot drawn, a regression's link leads to its
case. Screenshots go to tests/artifacts/ (not committed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_builder import build_store

from torchmark.cli.main import main
from torchmark.core.result import Failure, Result

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture
def history_store(tmp_path):
    return build_store(f"sqlite:///{tmp_path / 'history.db'}")


def test_the_report_renders_offline_and_links_work(browser, history_store, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "-o", str(out), "--db", history_store.url]) == 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" or
            m.text.startswith("WARN") else None)  # plotly's warnings of what it cannot
    # draw (a colour list for error bars: drawn black) come as console.trace
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-top.png"))

    plots = page.locator(".plot")
    count = plots.count()
    assert count == 3 + 2  # three cases, the A/B view, one run's raw samples
    for i in range(count):  # each plot is drawn when it scrolls into view
        plot = plots.nth(i)
        plot.scroll_into_view_if_needed()
        plot.locator("svg.main-svg").first.wait_for(timeout=10_000)
        assert plot.locator("svg.main-svg").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "report-cases.png"), full_page=True)

    # no run of this store holds counts or kernels: the "why" section says what would
    assert "no regression holds per-function counts" in page.locator("#why").inner_text()
    link = page.locator("#regressions a.to-case").first
    target = link.get_attribute("href")
    assert link.inner_text() == "mul: n=1"
    link.click()
    page.wait_for_function(f"location.hash === '{target}'")
    section = page.locator(target)
    assert "target" in (section.get_attribute("class") or "")
    # the change point is marked on the plot: a dashed line and its label
    assert section.locator("g.annotation text", has_text="+24.9%").count() == 1
    page.screenshot(path=str(ARTIFACTS / "report-case.png"))
    page.close()

    assert errors == []
    assert [u for u in requests if u != out.as_uri()] == []


def test_a_report_needs_a_store_with_the_named_runs(history_store, tmp_path, capsys):
    assert main(["report", "-o", str(tmp_path / "r.html"), "--run", "999",
                 "--db", history_store.url]) == 2
    assert "holds no run 999" in capsys.readouterr().err
    assert main(["report", "-o", str(tmp_path / "r.html"), "--case", "nosuch",
                 "--db", history_store.url]) == 2
    assert "holds no case named 'nosuch'" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()



def test_names_from_files_stay_text_in_the_report(browser, tmp_path):
    """A case named with HTML (an imported file can say anything) is shown as text: no
    element of its making, no script run."""
    import dataclasses

    store = build_store(f"sqlite:///{tmp_path / 'h.db'}", cases=2, runs=12, step_at=6)
    [record] = store.result_records(run=12)[:1]
    hostile = dataclasses.replace(record, case=dataclasses.replace(
        record.case, id="timeit:hostile",
        label='<img src=x onerror="window.pwned=1"> <b>bold</b>'))
    store.record([hostile], 12)
    # a case that fails in the candidate has no ratio to draw: it is named under the plot
    broken = dataclasses.replace(record.case, id="timeit:broken", label="<i>broken</i>")
    store.record([dataclasses.replace(record, case=broken)], 11)
    store.record([Result(case=broken, metric="wall", unit="s",
                         failure=Failure("RuntimeError: boom"))], 12)
    out = tmp_path / "report.html"
    assert main(["report", "-o", str(out), "--db", store.url, "--run", "12",
                 "--ab", "11", "12"]) == 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    for plot in page.locator(".plot").all():
        plot.scroll_into_view_if_needed()
        plot.locator("svg.main-svg").first.wait_for(timeout=10_000)
    assert page.locator("img").count() == 0
    assert page.evaluate("window.pwned === undefined")
    assert page.get_by_text('<img src=x onerror="window.pwned=1"> <b>bold</b>').count() >= 1
    # in the plots too, the name reads as written (plotly would render the tags it knows)
    assert page.locator("#dist-plot text", has_text="<b>bold</b>").count() >= 1
    assert page.locator("#ab p.unplotted").inner_text() == \
        "Not drawn (no ratio): <i>broken</i>: n=0 [wall] failed"
    assert page.locator("i").count() == 0
    assert errors == []
    page.close()
