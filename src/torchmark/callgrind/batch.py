"""Counting many statements in one call, on one or more valgrind hosts."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any

from torchmark.callgrind.collector import Host, default_host, median_repeat
from torchmark.callgrind.stats import CallgrindStats

DEFAULT_REPEATS = 3


def result_for(stats: tuple[CallgrindStats, ...], repeats: int | None):
    """What collect_callgrind returns: the median repeat, or every repeat when asked."""
    return median_repeat(stats) if repeats is None else stats


def collect_many(
    timers: Sequence[Any],
    number: int = 100,
    *,
    repeats: int | None = None,
    collect_baseline: bool = True,
    workers: int = 1,
    return_exceptions: bool = False,
) -> list[Any]:
    """`collect_callgrind` for many Timers, paying valgrind's start-up once per worker.

    Returns one result per timer, in order: a CallgrindStats (the median of
    3 repeats when `repeats` is None) or a tuple of `repeats` of them. With
    `return_exceptions`, a timer that fails gives its exception and the others go on.
    """
    from torchmark.core.task_spec import Language

    if workers < 1:
        raise ValueError(f"collect_many: workers must be >= 1, got {workers}")
    # the process's own host (warm once used) serves first; more workers add hosts
    hosts = [default_host()] + [Host() for _ in range(min(workers, len(timers)) - 1)]
    try:
        # valgrind brings up Python and torch while C++ snippets compile
        if any(t.language is Language.CPP for t in timers):
            for h in hosts:
                h.launch()
        requests: list[Any] = []
        for timer in timers:
            try:  # a C++ snippet compiles here: its CompileError is that timer's result
                requests.append(timer._callgrind_request(number, repeats, collect_baseline))
            except Exception as e:
                if not return_exceptions:
                    raise
                requests.append(e)
        return _collect(requests, hosts, repeats, return_exceptions)
    finally:
        for h in hosts[1:]:
            h.close()


def _collect(requests: list, hosts: list[Host], repeats: int | None,
             return_exceptions: bool) -> list[Any]:
    results: list[Any] = [None] * len(requests)
    pending: queue.Queue[int] = queue.Queue()
    for i in range(len(requests)):
        pending.put(i)

    def work(host: Host) -> None:
        while True:
            try:
                i = pending.get_nowait()
            except queue.Empty:
                return
            if isinstance(requests[i], Exception):
                results[i] = requests[i]
                continue
            try:
                results[i] = result_for(host.run(requests[i]), repeats)
            except Exception as e:  # kept per timer; re-raised below unless asked not to
                results[i] = e

    if len(hosts) == 1:
        work(hosts[0])
    else:
        threads = [threading.Thread(target=work, args=(h,)) for h in hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if not return_exceptions:
        for r in results:
            if isinstance(r, Exception):
                raise r
    return results

