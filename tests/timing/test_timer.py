"""Timer: the measurement algorithms (driven by a fake clock), threads, globals, errors."""

from __future__ import annotations

import timeit

import pytest
import torch

import torchmark
from torchmark import Language, Timer
from torchmark.timing import timer_class

from conftest import FakeTimeitTimer


@pytest.fixture
def fake(monkeypatch):
    """Install the fake clock class on both torchmark's and torch's Timer."""
    monkeypatch.setattr(Timer, "_timer_cls", FakeTimeitTimer)
    return FakeTimeitTimer


def torch_timer_with(fake_cls, **kwargs):
    from torch.utils.benchmark import Timer as TorchTimer

    class Patched(TorchTimer):
        _timer_cls = fake_cls

    return Patched(**kwargs)


def test_fake_clock_is_constructed_with_the_documented_arguments(fake):
    t = Timer("x + 1", setup="\n    x = 1\n", globals={"x": 3})
    inner = t._timer
    assert isinstance(inner, FakeTimeitTimer)
    assert inner.stmt == "x + 1" and inner.setup == "x = 1"
    assert inner.globals["x"] == 3 and inner.globals["torch"] is torch
    assert inner.timer is torchmark.timer


@pytest.mark.parametrize("per_run", [1e-8, 2e-6, 3e-4, 0.05])
def test_blocked_autorange_matches_torch_algorithm(monkeypatch, per_run):
    cls = type("Fake", (FakeTimeitTimer,), {"per_run": per_run})
    monkeypatch.setattr(Timer, "_timer_cls", cls)
    ours = Timer("f()").blocked_autorange(min_run_time=0.2)
    theirs = torch_timer_with(cls, stmt="f()").blocked_autorange(min_run_time=0.2)
    assert ours.number_per_run == theirs.number_per_run
    assert ours.raw_times == theirs.raw_times
    assert sum(ours.raw_times) >= 0.2


def test_blocked_autorange_times_min_blocks_at_least(monkeypatch):
    cls = type("Fake", (FakeTimeitTimer,), {"per_run": 0.05})  # blocks of 1 run: 0.05 s
    monkeypatch.setattr(Timer, "_timer_cls", cls)
    assert len(Timer("f()").blocked_autorange(min_run_time=0.2).raw_times) < 7
    m = Timer("f()").blocked_autorange(min_run_time=0.2, min_blocks=7)
    assert m.number_per_run == 1 and len(m.raw_times) == 7
    with pytest.raises(ValueError, match="min_blocks must be a positive int, got 0"):
        Timer("f()").blocked_autorange(min_blocks=0)


@pytest.mark.parametrize("noise", [0.0, 0.02, 0.4])
def test_adaptive_autorange_matches_torch_algorithm(monkeypatch, noise):
    cls = type("Fake", (FakeTimeitTimer,), {"per_run": 5e-6, "noise": noise})
    monkeypatch.setattr(Timer, "_timer_cls", cls)
    ours = Timer("f()").adaptive_autorange(threshold=0.05, max_run_time=1.0)
    theirs = torch_timer_with(cls, stmt="f()").adaptive_autorange(threshold=0.05,
                                                                  max_run_time=1.0)
    assert ours.number_per_run == theirs.number_per_run
    assert ours.raw_times == theirs.raw_times


def test_adaptive_stops_on_low_noise_and_runs_to_max_on_high(monkeypatch):
    quiet = type("Quiet", (FakeTimeitTimer,), {"noise": 0.0})
    monkeypatch.setattr(Timer, "_timer_cls", quiet)
    m = Timer("f()").adaptive_autorange(threshold=0.1, min_run_time=0.01)
    # stops at the first block where both hold: more than 3 blocks, min_run_time spent
    assert len(m.raw_times) >= 4 and sum(m.raw_times) >= 0.01
    assert len(m.raw_times) == 4 or sum(m.raw_times[:-1]) < 0.01
    noisy = type("Noisy", (FakeTimeitTimer,), {"noise": 0.9})
    monkeypatch.setattr(Timer, "_timer_cls", noisy)
    m = Timer("f()").adaptive_autorange(threshold=0.001, max_run_time=0.5)
    assert 0.5 < sum(m.raw_times) < 0.5 + 2 * max(m.raw_times)


def test_block_size_chosen_from_overhead(fake):
    t = Timer("f()")
    number = t._estimate_block_size(min_run_time=0.2)
    # overhead 1e-7: needs number * 2e-6 >= 1e-7 / 1e-4 = 1e-3 s -> number = 1000
    assert number == 1000
    assert t._timer.calls[:5] == [0] * 5


def test_timeit_warms_up_then_measures(fake):
    t = Timer("f()")
    m = t.timeit(500)
    assert t._timer.calls == [5, 500]
    assert m.number_per_run == 500 and len(m.raw_times) == 1
    assert m.median == pytest.approx(2e-6, rel=0.05)


def test_repeat_and_autorange(monkeypatch):
    monkeypatch.setattr(Timer, "_timer_cls", type("Q", (FakeTimeitTimer,), {"noise": 0.0}))
    m = Timer("f()").repeat(repeat=3, number=50)
    assert len(m.raw_times) == 3 and m.number_per_run == 50
    seen = []
    m = Timer("f()").autorange(callback=lambda n, t: seen.append(n))
    # 2 us per run: 0.2 s needs 100000 runs
    assert m.number_per_run == 100000 and seen[-1] == 100000
    assert seen[:6] == [1, 2, 5, 10, 20, 50]


def test_callback_sees_each_block(fake):
    seen = []
    m = Timer("f()").blocked_autorange(callback=lambda n, t: seen.append((n, t)),
                                       min_run_time=0.05)
    assert [t for _, t in seen] == m.raw_times
    assert all(n == m.number_per_run for n, _ in seen)


def test_threads_set_during_measurement_and_restored():
    before = torch.get_num_threads()
    target = 2 if before != 2 else 1
    seen = []
    t = Timer("seen.append(torch.get_num_threads())", globals={"seen": seen},
              num_threads=target)
    t.timeit(3)
    assert set(seen) == {target}
    assert torch.get_num_threads() == before


def test_real_timer_runs_setup_once_and_uses_globals():
    calls = []
    t = Timer("y = x * 2", setup="calls.append(1)\nx = torch.ones(4)", globals={"calls": calls})
    m = t.blocked_autorange(min_run_time=0.01)
    assert m.median > 0
    assert calls  # setup ran (timeit runs it once per timeit() call)


def test_stmt_and_setup_dedented():
    t = Timer("""
        a = 1
        b = a + 1
    """, setup="""
        import math
    """)
    assert t.task_spec.stmt == "a = 1\nb = a + 1"
    assert t.task_spec.setup == "import math"
    t.timeit(2)


def test_torch_available_implicitly_and_not_overridden():
    Timer("torch.empty(())").timeit(2)
    marker = object()
    t = Timer("pass", globals={"torch": marker})
    assert t._globals["torch"] is marker


def test_default_timer_is_used_for_python():
    assert Timer("pass")._timer.timer is torchmark.timer


@pytest.mark.parametrize("kwargs, message", [
    ({"stmt": 3}, "stmt must be a str"),
    ({"setup": None}, "setup must be a str"),
    ({"num_threads": 0}, "num_threads"),
    ({"num_threads": 1.5}, "num_threads"),
    ({"language": "rust"}, "invalid language"),
    ({"global_setup": "#include <x>"}, "global_setup is for C\\+\\+"),
    ({"globals": [1]}, "globals must be a dict"),
    ({"description": 64}, "description must be a str or None, got 64"),
    ({"label": 3}, "label must be a str or None"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Timer(**kwargs)


@pytest.mark.parametrize("call, message", [
    (lambda t: t.timeit(0), "number"),
    (lambda t: t.blocked_autorange(min_run_time=-1), "min_run_time"),
    (lambda t: t.adaptive_autorange(threshold=-0.1), "threshold"),
    (lambda t: t.repeat(repeat=0), "repeat"),
    # values that would never let the loop end
    (lambda t: t.blocked_autorange(min_run_time=float("inf")), "min_run_time must be a finite"),
    (lambda t: t.adaptive_autorange(threshold=0, max_run_time=0), "max_run_time must be > 0"),
    (lambda t: t.adaptive_autorange(max_run_time=None), r"max_run_time must be > 0 .*None"),
    (lambda t: t.adaptive_autorange(min_run_time=float("nan")), "min_run_time"),
])
def test_bad_call_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call(Timer("pass"))


def test_numpy_numbers_are_taken_as_torch_takes_them():
    import numpy as np

    t = Timer("pass", num_threads=np.int64(2))
    assert t.timeit(np.int64(10)).number_per_run == 10
    assert t.blocked_autorange(min_run_time=np.float32(0.01)).num_threads == 2
    x = torchmark.FuzzedTensor("x", size=("k", np.int64(4)), max_elements=1e6)
    fuzzer = torchmark.Fuzzer([torchmark.FuzzedParameter("k", 1, 8, distribution="uniform")],
                              [x], seed=0)
    tensors, _, _ = next(iter(fuzzer.take(1)))
    assert tensors["x"].shape[1] == 4


def test_languages_accepted():
    assert Timer("pass", language="py").language is Language.PYTHON
    assert Timer("pass", language="python").language is Language.PYTHON


def test_cpp_timer_rejects_globals():
    with pytest.raises(ValueError, match="C\\+\\+ snippets cannot use globals"):
        Timer("x;", language="cpp", globals={"x": 1})


def test_stdlib_timer_is_the_default_inner_class():
    assert Timer._timer_cls is timeit.Timer


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_default_timer_synchronizes_cuda(monkeypatch, request):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append(1))
    from torchmark.timing import clocks
    clocks._device_synchronize.cache_clear()
    request.addfinalizer(clocks._device_synchronize.cache_clear)  # forget the fake after
    monkeypatch.setattr(torch, "accelerator", None, raising=False)
    torchmark.timer()
    assert calls


def test_globals_take_what_dict_takes_and_the_repr_of_an_untitled_task():
    import collections
    import types

    for globals in (types.MappingProxyType({"a": 1}), collections.ChainMap({"a": 1}),
                    [("a", 1)]):
        assert Timer("a + 1", globals=globals).timeit(10).number_per_run == 10
    body = repr(Timer("pass", label="").timeit(10)).split("\n", 1)[1]
    assert body.startswith("\n  ") and body.endswith("10 runs, 1 thread")  # as torch's


@pytest.mark.parametrize("kwargs", [dict(setup=None), dict(globals=5), dict(stmt=3)])
def test_wrong_argument_types_raise_what_torch_raises_too(kwargs):
    with pytest.raises(TypeError) as e:  # torch raises TypeError; ours is a ValueError too
        Timer(**{"stmt": "pass", **kwargs})
    assert isinstance(e.value, ValueError) and str(e.value).startswith("Timer: ")


def test_thread_counts_torch_would_crash_on_are_refused():
    with pytest.raises(ValueError, match="num_threads must be at most 1024, got 5000"):
        Timer("pass", num_threads=5000)


def test_a_custom_timer_that_never_advances_is_named_instead_of_looping(monkeypatch):
    monkeypatch.setattr(timer_class, "_STUCK_CLOCK_SECONDS", 0.05)
    stuck = Timer("pass", timer=lambda: 1.0)
    with pytest.raises(ValueError, match=r"`timer` given reported 0 s for \d+ runs that took"):
        stuck.blocked_autorange(min_run_time=0.1)
    assert stuck.timeit(5).median == 1e-9 / 5  # a fixed count ends: what the timer said, as torch
    ticks = iter(range(10**9))  # a coarse clock that does advance is fine
    assert Timer("pass", timer=lambda: next(ticks) * 1e-3).timeit(10).median == pytest.approx(1e-4)
