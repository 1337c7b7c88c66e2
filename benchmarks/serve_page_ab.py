"""The CPU a dashboard page costs under two checkouts of torchmark, side by side.

    python benchmarks/serve_page_ab.py --db URL --page case|compare|run|api-case \
        --other /path/to/other/checkout [--batches 30] [--per-batch 5]

Two processes, one importing this checkout's `src`, one the other's, each with the store
open; they build the same pages (the page of request i is serve_speed.py's) in
alternating batches, so a VM whose speed moves by a third between minutes moves both
alike. Printed: each side's median CPU (the process's own: not the database server's)
and wall time a page, and the median of the batches' CPU ratios (this checkout / the
other). Both checkouts must open the store (the same schema).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "src"


def serve(url: str, page: str) -> None:
    """The child: build the pages asked on stdin ("START COUNT"), answer each batch's
    CPU and wall time a page (ms) as a JSON line."""
    from starlette.datastructures import QueryParams

    from torchmark.server.app import Dashboard, build_page, page_table
    from torchmark.store import open as open_store

    store = open_store(url)
    pages = {kind: (produce, title) for kind, _, produce, title in
             page_table(Dashboard(store, None))}
    ids = [run["id"] for run in store.runs(limit=None)]
    case_ids = sorted(store.case_titles())

    class Asked:
        def __init__(self, path: str, query: str, path_params: dict[str, Any]) -> None:
            self.path, self.query_params = path, QueryParams(query)
            self.path_params = path_params

    def asked(i: int) -> Asked:
        if page in ("case", "api-case"):
            case = case_ids[(i * 37) % len(case_ids)]
            return Asked(("/api/v1" if page == "api-case" else "") + f"/cases/{case}", "",
                         {"case_id": case})
        if page == "run":
            return Asked(f"/runs/{ids[i % len(ids)]}", "", {"run_id": ids[i % len(ids)]})
        return Asked("/compare", f"a={ids[(i + 1) % len(ids)]}&b={ids[i % len(ids)]}", {})

    kind = "case" if page == "api-case" else page
    produce, title = pages[kind]
    for i in range(5):  # warm
        build_page(kind, produce, title, asked(i), time.perf_counter())
    import torchmark

    print(f"ready {torchmark.__file__}", flush=True)
    for line in sys.stdin:
        start, count = map(int, line.split())
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(start, start + count):
            status = build_page(kind, produce, title, asked(i), time.perf_counter())[0]
            if status != 200:
                raise SystemExit(f"{page} page {i}: status {status}")
        print(json.dumps([(time.process_time() - cpu) * 1000 / count,
                          (time.perf_counter() - wall) * 1000 / count]), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--page", choices=("case", "api-case", "compare", "run"),
                        default="case")
    parser.add_argument("--other", required=True, help="another checkout's root folder")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--per-batch", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        serve(args.db, args.page)
        return 0
    sides = {"this": HERE, "other": Path(args.other).resolve() / "src"}
    procs = {}
    for name, src in sides.items():
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, "--child", "--db", args.db, "--page", args.page,
             "--other", args.other], env={**os.environ, "PYTHONPATH": str(src)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert procs[name].stdout is not None and procs[name].stdin is not None
        ready = procs[name].stdout.readline().split(maxsplit=1)
        if not ready or ready[0] != "ready" or not ready[1].startswith(str(src)):
            raise SystemExit(f"the {name} checkout's process did not start from {src}: "
                             f"{' '.join(ready)}")
    got: dict[str, list[list[float]]] = {name: [] for name in sides}
    for batch in range(args.batches):
        for name in (("this", "other") if batch % 2 else ("other", "this")):
            proc = procs[name]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(f"{100 + batch * args.per_batch} {args.per_batch}\n")
            proc.stdin.flush()
            got[name].append(json.loads(proc.stdout.readline()))
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()

    def median(name: str, part: int) -> float:
        return statistics.median(times[part] for times in got[name])

    ratio = statistics.median(mine[0] / theirs[0]
                              for mine, theirs in zip(got["this"], got["other"], strict=True))
    print(f"{args.page}: other checkout: CPU {median('other', 0):.1f} ms, wall "
          f"{median('other', 1):.1f} ms a page | this one: CPU {median('this', 0):.1f}, "
          f"wall {median('this', 1):.1f} | CPU ratio (this / other), median of "
          f"{args.batches} batches: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
