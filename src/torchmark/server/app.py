"""The dashboard's web application: each page at a stable address, its data from
report/views.py both as the page (HTML that draws it with dashboard.js and the plotly.js
served from the package, nothing from another host) and under /api/v1/ as JSON.

Pages: /regressions (the home page), /runs, /runs/{id}, /cases/{id}, /compare?a=&b=,
/search?q=. API: /api/v1/ (the index), /api/v1/runs, /api/v1/runs/{id},
/api/v1/cases/{id}, /api/v1/regressions (?since_commit=SHA: what regressed since it),
/api/v1/compare, /api/v1/search, and POST /api/v1/regressions/mark (a token holder's
acknowledgement or dismissal, with a note).

Pages are built in threads of this process, one at a time by default, or (`serve
--workers N`) in N page processes fed first come, first served (PageProcesses)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import html
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import anyio
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from torchmark.report import views
from torchmark.report.page import page_json, script_json
from torchmark.server import auth
from torchmark.server.changes_cache import ChangesCache

API_VERSION = "v1"
STATIC = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
REPORT_SCRIPTS = ("history_plot.js", "samples_plot.js")  # the report's, served as they are
CSP = ("default-src 'none'; script-src 'self' 'unsafe-eval'; style-src 'self' "
       "'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
MARKS = ("acknowledged", "dismissed", "reopened")  # reopened: a mark taken back
# pages one process builds at once: at 10M results, 20 clients, 2 processes on 2 cores,
# a comparison's round trip median 292 ms with 1, 323 with 2, 373 with 40 (anyio's own)
PAGE_THREADS = 1
CHANGES_PAGES = ("regressions", "case")  # the pages that show the detected changes
MAX_NOTE = 2000
MAX_PER_PAGE = 500
LARGEST_INT = 2**63 - 1  # the largest id a store holds (SQLite's and PostgreSQL's bigint)


class Dashboard:
    """The application's state: the store, the token (None: read-only), the cache."""

    def __init__(self, store: Any, token: str | None) -> None:
        self.store, self.token = store, token
        self.changes = ChangesCache(store)

    # -- pages and their data --------------------------------------------------------
    def runs(self, q: Any) -> dict[str, Any]:
        machine, env = self._machine_and_env(q)
        return views.runs_view(self.store, machine=machine, env=env,
                               commit=q.get("commit") or None,
                               command=q.get("command") or None,
                               since=_time(q, "since"), until=_time(q, "until"),
                               page=_page_number(q), per_page=_per_page(q))

    def run(self, run_id: int, q: Any) -> dict[str, Any] | None:
        data = views.run_view(self.store, run_id, page=_page_number(q),
                              per_page=_per_page(q))
        if data is None:
            raise NotFound(f"no run {run_id} in the store (the runs page lists them)")
        return data

    def case(self, case_id: str, q: Any) -> dict[str, Any] | None:
        """A case's page, its changes the feed's (detected across the store)."""
        changes, _ = self.changes.get()
        data = views.case_view(self.store, case_id, metric=_metric(q), detected=changes)
        if data is None:
            cut = [c["id"] for c in self.store.search_cases(f"{case_id}#", limit=3)
                   if c["id"].startswith(f"{case_id}#")]
            raise NotFound(f"no case {case_id[:200]!r} in the store" + (
                f" (is it {cut[0][:200]!r}? In an address a '#' is written %23: what "
                "follows a '#' never reaches the server)" if cut else
                " (search finds cases by their names)"))
        return data

    def regressions(self, q: Any) -> dict[str, Any]:

        changes, status = self.changes.get()
        since = (q.get("since_commit") or "")[:64] or None
        if since:
            first = min(r["started"] for r in self._runs_of_commit("since_commit", since))
            changes = [c for c in changes if c.first_bad.started > first]
        state = q.get("state") or None
        if state is not None and state not in views.STATES:
            raise BadRequest(f"state must be one of {', '.join(views.STATES)}")
        metric = _metric(q)
        hosts = self.store.hostnames()
        machine, env = self._machine_and_env(q, hosts)
        case = q.get("case") or None
        titles = self.store.case_titles() if case is not None else None
        if case is not None and not views.cases_matching(titles or {}, case):
            raise BadRequest(f"case: no case's id or title is {case[:200]!r} (a shell "
                             "pattern with * ? [ matches several)")
        data = views.regressions_view(
            changes, hosts, metric=metric, machine=machine, env=env, case=case,
            titles=titles, state=state,
            min_size=_share(q.get("min_size"), 0.0, "min_size"), page=_page_number(q),
            per_page=_per_page(q))
        return {**data, "status": status, "writable": self.token is not None,
                "since_commit": since}

    def compare(self, q: Any) -> dict[str, Any]:
        from torchmark.rootcause.explain import explain_results

        a, b = (self._side_of(name, q.get(name)) for name in ("a", "b"))
        if _runs_of(a) == _runs_of(b):
            raise BadRequest(f"a and b are the same run{'s' if len(_runs_of(a)) > 1 else ''}"
                             f" ({', '.join(map(str, _runs_of(a)))}): nothing to compare")
        sort = q.get("sort") or "change"
        if sort not in ("change", "case"):
            raise BadRequest("sort must be change or case")
        data = views.compare_view(self.store, a, b,
                                  threshold=_share(q.get("threshold"), 0.05, "threshold"),
                                  sort=sort, page=_page_number(q),
                                  per_page=_per_page(q), explainer=lambda old, new:
                                  explain_results(old, new, ops=False, top=5).sections(5))
        if not data["total"]:  # as gate refuses them: "no row" must not read as "no change"
            for name, side in (("a", a), ("b", b)):  # a run asked for is looked for only now
                if isinstance(side, int) and not self.store.has_run(side):
                    raise NotFound(f"{name}: no run {side}")
            raise BadRequest("a and b hold no case in common: nothing to compare")
        return data

    def _machine_and_env(self, q: Any, hosts: dict[str, str] | None = None
                         ) -> tuple[str | None, str | None]:
        """The ?machine= and ?env= filters; one that names nothing the store holds is
        refused ("no regression", "no run" would read as all clear). `hosts`: the
        store's hostnames, where the caller holds them."""
        machine, env = q.get("machine") or None, q.get("env") or None
        if machine is not None:
            known = self.store.hostnames() if hosts is None else hosts
            if not any(views.on_machine(fingerprint, machine, known) for fingerprint in known):
                raise BadRequest(f"machine: no machine of the store is {machine[:80]!r} (a "
                                 "hostname, or a fingerprint's first 4 characters or more)")
        if env is not None and not self.store.has_env(env):
            raise BadRequest(f"env: no run of the store has the env label {env[:80]!r}")
        return machine, env

    def _side_of(self, name: str, ref: str | None) -> Any:
        """A side of a comparison (the query parameter `name`): a run id, `run:N`,
        `latest` (the newest finished run), `commit:SHA` or `env:LABEL`, resolved as
        `gate` and `torchmark compare` resolve them (regressions/refs.py: on the machine
        of the newest run named, a commit's runs pooled, an env label's newest run of
        each case)."""
        if not ref:
            raise BadRequest("compare needs two runs: ?a=RUN&b=RUN (or run:N, latest, "
                             "commit:SHA, env:LABEL)")
        if ref == "latest":
            runs = self.store.finished_runs()
            if not runs:
                raise NotFound(f"{name}: the store holds no finished run")
            return int(runs[0]["id"])
        if ref.startswith("env:") and ref != "env:":
            if not self.store.finished_runs(env=ref.removeprefix("env:")):
                raise NotFound(f"{name}: no finished run labelled {ref[:80]}")
            return self._resolved(name, ref)
        if ref.startswith("commit:"):
            commit = ref.removeprefix("commit:")[:64]
            if commit == "":
                raise BadRequest(f"{name}: give the commit: commit:SHA (a prefix of it)")
            self._runs_of_commit(name, commit)
            return self._resolved(name, f"commit:{commit}")
        try:
            run = int(ref.removeprefix("run:"))
        except ValueError:
            raise BadRequest(f"{name}: expected a run (12, run:12, latest, commit:SHA or "
                             "env:LABEL), "
                             f"got {ref[:40]!r}") from None
        if not 0 < run <= LARGEST_INT:
            raise NotFound(f"{name}: no run {ref[:40]}")
        return run  # one the store lacks compares nothing: compare() then says so

    def _resolved(self, name: str, ref: str) -> Any:
        """The side `ref` names (regressions/refs.py resolve_side)."""
        from torchmark.core.errors import UsageError
        from torchmark.regressions.refs import resolve_side

        try:
            return resolve_side(ref, self.store, files=False)  # never a server's file
        except UsageError as error:
            raise NotFound(f"{name}: {error}") from None

    def _runs_of_commit(self, name: str, commit: str) -> list[dict[str, Any]]:
        """The finished runs of the one commit that `commit` begins, newest first (the
        query parameter `name`'s); NotFound for none, BadRequest for several commits."""
        runs = self.store.finished_runs(commit=commit)
        if not runs:
            raise NotFound(f"{name}: no finished run of a commit {commit!r}")
        commits = {r["git_commit"] for r in runs}
        if len(commits) > 1:
            raise BadRequest(f"{name}: {commit!r} begins {len(commits)} commits: give more "
                             "of it")
        return runs

    def search(self, q: Any) -> dict[str, Any]:
        return views.search_view(self.store, (q.get("q") or "")[:200],
                                 page=_page_number(q), per_page=_per_page(q))

    def mark(self, key: str, mark: str, note: str, by: str | None) -> dict[str, Any]:
        """Store a mark on the change named `key` (a regression's key)."""
        if mark not in MARKS:
            raise BadRequest(f"mark must be one of {', '.join(MARKS)}")
        changes, _ = self.changes.get()
        change = next((c for c in changes if c.key == key), None)
        if change is None:
            raise NotFound(f"no detected change {key!r}")
        self.store.mark_change(case_id=change.series.case_id, metric=change.series.metric,
                               first_bad_run=change.first_bad.run_id, mark=mark,
                               note=note[:MAX_NOTE], by=by)
        self.changes.marks_changed()
        return {"key": key, "mark": mark, "note": note[:MAX_NOTE]}


NUL_REFUSED = "a NUL character (%00) in the request"  # no name holds one; PostgreSQL refuses it


class BadRequest(Exception):
    status = 400


class NotFound(Exception):
    status = 404


def _runs_of(side: Any) -> tuple[int, ...]:
    """The runs a side of a comparison is made of (a run id, or refs.Side)."""
    return (side,) if isinstance(side, int) else tuple(side.runs)


def _side_name(side: int | str, first: bool = False) -> str:
    """A compared side for a title: "run 12" ("Run 12" `first`), or the reference of a
    side of several runs as given."""
    if isinstance(side, int):
        return f"{'R' if first else 'r'}un {side}"
    return side


def _int(value: Any, default: int) -> int:
    """A whole number of the query or the path (the store's ids are 64-bit)."""
    try:
        number = int(value) if value not in (None, "") else default
    except ValueError:
        raise BadRequest(f"not a whole number: {str(value)[:40]!r}") from None
    if abs(number) > LARGEST_INT:
        raise BadRequest(f"too large a number: {str(value)[:40]!r}")
    return number


def _time(q: Any, name: str) -> str | None:
    """The query parameter `name`, a date or an ISO time (store.time_bound), if given."""
    from torchmark.core.errors import UsageError
    from torchmark.store.store import time_bound

    value = q.get(name) or None
    if value is not None:
        try:
            time_bound(value, f"{name}:")
        except UsageError as e:
            raise BadRequest(str(e)) from None
    return value


def _per_page(q: Any) -> int:
    """?per_page=N, 1 to MAX_PER_PAGE (default: views.PAGE_SIZE); another is refused."""
    number = _int(q.get("per_page"), views.PAGE_SIZE)
    if not 1 <= number <= MAX_PER_PAGE:
        raise BadRequest(f"per_page must be 1 to {MAX_PER_PAGE}, got {number}")
    return number


def _page_number(q: Any) -> int:
    """?page=N, 1 or more (default 1); another is refused."""
    number = _int(q.get("page"), 1)
    if number < 1:
        raise BadRequest(f"page must be 1 or more, got {number}")
    return number


def _metric(q: Any) -> str | None:
    """?metric=, one torchmark measures (None when not given)."""
    from torchmark.core.result import METRICS

    metric = q.get("metric") or None
    if metric is not None and metric not in METRICS:
        raise BadRequest(f"metric must be one of {', '.join(METRICS)}")
    return metric


def _share(value: Any, default: float, name: str) -> float:
    """A proportion of the query: a fraction (0.05) or a percent (5%)."""
    from torchmark.core.errors import UsageError
    from torchmark.core.proportion import parse_proportion

    if value in (None, ""):
        return default
    try:
        return parse_proportion(str(value)[:40], 0, 10, high_open=True)
    except UsageError as e:
        raise BadRequest(f"{name}: {e}") from None


@functools.cache
def _template() -> str:
    """The pages' HTML (templates/page.html), read once."""
    return resources.files("torchmark.server").joinpath("templates/page.html") \
        .read_text(encoding="utf-8")


def _page(kind: str, title: str, data: Any) -> HTMLResponse:
    body = (_template().replace("{{title}}", html.escape(title))
            .replace("{{kind}}", html.escape(kind))
            .replace("{{data}}", script_json(data)))
    return HTMLResponse(body)


def _error(status: int, message: str, as_json: bool) -> Response:
    if as_json:
        return JSONResponse({"error": message}, status_code=status)
    # the pages' own head and header (no script); without the token the stylesheet
    head = _template().split("<main", 1)[0].replace("{{title}}", f"error {status}") \
        .replace("{{kind}}", "error")
    if status == 401:  # would be refused too
        head = head.replace('<link rel="stylesheet" href="/static/dashboard.css">', "")
    return HTMLResponse(f"{head}<main><h1>{status}</h1><p>{html.escape(message)}</p></main>"
                        "</body></html>", status_code=status)


async def _not_found(request: Request, exc: Exception) -> Response:
    """An address no page has (JSON under /api/)."""
    return _error(404, f"no page at {request.url.path[:200]}",
                  request.url.path.startswith("/api/"))


async def _not_allowed(request: Request, exc: Exception) -> Response:
    """A method an address does not take (JSON under /api/), with the ones it takes."""
    allowed = getattr(exc, "headers", None) or {}
    response = _error(405, f"{request.method[:10]} is not taken at {request.url.path[:200]}"
                           + (f" (it takes {allowed['Allow']})" if "Allow" in allowed else ""),
                      request.url.path.startswith("/api/"))
    response.headers.update(allowed)
    return response


@dataclasses.dataclass(frozen=True)
class Asked:
    """What a page is asked for, as a page process receives it (a Request does not
    cross processes): the path, its parameters and the query string."""

    path: str
    path_params: dict[str, Any]
    query: str

    @property
    def query_params(self) -> QueryParams:
        return QueryParams(self.query)

    @classmethod
    def of(cls, request: Request) -> Asked:
        return cls(request.url.path, dict(request.path_params), request.url.query)


Produce = Callable[[Asked], Any]
Title = Callable[[Asked, Any], str]


def page_table(dash: Dashboard) -> list[tuple[str, str, Produce, Title]]:
    """Each page: its kind, its path, what makes its data (its reads on one connection
    of the store), and its title."""
    def run_data(asked: Asked) -> Any:
        return dash.run(_int(asked.path_params["run_id"], 0), asked.query_params)

    def case_data(asked: Asked) -> Any:
        return dash.case(asked.path_params["case_id"], asked.query_params)

    def on_one_connection(produce: Produce) -> Produce:
        def pinned(asked: Asked) -> Any:
            with dash.store.one_connection():
                return produce(asked)
        return pinned

    pages: list[tuple[str, str, Produce, Title]] = [
        ("regressions", "/regressions", lambda r: dash.regressions(r.query_params),
         lambda r, d: "Regressions"),
        ("runs", "/runs", lambda r: dash.runs(r.query_params), lambda r, d: "Runs"),
        ("run", "/runs/{run_id:int}", run_data, lambda r, d: f"Run {d['run']['id']}"),
        ("case", "/cases/{case_id:path}", case_data, lambda r, d: d["title"]),
        ("compare", "/compare", lambda r: dash.compare(r.query_params),
         lambda r, d: f"{_side_name(d['baseline'], True)} against "
                      f"{_side_name(d['candidate'])}"),
        ("search", "/search", lambda r: dash.search(r.query_params), lambda r, d: "Search"),
    ]
    return [(kind, path, on_one_connection(produce), title)
            for kind, path, produce, title in pages]


Built = tuple[int, str, bytes, float, float]  # status, media type, body, queue, page (s)

# what each page reads of its query (`token` aside: the guard's); another name is refused,
# so a filter a page does not have (or a misspelt one) never reads as "nothing found"
PARAMETERS = {
    "regressions": {"since_commit", "state", "metric", "machine", "env", "case", "min_size",
                    "page", "per_page"},
    "runs": {"machine", "env", "commit", "command", "since", "until", "page", "per_page"},
    "run": {"page", "per_page"},
    "case": {"metric"},
    "compare": {"a", "b", "sort", "threshold", "page", "per_page"},
    "search": {"q", "page", "per_page"},
}


def build_page(kind: str, produce: Produce, title: Title, asked: Asked,
               arrived: float) -> Built:
    """A page (or, under /api/, its JSON) from `produce(asked)`: its status, media type
    and body, the time it waited since `arrived` (time.perf_counter, the same clock in
    every process of the machine) and the time it took."""
    started = time.perf_counter()
    api = asked.path.startswith("/api/")
    response: Response
    unknown = sorted(set(asked.query_params) - PARAMETERS.get(kind, set()) - {"token"})
    if "\x00" in asked.path or any(  # no name holds one; a server refuses it
            "\x00" in k or "\x00" in v for k, v in asked.query_params.multi_items()):
        response = _error(400, NUL_REFUSED, api)
    elif unknown:
        response = _error(400, f"unknown parameter {unknown[0][:60]!r}: the {kind} page "
                               f"takes {', '.join(sorted(PARAMETERS[kind])) or 'none'}", api)
    else:
        try:
            data = produce(asked)
        except (BadRequest, NotFound) as e:
            data, response = None, _error(e.status, str(e), api)
        except ValueError as e:  # a bad filter value (a date) the store refused
            data, response = None, _error(400, str(e).splitlines()[0][:300], api)
        else:
            if data is None:
                response = _error(404, "not found", api)
            elif api:
                response = Response(page_json({"version": API_VERSION, **data}),
                                    media_type="application/json")
            else:
                response = _page(kind, title(asked, data), data)
    return (response.status_code, response.media_type or "text/plain", bytes(response.body),
            started - arrived, time.perf_counter() - started)


_PROCESS: dict[str, Any] = {}  # a page process's pages (_start_page_process)


def _start_page_process(url: str, token: str | None) -> None:
    """A page process's own store and Dashboard (PageProcesses' initializer)."""
    from torchmark.store import open as open_store

    dash = Dashboard(open_store(url), token)
    _PROCESS["pages"] = {kind: (produce, title)
                         for kind, _, produce, title in page_table(dash)}


def _build_in_process(kind: str, asked: Asked, arrived: float) -> Built:
    produce, title = _PROCESS["pages"][kind]
    return build_page(kind, produce, title, asked, arrived)


class PageProcesses:
    """Pages built in `count` processes of their own, first come, first served: an idle
    process takes the oldest page waiting, so no page waits behind another process's
    queue while a core is free (uvicorn's worker processes each take connections as they
    come, and their queues grow unevenly). A process that dies is replaced (build)."""

    def __init__(self, url: str, token: str | None, count: int) -> None:
        self.url, self.token, self.count = url, token, count
        self.pool = self._new_pool()
        # a new pool's start, held: a task nothing refers to may be collected unfinished
        self.starting: asyncio.Future[None] | None = None

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        import multiprocessing

        return concurrent.futures.ProcessPoolExecutor(
            self.count, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_page_process, initargs=(self.url, self.token))

    async def build(self, kind: str, asked: Asked, arrived: float) -> Built:
        """The page built in a page process. A process that dies breaks the whole pool
        (every page waiting in it fails alike): a new pool is made and the page asked
        of it once more, so only a page that kills its process again answers 500."""
        for _ in range(2):
            pool = self.pool
            try:
                return await asyncio.wrap_future(pool.submit(_build_in_process, kind,
                                                             asked, arrived))
            except concurrent.futures.process.BrokenProcessPool:
                if self.pool is pool:  # its other processes are ended: a new pool
                    self.pool = self._new_pool()
                    self.starting = asyncio.ensure_future(self.start())
        message = "the process building this page ended, twice; ask again"
        body = _error(500, message, asked.path.startswith("/api/"))
        return (500, body.media_type or "text/plain", bytes(body.body), 0.0, 0.0)

    async def start(self) -> None:
        """Every process started now (a pool starts them as pages come: the first pages
        at once would wait for Python to start), each with its store open."""
        await asyncio.gather(*(asyncio.wrap_future(self.pool.submit(_started))
                               for _ in range(self.count)))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _started() -> bool:
    time.sleep(0.05)  # busy a moment: the pool starts another process for the next
    return True


def create_app(store: Any, token: str | None = None,
               page_threads: int = PAGE_THREADS, page_processes: int = 0) -> Starlette:
    """The application over `store`; `token`: required on every request, and what lets
    its holder mark regressions (None: read-only, for a loopback address);
    `page_threads`: pages built at once in this process (the others wait their turn);
    `page_processes` (2 or more): pages built in that many processes instead
    (PageProcesses), one at a time each."""
    dash = Dashboard(store, token)
    processes = PageProcesses(store.url, token, page_processes) \
        if page_processes > 1 else None

    # the pages' work is mostly Python holding the GIL: pages built at once only slow
    # each other down, so the others wait their turn, first come, first served
    threads = anyio.CapacityLimiter(page_threads)

    def handler(kind: str, produce: Produce, title: Title) -> Any:
        """The endpoint of a page: built in a thread of `threads` (or a page process);
        its Server-Timing says how long it waited for one (queue) and how long it took
        (page). A page of the detected changes first waits for them outside `threads`
        (the first detection of a store takes minutes: the other pages are built
        meanwhile)."""
        async def endpoint(request: Request) -> Response:
            if kind in CHANGES_PAGES:
                await anyio.to_thread.run_sync(dash.changes.get)
            asked, arrived = Asked.of(request), time.perf_counter()
            if processes is not None:
                built = await processes.build(kind, asked, arrived)
            else:
                built = await anyio.to_thread.run_sync(
                    build_page, kind, produce, title, asked, arrived, limiter=threads)
            status, media_type, body, queue, took = built
            return Response(body, status_code=status, media_type=media_type, headers={
                "Server-Timing": f"queue;dur={queue * 1000:.1f}, page;dur={took * 1000:.1f}"})
        return endpoint

    pages = page_table(dash)
    routes = []
    for kind, path, produce, title in pages:
        endpoint = handler(kind, produce, title)
        routes += [Route(path, endpoint), Route(f"/api/{API_VERSION}{path}", endpoint)]

    def home(request: Request) -> Response:
        return RedirectResponse("/regressions", status_code=307)

    def api_index(request: Request) -> Response:
        return JSONResponse({"version": API_VERSION, "endpoints": {
            f"/api/{API_VERSION}{path}": kind for kind, path, _, _ in pages},
            "mark": f"POST /api/{API_VERSION}/regressions/mark "
                    "{key, mark: acknowledged|dismissed|reopened, note} (token holders)"})

    async def mark(request: Request) -> Response:
        if token is None:
            return _error(403, "read-only: start `torchmark serve` with --token to let "
                               "token holders mark regressions", True)
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body must be a JSON object", True)
        if not isinstance(body, dict) or not all(isinstance(body.get(k, ""), str)
                                                 for k in ("key", "mark", "note", "by")):
            return _error(400, "give key, mark and note as strings", True)
        if any("\x00" in body.get(k, "") for k in ("key", "mark", "note", "by")):
            return _error(400, NUL_REFUSED, True)
        from starlette.concurrency import run_in_threadpool

        try:
            data = await run_in_threadpool(dash.mark, body.get("key", ""),
                                           body.get("mark", ""), body.get("note", ""),
                                           body.get("by") or "dashboard")
        except (BadRequest, NotFound) as e:
            return _error(e.status, str(e), True)
        return JSONResponse({"version": API_VERSION, **data})

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "plotly.min.js":
            from plotly.offline import get_plotlyjs

            return Response(get_plotlyjs(), media_type="text/javascript",
                            headers={"Cache-Control": "max-age=86400"})
        if name in REPORT_SCRIPTS:  # the report's own: one code path for both
            return Response(resources.files("torchmark.report").joinpath(name)
                            .read_text(encoding="utf-8"), media_type="text/javascript")
        if name not in STATIC:
            return _error(404, "not found", False)
        text = resources.files("torchmark.server").joinpath(f"static/{name}") \
            .read_text(encoding="utf-8")
        return Response(text, media_type=STATIC[name])

    routes += [Route("/", home), Route(f"/api/{API_VERSION}", api_index),
               Route(f"/api/{API_VERSION}/regressions/mark", mark, methods=["POST"]),
               Route("/static/{name}", static)]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if processes is not None:
            await processes.start()
        yield
        if processes is not None:
            processes.close()

    app = Starlette(routes=routes, middleware=[Middleware(Guard, token=token)],
                    exception_handlers={404: _not_found, 405: _not_allowed}, lifespan=lifespan)
    app.state.dashboard = dash
    return app


class Guard(BaseHTTPMiddleware):
    """The token on every request (when one is set; without one, a request must name
    this machine in its Host header: a web page elsewhere that had its own name point
    at 127.0.0.1 cannot read the dashboard through the user's browser), the security
    headers, and the server's time on the request (`Server-Timing: app;dur=MS`, after
    a page's own `queue` and `page` times)."""

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        if self.token is None:
            host = auth.host_of(request.headers.get("host"))
            if host and not auth.is_loopback(host):
                return _secured(_error(
                    400, f"this dashboard answers to localhost only, not {host[:80]!r} "
                         "(bound elsewhere it needs --token)",
                    request.url.path.startswith("/api/")))
        else:
            given = request.query_params.get("token")
            if given is not None:
                if not auth.matches(given, self.token):
                    return _error(401, "wrong token", request.url.path.startswith("/api/"))
                rest = urlencode([(k, v) for k, v in request.query_params.multi_items()
                                  if k != "token"])
                response: Response = RedirectResponse(
                    request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(auth.COOKIE, self.token, httponly=True, samesite="strict")
                return _secured(response)
            header = request.headers.get("authorization", "")
            bearer = header[7:] if header.lower().startswith("bearer ") else None
            if not (auth.matches(bearer, self.token) or
                    auth.matches(request.cookies.get(auth.COOKIE), self.token)):
                return _secured(_error(401, "this dashboard needs its token (?token=, or "
                                            "Authorization: Bearer TOKEN)",
                                       request.url.path.startswith("/api/")))
        started = time.perf_counter()
        response = await call_next(request)
        timing = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        page = response.headers.get("Server-Timing")
        response.headers["Server-Timing"] = f"{page}, {timing}" if page else timing
        return _secured(response)


def _secured(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
