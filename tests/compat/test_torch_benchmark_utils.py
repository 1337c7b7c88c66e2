"""The behaviours PyTorch's own test/benchmark_utils/test_benchmark_utils.py checks, checked
against torchmark: the Timer and its results, blocked and adaptive autorange on a modelled
clock, Measurement reprs and merge, Compare tables, Fuzzer determinism, the op fuzzers,
CallgrindStats / FunctionCounts arithmetic, C++ snippets and instruction counts.

Where torch's test holds expected output, the same computation is run through
torch.utils.benchmark itself and the two are compared; where torch's test names torch's
class paths or meets a difference listed in docs/compat.md, torchmark's documented
behaviour is checked instead.
"""

from __future__ import annotations

import collections
import random
import re
import shutil
import timeit
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torch.utils.benchmark as torch_benchmark

import torchmark as benchmark
import torchmark.op_fuzzers

from conftest import requires_valgrind

requires_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                  reason="no C++ compiler")
requires_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                 reason="no C compiler for callgrind's client-request helper")


def body(obj) -> list[str]:
    """A repr without its first line (`<module.Class object at 0x...>`)."""
    return repr(obj).splitlines()[1:]


def first_line(obj) -> str:
    return repr(obj).splitlines()[0]


# -- Timer --------------------------------------------------------------------------------

def test_timer_measures_real_statements():
    timer = benchmark.Timer(stmt="torch.ones(())")
    assert isinstance(timer.timeit(5).median, float)
    assert isinstance(timer.blocked_autorange(min_run_time=0.01).median, float)
    assert isinstance(timer.adaptive_autorange(threshold=0.5).median, float)
    multi_line = benchmark.Timer(
        stmt="""
        with torch.no_grad():
            y = x + 1""",
        setup="""
        x = torch.ones((1,), requires_grad=True)
        for _ in range(5):
            x = x + 1.0""",
    )
    m = multi_line.timeit(5)
    assert isinstance(m.median, float) and m.number_per_run == 5


class ModelledClock:
    """The clock model of torch's test, written afresh: `timeit(number)` costs a timer read,
    `number` runs of the statement and another timer read, each drawn from a normal
    distribution (relative noise 5%, at least 5 ns) from a numpy stream seeded per
    instance. Takes exactly the arguments torch's Timer passes its `_timer_cls`."""

    seed = 0
    timer_cost = 100e-9
    timer_noise = 0.05
    stmt_noise = 0.05
    stmt_costs = {
        "pass": 8e-9,
        "cheap_fn()": 4e-6,
        "expensive_fn()": 20e-6,
        "with torch.no_grad():\n    y = x + 1": 10e-6,
    }

    def __init__(self, stmt, setup, timer, globals):
        self._rng = np.random.RandomState(seed=self.seed)
        self._cost = self.stmt_costs[stmt]

    def _draw(self, mean: float, noise: float) -> float:
        return max(self._rng.normal(mean, mean * noise), 5e-9)

    def timeit(self, number: int) -> float:
        start = self._draw(self.timer_cost, self.timer_noise)
        work = self._draw(self._cost * number, self.stmt_noise)
        return start + work + self._draw(self.timer_cost, self.timer_noise)


class ModelledSyncClock(ModelledClock):
    """A clock that synchronizes a device: dearer reads, a faster expensive_fn()."""

    timer_cost = 10e-6
    stmt_costs = {"pass": 8e-9, "cheap_fn()": 4e-6, "expensive_fn()": 5e-6}


def timers_on(clock: type):
    """A torchmark Timer class and a torch Timer class that both read `clock`."""
    ours = type("OursOnModel", (benchmark.Timer,), {"_timer_cls": clock})
    theirs = type("TheirsOnModel", (torch_benchmark.Timer,), {"_timer_cls": clock})
    return ours, theirs


def assert_same_measurement(ours, theirs):
    assert ours.number_per_run == theirs.number_per_run
    assert ours.raw_times == theirs.raw_times
    assert body(ours) == body(theirs)
    assert re.fullmatch(r"<torchmark\.timing\.measurement\.Measurement object at 0x[0-9a-f]+>",
                        first_line(ours))


# (clock, stmt, method, measurements, runs per measurement), as torch's test expects
AUTORANGE_CASES = [
    (ModelledClock, "pass", "blocked", 125, 10_000_000),
    (ModelledClock, "pass", "adaptive", 6, 1_000_000),
    (ModelledClock, "cheap_fn()", "blocked", 252, 10_000),
    (ModelledClock, "cheap_fn()", "adaptive", 4, 1_000),
    (ModelledClock, "expensive_fn()", "blocked", 501, 1_000),
    (ModelledClock, "expensive_fn()", "adaptive", 4, 1_000),
    (ModelledSyncClock, "pass", "blocked", 13, 100_000_000),
    (ModelledSyncClock, "pass", "adaptive", 4, 10_000_000),
    (ModelledSyncClock, "cheap_fn()", "blocked", 25, 100_000),
    (ModelledSyncClock, "cheap_fn()", "adaptive", 4, 100_000),
    (ModelledSyncClock, "expensive_fn()", "blocked", 20, 100_000),
    (ModelledSyncClock, "expensive_fn()", "adaptive", 4, 10_000),
]


@pytest.mark.parametrize("clock, stmt, method, measurements, runs", AUTORANGE_CASES)
def test_blocked_and_adaptive_autorange_on_a_modelled_clock(clock, stmt, method, measurements,
                                                            runs):
    ours_cls, theirs_cls = timers_on(clock)

    def measure(cls):
        timer = cls(stmt)
        if method == "blocked":
            return timer.blocked_autorange(min_run_time=10)
        return timer.adaptive_autorange()

    ours = measure(ours_cls)
    assert (len(ours.times), ours.number_per_run) == (measurements, runs)
    assert_same_measurement(ours, measure(theirs_cls))


def test_statistics_of_a_modelled_measurement():
    ours_cls, _ = timers_on(ModelledClock)
    m = ours_cls("pass").blocked_autorange(min_run_time=10)
    assert m.mean == pytest.approx(8.0013658357956e-09, rel=1e-12)
    assert m.median == pytest.approx(7.983151323215967e-09, rel=1e-12)
    assert len(m.times) == 125 and m.number_per_run == 10_000_000


MULTI_LINE = """
        with torch.no_grad():
            y = x + 1
        """


@pytest.mark.parametrize("kwargs", [
    {},
    {"sub_label": "scalar_add"},
    {"label": "x + 1 (no grad)", "sub_label": "scalar_add"},
    {"setup": "setup_fn()", "sub_label": "scalar_add"},
    {"setup": """
        x = torch.ones((1,), requires_grad=True)
        for _ in range(5):
            x = x + 1.0""", "sub_label": "scalar_add",
     "description": "Multi-threaded scalar math!", "num_threads": 16},
], ids=["plain", "sub_label", "label", "setup", "everything"])
def test_measurement_repr_of_multi_line_and_labelled_tasks(kwargs):
    ours_cls, theirs_cls = timers_on(ModelledClock)
    ours = ours_cls(MULTI_LINE, **kwargs).blocked_autorange()
    assert (len(ours.times), ours.number_per_run) == (20, 1000)
    assert_same_measurement(ours, theirs_cls(MULTI_LINE, **kwargs).blocked_autorange())
    text = body(ours)
    if "label" in kwargs:
        assert text[0] == "x + 1 (no grad): scalar_add"
    elif "sub_label" in kwargs:
        assert text[0] == "stmt: (scalar_add)"
    assert text[-1].endswith("1 thread" if "num_threads" not in kwargs else "16 threads")


def test_a_single_measurement_repr_has_no_stray_space():
    """torch prints `1 measurement, 100 runs , 1 thread` (docs/compat.md)."""
    spec = dict(stmt="f()", setup="pass")
    ours = benchmark.Measurement(100, [1e-4], benchmark.TaskSpec(**spec))
    theirs = torch_benchmark.Measurement(100, [1e-4], torch_benchmark.TaskSpec(**spec))
    assert body(ours)[-1] == "  1 measurement, 100 runs, 1 thread"
    assert body(theirs)[-1] == body(ours)[-1].replace(" runs,", " runs ,")
    assert body(ours)[:-1] == body(theirs)[:-1]


def test_measurement_merge_pools_times_per_task():
    rng = random.Random(0)
    tasks = [dict(stmt="f()", setup="pass", label="L", sub_label=s, num_threads=n)
             for s in ("a", "b") for n in (1, 4)]
    blocks = [(t, [rng.uniform(1e-4, 2e-4) for _ in range(rng.randint(1, 4))], rng.choice(
        [10, 100])) for t in tasks for _ in range(3)]
    ours = benchmark.Measurement.merge(
        benchmark.Measurement(n, ts, benchmark.TaskSpec(**t)) for t, ts, n in blocks)
    theirs = torch_benchmark.Measurement.merge(
        torch_benchmark.Measurement(n, ts, torch_benchmark.TaskSpec(**t)) for t, ts, n in blocks)
    assert len(ours) == len(theirs) == 4
    for o, t in zip(ours, theirs, strict=True):
        assert o.number_per_run == t.number_per_run == 1
        assert o.times == pytest.approx(t.times, rel=1e-15, abs=0)
        assert o.task_spec.sub_label == t.task_spec.sub_label
        assert o.task_spec.num_threads == t.task_spec.num_threads
        assert body(o) == body(t)


# -- Compare ------------------------------------------------------------------------------

# (per-call overhead, cost per element) of three implementations of fn(i, j)
APPROACHES = {"overhead_optimized": (1e-6, 1e-9), "compute_optimized": (3e-6, 5e-10),
              "special_case (square)": (1e-6, 4e-10)}
SIZES = ((16, 16), (16, 128), (128, 128), (4096, 1024), (2048, 2048))


def compare_results(timer_base):
    results = []
    for i, j in SIZES:
        for sub_label, (overhead, per_element) in APPROACHES.items():
            if sub_label.startswith("special") and i != j:
                continue  # square inputs only
            clock = type("Clock", (ModelledClock,), {"stmt_costs": {
                f"fn({i}, {j})": overhead + per_element * i * j}})
            timer = type("T", (timer_base,), {"_timer_cls": clock})
            results.append(timer(f"fn({i}, {j})", label="fn", description=f"({i}, {j})",
                                 sub_label=sub_label).blocked_autorange(min_run_time=10))
    return results


def _cells(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|")] for line in table.splitlines()]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_compare_tables_and_colours_are_torchs():
    ours = benchmark.Compare(compare_results(benchmark.Timer))
    theirs = torch_benchmark.Compare(compare_results(torch_benchmark.Timer))
    table = str(ours)
    assert table == str(theirs)
    lines = [line.rstrip() for line in table.strip().splitlines()]
    assert re.fullmatch(r"\[-+ fn -+\]", lines[0])
    assert [cell.strip() for cell in lines[1].split("|")[1:]] == [str(s) for s in SIZES]
    assert lines[2].startswith("1 threads: ---")
    assert [line.split("|")[0].strip() for line in lines[3:6]] == list(APPROACHES)
    assert lines[-1] == "Times are in microseconds (us)."
    assert "|             |" in lines[5]  # no (16, 128) for the square-only approach
    for rowwise in (False, True):
        ours.colorize(rowwise=rowwise)
        theirs.colorize(rowwise=rowwise)
        assert str(ours) == str(theirs)
    assert "\x1b[92m\x1b[1m" in str(ours) and "\x1b[31m\x1b[1m" in str(ours)


def test_trimmed_tables_keep_two_figures_where_torch_keeps_one():
    """torch trims a column to the fewest figures any of its cells can claim: a noisy
    1.25 us beside 3.11 us prints as `1 | 3`; torchmark keeps two (`1.3 | 3.1`). Every
    other cell, and the colouring, are torch's (docs/compat.md)."""
    ours = benchmark.Compare(compare_results(benchmark.Timer))
    theirs = torch_benchmark.Compare(compare_results(torch_benchmark.Timer))
    ours.trim_significant_figures()
    theirs.trim_significant_figures()
    o, t = _cells(str(ours)), _cells(str(theirs))
    assert [len(row) for row in o] == [len(row) for row in t]
    differing = {(r, c) for r, (ro, rt) in enumerate(zip(o, t, strict=True))
                 for c, (a, b) in enumerate(zip(ro, rt, strict=True)) if a != b}
    assert differing == {(3, 1), (4, 1), (5, 1)}  # the (16, 16) column
    assert [o[r][1] for r in (3, 4, 5)] == ["1.3", "3.1", "1.1"]
    assert [t[r][1] for r in (3, 4, 5)] == ["1", "3", "1"]
    assert [row[2:] for row in o] == [row[2:] for row in t]
    for rowwise in (False, True):
        ours.colorize(rowwise=rowwise)
        theirs.colorize(rowwise=rowwise)
        o_lines, t_lines = str(ours).splitlines(), str(theirs).splitlines()
        assert [_ANSI.findall(line) for line in o_lines] == \
            [_ANSI.findall(line) for line in t_lines]
        assert _cells(_ANSI.sub("", str(ours))) == o


# -- Fuzzer -------------------------------------------------------------------------------

def test_fuzzer_is_deterministic_and_draws_torchs_tensors():
    def fuzzer(lib):
        return lib.Fuzzer(
            parameters=[lib.FuzzedParameter("n", minval=1, maxval=16,
                                            distribution="loguniform")],
            tensors=[lib.FuzzedTensor("x", size=("n",))],
            seed=0,
        )

    expected = [(0.7821, 0.0536, 0.9888, 0.1949, 0.5242, 0.1987, 0.5094),
                (0.7166, 0.5961, 0.8303, 0.005)]  # torch's test's values
    ours = [tensors["x"] for tensors, _, _ in fuzzer(benchmark).take(2)]
    for x, values in zip(ours, expected, strict=True):
        torch.testing.assert_close(x, torch.tensor(values), rtol=1e-3, atol=1e-3)
    again = [tensors["x"] for tensors, _, _ in fuzzer(benchmark).take(2)]
    theirs = [tensors["x"] for tensors, _, _ in fuzzer(torch_benchmark).take(2)]
    for a, b, c in zip(ours, again, theirs, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


OP_FUZZERS = [("binary", "BinaryOpFuzzer", {"x", "y"}), ("unary", "UnaryOpFuzzer", {"x"}),
              ("spectral", "SpectralOpFuzzer", {"x"}),
              ("sparse_unary", "UnaryOpSparseFuzzer", {"x"}),
              ("sparse_binary", "BinaryOpSparseFuzzer", {"x", "y"})]


@pytest.mark.parametrize("module, name, tensors", OP_FUZZERS)
def test_op_fuzzers_build_where_torchs_refuse_their_own_distributions(module, name, tensors):
    """torch's FuzzedParameter rejects normalized dict distributions, so every built-in op
    fuzzer fails at construction (docs/compat.md, Fuzzer)."""
    import importlib

    with pytest.raises(AssertionError, match="not normalized"):
        getattr(importlib.import_module(f"torch.utils.benchmark.op_fuzzers.{module}"),
                name)(seed=0)
    cls = getattr(importlib.import_module(f"torchmark.op_fuzzers.{module}"), name)
    assert cls is getattr(torchmark.op_fuzzers, name)
    first = [(t, p) for t, p, _ in cls(seed=0).preview(3)]
    again = [(t, p) for t, p, _ in cls(seed=0).preview(3)]
    assert len(first) == 3
    for (t1, p1), (t2, p2) in zip(first, again, strict=True):
        assert set(t1) == tensors and repr(p1) == repr(p2)  # properties hold numpy arrays
        assert {k: v.shape for k, v in t1.items()} == {k: v.shape for k, v in t2.items()}


# -- CallgrindStats / FunctionCounts (no valgrind) ------------------------------------------

def _profile(seed: int, scale: int) -> list[tuple[int, str]]:
    """Made-up (count, function) rows in callgrind's `file:function [object]` form: long
    C++ names, CPython and libc entries, and the dict lookups denoise drops."""
    rng = random.Random(seed)
    libs = ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/opt/env/lib/python3.11/site-packages/"
            "torch/lib/libtorch_cpu.so", "/opt/env/lib/python3.11/site-packages/torch/lib/"
            "libtorch_python.so", "/opt/env/bin/python3.11"]
    names = ["???:malloc", "???:free", "???:_int_free", "???:__tls_get_addr",
             "/tmp/build/cpython/Python/ceval.c:_PyEval_EvalFrameDefault",
             "/tmp/build/cpython/Objects/dictobject.c:lookdict_unicode",
             "/tmp/build/cpython/Objects/dictobject.c:lookdict_unicode_nodummy",
             "/tmp/build/cpython/Objects/tupleobject.c:PyTuple_New"]
    names += [f"/data/users/someone/pytorch/build/../aten/src/ATen/core/op_{k}.cpp:at::native"
              f"::op_{k}(at::Tensor const&, c10::Scalar const&, std::optional<at::Tensor>)"
              for k in range(30)]
    rows = []
    for name in names:
        lib = libs[rng.randrange(len(libs))]
        rows.append((scale * rng.randrange(1, 500) + rng.randrange(100), f"{name} [{lib}]"))
    return rows


def _stats(lib, stmt: str, seed: int):
    def counts(rows, inclusive):
        data = tuple(sorted((lib.FunctionCount(c, fn) for c, fn in rows), reverse=True))
        return lib.FunctionCounts(data, inclusive=inclusive)

    base = _profile(100, 1)
    exclusive = _profile(seed, 1000)
    inclusive = [(c * 3, fn) for c, fn in exclusive]
    return lib.CallgrindStats(
        lib.TaskSpec(stmt, "pass"), number_per_run=1000, built_with_debug_symbols=True,
        baseline_inclusive_stats=counts([(c * 2, fn) for c, fn in base], True),
        baseline_exclusive_stats=counts(base, False),
        stmt_inclusive_stats=counts(inclusive, True),
        stmt_exclusive_stats=counts(exclusive, False), stmt_callgrind_out=None)


def test_callgrind_stats_arithmetic_and_reprs_are_torchs():
    ours = [_stats(benchmark, "y = torch.ones(())", 1), _stats(benchmark, "y = torch.ones((1,))", 2)]
    theirs = [_stats(torch_benchmark, "y = torch.ones(())", 1),
              _stats(torch_benchmark, "y = torch.ones((1,))", 2)]
    (no_data, with_data), (t_no_data, t_with_data) = ours, theirs

    assert re.fullmatch(r"<torchmark\.callgrind\.stats\.CallgrindStats object at 0x[0-9a-f]+>",
                        first_line(no_data))
    assert body(no_data) == body(t_no_data)
    assert no_data.counts() == t_no_data.counts()
    assert no_data.counts(denoise=True) == t_no_data.counts(denoise=True) < no_data.counts()
    for inclusive in (False, True):
        assert body(no_data.stats(inclusive=inclusive)) == \
            body(t_no_data.stats(inclusive=inclusive))

    wide = benchmark.FunctionCounts(no_data.stats(inclusive=False)._data, False, _linewidth=160)
    t_wide = torch_benchmark.FunctionCounts(t_no_data.stats(inclusive=False)._data, False,
                                            _linewidth=160)
    assert body(wide) == body(t_wide)
    assert all(len(line) <= 160 for line in repr(wide).splitlines())
    assert any(" ... " in line for line in body(no_data.stats()))

    # `delta` is a convenience for subtracting the stats
    assert with_data.delta(no_data)._data == (with_data.stats() - no_data.stats())._data
    assert body(no_data.as_standardized().stats()) == \
        body(t_no_data.as_standardized().stats())
    deltas = with_data.as_standardized().delta(no_data.as_standardized())
    t_deltas = t_with_data.as_standardized().delta(t_no_data.as_standardized())
    assert re.fullmatch(
        r"<torchmark\.callgrind\.function_counts\.FunctionCounts object at 0x[0-9a-f]+>",
        first_line(deltas))
    assert body(deltas) == body(t_deltas)
    assert len(deltas) == len(t_deltas) and min(c for c, _ in deltas) < 0 < deltas[0].count

    def custom_transforms(fn: str) -> str:
        fn = re.sub(r"^.*build/\.\./", "", fn)
        return re.sub(r"\(.*\)$", "(...)", fn)

    assert body(deltas.transform(custom_transforms)) == \
        body(t_deltas.transform(custom_transforms))
    unknown = deltas.filter(lambda fn: fn.startswith("???"))
    assert body(unknown) == body(t_deltas.filter(lambda fn: fn.startswith("???")))
    assert len(unknown) == 4
    assert body(deltas[:5]) == body(t_deltas[:5])
    assert body(deltas.denoise()) == body(t_deltas.denoise())


def test_denoise_also_drops_the_dict_lookup_python_311_renamed():
    """docs/compat.md: torch's denoise matches `lookdict_unicode` only."""
    rows = ((50, "Objects/dictobject.c:unicodekeys_lookup_unicode"),
            (40, "Objects/dictobject.c:lookdict_unicode"), (30, "???:malloc"))
    ours = benchmark.FunctionCounts(tuple(benchmark.FunctionCount(*r) for r in rows), False)
    theirs = torch_benchmark.FunctionCounts(
        tuple(torch_benchmark.FunctionCount(*r) for r in rows), False)
    assert ours.denoise().sum() == 30
    assert theirs.denoise().sum() == 80


# -- C++ snippets -------------------------------------------------------------------------

GUARDED_STMT = """
    #ifndef TIMER_GLOBAL_CHECK
    static_assert(false);
    #endif

    torch::Tensor y = x + 1;
"""


@pytest.fixture(scope="module")
def cpp_timers():
    """The two snippets of torch's C++ checks, compiled side by side (each compile is
    single-threaded; cached builds return at once)."""
    tiny = benchmark.Timer("auto x = 1;(void)x;", timer=timeit.default_timer,
                           language=benchmark.Language.CPP)
    guarded = benchmark.Timer(GUARDED_STMT, setup="torch::Tensor x = torch::empty({1});",
                              global_setup="#define TIMER_GLOBAL_CHECK",
                              timer=timeit.default_timer, language=benchmark.Language.CPP)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda t: t.timeit(1), (tiny, guarded)))
    return tiny, guarded


@pytest.mark.compiler
@requires_cxx
def test_cpp_snippet_with_setup_and_global_setup_times(cpp_timers):
    _tiny, guarded = cpp_timers
    t = guarded.timeit(10)  # global_setup reaches the statement: it compiled
    assert isinstance(t.median, float) and t.number_per_run == 10
    m = guarded.blocked_autorange(min_run_time=0.05)
    assert isinstance(m.median, float) and m.median > 0


@pytest.mark.compiler
@requires_cxx
def test_a_tiny_cpp_snippet_the_compiler_removed_is_a_clear_error(cpp_timers):
    """Torch skips this test upstream (its blocked_autorange never ends when g++ -O2
    removes the loop around a statement with no effect); torchmark says what happened."""
    tiny, _guarded = cpp_timers
    assert tiny.timeit(10_000_000).median < 1e-11  # about 0 ns a run: no loop is left
    for measure in (tiny.blocked_autorange, tiny.adaptive_autorange):
        with pytest.raises(ValueError, match="less than a clock cycle"):
            measure()


@pytest.mark.compiler
@pytest.mark.valgrind
@requires_cxx
@requires_valgrind
@requires_cc
@pytest.mark.slow
def test_cpp_instruction_counts_are_deterministic(cpp_timers):
    _tiny, guarded = cpp_timers
    stats = [guarded.collect_callgrind() for _ in range(3)]
    counts = [s.counts() for s in stats]
    assert min(counts) > 0, "no instructions counted"
    assert min(counts) == max(counts), "C++ counts should be deterministic"
    for s in stats:
        assert s.counts(denoise=True) == s.counts(denoise=False)  # no Python to denoise
    repeated = guarded.collect_callgrind(number=1000, repeats=10)
    assert isinstance(repeated, tuple) and len(repeated) == 10
    totals = collections.Counter(s.counts(denoise=True) // 10_000 * 10_000 for s in repeated)
    assert max(totals.values()) > 1, totals


# -- collect_callgrind --------------------------------------------------------------------

@pytest.mark.valgrind
@requires_valgrind
@requires_cc
def test_collect_callgrind_with_globals_and_repeats():
    from compat_helpers import MyModule

    @torch.jit.script
    def add_one(x):
        return x + 1

    # torch requires every global wrapped in CopyIfCallgrind and cannot load a module whose
    # class the counted process cannot import; torchmark sends plain values and modules of
    # importable classes as they are (docs/compat.md, Instruction counts)
    timer = benchmark.Timer(
        "y = add_one(x) + k + j + model(x) + bare(x)",
        setup="x = torch.ones((1,))",
        globals={
            "add_one": benchmark.CopyIfCallgrind(add_one),
            "k": benchmark.CopyIfCallgrind(5),
            "model": benchmark.CopyIfCallgrind(MyModule(),
                                               setup="from compat_helpers import MyModule"),
            "bare": MyModule(),
            "j": 1,
        },
    )
    counts = timer.collect_callgrind(number=100).counts(denoise=False)
    assert isinstance(counts, int) and counts > 0

    repeated = benchmark.Timer("x += 1", setup="x = torch.ones((1,))").collect_callgrind(
        number=1000, repeats=10)
    assert isinstance(repeated, tuple) and len(repeated) == 10
    totals = collections.Counter(s.counts(denoise=True) // 10_000 * 10_000 for s in repeated)
    assert max(totals.values()) > 1, f"every instruction count total was unique: {totals}"
    # torchmark's repeats each fork the same warmed-up process: they agree exactly or
    # within a few instructions
    exact = [s.counts() for s in repeated]
    assert (max(exact) - min(exact)) / min(exact) < 1e-3
