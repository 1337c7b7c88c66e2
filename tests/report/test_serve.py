"""`torchmark serve` started for real (a subprocess on a loopback port) over a store with a
planted regression: the JSON API, every page in a real browser (Debian's Chromium driven
by playwright: no console error, no request leaving the host), the click path from the
regressions feed to the case to the comparison, the token, and an acknowledgement that
`torchmark regressions` then shows. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from store_builder import build_store

from torchmark.cli.main import main

pytest.importorskip("starlette", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TOKEN = "a-test-token-of-some-length"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(db: str, *args: str):
    """`torchmark serve` on a free port until the block ends; its base URL."""
    with serving_process(db, *args) as (base, _):
        yield base


@contextlib.contextmanager
def serving_process(db: str, *args: str):
    """serving, with the server's process."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", "serve", "--db", db,
                             "--port", str(port), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/v1", timeout=5)
                break
            except urllib.error.HTTPError:
                break  # it answers (a 401 without the token)
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"serve did not start: {proc.stdout.read()}") \
                        from None
                time.sleep(0.2)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    built = build_store(f"sqlite:///{tmp_path_factory.mktemp('serve') / 'history.db'}",
                        second_machine=12)
    built.reopen_run(16, ["torchmark", "timeit", "torch.mul(x, 1)", "--resume-run", "16"])
    built.finish_run(16, "ok")
    return built


@pytest.fixture(scope="module")
def served(store):
    with serving(store.url) as base:
        yield base


def test_the_api_gives_every_page_s_data(served):
    status, runs = get(f"{served}/api/v1/runs?per_page=5")
    assert status == 200 and runs["version"] == "v1" and runs["total"] == 42
    assert runs["runs"][0]["subject"] == "Change number 29"  # on both machines
    status, feed = get(f"{served}/api/v1/regressions")
    assert status == 200 and feed["total"] == 1
    assert feed["status"]["checked"] == {"series": 6, "short": 0, "min_runs": 8,
                                         "left_out_runs": 0}  # 3 cases on 2 machines
    [change] = feed["regressions"]
    assert change["case"] == "mul: n=1" and 1.2 < change["ratio"] < 1.3
    assert (change["last_good"], change["first_bad"], change["state"]) == (15, 16, "new")
    since = "0020" + "ab" * 18
    assert get(f"{served}/api/v1/regressions?since_commit={since}")[1]["total"] == 0
    assert get(f"{served}/api/v1/regressions?since_commit=0010")[1]["total"] == 1
    status, refused = get(f"{served}/api/v1/regressions?since_commit=zzzz")
    assert status == 404 and "since_commit" in refused["error"]
    assert get(f"{served}/api/v1/regressions?since_commit=00")[0] == 400  # many commits
    assert get(f"{served}/api/v1/regressions?metric=bogus")[0] == 400
    assert get(f"{served}/api/v1/regressions?machine=box-b")[1]["total"] == 0
    assert get(f"{served}/api/v1/regressions?machine={change['machine']}")[1]["total"] == 1
    # filters that name nothing the store holds, or that the page has not: refused, never
    # an empty feed read as all clear
    for asked, word in (("machine=bo", "machine"), ("env=nightly", "env"),
                        ("case=nosuch", "case"), ("cases=mul", "unknown parameter 'cases'")):
        status, refused = get(f"{served}/api/v1/regressions?{asked}")
        assert status == 400 and word in refused["error"], (asked, refused)
    for asked in ("env=ci", "case=mul%3A%20n%3D1", f"case={change['case_id']}", "case=mul*"):
        assert get(f"{served}/api/v1/regressions?{asked}")[1]["total"] == 1, asked
    assert get(f"{served}/api/v1/regressions?case=mul%3A%20n%3D2")[1]["total"] == 0
    first, second = (get(f"{served}/api/v1/search?q=mul&per_page=2&page={k}")[1]
                     for k in (1, 2))  # 3 cases: a page of 2, then the last one
    assert (len(first["cases"]), first["more"], len(second["cases"]), second["more"]) == \
        (2, True, 1, False)
    assert second["cases"][0]["case_id"] not in {c["case_id"] for c in first["cases"]}
    # paging values and runs' filters out of range are refused, not quietly changed
    for asked in ("runs?per_page=-5", "runs?per_page=501", "runs?page=0",
                  "runs?machine=zzzz", "runs?env=nightly", "search?q=mul&page=0"):
        status, refused = get(f"{served}/api/v1/{asked}")
        assert status == 400 and refused["error"], asked
    for method, path in (("DELETE", "runs/1"), ("GET", "regressions/mark")):
        request = urllib.request.Request(f"{served}/api/v1/{path}", method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 405 and "error" in json.loads(refused.value.read())
    # without a token, only a request naming this machine (no DNS rebinding)
    assert get(f"{served}/api/v1/runs", {"Host": "evil.example.com"})[0] == 400
    for host in ("localhost", "127.0.0.1:80", "[::1]:8000", "LOCALHOST:8000", "localhost."):
        assert get(f"{served}/api/v1/runs?per_page=1", {"Host": host})[0] == 200, host
    status, case = get(f"{served}/api/v1/cases/{change['case_id']}")
    [plot] = case["plots"]  # the two machines' series on one commit axis
    series, other = (case["series"][i] for i in plot["series"])
    assert other["machine"] == "box-b" and not other["changes"]
    assert [p["commit"][:4] for p in series["points"]] == [f"{k:04d}" for k in range(30)]
    assert [p["x"] for p in other["points"]] == list(range(18, 30))  # A's places
    assert series["changes"][0]["at"] == 15
    status, compared = get(f"{served}/api/v1/compare?a=15&b=16")
    assert status == 200 and compared["rows"][0]["verdict"] == "slower"
    by_commit = get(f"{served}/api/v1/compare?a=commit:0014&b=commit:0015")[1]
    assert by_commit["rows"] == compared["rows"]
    assert get(f"{served}/api/v1/compare?a=commit:ffff&b=16")[0] == 404
    newest = get(f"{served}/api/v1/compare?a=15&b=env:ci")[1]  # the label's newest run
    assert newest["candidate"] == get(f"{served}/api/v1/compare?a=15&b=latest")[1]["candidate"]
    assert get(f"{served}/api/v1/compare?a=env:nosuch&b=16")[0] == 404
    assert get(f"{served}/api/v1/compare?a=run:15&b=16")[1]["rows"] == compared["rows"]
    status, refused = get(f"{served}/api/v1/compare?a=16&b=run:16")
    assert status == 400 and "the same run (16)" in refused["error"]
    status, refused = get(f"{served}/api/v1/compare?a=x&b=16")
    assert status == 400 and refused["error"].startswith("a: expected a run")
    assert get(f"{served}/api/v1/no/such/page") == (404, {"error": "no page at "
                                                         "/api/v1/no/such/page"})
    assert get(f"{served}/api/v1/runs/16")[1]["previous"] == 15
    assert get(f"{served}/api/v1/runs/1")[1]["previous"] is None
    assert get(f"{served}/api/v1/runs/31")[1]["previous"] is None  # box-b's first
    day = get(f"{served}/api/v1/runs?since=2026-10-01&until=2026-10-01")[1]
    assert day["total"] == 24 + 6  # that day's runs (hours 0-23; box-b's 18-23) to its end
    assert get(f"{served}/api/v1/search?q=n%3D2")[1]["cases"][0]["title"] == "mul: n=2"
    assert get(f"{served}/api/v1/runs/999") == (404, {"error": "no run 999 in the store (the "
                                                         "runs page lists them)"})
    status, refused = get(f"{served}/api/v1/cases/timeit:case1%23forward")
    assert status == 404 and refused["error"].startswith("no case 'timeit:case1#forward'")
    huge = "9" * 25  # beyond any id a store holds: a clear answer, not a server error
    assert get(f"{served}/api/v1/runs/{huge}")[0] == 400
    assert get(f"{served}/api/v1/runs?page={huge}")[0] == 400
    assert get(f"{served}/api/v1/compare?a={huge}&b=16")[0] == 404
    assert get(f"{served}/api/v1/compare?a=15&b=999") == (404, {"error": "b: no run 999"})
    assert get(f"{served}/api/v1/compare?a=commit:&b=16")[0] == 400
    status, refused = get(f"{served}/api/v1/compare?a=commit:00&b=16")  # many commits
    assert status == 400 and refused["error"] == "a: '00' begins 30 commits: give more of it"
    assert get(f"{served}/api/v1/runs?until=9999-12-31")[0] == 200  # the last day
    status, refused = get(f"{served}/api/v1/runs?since=9999-12-31T23:59:59-05:00")
    assert status == 400 and "beyond the times a store holds" in refused["error"]
    status, refused = get(f"{served}/api/v1/runs?until=2026-13-45")
    assert status == 400 and refused["error"].startswith("until: '2026-13-45': expected a date")
    one = get(f"{served}/api/v1/compare?a=15&b=16&per_page=1&page=2&threshold=5%25")[1]
    assert (one["per_page"], len(one["rows"]), one["threshold"]) == (1, 1, 0.05)
    assert get(f"{served}/api/v1/compare?a=15&b=16&threshold=lots")[0] == 400
    assert get(f"{served}/api/v1/cases/{change['case_id']}?metric=bogus")[0] == 400
    assert get(f"{served}/api/v1/search?q=%25")[1]["cases"] == []  # % is no wildcard
    assert get(f"{served}/api/v1/runs?page=x")[0] == 400
    assert get(f"{served}/api/v1/regressions?state=lost")[0] == 400
    request = urllib.request.Request(f"{served}/api/v1/regressions/mark", method="POST",
                                     data=b'{"key": "x", "mark": "dismissed"}',
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403  # read-only without a token


def test_a_port_in_use_is_one_line_before_any_banner(store, served, capsys):
    port = served.rsplit(":", 1)[1]
    assert main(["serve", "--db", store.url, "--port", port]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"torchmark: error: --host 127.0.0.1 --port {port}: cannot listen "
                          "there: in use") and err.count("\n") == 1


def test_sigterm_stops_the_server_as_asked_not_as_an_error(store):
    with serving_process(store.url) as (_, proc):
        pass  # stopped with SIGTERM
    out = proc.stdout.read()
    assert proc.returncode == 0 and out.rstrip().endswith("torchmark serve: stopped"), out
    assert "error" not in out


def test_a_process_builds_one_page_at_a_time_and_says_how_long_each_waited(served):
    """Pages sent at once are built one after the other (--page-threads 1): the times
    their Server-Timing gives for building them do not overlap."""
    def timed(i: int) -> tuple[dict[str, float], float, float]:
        started = time.perf_counter()
        with urllib.request.urlopen(f"{served}/api/v1/compare?a={1 + i % 15}&b=16",
                                    timeout=60) as response:
            response.read()
            header = response.headers["Server-Timing"]
        parts = dict(part.strip().split(";dur=") for part in header.split(","))
        return {k: float(v) for k, v in parts.items()}, started, time.perf_counter()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(timed, range(16)))
    assert all(set(t) == {"queue", "page", "app"} for t, _, _ in answers)
    assert all(t["app"] >= t["page"] for t, _, _ in answers)
    span = (max(end for _, _, end in answers) - min(start for _, start, _ in answers)) * 1000
    assert sum(t["page"] for t, _, _ in answers) <= span
    assert max(t["queue"] for t, _, _ in answers) > 0


def _page_processes(server_pid: int) -> list[int]:
    """The processes `serve --workers N` builds pages in (multiprocessing's children)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if int(stat.rpartition(")")[2].split()[1]) == server_pid and \
                b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def test_pages_built_in_processes_of_their_own_answer_as_in_one(store, served):
    """`--workers 2`: the pages are built in two processes apart from the server's, and
    answer what the one-process server answers; a page process that dies is replaced,
    and the pages that waited for it are built by the new ones."""
    case_id = get(f"{served}/api/v1/regressions")[1]["regressions"][0]["case_id"]
    paths = ["/api/v1/runs?per_page=5", "/api/v1/regressions", f"/api/v1/cases/{case_id}",
             "/api/v1/compare?a=15&b=16", "/api/v1/compare?a=commit:0014&b=commit:0015",
             "/api/v1/search?q=n%3D2", "/api/v1/runs/999", "/api/v1/compare?a=x&b=16",
             "/api/v1/runs?until=2026-13-45", "/api/v1/runs/16"]
    with serving_process(store.url, "--workers", "2") as (base, proc):
        for path in paths:
            assert get(base + path) == get(served + path), path
        with urllib.request.urlopen(f"{base}/cases/{case_id}", timeout=60) as page:
            assert page.status == 200 and b"mul: n=1" in page.read()
            assert "page;dur=" in page.headers["Server-Timing"]
        workers = _page_processes(proc.pid)
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        time.sleep(0.5)
        answers = [get(base + "/api/v1/runs/16")[0] for _ in range(4)]
        assert answers == [200] * 4  # the pages the broken pool held: asked again
        assert get(base + paths[3]) == get(served + paths[3])
        deadline = time.monotonic() + 60  # the new pool's processes started
        while len(_page_processes(proc.pid)) != 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_page_processes(proc.pid)) == 2


def watched(browser, base: str):
    """A page whose console errors and requests to other hosts are collected."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" or
            m.text.startswith("WARN") else None)  # plotly's warnings: console.trace
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: outside.append(r.url)
            if not r.url.startswith(base) else None)
    return page, errors, outside


def test_every_page_renders_and_the_click_path_works(browser, served):
    page, errors, outside = watched(browser, served)
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{served}/")
    page.wait_for_selector("table")
    assert "mul: n=1" in page.inner_text("main")
    page.screenshot(path=str(ARTIFACTS / "dashboard-regressions.png"), full_page=True)
    page.click("text=mul: n=1")
    page.wait_for_selector(".plot svg.main-svg")
    assert "/cases/" in page.url
    assert page.locator("pre.stmt").inner_text() == "torch.mul(x, 1)"  # what is timed
    page.screenshot(path=str(ARTIFACTS / "dashboard-case.png"), full_page=True)
    page.click("a:text-is('compare')")
    page.wait_for_selector("td.slower")
    assert page.url.endswith("/compare?a=15&b=16")
    page.screenshot(path=str(ARTIFACTS / "dashboard-compare.png"), full_page=True)
    page.click("th:has-text('change')")  # sortable
    for path, shot in (("/runs", "runs"), ("/runs/16", "run"), ("/search?q=mul", "search"),
                       ("/runs?commit=ffffff", None)):
        page.goto(f"{served}{path}")
        page.wait_for_selector("main table, main p")
        if shot:
            page.screenshot(path=str(ARTIFACTS / f"dashboard-{shot}.png"), full_page=True)
    page.goto(f"{served}/runs/16")  # its times as Compare's table, a cell a case's link
    assert "[object" not in page.inner_text("main")
    assert page.locator("table.compare caption").inner_text() == "mul"
    assert page.locator("table.compare td.grade-best").count() == 1  # n=0, the fastest
    assert "status ok - 3 results" in page.inner_text("main")
    assert "UTC: torchmark timeit 'torch.mul(x, 1)' --resume-run 16" in page.inner_text("main")
    page.wait_for_selector("#samples svg.main-svg")  # each result's raw samples: a box
    assert page.locator("#samples g.trace.boxes").count() == 3
    page.click("table.compare tr:has(th:text-is('n=1')) a")
    page.wait_for_selector(".plot svg.main-svg")
    assert page.url.endswith(("/cases/timeit%3Acase1", "/cases/timeit:case1"))
    page.goto(f"{served}/runs?per_page=10")
    page.click("text=next")
    assert "page=2" in page.url
    page.goto(f"{served}/regressions?min_size=20%25&case=mul*")  # the form sent twice
    page.wait_for_selector("main table")
    assert page.input_value("input[name=min_size]") == "20%"
    page.click("button:text-is('Filter')")
    page.wait_for_selector("main table")
    assert "min_size=20%25" in page.url and "mul: n=1" in page.inner_text("main")
    assert "machine=" not in page.url  # an empty field is left out of the address
    page.goto(f"{served}/regressions?since_commit=0010")  # kept by the filter form
    page.wait_for_selector("main table")
    page.click("button:text-is('Filter')")
    page.wait_for_selector("main table")
    assert "since_commit=0010" in page.url
    page.goto(f"{served}/compare?a=15&b=16&threshold=1%25&per_page=1")
    page.click("text=next")  # the next page and the other order: judged alike
    page.wait_for_selector("main table")
    assert "threshold=0.01" in page.url and "per_page=1" in page.url and "page=2" in page.url
    page.click("text=by case instead")
    page.wait_for_selector("main table")
    assert "threshold=0.01" in page.url and "sort=case" in page.url
    assert "threshold 1.0%" in page.inner_text("main")
    assert errors == [] and outside == []


def test_a_non_local_address_needs_the_token_and_its_holder_can_acknowledge(
        browser, store, tmp_path, capsys):
    assert main(["serve", "--db", store.url, "--host", "0.0.0.0"]) == 2
    assert "needs" not in capsys.readouterr().out
    for weak in (" " * 20, "a" * 20, "short", "a token with spaces in it"):
        assert main(["serve", "--db", store.url, "--host", "0.0.0.0", "--token", weak]) == 2
        assert "the token must be at least 16 characters" in capsys.readouterr().err
    with serving(store.url, "--host", "0.0.0.0", "--token", TOKEN) as base:
        assert get(f"{base}/api/v1/runs")[0] == 401
        assert get(f"{base}/api/v1/runs", {"Authorization": "Bearer wrong-token-xxxxxx"})[0] \
            == 401
        assert get(f"{base}/api/v1/runs", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        request = urllib.request.Request(  # a NUL in a mark: refused before the store
            f"{base}/api/v1/regressions/mark", method="POST",
            data=json.dumps({"key": "k", "mark": "dismissed", "note": "a\u0000b"}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 400
        page, errors, outside = watched(browser, base)
        page.goto(f"{base}/runs")
        assert "needs its token" in page.inner_text("body")
        page.goto(f"{base}/regressions?token={TOKEN}")  # the cookie, then no token in the URL
        page.wait_for_selector("button:has-text('acknowledge')")
        assert all("401" in e for e in errors), errors  # the page refused above, logged as errors
        errors.clear()
        assert TOKEN not in page.url and TOKEN not in page.content()
        page.on("dialog", lambda dialog: dialog.accept("a known cost of the new kernel"))
        page.click("button:has-text('acknowledge')")
        page.wait_for_selector("text=acknowledged: a known cost of the new kernel")
        capsys.readouterr()
        assert main(["regressions", "--db", store.url]) == 0
        out = capsys.readouterr().out
        assert "acknowledged" in out and "a known cost of the new kernel" in out
        page.reload()  # a marked change offers to take its mark back
        page.click("button:has-text('reopen')")
        page.wait_for_selector("text=reopened: a known cost of the new kernel")
        assert errors == [] and outside == []
    assert main(["regressions", "--db", store.url]) == 0
    assert "acknowledged" not in capsys.readouterr().out


def test_the_api_over_a_postgresql_store(postgres):
    store = build_store(postgres.new_database(), runs=20, step_at=10)
    with serving(store.url) as base:
        assert get(f"{base}/api/v1/runs")[1]["total"] == 20
        [change] = get(f"{base}/api/v1/regressions")[1]["regressions"]
        assert (change["last_good"], change["first_bad"]) == (10, 11)
        case = get(f"{base}/api/v1/cases/{change['case_id']}")[1]
        assert case["series"][0]["changes"][0]["first_bad"] == 11
        assert get(f"{base}/api/v1/compare?a=10&b=11")[1]["rows"][0]["verdict"] == "slower"
        assert get(f"{base}/api/v1/search?q=N%3D2")[1]["cases"][0]["title"] == "mul: n=2"
        assert get(f"{base}/api/v1/runs/5")[1]["total"] == 3
        # PostgreSQL's text holds no NUL: a request naming one is refused, not a 500
        for path in ("/api/v1/search?q=%00", "/api/v1/cases/%00", "/api/v1/cases/a%00b",
                     "/api/v1/runs?machine=%00", "/api/v1/runs?command=%00",
                     "/api/v1/regressions?machine=%00"):
            assert get(f"{base}{path}") == (400, {"error": "a NUL character (%00) in the "
                                                           "request"}), path


def test_a_page_waiting_for_the_first_detection_holds_no_other_page(tmp_path):
    """The first detection of a large store takes minutes: the feed waits for it, the
    runs page (built under the same one page thread) does not."""
    import asyncio

    from torchmark.server.app import create_app

    app = create_app(build_store(f"sqlite:///{tmp_path / 'h.db'}"), None)
    detect = app.state.dashboard.changes.get

    def slow_detection():
        time.sleep(2)
        return detect()

    app.state.dashboard.changes.get = slow_detection

    async def timed(path: str) -> float:
        """GET `path` from the application itself (ASGI); the seconds it took."""
        started, sent = time.perf_counter(), []
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": path,
                 "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1),
                 "server": ("127.0.0.1", 80)}

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        await app(scope, receive, send)
        assert sent[0]["status"] == 200
        return time.perf_counter() - started

    async def main() -> tuple[float, float]:
        feed = asyncio.create_task(timed("/api/v1/regressions"))
        await asyncio.sleep(0.2)
        return await timed("/api/v1/runs"), await feed

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a loop of its own (the
        runs, feed = pool.submit(lambda: asyncio.run(main())).result()  # browser's runs)
    assert feed >= 2 and runs < 1.5
