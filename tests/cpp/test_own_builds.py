"""Waiting for this process's background header builds from several threads at once."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from torchmark.cpp import compile_cache


class SlowBuild:
    """Stands in for a compiler process: wait() returns after a short while."""

    def __init__(self) -> None:
        self.waits = 0
        self._lock = threading.Lock()

    def wait(self) -> int:
        with self._lock:
            self.waits += 1
        time.sleep(0.2)
        return 0


def test_threads_waiting_for_the_same_build_all_return(monkeypatch):
    build = SlowBuild()
    monkeypatch.setattr(compile_cache, "_OWN_BUILDS", [build])
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: compile_cache.wait_for_own_builds(), range(4)))
    assert results == [None] * 4
    assert compile_cache._OWN_BUILDS == []
    assert build.waits >= 1
