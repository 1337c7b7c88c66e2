"""Detection quality: torchmark.regressions.detect against the change-point libraries it
was chosen from, on a seeded synthetic set of benchmark histories.

Series of 50-500 per-run values with noise of 0.5-5% (normal, heavy-tailed, bimodal, or
normal with isolated outliers, a first-point outlier half the time), 0-3 steps of 1-30%
up or down, and series with no change at all; then near-exact instruction counts (noise
0.01-0.05%, steps of 0.5%). A detected index within 2 points of a true one counts.

It prints precision, recall and F1 for every candidate (overall, and on the target
subset: series whose every step is at least 3x the noise's robust standard deviation
with at least 10 points each side), false alarms per 1,000 points on the series without
change, the instruction-count section's recall, and torchmark's figures beside their
targets. Candidates whose library is missing are reported as such.

    python benchmarks/detection_quality.py [--quick] [--seed N] [--jobs N]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from itertools import pairwise

import numpy as np

TOLERANCE = 2  # a detection this close to a true change finds it
FAMILIES = ("normal", "heavy", "bimodal", "outliers")
MIN_GAP = 5  # points between changes (and from the ends) in the synthetic set
TARGETS = {"f1_target": 0.9, "alarms_per_1000": 1.0, "instructions_recall": 0.9}


# ---------------------------------------------------------------- the synthetic set

@dataclass
class Case:
    section: str  # "wall" or "instructions"
    family: str
    noise: float  # the noise's robust standard deviation (relative)
    values: np.ndarray
    changes: list[int]  # first index of each new level
    target: bool  # every step >= 3x noise with >= 10 points each side (and >= 1 step)


def _family_scale(family: str) -> tuple[float, float]:
    """The median and robust standard deviation of a family's raw draws."""
    z = _raw_noise(np.random.default_rng(12345), family, 400_000)
    median = float(np.median(z))
    return median, float(1.4826 * np.median(np.abs(z - median)))


def _raw_noise(rng: np.random.Generator, family: str, n: int) -> np.ndarray:
    if family == "heavy":
        return rng.standard_t(3, n)
    if family == "bimodal":  # a second mode 2 sd up, 30% of runs
        return 0.5 * rng.standard_normal(n) + 2.0 * (rng.random(n) < 0.3)
    return rng.standard_normal(n)


SCALES = {family: _family_scale(family) for family in FAMILIES}


def _positions(rng: np.random.Generator, n: int, count: int) -> list[int]:
    while True:
        found = sorted(int(i) for i in rng.integers(MIN_GAP, n - MIN_GAP + 1, count))
        bounds = [0, *found, n]
        if all(b - a >= MIN_GAP for a, b in pairwise(bounds)):
            return found


def make_case(rng: np.random.Generator, *, changes: int, section: str = "wall") -> Case:
    n = int(rng.integers(50, 501))
    if section == "instructions":
        family, noise = "normal", float(rng.uniform(1e-4, 5e-4))
        steps = [0.005] * changes
    else:
        family = str(rng.choice(FAMILIES))
        noise = float(np.exp(rng.uniform(math.log(0.005), math.log(0.05))))
        steps = [float(np.exp(rng.uniform(math.log(0.01), math.log(0.30))))
                 for _ in range(changes)]
    where = _positions(rng, n, changes)
    level = np.ones(n)
    for i, step in zip(where, steps, strict=True):
        level[i:] *= (1 + step) if rng.random() < 0.5 else (1 - step)
    median, scale = SCALES[family]
    values = 1e-3 * level * np.exp(noise * (_raw_noise(rng, family, n) - median) / scale)
    if family == "outliers":  # isolated slow runs, 1% of points, the first one half the time
        spikes = rng.choice(n, max(1, n // 100), replace=False)
        if rng.random() < 0.5:
            spikes = np.append(spikes, 0)
        values[spikes] *= 1 + rng.uniform(0.1, 1.0, len(spikes))
    bounds = [0, *where, n]
    target = bool(where) and all(
        abs(math.log(level[i] / level[i - 1])) >= 3 * noise
        and i - bounds[k] >= 10 and bounds[k + 2] - i >= 10
        for k, i in enumerate(where))
    return Case(section, family, noise, values, where, target)


def make_set(seed: int, quick: bool) -> list[Case]:
    rng = np.random.default_rng(seed)
    main, still, instructions = (160, 60, 60) if quick else (640, 200, 200)
    cases = [make_case(rng, changes=int(rng.integers(0, 4))) for _ in range(main)]
    cases += [make_case(rng, changes=0) for _ in range(still)]
    cases += [make_case(rng, changes=int(rng.integers(0, 4)), section="instructions")
              for _ in range(instructions)]
    return cases


# ---------------------------------------------------------------- the candidates

def _noise_sd(y: np.ndarray) -> float:
    d = np.diff(y)
    return max(1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2), 1e-6)


def _ruptures(method: str) -> Callable[[np.ndarray, str], list[int]]:
    import ruptures

    def run(values: np.ndarray, metric: str) -> list[int]:
        y = np.log(values)
        scaled = ((y - np.median(y)) / _noise_sd(y)).reshape(-1, 1)
        algo = (ruptures.KernelCPD(kernel="linear", min_size=3) if method == "pelt"
                else ruptures.Binseg(model="l2", min_size=3, jump=1))
        return [int(i) for i in algo.fit(scaled).predict(pen=2 * math.log(len(y)))[:-1]]
    return run


def _edivisive() -> Callable[[np.ndarray, str], list[int]]:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    def run(values: np.ndarray, metric: str) -> list[int]:
        np.random.seed(zlib.crc32(values.tobytes()))  # its permutations use numpy's global RNG
        return sorted(int(i) for i in e_divisive(values, pvalue=0.05, permutations=100))
    return run


def _otava() -> Callable[[np.ndarray, str], list[int]]:
    from otava.analysis import compute_change_points

    def run(values: np.ndarray, metric: str) -> list[int]:
        found, _ = compute_change_points(list(values), window_len=50, max_pvalue=0.001)
        return sorted(int(c.index) for c in found)
    return run


def _torchmark() -> Callable[[np.ndarray, str], list[int]]:
    from torchmark.regressions import detect

    def run(values: np.ndarray, metric: str) -> list[int]:
        return [c.index for c in detect(values, metric=metric)]
    return run


# name, what it is, the factory (ImportError when its library is missing)
CANDIDATES: list[tuple[str, str, Callable[[], Callable[[np.ndarray, str], list[int]]]]] = [
    ("pelt", "ruptures PELT (KernelCPD linear), l2 cost, penalty 2 log(n) at unit noise", lambda: _ruptures("pelt")),
    ("binseg", "ruptures binary segmentation, same cost and penalty",
     lambda: _ruptures("binseg")),
    ("edivisive", "signal-processing-algorithms E-Divisive means, permutation test p<0.05",
     _edivisive),
    ("otava", "apache-otava (Hunter) split/merge t-test, window 50, p<0.001", _otava),
    ("torchmark", "torchmark.regressions.detect (final)", _torchmark),
]
# why a candidate may be missing: its pins conflict with torchmark's environment
CONFLICTS = {
    "edivisive": "its 2.1.6 pins numpy<2, setuptools<71 and gevent; to measure it: "
                 "pip install --no-deps signal-processing-algorithms structlog "
                 "'more-itertools<9' in a separate venv",
    "otava": "its 0.8.0 pins numpy==2.2.*, scipy<1.17 and pulls google-cloud-bigquery, "
             "slack-sdk, pg8000; to measure it: pip install --no-deps apache-otava in a "
             "separate venv",
}
# torchmark's per-change test and effect filter over another candidate's changes
WRAPPED = ("binseg", "edivisive", "otava")


def _pruned(values: np.ndarray, metric: str, cuts: list[int]) -> list[int]:
    from torchmark.regressions.noise import prepare
    from torchmark.regressions.significance import significant_changes
    from torchmark.regressions.thresholds import MIN_SEGMENT, Thresholds

    limits = Thresholds.for_metric(metric)
    spaced: list[int] = []  # levels of MIN_SEGMENT points at least
    for cut in sorted(cuts):
        if cut - (spaced[-1] if spaced else 0) >= MIN_SEGMENT \
                and len(values) - cut >= MIN_SEGMENT:
            spaced.append(cut)
    prep = prepare(values, None, limits.noise_floor)
    return [c.index for c in significant_changes(prep, spaced, alpha=0.01,
                                                 min_effect=limits.min_effect)]


_LOADED: dict[str, Callable[[np.ndarray, str], list[int]] | None] = {}


def _load(names: Sequence[str]) -> dict[str, str]:
    """Loads the candidates (in this process); the missing ones and why."""
    missing = {}
    for name, _, factory in CANDIDATES:
        if name in names:
            try:
                _LOADED[name] = factory()
            except ImportError as e:
                _LOADED[name] = None
                missing[name] = f"{type(e).__name__}: {e}"
    return missing


def _run_case(job: tuple[Case, tuple[str, ...]]) -> dict[str, tuple[list[int], float]]:
    case, names = job
    if not _LOADED:
        _load(names)
    metric = "instructions" if case.section == "instructions" else "wall"
    out: dict[str, tuple[list[int], float]] = {}
    for name in names:
        run = _LOADED.get(name)
        if run is None:
            continue
        start = time.perf_counter()
        found = run(case.values, metric)
        out[name] = (found, time.perf_counter() - start)
        if name in WRAPPED:
            start = time.perf_counter()
            out[f"torchmark test on {name}"] = (_pruned(case.values, metric, found),
                                                time.perf_counter() - start)
    return out


# ---------------------------------------------------------------- scoring

@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, truth: list[int], found: list[int]) -> None:
        left = sorted(found)
        for t in sorted(truth):
            near = [d for d in left if abs(d - t) <= TOLERANCE]
            if near:
                left.remove(min(near, key=lambda d: abs(d - t)))
                self.tp += 1
            else:
                self.fn += 1
        self.fp += len(left)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Row:
    overall: Score = field(default_factory=Score)
    target: Score = field(default_factory=Score)
    instructions: Score = field(default_factory=Score)
    alarms: int = 0  # detections on wall series without change
    still_points: int = 0
    instruction_alarms: int = 0
    instruction_still_points: int = 0
    seconds: float = 0.0
    series: int = 0


def score(cases: list[Case], results: list[dict[str, tuple[list[int], float]]]
          ) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for case, result in zip(cases, results, strict=True):
        for name, (found, seconds) in result.items():
            row = rows.setdefault(name, Row())
            row.seconds += seconds
            row.series += 1
            if case.section == "instructions":
                row.instructions.add(case.changes, found)
                if not case.changes:
                    row.instruction_alarms += len(found)
                    row.instruction_still_points += len(case.values)
                continue
            row.overall.add(case.changes, found)
            if case.target:
                row.target.add(case.changes, found)
            if not case.changes:
                row.alarms += len(found)
                row.still_points += len(case.values)
    return rows


# ---------------------------------------------------------------- output

def _versions() -> str:
    names = ("numpy", "scipy", "ruptures", "signal-processing-algorithms", "apache-otava")
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def report(cases: list[Case], rows: dict[str, Row], missing: dict[str, str],
           args: argparse.Namespace, wall_seconds: float) -> None:
    wall = [c for c in cases if c.section == "wall"]
    instr = [c for c in cases if c.section == "instructions"]
    still = [c for c in wall if not c.changes]
    print(f"detection quality: seed {args.seed}{' (--quick)' if args.quick else ''}, "
          f"{len(wall)} wall series ({sum(len(c.changes) for c in wall)} changes, "
          f"{len(still)} without change, {sum(c.target for c in wall)} in the target "
          f"subset), {len(instr)} instruction-count series "
          f"({sum(len(c.changes) for c in instr)} changes of 0.5%)")
    print(f"machine: {platform.node() or '?'}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}; {_versions()}")
    print(f"{args.jobs} worker processes, {wall_seconds:.0f} s in all")
    print()
    header = (f"{'candidate':<30} {'P':>5} {'R':>5} {'F1':>5} {'F1 tgt':>6} "
              f"{'FA/1k':>6} {'instr R':>7} {'instr FA/1k':>11} {'ms/series':>9}")
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        fa = 1000 * row.alarms / max(1, row.still_points)
        ifa = 1000 * row.instruction_alarms / max(1, row.instruction_still_points)
        print(f"{name:<30} {row.overall.precision:5.3f} {row.overall.recall:5.3f} "
              f"{row.overall.f1:5.3f} {row.target.f1:6.3f} {fa:6.2f} "
              f"{row.instructions.recall:7.3f} {ifa:11.2f} "
              f"{1000 * row.seconds / max(1, row.series):9.2f}")
    for name, why in missing.items():
        print(f"{name:<30} not run: {why}")
        if name in CONFLICTS:
            print(f"{'':<30} ({CONFLICTS[name]})")
    print()
    for name, what, _ in CANDIDATES:
        print(f"  {name}: {what}")
    print("  torchmark test on X: X's changes, then torchmark's per-change test and "
          "effect filter")
    print("  P, R, F1: all wall series; F1 tgt: the target subset; FA/1k: false alarms "
          "per 1,000 points without change")
    final = rows.get("torchmark")
    if final is None:
        return
    print()
    print("torchmark.regressions.detect against its targets:")
    fa = 1000 * final.alarms / max(1, final.still_points)
    checks = [
        ("F1, target subset", final.target.f1, ">=", TARGETS["f1_target"]),
        ("false alarms per 1,000 points", fa, "<=", TARGETS["alarms_per_1000"]),
        ("instruction-count 0.5% steps, recall", final.instructions.recall, ">=",
         TARGETS["instructions_recall"]),
    ]
    for label, value, op, goal in checks:
        ok = value >= goal if op == ">=" else value <= goal
        print(f"  {label:<40} {value:7.3f}   target {op} {goal:<5} "
              f"{'ok' if ok else 'MISSED'}")
    print(f"  {'F1, all wall series':<40} {final.overall.f1:7.3f}   (no target)")
    print(f"  {'precision, instruction-count series':<40} "
          f"{final.instructions.precision:7.3f}   (no target)")


def speed() -> None:
    """detect's speed: the first call's imports (a fresh process), then the report's
    load (200 series of 100 runs with 30 raw samples each) and a large store's."""
    import subprocess

    from torchmark.regressions import detect

    code = ("import time; t = time.perf_counter(); from torchmark.regressions import detect; "
            "detect([1.0, 1.1] * 20); print(time.perf_counter() - t)")
    first = float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                 text=True, check=True).stdout)
    rng = np.random.default_rng(7)
    print()
    print(f"speed of detect (one process): imports and first call {first:.2f} s")
    for series, points, per_run in ((200, 100, 30), (2000, 500, 0)):
        data = [1e-3 * np.exp(0.02 * rng.standard_normal(points)) for _ in range(series)]
        raw = [[v * np.exp(0.02 * rng.standard_normal(per_run)) for v in d] if per_run
               else None for d in data]
        start = time.perf_counter()
        for values, samples in zip(data, raw, strict=True):
            detect(values, samples=samples)
        took = time.perf_counter() - start
        what = f"{per_run} raw samples a run" if per_run else "no raw samples"
        print(f"  {series} series x {points} points ({what}): {took:.2f} s "
              f"({1000 * took / series:.2f} ms a series)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the series")
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", nargs="*", default=[name for name, _, _ in CANDIDATES],
                        help="candidates to run")
    args = parser.parse_args(argv)
    names = tuple(args.only)
    missing = _load(names)
    cases = make_set(args.seed, args.quick)
    start = time.perf_counter()
    jobs = [(case, names) for case in cases]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_run_case, jobs, chunksize=8))
    else:
        results = [_run_case(job) for job in jobs]
    report(cases, score(cases, results), missing, args, time.perf_counter() - start)
    if "torchmark" in names:
        speed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
