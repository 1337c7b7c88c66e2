"""The pytest plugin's hooks (entry point `pytest11: torchmark`): the `--torchmark-*`
options, the `torchmark` marker and fixture, whole tests measured under the marker,
each test's Results put on its report (pytest-xdist carries a report's attributes to its
controller, so the process that reports sees every worker's), and the session's end
(session.py). Start-up reads the options only: torch and the store are imported when a
test measures, or when --torchmark-baseline is read."""

from __future__ import annotations

from typing import Any

import pytest

from torchmark.core.errors import UsageError
from torchmark.pytest_plugin.fixture import RESULTS
from torchmark.pytest_plugin.options import METRICS, Settings
from torchmark.pytest_plugin.session import REPORT_ATTR

SETTINGS = pytest.StashKey[Settings]()
MARKER = "torchmark"


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("torchmark", "torchmark benchmarks (docs/pytest.md)")
    group.addoption("--torchmark-only", action="store_true",
                    help="Run only the tests that benchmark (the torchmark fixture or marker).")
    group.addoption("--torchmark-skip", action="store_true",
                    help="Skip the tests that benchmark.")
    group.addoption("--torchmark-disable", action="store_true",
                    help="Run each benchmark's code once, untimed, recording nothing (a "
                         "plain test run).")
    group.addoption("--torchmark-store", metavar="URL", default=None,
                    help="The result store: a SQLite file or path, or postgresql+psycopg://"
                         "... [default: $TORCHMARK_DB, else results.db in the user data "
                         "folder].")
    group.addoption("--torchmark-no-store", action="store_true",
                    help="Do not record the results in the store (TORCHMARK_NO_STORE=1 "
                         "does the same).")
    group.addoption("--torchmark-env", metavar="LABEL", default=None,
                    help="The run's environment label [default: $TORCHMARK_ENV].")
    group.addoption("--torchmark-baseline", metavar="REF", default=None,
                    help="Compare with a run id, latest, commit:SHA, env:LABEL, or a "
                         "results file.")
    group.addoption("--torchmark-allow-env-diff", action="store_true", default=False,
                    help="Compare with the baseline even when its environment differs in "
                         "what changes performance (hardware, torch build, threads); the "
                         "verdicts are then marked.")
    group.addoption("--torchmark-fail-slower", metavar="SHARE", default=None,
                    help="Fail the session when a case is slower than the baseline by more "
                         "than this (5%% or 0.05), with confidence.")
    group.addoption("--torchmark-metric", choices=METRICS, default=None,
                    help="What to measure: wall time (default), device time (CUDA "
                         "events), instructions (callgrind: exact) or memory (peak bytes "
                         "and bytes allocated a call, from torch's allocator: exact). A "
                         "marker's metric wins.")
    group.addoption("--torchmark-json", metavar="FILE", default=None,
                    help="Also write the results to FILE (JSON lines of Results).")
    group.addoption("--torchmark-min-run-time", metavar="SECONDS", type=float,
                    default=None,
                    help="Seconds of timed runs a benchmark [default: 0.2]; a marker's "
                         "min_run_time wins.")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(min_run_time=, num_threads=, device=, metric=, group=, l2=, "
                   "number=, compile=): benchmark this test with torchmark (the whole test unless it "
                   "uses the torchmark fixture, which the options then steer)")
    try:
        settings = Settings.from_options(config.getoption)
        from torchmark.store.store import recording_off

        if not (settings.disabled or settings.no_store or recording_off()):
            from torchmark.store.recorder import store_wait

            store_wait()  # a bad TORCHMARK_STORE_WAIT: said before anything runs
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[SETTINGS] = settings
    if not hasattr(config, "workerinput"):  # a pytest-xdist worker reports to its controller
        from torchmark.pytest_plugin.session import start

        start(config, settings)


def _benchmarks(item: Any) -> bool:
    return MARKER in getattr(item, "fixturenames", ()) or \
        item.get_closest_marker(MARKER) is not None


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    settings = config.stash[SETTINGS]
    if not (settings.only or settings.skip):
        return
    for item in items:
        if settings.only and not _benchmarks(item):
            item.add_marker(pytest.mark.skip(reason="not a benchmark (--torchmark-only)"))
        elif settings.skip and _benchmarks(item):
            item.add_marker(pytest.mark.skip(reason="a benchmark (--torchmark-skip)"))


@pytest.fixture
def torchmark(request: Any) -> Any:
    """Benchmark with torchmark: `torchmark(fn, *args, **kwargs)` measures `fn` and
    returns what it returns; `torchmark.timeit(stmt, setup, globals)`;
    `torchmark.pedantic(fn, args, kwargs, setup=, rounds=, warmup_rounds=,
    iterations=)`. Options: `@pytest.mark.torchmark(min_run_time=, num_threads=,
    device=, metric=, group=, l2=, number=, compile=)` (compile=True: the call is a
    torch.compile one, its compile time and its wall time beside eager's measured)."""
    from torchmark.pytest_plugin.fixture import TorchmarkFixture

    return TorchmarkFixture(request.node, request.config.stash[SETTINGS])


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: Any) -> bool | None:
    """A test under the marker that does not use the fixture: measured whole."""
    if pyfuncitem.get_closest_marker(MARKER) is None or \
            MARKER in pyfuncitem.fixturenames:
        return None
    settings = pyfuncitem.config.stash[SETTINGS]
    if settings.disabled:
        return None
    from torchmark.pytest_plugin.fixture import benchmark_test

    benchmark_test(pyfuncitem, settings)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    report = yield
    results = item.stash.get(RESULTS, None)
    if results and call.when == "call":
        setattr(report, REPORT_ATTR, [r.to_json() for r in results])
    return report
