"""The result store's speed on SQLite and PostgreSQL, in one run, beside the same writes as
asv-style JSON files (one file a run, as asv keeps its results) for scale.

Printed per backend:
- writing 1,000,000 raw samples (1,000 results of 1,000 samples) in one record() call;
- recording a run of 219 suite-like results (the standard suite's size), one case each;
- reading one case's history over 10,000 runs (history(case)), the runs made in bulk
  (median of 11 reads);
- `torchmark runs --limit 50` over those 10,000 runs, from process start (a fresh
  process; the command imports no torch; median of 11).
Targets (issue 24) on SQLite: 1M samples written in < 2 s, history read < 50 ms, `runs`
< 300 ms from process start.

Then at scale (issue 36), on SQLite, each beside its floor in the same run:
- `torchmark import` of a results file of 1,000,000 results (100 runs of 10,000 cases,
  10 samples each), from process start: its time and the peak memory of it and its
  workers together (targets: < 30 s, < 1 GB); the floor: the same lines parsed with
  orjson and their rows inserted with sqlite3's executemany in one process (no
  validation, no duplicate check), which no import can beat on one core;
- `torchmark report` on that store, from process start (target < 30 s); the floor:
  reading every result's row (driver tuples) and nothing else.

    python benchmarks/store_speed.py [--postgres URL] [--scale N] [--no-scale]

Without --postgres a throw-away PostgreSQL cluster is started (tests/pg_cluster.py), when
its server binaries are installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from torchmark.core.result import Case, Result
from torchmark.store import Store
from torchmark.store import schema as tables
from torchmark.store.result_rows import pack
from torchmark.store.store import utc_now


def results(n: int, samples: int, prefix: str) -> list[Result]:
    return [Result(case=Case(id=f"{prefix}:{i}", frontend="suite", stmt=f"case {i}"),
                   metric="wall", samples=tuple(1e-6 * (1 + (k % 97) / 100)
                                                for k in range(samples)),
                   number_per_run=100) for i in range(n)]


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def bulk_history(store: Store, runs: int, case: str) -> None:
    """`runs` runs holding one result of `case` each, inserted in bulk (setup only)."""
    store.record(results(1, 10, "hist"), store.start_run())  # the case and a machine
    machine = store.runs()[0]["machine"]
    with store.engine.begin() as conn:
        first = conn.execute(sa.select(sa.func.max(tables.runs.c.id))).scalar() + 1
        conn.execute(tables.runs.insert(), [
            {"id": first + i, "started": f"2026-01-01T00:00:{i % 60:02d}.{i:06d}Z",
             "status": "ok", "command": ["torchmark", "suite", "run"], "tags": {},
             "machine": machine} for i in range(runs)])
        blob = pack([1e-6] * 10)
        conn.execute(tables.results.insert(), [
            {"run_id": first + i, "case_id": case, "metric": "wall", "unit": "s",
             "number_per_run": 100, "n": 10, "median": 1e-6 * (1 + i % 7 / 100),
             "mean": 1e-6, "iqr": 0.0, "min": 1e-6, "max": 1e-6, "samples": blob,
             "q1": 1e-6, "q3": 1e-6,
             "warnings": [], "extra": {}, "recorded": utc_now()} for i in range(runs)])


def bench(url: str) -> dict[str, float]:
    store = Store(url)
    out = {"write 1M samples": timed(lambda: store.record(results(1000, 1000, "big"),
                                                          store.start_run()))}
    out["record 219 results"] = timed(lambda: store.record(results(219, 10, "suite"),
                                                           store.start_run()))
    bulk_history(store, 10_000, "hist:0")
    reads = []
    for _ in range(11):
        reads.append(timed(lambda: store.history("hist:0")))
    out["history over 10,000 runs"] = statistics.median(reads)
    store.close()
    starts = []
    for _ in range(11):
        starts.append(timed(lambda: subprocess.run(
            [sys.executable, "-m", "torchmark", "runs", "--limit", "50", "--db", url],
            check=True, capture_output=True)))
    out["`torchmark runs` (process)"] = statistics.median(starts)
    return out


def bench_asv(folder: Path) -> dict[str, float]:
    """The same writes as one JSON file a run, as asv stores results."""
    def write(name: str, rs: list[Result]) -> None:
        (folder / f"{name}.json").write_text(json.dumps(
            {"results": {r.case.id: list(r.samples) for r in rs}}))

    out = {"write 1M samples": timed(lambda: write("big", results(1000, 1000, "big"))),
           "record 219 results": timed(lambda: write("suite", results(219, 10, "suite")))}
    for i in range(10_000):
        (folder / f"run{i}.json").write_text(json.dumps({"results": {"hist:0": [1e-6] * 10}}))
    out["history over 10,000 runs"] = timed(lambda: [
        json.loads((folder / f"run{i}.json").read_text())["results"]["hist:0"]
        for i in range(10_000)])
    return out


def results_lines(path: Path, runs: int, cases: int, samples: int = 10) -> None:
    """A results file of `runs` runs of `cases` suite cases (a run line each)."""
    import random

    rng = random.Random(0)
    with open(path, "w") as f:
        f.write('{"schema": "torchmark.results", "version": 1}\n')
        for r in range(runs):
            provenance = {
                "torchmark_version": "0.1.0", "torch_version": "2.13.0+cpu",
                "torch_git": None, "torch_cuda": None, "torch_cudnn": None,
                "torch_debug": False, "python": "CPython 3.11.7",
                "git_commit": f"{r:040x}", "git_dirty": False,
                "machine": {"hostname": "ci-1", "cpu_model": "Xeon", "cores": 2,
                            "memory_bytes": 25 << 30, "gpus": [], "gpu_driver": None,
                            "governor": None, "turbo": None},
                "env": None, "started": f"2026-{1 + r // 28:02d}-{1 + r % 28:02d}T10:00:00+0000",
                "command": ["torchmark", "suite", "run"], "schema_version": 1}
            f.write(json.dumps({"schema": "torchmark.run", "version": 1,
                                "provenance": provenance}) + "\n")
            for c in range(cases):
                base = 1e-6 * (1 + c % 50)
                f.write(json.dumps({
                    "schema": "torchmark.result", "version": 1,
                    "case": {"id": f"suite:case{c}", "frontend": "suite",
                             "stmt": f"torch.add(x, {c})", "setup": "x = torch.ones(8)",
                             "label": f"group{c % 40}", "sub_label": f"case{c}",
                             "description": "eager", "env": None, "threads": 1,
                             "device": "cpu", "params": {}},
                    "metric": "wall", "unit": "s", "number_per_run": 100,
                    "samples": [base * (1 + 0.02 * rng.random()) for _ in range(samples)],
                    "warnings": [], "failure": None, "extra": {}},
                    separators=(",", ":")) + "\n")


def tree_peak(command: list[str]) -> tuple[float, float]:
    """Run `command`; (its seconds, the peak of the summed resident memory of it and its
    children, in bytes, sampled every 20 ms)."""
    import os

    def tree_rss(pid: int) -> int:
        total, todo = 0, [pid]
        while todo:
            p = todo.pop()
            try:
                with open(f"/proc/{p}/statm") as f:
                    total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                with open(f"/proc/{p}/task/{p}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                pass
        return total

    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.02)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(command)}")
    return time.perf_counter() - started, peak


def import_floor(path: Path, db: Path) -> float:
    """The file's lines parsed (orjson) and their rows inserted (sqlite3, the store's
    results table and indexes, one transaction) in one process, without validation."""
    import hashlib
    import sqlite3
    import struct

    import orjson

    started = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA cache_size=-262144")
    conn.execute("CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INT, case_id TEXT, "
                 "metric TEXT, unit TEXT, env TEXT, number_per_run INT, n INT, median REAL, "
                 "mean REAL, iqr REAL, min REAL, max REAL, samples BLOB, content_key TEXT, "
                 "warnings TEXT, failure TEXT, failure_tail TEXT, extra TEXT, recorded TEXT)")
    for index in ("case_id, metric", "run_id", "content_key"):
        conn.execute(f"CREATE INDEX i_{index[:6]} ON results ({index})")
    conn.execute("BEGIN")
    run, rows = 0, []

    def flush() -> None:
        conn.executemany("INSERT INTO results (run_id, case_id, metric, unit, number_per_run, "
                         "n, median, samples, content_key, warnings, extra, recorded) VALUES "
                         "(?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', '{}', 'now')", rows)
        rows.clear()

    with open(path, "rb") as f:
        for line in f:
            value = orjson.loads(line)
            if value.get("schema") == "torchmark.run":
                run += 1
            elif value.get("schema") == "torchmark.result":
                samples = value["samples"]
                blob = struct.pack(f"<{len(samples)}d", *samples)
                key = hashlib.sha256(value["case"]["id"].encode() + blob).hexdigest()[:32]
                rows.append((run, value["case"]["id"], value["metric"], value["unit"],
                             value["number_per_run"], len(samples), samples[0], blob, key))
                if len(rows) >= 4000:
                    flush()
    flush()
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - started


def report_floor(db: Path) -> float:
    """Every result's row of the store read through sqlite3, and nothing done with it."""
    import sqlite3

    started = time.perf_counter()
    conn = sqlite3.connect(db)
    conn.execute("SELECT results.case_id, results.metric, results.median, results.samples, "
                 "runs.started FROM results JOIN runs ON runs.id = results.run_id "
                 "ORDER BY runs.started, results.id").fetchall()
    conn.close()
    return time.perf_counter() - started


def bench_scale(folder: Path, results: int) -> None:
    cases = 10_000 if results >= 100_000 else max(1, results // 100)
    runs = max(1, results // cases)
    path = folder / "scale.jsonl"
    results_lines(path, runs, cases)
    print(f"\nat scale: {runs * cases:,} results ({runs} runs of {cases:,} cases, 10 samples "
          f"each), a {path.stat().st_size / 1e6:.0f} MB results file")
    db = folder / "scale.db"
    command = [sys.executable, "-m", "torchmark"]
    took, peak = tree_peak([*command, "import", str(path), "--db", str(db)])
    floor = import_floor(path, folder / "floor.db")
    print(f"  import, from process start      {took:8.1f} s   peak memory {peak / 2**20:6.0f} MiB"
          f"   floor {floor:6.1f} s   ratio {took / floor:5.2f}x   (targets < 30 s, < 1024 MiB)")
    took_report, _ = tree_peak([*command, "report", "-o", str(folder / "report.html"),
                                "--db", str(db)])
    floor = report_floor(db)
    size = (folder / "report.html").stat().st_size
    print(f"  report, from process start      {took_report:8.1f} s   page {size / 1e6:6.1f} MB"
          f"       floor {floor:6.1f} s   ratio {took_report / floor:5.2f}x   (target < 30 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="a postgresql+psycopg:// URL to an empty database")
    parser.add_argument("--scale", type=int, default=1_000_000,
                        help="results in the import and report at scale (default 1M)")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale figures")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="torchmark-store-speed-"))
    columns = {"SQLite": bench(f"sqlite:///{folder / 'store.db'}")}
    cluster = None
    url = args.postgres
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        try:
            import pg_cluster

            if all(pg_cluster.pg_bin(n) for n in ("initdb", "pg_ctl", "postgres")):
                cluster = pg_cluster.PostgresCluster()
                url = cluster.new_database()
        except Exception as e:  # no server here: SQLite and the files only
            print(f"(no PostgreSQL: {e})")
    try:
        if url:
            columns["PostgreSQL"] = bench(url)
    finally:
        if cluster is not None:
            cluster.stop()
    asv = folder / "asv"
    asv.mkdir()
    columns["asv-style JSON files"] = bench_asv(asv)
    names = list(columns)
    print(f"{'':<30}" + "".join(f"{n:>24}" for n in names))
    for row in columns["SQLite"]:
        cells = [columns[n].get(row) for n in names]
        print(f"{row:<30}" + "".join(f"{c * 1000:>21.1f} ms" if c is not None else f"{'-':>24}"
                                     for c in cells))
    print("targets on SQLite: 1M samples < 2000 ms, history < 50 ms, runs < 300 ms")
    if not args.no_scale:
        bench_scale(folder, args.scale)


if __name__ == "__main__":
    main()
