"""How long a side of the store takes to resolve (`gate`, `compare`, `ab` and the
dashboard's /compare all resolve theirs with regressions/refs.py resolve_side), on a store
built by benchmarks/serve_speed.py (or any): `latest`, a run, and `env:LABEL`, each case
from the newest of the label's runs holding it. With --anchor, the way env labels were
resolved before (every run of the label read whole, newest first) is timed beside it in
the same run, and the two sides' results are checked equal.

    python benchmarks/side_resolution.py --db /tmp/serve10m.db [--env ci] [--anchor]
"""

from __future__ import annotations

import argparse
import time

from torchmark.regressions.refs import resolve_side
from torchmark.store import open as open_store


def read_every_run(store, runs):
    """The anchor: each (case, metric) from the newest run holding it, every run read."""
    newest = {}
    for run in runs:
        for result in store.result_records(run=run["id"]):
            newest.setdefault((result.case.id, result.metric), result)
    return newest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="a SQLite file or a store URL")
    parser.add_argument("--env", default="ci", help="the env label to resolve")
    parser.add_argument("--anchor", action="store_true",
                        help="also time reading every run of the label (slow: minutes)")
    args = parser.parse_args()
    url = args.db if "://" in args.db else f"sqlite:///{args.db}"
    store = open_store(url)
    newest = store.finished_runs()[0]["id"]
    for ref in ("latest", f"run:{newest}", f"env:{args.env}"):
        started = time.perf_counter()
        side = resolve_side(ref, store)
        took = time.perf_counter() - started
        print(f"{ref:<16} {len(side.results):>7} results from {len(side.runs):>4} run(s): "
              f"{took:8.2f} s", flush=True)
    if args.anchor:
        machine = side.machine
        runs = [run for run in store.finished_runs(env=args.env) if run["machine"] == machine]
        started = time.perf_counter()
        before = read_every_run(store, runs)
        anchor = time.perf_counter() - started
        same = {(r.case.id, r.metric): r.samples for r in side.results} == \
            {key: r.samples for key, r in before.items()}
        print(f"anchor: every run of env:{args.env} read ({len(runs)} runs): {anchor:.2f} s; "
              f"ratio {anchor / took:.0f}x; the same results: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
