"""Kernel time, device time and batch time against Nsight Compute and triton's do_bench,
on a CUDA GPU (issue 28).

For each case (relu / add / mul on 1K to 1M floats, softmax, layer_norm, a conv2d that
runs several kernels, a small matmul) it prints:

- torchmark's kernel time (the sum of the call's kernel durations, CUPTI through
  torch.profiler) with a cold L2 (flushed clean, as ncu's --cache-control all leaves
  it) and a hot one, and the kernels a call runs;
- torchmark's device time (CUDA events, blocking mode, cold L2), and the same with the
  events' cost taken off (subtract_event_overhead);
- torchmark's batch time (many calls back to back between one pair of events, hot L2);
- do_bench's median (triton.testing; blank when triton is not importable);
- Nsight Compute's gpu__time_duration.sum per call (the sum over the call's kernels) and
  its SM-active time (sm__cycles_active.max / gpc__cycles_elapsed.avg.per_second, summed
  the same way), with `--cache-control all` (ncu flushes the caches before each kernel:
  against the cold kernel time) and `--cache-control none` (against the hot one), both
  `--clock-control none`. ncu runs one child process per cache mode over every case; the
  child launches an empty marker kernel (torch's spin kernel asked for 0 cycles) before
  each case's profiled calls, inside an NVTX range named for the case, so each case's
  kernels are the rows between two markers (blank columns, and a note, where ncu is
  missing or fails).

Checks printed (PASS / FAIL / n/a), kernel by kernel where torchmark's launch order and
ncu's name the same kernels (see kernel_checks), else for the call as a whole (cold
against --cache-control all):
- kernel time within 3% of ncu's duration where that is >= 20 us;
- below 20 us: kernel time between ncu's SM-active time and its duration (2% margin);
- device time (cold, blocking) within 2% of do_bench where do_bench reads >= 50 us.
With --spread N, the calls of 20 us or more are timed again in N fresh processes.

Where a case's tensors land in device memory moves a large kernel's figure by a few per
cent (layer_norm 8192x4096 cold: 123.7 to 129.0 us over eight placements in one process),
on both sides: one copy here against one in ncu's child compares two placements. With
--placements, the calls of 20 us or more are each prepared eight times (PADS), the
copies' tensors placed after buffers of different sizes, all alive together, in this
process and in an ncu child that prepares copies the same way (the addresses each gets
may differ: the two sides sample placements, they do not pair them); the targets are then
checked on each kernel position's medians over the placements (at least MIN_PLACEMENTS
usable copies), and the one-copy checks printed as information. Each such case is also
timed twice the table's way (`Timer(stmt, setup)`) once the copies are freed, as a
diagnostic of a row that lies outside the placements' range.

    python benchmarks/gpu_kernel_time.py [--no-ncu] [--cases NAME,...] [--quick]
                                         [--ncu-log DIR] [--spread N] [--placements]

Exits 2 with a message on a machine without CUDA.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import NamedTuple

from torchmark.timing.kernel_names import kernel_base

SIZES = (1 << 10, 1 << 14, 1 << 17, 1 << 20)  # 1K .. 1M elements


def _cases() -> dict[str, tuple[str, str]]:
    cases: dict[str, tuple[str, str]] = {}
    for n in SIZES:
        label = f"{n >> 10}K" if n < 1 << 20 else f"{n >> 20}M"
        setup = f"x = torch.randn({n}, device='cuda'); y = torch.randn_like(x)"
        cases[f"relu {label}"] = ("torch.relu(x)", setup)
        cases[f"add {label}"] = ("torch.add(x, y)", setup)
        cases[f"mul {label}"] = ("torch.mul(x, y)", setup)
    cases["softmax 8192x4096"] = (
        "torch.softmax(s, dim=-1)", "s = torch.randn(8192, 4096, device='cuda')")
    cases["layer_norm 8192x4096"] = (
        "torch.nn.functional.layer_norm(s, (4096,), w, b)",
        "s = torch.randn(8192, 4096, device='cuda'); w = torch.ones(4096, device='cuda'); "
        "b = torch.zeros(4096, device='cuda')")
    cases["conv2d 32x64x56x56 3x3 (+bias)"] = (
        "torch.nn.functional.conv2d(i, k, c, padding=1)",
        "i = torch.randn(32, 64, 56, 56, device='cuda'); "
        "k = torch.randn(64, 64, 3, 3, device='cuda'); c = torch.randn(64, device='cuda')")
    cases["mm 512^3 fp32"] = ("torch.mm(a, b)", "a = torch.randn(512, 512, device='cuda'); "
                                               "b = torch.randn_like(a)")
    return cases


CASES = _cases()
NCU_CALLS = 3  # profiled calls a case
NCU_TIMEOUT_S = 150  # one ncu child (every case, one cache mode)
NCU_METRICS = ("gpu__time_duration.sum", "sm__cycles_active.max",
               "gpc__cycles_elapsed.avg.per_second")
MARKER = "spin_kernel"  # torch.cuda._sleep's kernel: the child's separator between cases
KERNEL_TARGET, SMALL, BENCH_TARGET = 0.03, 20e-6, 50e-6

# -- the ncu child ---------------------------------------------------------------------

CHILD = r"""
import json, sys
import torch
cases = json.loads(sys.argv[1])
calls = int(sys.argv[2])
prepared = []
for name, stmt, setup, pad_mib in cases:
    # pad_mib: a buffer allocated first, kept with the case (where its tensors land)
    ns = {"torch": torch, "_pad": torch.empty(pad_mib << 20, dtype=torch.uint8,
                                               device="cuda")}
    exec(setup, ns)
    code = compile(stmt, "<stmt>", "exec")
    for _ in range(3):  # warm-up (cuDNN's choice, lazy init): not profiled
        exec(code, ns)
    prepared.append((name, code, ns))
torch.cuda.synchronize()
torch.cuda.profiler.start()
for name, code, ns in prepared:
    torch.cuda.nvtx.range_push(name)
    torch.cuda._sleep(0)  # the marker: this case's kernels follow it
    for _ in range(calls):
        exec(code, ns)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
torch.cuda._sleep(0)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""

TIME_UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
              "ms": 1e-3, "second": 1.0, "s": 1.0}
RATE_UNITS = {"cycle/second": 1.0, "cycle/nsecond": 1e9, "cycle/usecond": 1e6,
              "cycle/msecond": 1e3, "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse_ncu_rows(text: str) -> list[dict[str, object]]:
    """ncu's --csv output as one dict a kernel launch, in launch order: its name, its
    duration (s), SM-active cycles and cycles a second."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if header is None:
        raise ValueError(f"ncu printed no CSV table: {text[-400:]}")
    kernels: dict[int, dict[str, object]] = {}
    for row in csv.DictReader(lines[header:]):
        try:
            launch = int(row["ID"])
        except (KeyError, ValueError):
            continue
        entry = kernels.setdefault(launch, {"name": row.get("Kernel Name", "")})
        metric, unit = row.get("Metric Name"), (row.get("Metric Unit") or "").strip()
        value = row.get("Metric Value") or ""
        if metric == "gpu__time_duration.sum":
            if unit not in TIME_UNITS:
                raise ValueError(f"ncu reported an unknown time unit {unit!r}")
            entry["duration"] = _number(value) * TIME_UNITS[unit]
        elif metric == "sm__cycles_active.max":
            entry["active_cycles"] = _number(value)
        elif metric == "gpc__cycles_elapsed.avg.per_second":
            rate = RATE_UNITS.get(unit.lower())
            if rate is None:
                raise ValueError(f"ncu reported an unknown rate unit {unit!r}")
            entry["cycles_per_s"] = _number(value) * rate
    return [kernels[k] for k in sorted(kernels)]


class NcuCase(NamedTuple):
    """A case under ncu: duration and SM-active seconds a call (None where a kernel had no
    SM-active figure), kernels a call, and its launch order a position at a time (name,
    mean duration, mean SM-active seconds or None) where every call launched the same
    names (else None)."""

    duration: float
    active: float | None
    kernels: int
    steps: list[tuple[str, float, float | None]] | None


def _active_s(kernel: dict[str, object]) -> float | None:
    cycles, rate = kernel.get("active_cycles"), kernel.get("cycles_per_s")
    return float(cycles) / float(rate) if cycles is not None and rate else None


def _steps(kernels: list[dict[str, object]], calls: int
           ) -> list[tuple[str, float, float | None]] | None:
    if len(kernels) % calls:
        return None
    n = len(kernels) // calls
    runs = [kernels[i * n:(i + 1) * n] for i in range(calls)]
    if any([k["name"] for k in run] != [k["name"] for k in runs[0]] for run in runs):
        return None
    steps = []
    for i in range(n):
        at = [run[i] for run in runs]
        active = [_active_s(k) for k in at]
        steps.append((str(at[0]["name"]),
                      sum(float(k.get("duration", 0.0)) for k in at) / calls,
                      None if None in active else sum(active) / calls))  # type: ignore[arg-type]
    return steps


def split_cases(rows: list[dict[str, object]], names: list[str], calls: int
                ) -> dict[str, NcuCase]:
    """Each case's figures (NcuCase) from the launches between markers (the child's
    order)."""
    groups: list[list[dict[str, object]]] = []
    for row in rows:
        if MARKER in str(row["name"]):
            groups.append([])
        elif groups:
            groups[-1].append(row)
    # a case is complete once the next marker follows it (the child ends with one): a
    # --launch-count bound reached mid-case leaves it open
    complete = max(len(groups) - 1, 0)
    if complete < len(names):
        raise ValueError(f"ncu's rows held {complete} complete cases, {len(names)} were run "
                         "(--launch-count reached?)")
    groups = groups[:len(names)]
    out = {}
    for name, kernels in zip(names, groups, strict=True):
        if not kernels:
            continue
        duration = sum(float(k.get("duration", 0.0)) for k in kernels) / calls
        active = [_active_s(k) for k in kernels]
        out[name] = NcuCase(duration,
                            None if None in active else sum(active) / calls,  # type: ignore[arg-type]
                            round(len(kernels) / calls), _steps(kernels, calls))
    return out


def ncu_figures(cases: list[tuple[str, str, str, int]], cache_control: str,
                log_dir: str | None = None, log_name: str = "",
                ) -> tuple[dict[str, NcuCase], str]:
    """{case: its figures} under ncu, and a note, for `cases`: (name, stmt, setup, MiB
    allocated before the setup) each; ncu's raw output kept in `log_dir`
    (ncu_<log_name><cache_control>.csv) when given."""
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu"
                                  if os.access("/usr/local/cuda/bin/ncu", os.X_OK) else None)
    if ncu is None:
        return {}, "ncu not found (PATH, /usr/local/cuda/bin): ncu columns blank"
    import json

    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        names = [case[0] for case in cases]
        # a bound on what ncu profiles: the markers and every case's calls (conv2d and
        # softmax run a few kernels a call)
        bound = len(names) * (NCU_CALLS * 8 + 1) + 1
        cmd = [ncu, "--profile-from-start", "off", "--metrics", ",".join(NCU_METRICS),
               "--csv", "--print-units", "base", "--cache-control", cache_control,
               "--clock-control", "none", "--launch-count", str(bound), "--nvtx",
               sys.executable, script, json.dumps(cases), str(NCU_CALLS)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=NCU_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {}, f"ncu --cache-control {cache_control} timed out after {NCU_TIMEOUT_S} s"
    if log_dir is not None:
        with open(os.path.join(log_dir, f"ncu_{log_name}{cache_control}.csv"), "w") as f:
            f.write(out.stdout + "\n--- stderr ---\n" + out.stderr)
    if out.returncode != 0:
        return {}, (f"ncu --cache-control {cache_control} exited {out.returncode}: "
                    f"{(out.stderr or out.stdout)[-400:]}")
    try:
        return split_cases(parse_ncu_rows(out.stdout), names, NCU_CALLS), \
            f"ncu --cache-control {cache_control}: {len(names)} cases, {NCU_CALLS} calls each"
    except ValueError as e:
        return {}, f"ncu --cache-control {cache_control}: {e}"


# -- torchmark and do_bench --------------------------------------------------------------

def do_bench_median(stmt: str, setup: str) -> float | None:
    """do_bench's median, as benchmarks/gpu_vs_do_bench.py takes it (None without triton)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpu_vs_do_bench import do_bench_median as median

    return median(stmt, setup)


def _our_steps(m) -> list[tuple[str, float]] | None:
    """A kernel-time Measurement's launch order: (name, mean seconds) a position."""
    sequence = m.metadata.get("sequence")
    return [(k["name"], k["seconds"]) for k in sequence["kernels"]] if sequence else None


def measure(name: str, quick: bool) -> dict[str, object]:
    from torchmark import Timer

    stmt, setup = CASES[name]
    limit = 1.0 if quick else 3.0
    timer = Timer(stmt, setup, label=name)
    kernel_cold = timer.kernel_time(l2="cold", min_run_time=0.01, max_run_time=limit)
    kernel_hot = timer.kernel_time(l2="hot", min_run_time=0.01, max_run_time=limit)
    device = timer.device_time(mode="blocking", l2="cold", max_run_time=limit)
    minus = timer.device_time(mode="blocking", l2="cold", max_run_time=limit,
                              subtract_event_overhead=True)
    batch = timer.device_time(mode="batch", max_run_time=limit)
    kernels = kernel_cold.metadata["kernels"]
    return {"kernel_cold": kernel_cold.median, "kernel_hot": kernel_hot.median,
            "device": device.median, "minus": minus.median,
            "event_cost": minus.metadata.get("event_overhead"), "batch": batch.median,
            "batch_calls": batch.metadata.get("batch_calls"),
            "kernels_per_call": sum(k["per_call"] for k in kernels),
            "steps_cold": _our_steps(kernel_cold), "steps_hot": _our_steps(kernel_hot),
            "kernel_names": [(k["name"], k["share"]) for k in kernels[:3]],
            "bench": do_bench_median(stmt, setup)}


def _us(value: float | None) -> str:
    return f"{value * 1e6:9.2f}" if value is not None else f"{'':>9}"


def within(name: str, ours: float, duration: float, active: float | None,
           pairing: str) -> str:
    """One figure against ncu's: within KERNEL_TARGET of its duration from SMALL up,
    between its SM-active time and its duration (2% margin) below."""
    if duration >= SMALL:
        ratio = ours / duration
        return (f"{'PASS' if abs(ratio - 1) <= KERNEL_TARGET else 'FAIL'}  {name}: kernel "
                f"time / ncu duration = {ratio:.3f} ({pairing}; target within "
                f"{KERNEL_TARGET:.0%})")
    if active is None:
        return f"n/a   {name}: ncu gave no SM-active time ({pairing})"
    ok = active * 0.98 <= ours <= duration * 1.02
    return (f"{'PASS' if ok else 'FAIL'}  {name}: ncu SM-active {active * 1e6:.2f}, kernel "
            f"{ours * 1e6:.2f}, ncu duration {duration * 1e6:.2f} us ({pairing}; target: "
            "between, 2% margin)")


def _same_kernels(ours: list[tuple[str, float]], theirs: list[tuple[str, float, float | None]]
                  ) -> bool:
    return [kernel_base(n) for n, _ in ours] == [kernel_base(n) for n, *_ in theirs]


def _at_median(steps: list[tuple[str, float]], median: float) -> list[float]:
    """Each position's mean scaled so that they sum to the call's median (the figure
    the table shows): for a one-kernel call, the median itself."""
    total = sum(seconds for _, seconds in steps)
    return [seconds * median / total if total > 0 else seconds for _, seconds in steps]


def kernel_checks(name: str, row: dict[str, object], clean: NcuCase | None,
                  warm: NcuCase | None) -> list[str] | None:
    """The issue's targets kernel by kernel ("for kernels >= 20 us"), where both sides
    give the call's launch order and name the same kernels in it (else None). The first
    kernel pairs cold with --cache-control all; later ones hot with --cache-control
    none, as ncu flushes before each kernel, not each call: there a later kernel finds
    its inputs, the call's own earlier outputs, evicted, as in no run of the call."""
    cold, hot = row.get("steps_cold"), row.get("steps_hot")
    if not (cold and hot and clean and clean.steps and _same_kernels(cold, clean.steps)):
        return None
    if len(cold) > 1 and not (warm and warm.steps and _same_kernels(hot, warm.steps) and
                              _same_kernels(cold, warm.steps)):
        return None
    ours_cold = _at_median(cold, float(row["kernel_cold"]))
    ours_hot = _at_median(hot, float(row["kernel_hot"]))
    out = []
    for i, (kernel, _) in enumerate(cold):
        label = f"{name} #{i + 1} {kernel_base(kernel)[:40]}" if len(cold) > 1 else name
        if i == 0:
            _, duration, active = clean.steps[0]
            out.append(within(label, ours_cold[0], duration, active,
                              "cold, --cache-control all"))
        else:
            _, duration, active = warm.steps[i]  # type: ignore[union-attr]
            out.append(within(label, ours_hot[i], duration, active,
                              "hot, --cache-control none"))
    return out


def check(name: str, row: dict[str, object], clean: dict, warm: dict,
          placed: list[str] | None = None) -> list[str]:
    """The case's checks: kernel by kernel where the launch orders align (see
    kernel_checks), else the call's kernel time (cold) against ncu's (--cache-control
    all); then the hot figure (info) and device time against do_bench. `placed`: the
    checks on medians over placements (placement_checks), which then stand in for those
    on this process's one copy (printed as info)."""
    figures = clean.get(name)
    out = kernel_checks(name, row, figures, warm.get(name))
    if out is None:
        out = []
        if figures is None:
            out.append(f"n/a   {name}: kernel vs ncu (no ncu figure)")
        else:
            out.append(within(name, float(row["kernel_cold"]), figures.duration,
                              figures.active, "the call, cold, --cache-control all"))
    elif figures is not None and figures.kernels > 1:
        call = within(name, float(row["kernel_cold"]), figures.duration, figures.active,
                      "the call, cold, --cache-control all")
        out.append(f"info  {call[:4].strip()} for the call as a whole: {call[6:]}")
    if placed:
        out = placed + [f"info  {line[:4]} in this process's one copy: {line[6:]}"
                        if line[:4] in ("PASS", "FAIL") else line for line in out]
    hot = warm.get(name)
    if hot is not None:
        out.append(f"info  {name}: kernel time (hot) / ncu duration (--cache-control "
                   f"none) = {float(row['kernel_hot']) / hot[0]:.3f}")
    bench = row["bench"]
    if bench is None:
        out.append(f"n/a   {name}: device vs do_bench (triton not importable)")
    elif float(bench) >= BENCH_TARGET:
        ratio = float(row["device"]) / float(bench)
        out.append(f"{'PASS' if abs(ratio - 1) <= 0.02 else 'FAIL'}  {name}: device time "
                   f"(cold, blocking) / do_bench = {ratio:.3f} (target within 2%)")
    return out


# -- placements: each case prepared several times, its tensors placed differently ----------

PADS = (0, 2, 6, 14, 30, 62, 126, 254)  # MiB allocated before a copy's tensors
PLACEMENT_RUN_S = 0.5  # at most, a copy's measurement


def placement_copies(names: list[str]) -> list[tuple[str, str, str, int]]:
    """Every case of `names` at every padding: (label, stmt, setup, pad MiB), in the order
    both this process and the ncu child prepare them (all kept alive together)."""
    return [(f"{name} @{pad}", *CASES[name], pad) for name in names for pad in PADS]


def placement_orders(prepared: list[tuple[str, str, str, int]]
                     ) -> dict[str, tuple[list[tuple[str, float]], list[tuple[str, float]]]]:
    """{label: (cold launch order, hot launch order)}: each position's (name, seconds),
    scaled so that a call's positions sum to its median; the copies prepared in order,
    measured in a shuffled one, each printed as it comes."""
    import torch

    from torchmark import Timer

    spaces = []
    for label, stmt, setup, pad in prepared:  # as the ncu child prepares them
        space = {"torch": torch,
                 "_pad": torch.empty(pad << 20, dtype=torch.uint8, device="cuda")}
        exec(setup, space)
        spaces.append((label, stmt, space))
    # measured in a shuffled order (seeded), so that a drift over time does not line up
    # with the padding
    random.Random(0).shuffle(spaces)
    out = {}
    for label, stmt, space in spaces:
        timer = Timer(stmt, globals=space)
        pair = []
        for l2 in ("cold", "hot"):
            m = timer.kernel_time(l2=l2, min_run_time=0.01, max_run_time=PLACEMENT_RUN_S)
            steps = _our_steps(m) or []
            pair.append(list(zip([n for n, _ in steps],
                                 _at_median(steps, m.median), strict=True)))
        out[label] = (pair[0], pair[1])
        print(f"  {label:<40} cold {_us(sum(s for _, s in pair[0]))}  hot "
              f"{_us(sum(s for _, s in pair[1]))}", flush=True)
    return out


class Position(NamedTuple):
    """One kernel position of a case's calls over the placements: its name, torchmark's
    figures, ncu's durations and SM-active times (None where ncu gave none)."""

    kernel: str
    ours: list[float]
    duration: list[float]
    active: list[float | None]


def placement_positions(name: str, mine: dict, clean: dict[str, NcuCase],
                        warm: dict[str, NcuCase]) -> list[Position]:
    """`name`'s kernel positions over the placements: the first kernel cold against
    --cache-control all, later ones hot against --cache-control none (as kernel_checks
    pairs them; a one-kernel call needs no `none` figure). The first usable copy fixes the
    kernels; a copy whose launch orders (either side, cold or hot) name others is left
    out, with a line saying so."""
    positions: list[Position] = []
    for pad in PADS:
        label = f"{name} @{pad}"
        cold, hot = mine.get(label, ([], []))
        a = clean[label].steps if label in clean else None
        n = warm[label].steps if label in warm else None
        usable = bool(cold and a and _same_kernels(cold, a) and _same_kernels(hot, a)
                      and (len(cold) == 1 or (n and _same_kernels(cold, n))))
        if usable and positions:
            usable = [kernel_base(k) for k, _ in cold] == [p.kernel for p in positions]
        if not usable:
            print(f"  {label}: launch orders differ or are missing: left out")
            continue
        if not positions:
            positions = [Position(kernel_base(k), [], [], []) for k, _ in cold]
        for i, position in enumerate(positions):
            ours, theirs = (cold[i], a[i]) if i == 0 else (hot[i], n[i])  # type: ignore[index]
            position.ours.append(ours[1])
            position.duration.append(theirs[1])
            position.active.append(theirs[2])
    return positions


def _spread(values: list[float]) -> str:
    return f"{min(values) * 1e6:.2f}..{max(values) * 1e6:.2f}"


MIN_PLACEMENTS = 4  # usable copies a case needs for checks on medians


def placement_checks(name: str, positions: list[Position]) -> list[str]:
    """The targets on each position's medians over the placements (see within); none
    (the one-copy checks then stand) where fewer than MIN_PLACEMENTS copies were usable,
    with a line saying so."""
    usable = len(positions[0].ours) if positions else 0
    if usable < MIN_PLACEMENTS:
        print(f"  {name}: {usable} usable placement(s) of {len(PADS)}, fewer than "
              f"{MIN_PLACEMENTS}: checked on this process's one copy")
        return []
    out = []
    for i, p in enumerate(positions):
        label = f"{name} #{i + 1} {p.kernel[:40]}" if len(positions) > 1 else name
        active = None if None in p.active else statistics.median(p.active)  # type: ignore[type-var]
        pairing = (f"medians over {len(p.ours)} placements, "
                   + ("cold, --cache-control all" if i == 0 else "hot, --cache-control none"))
        line = within(label, statistics.median(p.ours), statistics.median(p.duration),
                      active, pairing)
        out.append(f"{line} [torchmark {_spread(p.ours)}, ncu {_spread(p.duration)} us]")
    return out


def timer_way(names: list[str]) -> None:
    """Each case measured twice as the table's row was (`Timer(stmt, setup)`: the setup run
    again for the measurement, its tensors taken from the allocator's cache), printed
    beside the placements: whether a slow row reproduces after the copies are freed."""
    from torchmark import Timer

    print("the Timer's own setup, after the placements were freed, kernel time cold, us:")
    for name in names:
        stmt, setup = CASES[name]
        figures = [Timer(stmt, setup).kernel_time(l2="cold", min_run_time=0.01,
                                                  max_run_time=PLACEMENT_RUN_S).median
                   for _ in range(2)]
        print(f"  {name:<40} {_us(figures[0])} {_us(figures[1])}", flush=True)


def placements(names: list[str], log_dir: str | None) -> dict[str, list[str]]:
    """The placement study of `names`: each copy's figures printed, then {case: its
    checks on the medians over placements}."""
    prepared = placement_copies(names)
    print(f"placements: {len(names)} case(s) x {len(PADS)} (tensors after "
          f"{', '.join(map(str, PADS))} MiB); torchmark's kernel time, us a call:", flush=True)
    mine = placement_orders(prepared)
    timer_way(names)
    clean: dict[str, NcuCase] = {}
    warm: dict[str, NcuCase] = {}
    for control, into in (("all", clean), ("none", warm)):
        figures, note = ncu_figures(prepared, control, log_dir, log_name="placement_")
        into.update(figures)
        print(f"note: placements, {note}", flush=True)
    print("placements, ncu's duration a call, us (all, none):")
    for label, *_ in prepared:
        c, w = clean.get(label), warm.get(label)
        print(f"  {label:<40} {_us(c.duration if c else None)} "
              f"{_us(w.duration if w else None)}")
    return {name: placement_checks(name, placement_positions(name, mine, clean, warm))
            for name in names}


ONE_FIGURE = r"""
import sys
from torchmark import Timer
m = Timer(sys.argv[1], sys.argv[2]).kernel_time(l2="cold", max_run_time=float(sys.argv[3]))
print(repr(m.median))
"""


def spread_line(name: str, here: float, ncu: NcuCase | None, processes: int) -> str:
    """`name`'s kernel time (cold) in `processes` fresh processes, against this process's
    and ncu's: a process reads its own figure (the same kernel, flush and machine), and
    the spread bounds how closely any two processes, ncu's among them, can agree."""
    stmt, setup = CASES[name]
    figures = []
    for _ in range(processes):
        try:
            done = subprocess.run([sys.executable, "-c", ONE_FIGURE, stmt, setup, "1.0"],
                                  capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return f"{name:<30} failed: a process ran past 120 s"
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return f"{name:<30} failed: {(done.stderr or done.stdout or 'no output')[-300:]}"
        try:
            figures.append(float(lines[-1]))
        except ValueError:
            return f"{name:<30} failed: printed {lines[-1][:100]!r}, not a figure"
    figures.sort()
    middle = figures[len(figures) // 2]
    against = f"; median / ncu {middle / ncu.duration:.3f}" if ncu else ""
    return (f"{name:<30} {_us(figures[0])} {_us(middle)} {_us(figures[-1])}  (this process "
            f"{here * 1e6:.2f}{against}; max / min {figures[-1] / figures[0]:.3f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute")
    parser.add_argument("--cases", default=None, help="comma-separated case names")
    parser.add_argument("--quick", action="store_true", help="1 s a measurement, not 3")
    parser.add_argument("--ncu-log", default=None, metavar="DIR",
                        help="keep ncu's raw output there (ncu_all.csv, ncu_none.csv)")
    parser.add_argument("--spread", type=int, default=0, metavar="N",
                        help="for the calls of 20 us or more, kernel time (cold) again in N "
                             "fresh processes: how far apart two processes read")
    parser.add_argument("--placements", action="store_true",
                        help=f"for the calls of 20 us or more, each prepared {len(PADS)} "
                             "times, its tensors placed after buffers of different sizes, "
                             "here and under ncu; the targets checked on the medians")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_kernel_time.py: no CUDA device here (torch.cuda.is_available() is "
              "False); this script runs on a GPU machine", file=sys.stderr)
        return 2
    names = list(CASES) if args.cases is None else [n.strip() for n in args.cases.split(",")]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown cases {unknown}; known: {list(CASES)}", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, torch {torch.__version__}, L2 "
          f"{props.L2_cache_size / 2**20:.0f} MiB", flush=True)
    # torchmark and do_bench first, each row printed as it comes (a run cut off by its
    # time limit keeps them); Nsight Compute after, then the table joining both
    print("torchmark and do_bench, us a call (kernel cold, kernel hot, device, -event, "
          "batch, do_bench):", flush=True)
    rows = {}
    for name in names:
        try:
            row = measure(name, args.quick)
        except Exception as e:  # one case failing must not lose the others' figures
            print(f"{name:<30} failed: {type(e).__name__}: {e}", flush=True)
            continue
        rows[name] = row
        print(f"{name:<30} {_us(row['kernel_cold'])} {_us(row['kernel_hot'])} "
              f"{_us(row['device'])} {_us(row['minus'])} {_us(row['batch'])} "
              f"{_us(row['bench'])}", flush=True)
    clean: dict = {}
    warm: dict = {}
    notes = []
    if args.no_ncu:
        notes.append("ncu skipped (--no-ncu): ncu columns blank")
    else:
        for control, into in (("all", clean), ("none", warm)):
            figures, note = ncu_figures([(n, *CASES[n], 0) for n in names], control,
                                        args.ncu_log)
            into.update(figures)
            notes.append(note)
            print(f"note: {note}", flush=True)
    print("times in us a call; kernel = sum of the call's kernel durations (CUPTI); device ="
          " CUDA events, blocking, cold L2; -event = device less the events' cost; batch ="
          " events around many calls, hot L2; ncu = gpu__time_duration (all: caches flushed"
          " before each kernel; none: not); SM = ncu's SM-active time")
    head = (f"{'case':<30} {'kern cold':>9} {'kern hot':>9} {'device':>9} {'-event':>9} "
            f"{'batch':>9} {'do_bench':>9} {'ncu all':>9} {'SM all':>9} {'ncu none':>9} "
            f"{'SM none':>9} {'k/call':>6}")
    print(head, flush=True)
    for name, row in rows.items():
        c, w = clean.get(name), warm.get(name)
        print(f"{name:<30} {_us(row['kernel_cold'])} {_us(row['kernel_hot'])} "
              f"{_us(row['device'])} {_us(row['minus'])} {_us(row['batch'])} "
              f"{_us(row['bench'])} {_us(c[0] if c else None)} "
              f"{_us(c[1] if c else None)} {_us(w[0] if w else None)} "
              f"{_us(w[1] if w else None)} {row['kernels_per_call']:>6.3g}", flush=True)
    print("kernels (cold, by share):")
    for name, row in rows.items():
        listed = "; ".join(f"{share:.0%} {kname[:60]}"
                           for kname, share in row["kernel_names"])
        cost = row["event_cost"]
        print(f"  {name}: {listed} (ncu kernels a call: "
              f"{clean[name][2] if name in clean else '?'}; event cost "
              f"{float(cost) * 1e6:.2f} us; batch of {row['batch_calls']})"
              if cost is not None else f"  {name}: {listed}")
    placed: dict[str, list[str]] = {}
    if args.placements:
        big = [name for name, row in rows.items() if float(row["kernel_cold"]) >= SMALL]
        if args.no_ncu:
            notes.append("--placements needs ncu: skipped")
        elif big:
            try:
                placed = placements(big, args.ncu_log)
            except Exception as e:  # the figures above stay
                notes.append(f"placements failed: {type(e).__name__}: {e}")
    print("checks:")
    failed = 0
    for name, row in rows.items():
        for line in check(name, row, clean, warm, placed.get(name)):
            failed += line.startswith("FAIL")
            print(f"  {line}")
    if args.spread > 0:
        print(f"kernel time (cold) in {args.spread} fresh processes, us a call "
              "(min / median / max; this process; ncu duration, all):", flush=True)
        for name, row in rows.items():
            if float(row["kernel_cold"]) >= SMALL:
                print(spread_line(name, float(row["kernel_cold"]), clean.get(name),
                                  args.spread), flush=True)
    for note in notes:
        print(f"note: {note}")
    print(f"{failed} check(s) failed, {len(names) - len(rows)} case(s) failed to measure")
    return 1 if failed or len(rows) < len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
