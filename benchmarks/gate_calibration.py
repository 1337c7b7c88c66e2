"""Does the verdict engine keep its promise on this machine? A/A pairs (the same code
measured twice) must not read `slower`; planted slowdowns must; and `gate`, `compare`
and the pytest plugin must say the same of each case.

A throw-away git project holds a pytest file of 10 benchmarks, each a torch op in a
loop of K calls. Each *run* is one pytest session of it (the plugin measures, records
the run in a throw-away store, and checks it against the previous session's run with
--torchmark-baseline run:N --torchmark-fail-slower=3%). Each *pair* (baseline run,
candidate run) is then judged again by `torchmark gate --max-slowdown 3%` and
`torchmark compare run:A run:B --threshold 3%`.

- A/A pairs (PAIRS_AA, seeded order among the others): the same commit twice; in half
  of them another process loads one core during one side (the baseline or the
  candidate, seeded);
- A/B pairs (PAIRS_AB): the candidate commit makes 3 cases 20% slower (K x 1.2) and 3
  others 5% slower (K x 1.05); a commit after it restores the code;
- local-pool vs Ray pairs: a 12-shape ops sweep run with the local pool and with
  `--executor ray` (a private local instance), judged by `gate` and `compare` (pytest
  has no part in it), when ray is installed.

Targets (issue 35): A/A: no `slower` in >= 95% of case comparisons, the gate exits 0 in
>= 19 of 20 pairs; 20% slowdowns `slower` in >= 19 of 20; 5% never `faster`; every
command agrees with the others case by case. The figures printed go to
docs/regressions.md.

    python benchmarks/gate_calibration.py [--pairs-aa 20] [--pairs-ab 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

CASES = [  # name, setup, statement in a loop of K
    ("add", "x = torch.rand(4096); y = torch.rand(4096)", "torch.add(x, y)"),
    ("mul", "x = torch.rand(4096); y = torch.rand(4096)", "torch.mul(x, y)"),
    ("relu", "x = torch.randn(4096)", "torch.relu(x)"),
    ("sum", "x = torch.rand(16384)", "x.sum()"),
    ("mm", "a = torch.rand(48, 48); b = torch.rand(48, 48)", "torch.mm(a, b)"),
    ("exp", "x = torch.rand(4096)", "torch.exp(x)"),
    ("cat", "x = torch.rand(2048); y = torch.rand(2048)", "torch.cat([x, y])"),
    ("sort", "x = torch.rand(1024)", "torch.sort(x)"),
    ("softmax", "x = torch.rand(32, 128)", "torch.softmax(x, dim=-1)"),
    ("clone", "x = torch.rand(8192)", "x.clone()"),
]
K = 40  # calls a benchmark
SLOWER = {0: 1.2, 3: 1.2, 6: 1.2, 1: 1.05, 4: 1.05, 7: 1.05}  # case index -> factor
THRESHOLD = "3%"
OPS_SHAPES = 12


def test_file(factors: dict[int, float]) -> str:
    """The benchmarks, each case's loop K x its factor calls long."""
    lines = ["import pytest", "import torch", ""]
    for i, (name, setup, stmt) in enumerate(CASES):
        k = round(K * factors.get(i, 1.0))
        lines += [f"def test_{name}(torchmark):",
                  f"    torchmark.timeit('for _ in range({k}): {stmt}', setup={setup!r})", ""]
    return "\n".join(lines)


def git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(project: Path, factors: dict[int, float], message: str) -> str:
    (project / "test_bench.py").write_text(test_file(factors))
    git(project, "add", "-A")
    git(project, "commit", "-q", "--allow-empty", "-m", message)
    return git(project, "rev-parse", "HEAD")


class Loader:
    """A busy process pinned to one core while it lives."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Loader:
        self.proc = subprocess.Popen(["taskset", "-c", str(self.cpu), sys.executable, "-c",
                                      "while True: pass"])
        time.sleep(0.3)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()


def session(project: Path, env: dict[str, str], baseline: int | None) -> tuple[int, dict]:
    """One pytest session: (its run id, the plugin's verdict a case against `baseline`)."""
    gate = ["--torchmark-baseline", f"run:{baseline}", f"--torchmark-fail-slower={THRESHOLD}"] \
        if baseline else []
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_bench.py", *gate], cwd=project, env=env, capture_output=True,
                         text=True)
    run = re.search(r"recorded as run (\d+) of", out.stdout)
    if run is None:
        raise SystemExit(f"the session recorded no run:\n{out.stdout[-3000:]}\n{out.stderr}")
    verdicts = {}
    for m in re.finditer(r"^  test_(\w+)\s+[-+][\d.]+%.*\s(\w+)$", out.stdout, re.M):
        verdicts[m.group(1)] = m.group(2)
    return int(run.group(1)), verdicts


def table_rows(text: str, row: str) -> dict[str, str]:
    """A verdict table's rows matching `row` (a pattern: the row's name, then its
    verdict): name -> verdict (the lines that give a row's reason left out)."""
    out = {}
    for line in text.splitlines():
        m = re.match(row, line)
        if m and "[wall]:" not in line:
            out[m.group(1)] = m.group(2)
    return out


def verdict_table(text: str) -> dict[str, str]:
    """case name -> verdict, from a `gate` or `compare` verdict table."""
    return table_rows(text, r"^(?:test_bench\.py: )?test_(\w+)\s+wall\s.*\s(\w+)$")


def torchmark(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmark", *args], env=env,
                          capture_output=True, text=True)


def judge(env: dict[str, str], db: str, base: int, cand: int,
          table=None) -> tuple[int, dict, dict]:
    """(gate's exit code, gate's verdicts, compare's verdicts) of one pair; `table`
    reads a verdict table (default: the pytest benchmarks')."""
    table = table or verdict_table
    gate = torchmark(env, "gate", "--db", db, "--baseline", str(base), "--candidate",
                     str(cand), "--max-slowdown", THRESHOLD)
    compare = torchmark(env, "compare", f"run:{base}", f"run:{cand}", "--db", db,
                        "--threshold", THRESHOLD)
    return gate.returncode, table(gate.stdout), table(compare.stdout)


def ops_config(folder: Path) -> Path:
    path = folder / "sweep.json"
    path.write_text(json.dumps({"torch.mm": {"config": [{"input": [{"args": [
        {"type": "tensor", "dtype": "float", "shape": [n, 64]},
        {"type": "tensor", "dtype": "float", "shape": [64, 32]}]}
        for n in range(64, 64 + 32 * OPS_SHAPES, 32)]}]}}))
    return path


def ray_pairs(env: dict[str, str], db: str, folder: Path, count: int) -> list[tuple]:
    """`count` local-pool vs Ray pairs of the ops sweep: (gate code, gate, compare)."""
    config = ops_config(folder)
    out = []
    for k in range(count):
        runs = []
        for executor in ("local", "ray"):
            r = torchmark(env, "ops", "-c", str(config), "-w", "5", "-i", "30", "--db", db,
                          "--executor", executor, "-o", str(folder / f"{executor}{k}.jsonl"))
            if r.returncode:
                raise SystemExit(f"ops --executor {executor} failed:\n{r.stderr[-2000:]}")
            newest = torchmark(env, "runs", "--db", db, "--limit", "1", "--json").stdout
            runs.append(int(json.loads(newest.splitlines()[0])["id"]))
        code, gate, compare = judge(env, db, *runs, table=ops_table)
        out.append((code, gate, compare))
    return out


def ops_table(text: str) -> dict[str, str]:
    """the sweep's first dimension -> verdict, from a verdict table of the ops sweep."""
    return table_rows(text, r"^torch\.mm: (\d+)x64 .*\s(\w+)$")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs-aa", type=int, default=20)
    parser.add_argument("--pairs-ab", type=int, default=20)
    parser.add_argument("--ray-pairs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="Keep the project and store.")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="torchmark-gate-calibration-"))
    project = folder / "project"
    project.mkdir()
    db = f"sqlite:///{folder / 'store.db'}"
    env = {**os.environ, "TORCHMARK_DB": db, "TORCHMARK_PROGRESS": "0",
           "TORCHMARK_ENV": "calibration"}
    env.pop("TORCHMARK_NO_STORE", None)
    git(project, "init", "-q")
    git(project, "config", "user.email", "bench@example.com")
    git(project, "config", "user.name", "bench")
    (project / "pytest.ini").write_text("[pytest]\n")
    commit(project, {}, "baseline")
    kinds = ["A/A"] * args.pairs_aa + ["A/B"] * args.pairs_ab
    rng.shuffle(kinds)
    loaded = set(rng.sample([i for i, k in enumerate(kinds) if k == "A/A"],
                            args.pairs_aa // 2))
    cpus = sorted(os.sched_getaffinity(0))
    started = time.perf_counter()
    session(project, env, None)  # a first run: warm caches, a store that exists
    records = []  # (kind, loaded side, gate code, {case: (pytest, gate, compare)})
    for i, kind in enumerate(kinds):
        side = rng.choice(["baseline", "candidate"]) if i in loaded else ""
        with Loader(rng.choice(cpus)) if side == "baseline" else _nothing():
            base, _ = session(project, env, None)
        if kind == "A/B":
            commit(project, SLOWER, f"pair {i}: slower")
        with Loader(rng.choice(cpus)) if side == "candidate" else _nothing():
            cand, plugin = session(project, env, base)
        if kind == "A/B":
            commit(project, {}, f"pair {i}: restored")
        code, gate, compare = judge(env, db, base, cand)
        cases = {name: (plugin.get(name, "-"), gate.get(name, "-"), compare.get(name, "-"))
                 for name, _, _ in CASES}
        records.append((kind, side, code, cases, (base, cand)))
        print(f"pair {i + 1:2d}/{len(kinds)} {kind} {side or '-':9s} runs {base}/{cand} gate "
              f"exit {code}: " + " ".join(f"{n}={v[1]}" for n, v in cases.items()),
              flush=True)
    ray = []
    if args.ray_pairs and _has_ray():
        ray = ray_pairs(env, db, folder, args.ray_pairs)
    report(records, ray, time.perf_counter() - started)
    floor(records, db)
    if args.keep:
        print(f"kept: {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)


def _has_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def report(records: list, ray: list, seconds: float) -> None:
    aa = [r for r in records if r[0] == "A/A"]
    ab = [r for r in records if r[0] == "A/B"]
    counts: dict[str, Counter] = defaultdict(Counter)
    disagree = 0
    compared = 0
    for kind, _, _, cases, _ in records:
        for i, (name, _, _) in enumerate(CASES):
            plugin, gate, compare = cases[name]
            compared += 1
            disagree += len({plugin, gate, compare}) > 1
            what = "A/A" if kind == "A/A" else \
                {1.2: "+20%", 1.05: "+5%"}.get(SLOWER.get(i, 1.0), "A/A in A/B")
            for command, verdict in (("pytest", plugin), ("gate", gate), ("compare", compare)):
                counts[(what, command)][verdict] += 1
    print(f"\n{len(records)} pairs ({len(aa)} A/A, {len(ab)} A/B) in {seconds:.0f} s")
    for (what, command), c in sorted(counts.items()):
        total = sum(c.values())
        print(f"  {what:10s} {command:8s} " + ", ".join(f"{v} {n}" for v, n in c.most_common())
              + f"  ({total} comparisons)")
    aa_cases = [cases[name][1] for _, _, _, cases, _ in aa for name, _, _ in CASES]
    slow20 = [cases[name][1] for _, _, _, cases, _ in ab
              for i, (name, _, _) in enumerate(CASES) if SLOWER.get(i) == 1.2]
    slow5 = [v for _, _, _, cases, _ in ab for i, (name, _, _) in enumerate(CASES)
             if SLOWER.get(i) == 1.05 for v in cases[name]]
    gate_ok = sum(code == 0 for _, _, code, _, _ in aa)
    checks = [
        ("A/A: no slower in >= 95% of case comparisons (gate)",
         1 - aa_cases.count("slower") / max(len(aa_cases), 1), 0.95),
        (f"A/A: the gate exits 0 in >= 95% of pairs ({gate_ok} of {len(aa)})",
         gate_ok / max(len(aa), 1), 0.95),
        ("+20%: slower in >= 95% (gate)", slow20.count("slower") / max(len(slow20), 1), 0.95),
        ("+5%: never faster (every command)", 1.0 - slow5.count("faster") / max(len(slow5), 1),
         1.0),
        (f"the three commands agree case by case ({compared - disagree} of {compared})",
         (compared - disagree) / max(compared, 1), 1.0),
    ]
    if ray:
        ray_cases = [v for _, gate, _ in ray for v in gate.values()]
        ray_agree = sum(gate.get(k) == compare.get(k) for _, gate, compare in ray for k in gate)
        print(f"  local vs Ray: {len(ray)} pairs, gate exits {[c for c, _, _ in ray]}: "
              + ", ".join(f"{v} {n}" for v, n in Counter(ray_cases).most_common()))
        checks.append(("local vs Ray: no slower in >= 95% of case comparisons",
                       1 - ray_cases.count("slower") / max(len(ray_cases), 1), 0.95))
        checks.append((f"local vs Ray: gate and compare agree ({ray_agree} of "
                       f"{len(ray_cases)})", ray_agree / max(len(ray_cases), 1), 1.0))
    failed = 0
    for name, value, target in checks:
        ok = value >= target
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value:.1%} (target {target:.0%})")
    print(f"{failed} check(s) failed")


if __name__ == "__main__":
    main()


def floor(records: list, db: str) -> None:
    """What no rule can beat on this machine: from the A/A pairs of this run, each
    case's spread of log ratios between two sessions of the same code (sd), and the
    largest share of +20% slowdowns any rule could call slower while calling a case of
    unchanged code slower at most as often as the gate may (one-sided 2.5% over the 10
    cases of a pair, 0.25% a case): Phi(log 1.2 / sd - z). Beside it, the share the gate
    called slower."""
    from statistics import NormalDist, median, pstdev

    from torchmark.store import Store

    store = Store(db)
    medians = {}
    for row in store.results():
        medians[(row["run_id"], row["sub_label"])] = row["median"]
    store.close()
    z = NormalDist().inv_cdf(1 - 0.025 / len(CASES))
    print(f"\nThe floor (A/A sessions of this run; a case called slower by any rule at most "
          f"{0.025 / len(CASES):.2%} of the time, z = {z:.2f}):")
    powers, found = [], []
    for i, (name, _, _) in enumerate(CASES):
        logs = [math.log(medians[(c, f"test_{name}")] / medians[(b, f"test_{name}")])
                for kind, _, _, _, (b, c) in records if kind == "A/A"
                if (b, f"test_{name}") in medians and (c, f"test_{name}") in medians]
        sd = pstdev(logs) if len(logs) > 1 else math.nan
        power = NormalDist().cdf(math.log(1.2) / sd - z) if sd > 0 else math.nan
        line = f"  {name:8s} A/A sd of log ratio {sd:.3f} (median |log ratio| " \
               f"{median(abs(x) for x in logs):.3f}): best power at +20% {power:.1%}"
        if SLOWER.get(i) == 1.2:
            called = [cases[name][1] for kind, _, _, cases, _ in records if kind == "A/B"]
            share = called.count("slower") / max(len(called), 1)
            powers.append(power)
            found.append(share)
            line += f"; the gate called {share:.1%} slower"
        print(line)
    if powers:
        print(f"  +20% cases: the gate {sum(found) / len(found):.1%} against a floor of "
              f"{sum(powers) / len(powers):.1%} (normal model; ratio "
              f"{(sum(found) / len(found)) / max(sum(powers) / len(powers), 1e-9):.2f})")
    # without the normal model: every A/A log ratio of this run pooled, the threshold
    # that as few of them pass, and the share of them that a 20% step would lift past it
    pooled = sorted(math.log(medians[(c, f"test_{name}")] / medians[(b, f"test_{name}")])
                    for kind, _, _, _, (b, c) in records if kind == "A/A"
                    for name, _, _ in CASES
                    if (b, f"test_{name}") in medians and (c, f"test_{name}") in medians)
    for alpha in (0.025, 0.025 / len(CASES)):
        if not pooled:
            break
        cut = pooled[min(len(pooled) - 1, math.ceil((1 - alpha) * len(pooled)) - 1)]
        best = sum(x + math.log(1.2) > cut for x in pooled) / len(pooled)
        print(f"  empirical ({len(pooled)} A/A log ratios): at most {alpha:.2%} of A/A "
              f"above {cut:+.3f}: best power at +20% {best:.1%}")
