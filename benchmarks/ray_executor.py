"""The Ray executor against the local pool, on this machine, in one run.

1. The whole standard suite, instruction counts only (5 callgrind repeats a case, as
   `suite run --no-wall`), on the local pool (2 workers), then on a local Ray instance
   (2 CPUs, started by the run as `--executor ray` does), then on the local pool again
   (the machine's load and the caches change over a run: Ray is compared with the mean
   of the two): the wall time of each (Ray's start included), their ratio (target: Ray
   <= 1.2x local), and how many counts are identical, Ray against the first local run
   and the second local run against the first (a case's count depends a little on what
   its valgrind host counted before it, and the two pools hand cases to hosts in their
   own orders).
2. Ray's own cost per task: empty tasks, and `node.run_item` with a Job that measures
   nothing (CPU claim, provenance, record), as tasks a second on this Ray instance.
3. What the driver does per result (record merged with the node's provenance, a line
   written, the Results recorded in a SQLite store), timed over synthetic records.

From those figures it projects the suite's time on 10 and 100 nodes.

    python benchmarks/ray_executor.py [--workers 2] [--filter REGEX] [--skip-suite]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time


def run_suite(cases, out: str, workers: int, executor=None) -> tuple[float, dict, float]:
    from torchmark.suite.runner import RunOptions, SuiteRunner

    started = time.perf_counter()
    summary = SuiteRunner(cases, out, RunOptions(workers=workers, repeats=5, wall=False),
                          executor=executor,
                          on_phase=lambda p: print(f"  {p}", flush=True)).run()
    total = time.perf_counter() - started
    counts = {r["id"]: r["instructions"]["median"] for r in summary.records
              if r["status"] == "ok" and r.get("instructions")}
    print(f"  {summary.ok} ok, {summary.failed} failed in {total:.1f} s", flush=True)
    return total, counts, summary.compile_s


@dataclasses.dataclass
class NullJob:
    """A Job that measures nothing: the executor's and the node's own cost."""

    key: str = "null"

    def make_state(self, slot):
        return None

    def close_state(self, state, kill=False):
        pass

    def run(self, state, item, attempt):
        return {"type": "case", "id": item.id, "status": "ok", "attempts": attempt}

    def lost(self, item, error, attempts):
        return {"type": "case", "id": item.id, "status": "failed", "error": error}


def task_overhead(n: int) -> dict[str, float]:
    import ray

    from torchmark.executors import Item
    from torchmark.executors.options import RayOptions
    from torchmark.executors.ray_executor import RayExecutor

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    start_s = time.perf_counter() - started

    @ray.remote(num_cpus=1, max_retries=0)
    def empty():
        return None

    ray.get([empty.remote() for _ in range(20)])  # workers up
    t0 = time.perf_counter()
    ray.get([empty.remote() for _ in range(n)])
    empty_s = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(200):
        ray.get(empty.remote())
    round_trip_s = (time.perf_counter() - t0) / 200

    items = [Item(f"i{k}", None) for k in range(n)]
    executor = RayExecutor(RayOptions())  # joins this process's instance
    outcomes: list = []
    executor.run(NullJob(), items[:20], outcomes.append)  # warm
    outcomes.clear()
    t0 = time.perf_counter()
    executor.run(NullJob(), items, outcomes.append)
    item_s = (time.perf_counter() - t0) / n
    assert len(outcomes) == n
    ray.shutdown()
    return {"start_s": start_s, "empty_task_s": empty_s, "round_trip_s": round_trip_s,
            "item_s": item_s}


def driver_per_result(n: int) -> float:
    """Seconds the driver spends a result: provenance merged, a record written to the
    results file, its Result recorded in a SQLite store."""
    from torchmark.core.provenance import Provenance
    from torchmark.core.result import Case, Result
    from torchmark.executors.ray_executor import _merged
    from torchmark.store.recorder import RunRecorder
    from torchmark.suite.results import ResultsWriter

    here = Provenance.capture()
    node = here.to_dict()
    folder = tempfile.mkdtemp(prefix="ray-driver-")
    record = {"type": "case", "id": "", "status": "ok", "label": ["Pointwise", "add"],
              "auto_labels": {"language": "python"},
              "timer_args": {"stmt": "x + 1", "setup": "", "num_threads": 1},
              "instructions": {"median": 12345678, "per_run": 123456.78,
                               "repeats": [12345678] * 5, "spread": 0.0, "number": 100},
              "error": None, "attempts": 1, "slot": None, "finished": time.time()}
    writer = ResultsWriter(os.path.join(folder, "r.jsonl"), {}, resume=False)
    with RunRecorder(os.path.join(folder, "store.db")) as rec:
        t0 = time.perf_counter()
        for k in range(n):
            provenance = _merged(here, json.loads(json.dumps(node)))
            r = {**record, "id": f"case {k}", "node": provenance.machine.hostname,
                 "provenance": provenance.to_dict()}
            writer.write(r)
            rec.add([Result(Case(id=f"suite:case {k}", frontend="suite", stmt="x + 1"),
                            "instructions", samples=(123456.78,) * 5, number_per_run=100,
                            provenance=provenance)])
        per = (time.perf_counter() - t0) / n
    writer.close()
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--filter", default=None)
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--tasks", type=int, default=2000)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    from torchmark.suite.materialize import select
    from torchmark.suite.standard import standard_cases

    cases = select(standard_cases(), args.filter)
    folder = tempfile.mkdtemp(prefix="ray-executor-")
    figures: dict = {"cases": len(cases), "workers": args.workers}
    if not args.skip_suite:
        from torchmark.executors.options import RayOptions
        from torchmark.executors.ray_executor import RayExecutor

        print(f"standard suite, {len(cases)} cases, instruction counts, 5 repeats")
        print(f"local pool, {args.workers} workers:", flush=True)
        local_s, local, compile_s = run_suite(cases, os.path.join(folder, "local.jsonl"),
                                              args.workers)
        print(f"Ray, a local instance of {args.workers} CPUs:", flush=True)
        ray_s, on_ray, ray_compile_s = run_suite(
            cases, os.path.join(folder, "ray.jsonl"), args.workers,
            RayExecutor(RayOptions(num_cpus=args.workers)))
        print(f"local pool again, {args.workers} workers:", flush=True)
        again_s, again, again_compile_s = run_suite(
            cases, os.path.join(folder, "local-again.jsonl"), args.workers)

        def compare(a: dict, b: dict) -> tuple[int, int, float, str]:
            common = sorted(set(a) & set(b))
            diffs = sorted((abs(b[c] - a[c]) / a[c], c) for c in common)
            return (sum(a[c] == b[c] for c in common), len(common),
                    diffs[-1][0] if diffs else 0.0, diffs[-1][1] if diffs else "-")

        mean_local = (local_s + again_s) / 2
        same, counted, max_diff, worst = compare(local, on_ray)
        same_ll, counted_ll, max_ll, worst_ll = compare(local, again)
        figures.update(local_s=local_s, local_again_s=again_s, ray_s=ray_s,
                       ratio=ray_s / mean_local,
                       compile_s=[compile_s, ray_compile_s, again_compile_s],
                       counted=counted, identical_ray=same, max_diff_ray=max_diff,
                       identical_local=same_ll, max_diff_local=max_ll,
                       only_one_side=len(set(local) ^ set(on_ray)))
        print(f"\nlocal pool {local_s:.1f} s and {again_s:.1f} s, Ray {ray_s:.1f} s: Ray / "
              f"local = {ray_s / mean_local:.2f}x (target <= 1.2x)")
        print(f"counts, Ray against local: {same}/{counted} identical, largest difference "
              f"{max_diff:.4%} ({worst})")
        print(f"counts, local against local: {same_ll}/{counted_ll} identical, largest "
              f"difference {max_ll:.4%} ({worst_ll})")

    print(f"\nRay's cost per task ({args.tasks} tasks, 2 CPUs):", flush=True)
    overhead = task_overhead(args.tasks)
    figures.update(overhead)
    print(f"  Ray start {overhead['start_s']:.1f} s; empty task {overhead['empty_task_s'] * 1e3:.2f}"
          f" ms a task in a batch, {overhead['round_trip_s'] * 1e3:.2f} ms one at a time; "
          f"torchmark item (node.run_item, NullJob) {overhead['item_s'] * 1e3:.2f} ms")
    per_result = driver_per_result(500)
    figures["driver_per_result_s"] = per_result
    print(f"driver per result (provenance, results line, store): {per_result * 1e3:.2f} ms")

    if "local_s" in figures:
        # the suite's work: valgrind host start-up once a worker, then cases split evenly
        slots = args.workers
        host_start = 30.0  # s: valgrind bringing up Python and torch (20-50 s, README)
        compile_s = figures["compile_s"][0]
        work = max(figures["local_s"] - compile_s - host_start, 0.0) * slots
        print("\nprojection (2 CPUs a node, one valgrind host a CPU):")
        for nodes in (10, 100):
            workers = nodes * 2
            t = (overhead["start_s"] + compile_s + host_start + work / workers
                 + len(cases) * max(per_result, overhead["item_s"] / workers))
            figures[f"projected_{nodes}_nodes_s"] = t
            print(f"  {nodes} nodes ({workers} workers): about {t:.0f} s "
                  f"({work / workers:.0f} s counting, {host_start:.0f} s host start-up, "
                  f"{compile_s:.0f} s compiling on the driver, "
                  f"{len(cases) * per_result:.1f} s driver work)")
    print("\n" + json.dumps(figures))


if __name__ == "__main__":
    main()
