"""How fast `torchmark serve` answers on a large store (issue 40's targets: each page's
server time under 300 ms on 10,000 cases x 1,000 runs, 10M results, SQLite and
PostgreSQL).

A store of CASES x RUNS wall-time results (10 raw samples each, one case in 100 with a 25%
step half-way, the runs a commit each with its date and subject) is built first, in bulk
(its time printed, not a target). Then `torchmark serve` is started on it (a subprocess,
as a user starts it) and each page is requested: the regressions feed (after the first
request, which detects the changes across the store: its time printed apart), runs
(paged, and filtered by machine), a run, a case's history, a comparison of two runs, a
search, and two API answers; each 100 times one after the other, then 100 times from 20
concurrent clients, each request for another case, run, pair of runs or page (nothing
answers from a cache). Printed: the server's time (its Server-Timing header) median and
p95, and the round trip's median, each page. Then how long the feed takes to show a new
run (of 1% of the cases, then of all: the detection is done again for their cases only),
and the static report's build time on the same store (`torchmark report`, with a time
limit).

    python benchmarks/serve_speed.py [--cases 10000] [--runs 1000] [--postgres URL|auto]
        [--requests 100] [--clients 20] [--report-timeout 600] [--workers 1]
        [--skip-sqlite]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime as dt
import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from torchmark.core.provenance import Provenance
from torchmark.store import Store
from torchmark.store import schema as tables
from torchmark.store.result_rows import content_key
from torchmark.store.store import utc_now

SAMPLES = 10
STEP_EVERY = 100  # one case in this many steps up 25% half-way
FIRST = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)  # the first run's commit date


def build(url: str, cases: int, runs: int) -> tuple[Store, float]:
    """The store (module docstring) and the seconds it took to build."""
    started = time.perf_counter()
    store = Store(url)
    rng = np.random.default_rng(3)
    ids = [f"suite:case{i:05d}" for i in range(cases)]
    with store.engine.begin() as conn:
        conn.execute(tables.cases.insert(), [
            {"id": case, "frontend": "suite", "stmt": f"torch.mul(x, {i})",
             "setup": "", "label": f"op{i % 50}", "sub_label": f"n={i}",
             "description": None, "threads": 1, "device": "cpu",
             "params": {"n": i, "dtype": "float32" if i % 2 else "bfloat16"}}
            for i, case in enumerate(ids)])
    base = Provenance.capture(env="ci")
    level = 1e-6 * (1 + (np.arange(cases) % 97) / 10)
    stepped = np.arange(cases) % STEP_EVERY == 0
    for k in range(runs):
        write_run(store, base, k, ids, level * np.where(stepped & (k >= runs // 2), 1.25, 1.0),
                  rng)
        if k % 100 == 99:
            print(f"  built {k + 1} of {runs} runs ({time.perf_counter() - started:.0f} s)",
                  flush=True)
    return store, time.perf_counter() - started


def write_run(store: Store, base: Provenance, k: int, ids: list[str], scale: np.ndarray,
              rng: np.random.Generator) -> int:
    """Run number `k` (commit k, an hour after run k - 1) of the cases `ids` at the
    levels `scale` (seconds, 1% noise), written in bulk; its id."""
    when = FIRST + dt.timedelta(hours=k)
    run = store.start_run(dataclasses.replace(
        base, git_commit=f"{k:08x}" + "cd" * 16, git_dirty=False,
        git_commit_date=when.isoformat(), git_commit_subject=f"Commit number {k}",
        started=(when + dt.timedelta(minutes=3)).isoformat()))
    values = scale[:, None] * (1 + 0.01 * rng.standard_normal((len(ids), SAMPLES)))
    ordered = np.sort(values, axis=1)
    medians = (ordered[:, SAMPLES // 2 - 1] + ordered[:, SAMPLES // 2]) / 2
    # core.result.quartile's: linear between the sorted values about i (n - 1) / 4
    (j1, d1), (j3, d3) = divmod(SAMPLES - 1, 4), divmod(3 * (SAMPLES - 1), 4)
    q1 = (ordered[:, j1] * (4 - d1) + ordered[:, j1 + 1] * d1) / 4
    q3 = (ordered[:, j3] * (4 - d3) + ordered[:, j3 + 1] * d3) / 4
    means = values.mean(axis=1)
    blobs = [row.astype("<f8").tobytes() for row in values]
    now = utc_now()
    rows = [{"run_id": run, "case_id": case, "metric": "wall", "unit": "s", "env": None,
             "number_per_run": 100, "n": SAMPLES, "median": float(medians[i]),
             "mean": float(means[i]), "iqr": float(q3[i] - q1[i]),
             "min": float(ordered[i, 0]), "max": float(ordered[i, -1]),
             "samples": blobs[i], "content_key": content_key(case, "wall", blobs[i]),
             "warnings": [], "failure": None, "failure_tail": None, "extra": {},
             "q1": float(q1[i]), "q3": float(q3[i]), "recorded": now}
            for i, case in enumerate(ids)]
    with store.engine.begin() as conn:
        conn.execute(tables.results.insert(), rows)
        store.count_result_write(conn, run)
    store.finish_run(run, "ok")
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_CLIENT = threading.local()  # each client thread's connection, kept alive as a browser's


def fetch(url: str) -> dict[str, float]:
    """One GET's times in ms: its Server-Timing parts (`queue`: waiting for a page
    thread, `page`: building the page, `app`: the whole request in the server) and the
    round trip (`trip`). Each thread asks on a connection of its own, kept open between
    its requests (as browsers and HTTP client libraries do: a connection a request cost
    the server and these clients CPU a real client does not make it spend)."""
    parts = urllib.parse.urlsplit(url)
    started = time.perf_counter()
    for attempt in range(2):
        conn = getattr(_CLIENT, "conn", None)
        if conn is None or (conn.host, conn.port) != (parts.hostname, parts.port):
            conn = _CLIENT.conn = http.client.HTTPConnection(parts.hostname, parts.port,
                                                             timeout=600)
        try:
            conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
            response = conn.getresponse()
            response.read()
            break
        except (ConnectionError, http.client.HTTPException):
            conn.close()  # the server closed it (a restart): once more on a new one
            _CLIENT.conn = None
            if attempt:
                raise
    if response.status >= 400:
        raise RuntimeError(f"GET {url}: {response.status}")
    timing = response.headers.get("Server-Timing", "")
    times = {"queue": math.nan, "page": math.nan, "app": math.nan}
    for part in timing.split(","):
        name, _, duration = part.strip().partition(";dur=")
        if name in times:
            times[name] = float(duration)
    return {**times, "trip": (time.perf_counter() - started) * 1000}


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def busy_cpu_ms() -> float:
    """The CPU time the whole machine has spent busy (every core, every process: the
    server's, the database's, these clients'), from /proc/stat; NaN elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:8]]
    except (OSError, ValueError):
        return math.nan
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) * 1000 / os.sysconf("SC_CLK_TCK")


def measure(base: str, pages: dict[str, Any], requests: int, clients: int) -> None:
    """Each page `requests` times (request i asks for `pages[name](i)`: another case,
    run, pair of runs or page each time, so nothing answers from a cache), alone and
    from `clients` concurrent clients. Printed: the server's time on the request (app)
    alone, median and p95, and with the clients: the time building the page (page),
    the wait for a page thread before it (queue), the server's time, the round trip,
    the machine's busy CPU a request (cpu: the page processes', the serving process's,
    the database's and these clients' together) and what that cost sets the server's
    median to when the clients keep every core busy (floor: clients x cpu / cores; a
    p95 near it is as low as this cost allows, not a queue the code could shorten)."""
    first_ms = fetch(base + "/regressions")["trip"]
    print(f"first regressions request (detects the changes across the store): "
          f"{first_ms / 1000:.1f} s")
    for path_of in pages.values():
        fetch(base + path_of(0))  # warm
    cores = os.cpu_count() or 1
    print(f"{'':<16}{'alone: server':>14} {'p95':>6} | {clients} clients: "
          f"{'page':>6} {'p95':>6} {'queue':>6} {'server':>7} {'p95':>6} {'trip':>6} "
          f"{'p95':>6} | {'cpu':>5} {'floor':>6}  (medians and p95, ms; {cores} cores)")
    for name, path_of in pages.items():
        alone = [fetch(base + path_of(i))["app"] for i in range(requests)]
        busy = busy_cpu_ms()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            together = list(pool.map(fetch, [base + path_of(requests + i)
                                             for i in range(requests)]))
        cpu = (busy_cpu_ms() - busy) / requests

        def of(part: str, together: list[dict[str, float]] = together) -> list[float]:
            return [t[part] for t in together]

        print(f"{name:<16}{statistics.median(alone):>14.1f} {p95(alone):>6.1f} | "
              f"{'':>11}{statistics.median(of('page')):>6.1f} {p95(of('page')):>6.1f} "
              f"{statistics.median(of('queue')):>6.1f} {statistics.median(of('app')):>7.1f} "
              f"{p95(of('app')):>6.1f} {statistics.median(of('trip')):>6.1f} "
              f"{p95(of('trip')):>6.1f} | {cpu:>5.1f} {clients * cpu / cores:>6.0f}",
              flush=True)


def feed_status(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + "/api/v1/regressions?per_page=1", timeout=600) as r:
        return json.loads(r.read())["status"]


def freshness(base: str, store: Store, args: argparse.Namespace) -> None:
    """How long after a new run is written the feed holds it: a run of 1% of the cases,
    then one of all of them (both deleted afterwards, leaving the store as built)."""
    ids = [f"suite:case{i:05d}" for i in range(args.cases)]
    level = 1e-6 * (1 + (np.arange(args.cases) % 97) / 10)
    scale = level * np.where(np.arange(args.cases) % STEP_EVERY == 0, 1.25, 1.0)
    provenance, rng, added = Provenance.capture(env="ci"), np.random.default_rng(5), []
    try:
        for count in (max(1, args.cases // 100), args.cases):
            started, at = time.perf_counter(), time.time()
            added.append(write_run(store, provenance, args.runs + len(added), ids[:count],
                                   scale[:count], rng))
            written = time.perf_counter() - started
            while True:  # a detection begun after the run was written (by any worker)
                status = feed_status(base)
                if status["started_at"] >= at + written and not status["refreshing"]:
                    break
                time.sleep(0.5)
            print(f"a new run of {count} cases (written in {written:.1f} s): in the feed "
                  f"{time.perf_counter() - started - written:.1f} s later (the detection: "
                  f"{status['scan_seconds']:.1f} s, {status['cases_detected']} cases "
                  f"detected again)", flush=True)
    finally:
        store.delete_runs(added)


def serve_and_measure(url: str, store: Store, args: argparse.Namespace) -> None:
    from torchmark.server.changes_cache import ChangesCache

    if not args.pages_only:
        ChangesCache(store).path.unlink(missing_ok=True)  # measure a first detection
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", "serve", "--db", url,
                             "--port", str(port), "--workers", str(args.workers),
                             "--page-threads", str(args.page_threads)],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/api/v1", timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        ids = [run["id"] for run in store.runs(limit=None)]
        machine = store.runs(limit=1)[0]["machine"]
        cases, n = args.cases, len(ids)

        def case(i: int) -> str:
            return f"suite:case{(i * 37) % cases:05d}"

        pages = {
            "regressions": lambda i: f"/regressions?page={1 + i % 2}",
            "runs": lambda i: f"/runs?page={1 + i % max(1, n // 50)}",
            "runs machine": lambda i: f"/runs?machine={machine}&page={1 + i % 3}",
            "run": lambda i: f"/runs/{ids[i % n]}",
            "case": lambda i: f"/cases/{case(i)}",
            "compare": lambda i: f"/compare?a={ids[(i + 1) % n]}&b={ids[i % n]}",
            "search": lambda i: f"/search?q=n%3D{(i * 7919) % cases}",
            "api regressions": lambda i: f"/api/v1/regressions?page={1 + i % 2}",
            "api case": lambda i: f"/api/v1/cases/{case(i + 500)}",
        }
        if args.pages:
            unknown = set(args.pages) - set(pages)
            if unknown:
                raise SystemExit(f"--pages: no page {', '.join(sorted(unknown))}")
            pages = {name: pages[name] for name in args.pages}
        measure(base, pages, args.requests, args.clients)
        if not args.pages_only:
            freshness(base, store, args)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def report_time(url: str, timeout: float) -> str:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        try:
            subprocess.run([sys.executable, "-m", "torchmark", "report", "--db", url, "-o",
                            str(Path(folder) / "r.html")], check=True, timeout=timeout,
                           stdout=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"over {timeout:.0f} s (stopped)"
        return f"{time.perf_counter() - started:.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--report-timeout", type=float, default=600)
    parser.add_argument("--workers", type=int, default=1, help="serve's --workers")
    parser.add_argument("--page-threads", type=int, default=1,
                        help="serve's --page-threads")
    parser.add_argument("--postgres", default=None,
                        help="A PostgreSQL URL, or `auto` for a throw-away cluster "
                             "(tests/pg_cluster.py)")
    parser.add_argument("--db", default=None, help="Reuse (or build at) this SQLite path.")
    parser.add_argument("--skip-sqlite", action="store_true",
                        help="Measure PostgreSQL only.")
    parser.add_argument("--pages", type=lambda text: text.split(","), default=None,
                        help="Measure only these pages (comma-separated: regressions, "
                             "runs, run, case, compare, search, ...).")
    parser.add_argument("--pages-only", action="store_true",
                        help="Measure the pages only: not the feed's freshness nor the "
                             "static report.")
    args = parser.parse_args()
    targets = []
    folder = tempfile.mkdtemp(prefix="torchmark-serve-speed-")
    sqlite_path = args.db or os.path.join(folder, "store.db")
    if not args.skip_sqlite:
        targets.append(("SQLite", f"sqlite:///{sqlite_path}"))
    cluster = None
    if args.postgres == "auto":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_cluster import PostgresCluster, pg_bin

        if pg_bin("initdb"):
            cluster = PostgresCluster()
            targets.append(("PostgreSQL", cluster.url()))
    elif args.postgres:
        targets.append(("PostgreSQL", args.postgres))
    try:
        for name, url in targets:
            print(f"== {name}: {args.cases} cases x {args.runs} runs "
                  f"({args.cases * args.runs:,} results)", flush=True)
            store = Store(url)
            with store.engine.connect() as conn:
                held = conn.execute(sa.select(sa.func.count()).select_from(
                    tables.results)).scalar()
            if held != args.cases * args.runs:
                store, seconds = build(url, args.cases, args.runs)
                print(f"built in {seconds:.0f} s", flush=True)
            serve_and_measure(url, store, args)
            if args.pages_only:
                continue
            print(f"static report: {report_time(url, args.report_timeout)}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    print(json.dumps({"targets_ms": 300}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
