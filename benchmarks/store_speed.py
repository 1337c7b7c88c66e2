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

    python benchmarks/store_speed.py [--postgres URL]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="a postgresql+psycopg:// URL to an empty database")
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


if __name__ == "__main__":
    main()
