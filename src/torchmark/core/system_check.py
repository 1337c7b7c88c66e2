"""Settings of this machine that make timing noisy, as warnings (`torchmark env check`,
and the cheap ones stored with every run's fingerprint as "check.warnings"), in the
manner of pyperf's `system show`:

- the CPU frequency governor is not `performance`, or turbo / boost is on (the clock
  then follows load and temperature);
- the machine is loaded (the 1-minute load above half the CPUs this process may use),
  or torch's threads outnumber the CPUs' worth of time the cgroup quota allows;
- the SMT siblings of the CPUs this process is pinned to are busy (sampled over
  SIBLING_SAMPLE_S, `env check` only): they share the pinned cores' execution units;
- thermal throttling has happened since boot (the kernel's throttle counters, where
  readable).
"""

from __future__ import annotations

import glob
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SIBLING_SAMPLE_S = 0.25
BUSY_SIBLING = 0.10  # a sibling busier than this share of its time is a warning
LOADED = 0.5  # load per allowed CPU above which the machine counts as loaded


def warnings(fields: Mapping[str, Any], sample: bool = False) -> list[str]:
    """The warnings for a fingerprint's fields (core/fingerprint.py); with `sample`,
    also those that take a moment to measure (busy SMT siblings)."""
    out = []
    governor = fields.get("cpu.governor")
    if governor is not None and governor != "performance":
        out.append(f"CPU frequency governor is {governor!r}, not 'performance' (`sudo "
                   "cpupower frequency-set -g performance`)")
    if fields.get("cpu.boost") is True:
        out.append("turbo / boost is on: the clock follows load and temperature")
    allowed = len(_cpus(fields.get("cpu.affinity"))) or fields.get("cpu.threads") or 1
    quota = fields.get("cpu.quota")
    if isinstance(quota, (int, float)):
        allowed = min(allowed, quota)
    load = fields.get("load.1m")
    if isinstance(load, (int, float)) and load > LOADED * allowed:
        out.append(f"the machine is loaded: 1-minute load {load:g} for {allowed:g} CPU(s)")
    threads = fields.get("threads.intra_op")
    if isinstance(threads, int) and isinstance(quota, (int, float)) and threads > quota:
        out.append(f"torch uses {threads} threads but the cgroup quota allows "
                   f"{quota:g} CPU(s): its threads wait for each other")
    throttled = throttle_count()
    if throttled:
        out.append(f"thermal throttling: the CPUs were throttled {throttled} time(s) "
                   "since boot")
    if sample:
        busy = busy_siblings(_cpus(fields.get("cpu.affinity")))
        if busy:
            out.append("SMT siblings of the CPUs this process may use are busy: " +
                       ", ".join(f"CPU {cpu} {share:.0%}" for cpu, share in busy.items()))
    return out


def _cpus(ranges: Any) -> list[int]:
    """"0-2,5" -> [0, 1, 2, 5] ([] for anything else)."""
    if not isinstance(ranges, str):
        return []
    out: list[int] = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            out.extend(range(int(first), int(last or first) + 1))
    return out


def throttle_count() -> int:
    """The CPUs' thermal throttle events since boot (0 where unreadable)."""
    total = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle/"
                          "core_throttle_count"):
        try:
            total += int(Path(path).read_text().strip() or 0)
        except (OSError, ValueError):
            continue
    return total


def busy_siblings(cpus: list[int]) -> dict[int, float]:
    """The SMT siblings of `cpus` (not themselves among them) busier than BUSY_SIBLING,
    with their busy share over SIBLING_SAMPLE_S."""
    siblings: set[int] = set()
    for cpu in cpus:
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/"
                        "thread_siblings_list").read_text().strip()
        except OSError:
            continue
        siblings.update(_cpus(text))
    siblings -= set(cpus)
    if not siblings:
        return {}
    before = _cpu_times()
    time.sleep(SIBLING_SAMPLE_S)
    after = _cpu_times()
    out = {}
    for cpu in sorted(siblings):
        if cpu in before and cpu in after:
            (busy0, total0), (busy1, total1) = before[cpu], after[cpu]
            share = (busy1 - busy0) / max(total1 - total0, 1)
            if share > BUSY_SIBLING:
                out[cpu] = share
    return out


def _cpu_times() -> dict[int, tuple[int, int]]:
    """Each CPU's (busy, total) jiffies from /proc/stat."""
    out: dict[int, tuple[int, int]] = {}
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            numbers = [int(v) for v in values[:8]]
            idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)
            out[int(name[3:])] = (sum(numbers) - idle, sum(numbers))
    return out
