"""Shared fixtures: a deterministic fake clock for Timer, measurement builders, and a
simulated GPU behind torch.cuda (CI has none)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from torchmark import Measurement, TaskSpec

import pg_cluster

# Tests use private callgrind hosts (closed at exit); the shared one is tested on its own.
os.environ["TORCHMARK_CALLGRIND_KEEPALIVE"] = "0"
# Compiled snippets, the precompiled header and the callgrind helper go to the checkout's
# build/ folder (ignored by git, removed by `make clean`), never to the user's cache; kept
# between runs so that a second `make test` compiles nothing.
os.environ["TORCHMARK_CACHE_DIR"] = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "build", "test-cache")
# What the commands under test record goes to a throw-away store, never the user's.
os.environ["TORCHMARK_DB"] = os.path.join(tempfile.mkdtemp(prefix="torchmark-tests-"),
                                          "store.db")


class FakeTimeitTimer:
    """Stands in for `timeit.Timer`: `timeit(number)` returns a modelled time, no sleeping.

    cost(number) = overhead + number * per_run * (1 + noise), noise drawn from a seeded
    generator so every run of a test sees the same sequence.
    """

    per_run = 2e-6
    overhead = 1e-7
    noise = 0.02
    seed = 0

    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self.stmt, self.setup, self.timer, self.globals = stmt, setup, timer, globals
        self.calls: list[int] = []
        self._rng = random.Random(self.seed)

    def timeit(self, number: int) -> float:
        self.calls.append(number)
        jitter = 1 + self.noise * (2 * self._rng.random() - 1)
        return self.overhead + number * self.per_run * jitter


def make_measurement(median: float, spread: float = 0.02, n: int = 20, number: int = 100,
                     seed: int = 0, metadata: dict | None = None,
                     **task: object) -> Measurement:
    """A Measurement whose per-run times lie around `median` with relative `spread`."""
    rng = random.Random(seed)
    times = [median * (1 + spread * (2 * rng.random() - 1)) * number for _ in range(n)]
    task.setdefault("stmt", "f(x)")
    task.setdefault("setup", "pass")
    return Measurement(number_per_run=number, raw_times=times, task_spec=TaskSpec(**task),
                       metadata=metadata)


@pytest.fixture
def fake_timer_cls():
    return FakeTimeitTimer


def deliverable_sigint() -> None:
    """A child process's `preexec_fn`: SIGINT handled and not blocked, whatever the test
    process inherited or an earlier test's library left in its signal state (a child
    inherits both)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def exit_of(proc: subprocess.Popen, timeout: float) -> tuple[bytes, bytes]:
    """The child's stdout and stderr once it has exited. A child still running after
    `timeout` seconds fails the test with its threads' stacks (it must have been started
    with PYTHONFAULTHANDLER=1: SIGABRT then prints them)."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=60)
        pytest.fail(f"the child was still running {timeout:.0f} s later; its stacks:\n"
                    + err[-8000:].decode(errors="replace"))


def say_made_with_torch(path, version: str) -> None:
    """Rewrite a results file's header (its first line) as if made with torch `version`."""
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["system"]["torch"] = version
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")


requires_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                       reason="valgrind is not installed")


class FakeGpu:
    """A device clock that kernels advance; what the fake CUDA API records. With
    `host_clock`, events also read the host's clock (for ops that really run on the CPU)."""

    def __init__(self):
        self.now = 0.0
        self.host_clock = False
        self.current = 0
        self.capturing: list | None = None
        self.flushes = self.spins = 0
        self.flush_clean: list[bool] = []  # each L2Flusher made: whether it flushes clean
        self.spin_seconds: list[float] = []
        self.peak_bytes = 0
        self.devices_used: set[int] = set()
        self.log: list[tuple[str, object]] = []  # ("spin" | "record" | "sync" | "capture", arg)
        self.syncs = 0  # the host waited the device out this many times

    def host_sync(self) -> None:
        """What `.item()` or `nonzero` does: the host waits until the device is done."""
        self.syncs += 1

    def kernel(self, seconds: float) -> None:
        self.devices_used.add(self.current)
        if self.capturing is not None:
            self.capturing.append(seconds)
        else:
            self.now += seconds


def install_fake_cuda(monkeypatch, gpu: FakeGpu) -> None:
    """Replace torch.cuda's entry points that torchmark's GPU code calls."""
    import torch

    import torchmark.timing.l2 as l2_module
    from torchmark.timing import clocks, device_time, gpu_sampler

    cuda = torch.cuda

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            gpu.log.append(("record", None))
            self.t = gpu.now + (time.perf_counter() if gpu.host_clock else 0.0)
            self.syncs_before = gpu.syncs

        def query(self):  # the device runs what was queued only when the host waits for it
            return gpu.syncs > self.syncs_before

        def elapsed_time(self, end):  # milliseconds, as CUDA's
            return (end.t - self.t) * 1000.0

    class Graph:
        def __init__(self):
            self.kernels: list[float] = []

        def replay(self):
            for seconds in self.kernels:
                gpu.kernel(seconds)

    @contextlib.contextmanager
    def graph(g, pool=None, stream=None, **kwargs):
        gpu.log.append(("capture", stream.device if stream is not None else None))
        gpu.capturing = g.kernels
        try:
            yield
        finally:
            gpu.capturing = None

    @contextlib.contextmanager
    def device(d):
        previous, gpu.current = gpu.current, torch.device(d).index or 0
        try:
            yield
        finally:
            gpu.current = previous

    class Stream:
        def __init__(self, device=None, **kwargs):
            self.device = gpu.current if device is None else torch.device("cuda", device).index

        def wait_stream(self, other):
            pass

    def synchronize(d=None):
        gpu.log.append(("sync", d))
        gpu.host_sync()

    class Props:
        name, clock_rate, L2_cache_size, uuid = "fake", 1_000_000, 1 << 20, None

    def sleep(cycles):  # clock_rate 1e6 kHz: a cycle is a nanosecond
        gpu.log.append(("spin", cycles))
        gpu.spins += 1
        gpu.spin_seconds.append(cycles / 1e9)
        gpu.kernel(cycles / 1e9)

    class Flusher:
        def __init__(self, dev, clean=False):
            gpu.flush_clean.append(clean)

        def flush(self):
            gpu.flushes += 1
            gpu.kernel(1e-3)  # takes device time, which the events must not see

    for name, value in dict(
            is_available=lambda: True, device_count=lambda: 2, Event=Event, CUDAGraph=Graph, graph=graph,
            device=device, Stream=Stream, stream=lambda s: contextlib.nullcontext(),
            current_stream=lambda d=None: Stream(d), current_device=lambda: gpu.current,
            synchronize=synchronize, get_device_properties=lambda d: Props(),
            _sleep=sleep, reset_peak_memory_stats=lambda d=None: None,
            memory_allocated=lambda d=None: 0,
            max_memory_allocated=lambda d=None: gpu.peak_bytes).items():
        monkeypatch.setattr(cuda, name, value, raising=False)
    monkeypatch.setattr(l2_module, "L2Flusher", Flusher)
    monkeypatch.setattr(gpu_sampler, "spin_rate", lambda torch: 1e9)  # as sleep() above
    monkeypatch.setattr(clocks, "_device_synchronize", lambda: synchronize)  # timer() syncs
    monkeypatch.setattr(device_time, "SmClock", type("NoClock", (), {
        "for_device": classmethod(lambda cls, t, d: cls()), "note": "",
        "ratio": lambda self: None}))


@pytest.fixture
def fake_gpu(monkeypatch):
    """A simulated GPU behind torch.cuda (see FakeGpu), for CUDA control flow on the CPU."""
    fake = FakeGpu()
    install_fake_cuda(monkeypatch, fake)
    return fake


# -- the result store's backends --------------------------------------------------------

@pytest.fixture(scope="session")
def postgres():
    missing = [n for n in ("initdb", "pg_ctl", "postgres") if pg_cluster.pg_bin(n) is None]
    if missing:
        pytest.skip(f"PostgreSQL server binaries not found: {', '.join(missing)}")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'torchmark[postgres]')")
    if os.getuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL")
    cluster = pg_cluster.PostgresCluster()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A fresh, empty store of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres").new_database()


# -- a real browser: Debian's Chromium driven by playwright (never `playwright install`) --

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    playwright_api = pytest.importorskip("playwright.sync_api",
                                         reason="playwright is not installed")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no browser at {CHROMIUM} (apt-get install -y chromium)")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield browser
        browser.close()
