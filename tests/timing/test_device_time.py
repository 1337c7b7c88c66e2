"""Device time: the API, argument errors, the stopping rule (fake clock), the reporting.
The GPU measurements themselves run only where CUDA is present."""

import itertools
import sys

import pytest
import torch

from torchmark import Compare, Measurement, TaskSpec, Timer
from torchmark.cli.main import main
from torchmark.timing.device_time import DeviceTimeOptions
from torchmark.timing.gpu_sampler import sample_until
from torchmark.timing.stopping import RunningStats, StopRule

CUDA = torch.cuda.is_available()


class FakeClock:
    """Advances by `step` seconds at every read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def batches(values, keep=None):
    it = iter(values)
    keeps = iter(keep) if keep is not None else itertools.repeat(True)

    def take():
        batch = next(it)
        return batch, [v / 10 for v in batch], next(keeps)
    return take


def test_quiet_samples_stop_on_noise():
    rule = StopRule(rsd=0.02, min_time=1e-4, max_time=10, min_samples=10)
    quiet = itertools.repeat([1e-5 * (1 + 0.001 * i) for i in range(10)])
    sampled = sample_until(rule, batches(quiet), FakeClock(0.01))
    decision = sampled.decision
    assert decision.rule == "noise" and decision.samples == len(sampled.times)
    assert "relative std" in decision.reason and decision.rsd <= 0.02
    assert len(sampled.host_times) == len(sampled.times) and sampled.dropped == 0


def test_min_time_keeps_sampling_until_enough_device_time():
    rule = StopRule(rsd=0.5, min_time=1e-3, max_time=100, min_samples=10)
    sampled = sample_until(rule, batches(itertools.repeat([1e-5] * 10)), FakeClock(0.001))
    samples = sampled.times
    assert sampled.decision.rule == "noise" and sum(samples) >= 1e-3 and len(samples) == 100


def test_noisy_samples_stop_on_timeout():
    rule = StopRule(rsd=0.01, min_time=0, max_time=0.5)
    noisy = itertools.cycle([[1e-5, 5e-5] * 5])
    sampled = sample_until(rule, batches(noisy), FakeClock(0.1))
    assert sampled.decision.rule == "timeout" and "timeout after" in sampled.decision.reason
    assert len(sampled.times) == 10 * 5  # five batches before the fake clock passed 0.5 s


def test_steady_noise_stops_after_the_settle_window():
    # samples whose spread is their own (a kernel shorter than its launch): the relative
    # std sits at ~64% whatever the count, so waiting for 1% would always time out
    rule = StopRule(rsd=0.01, min_time=0, max_time=100, settle=0.5, steady=0.05)
    noisy = itertools.cycle([[1e-5, 5e-5] * 5])
    sampled = sample_until(rule, batches(noisy), FakeClock(0.01))
    assert sampled.decision.rule == "steady" and sampled.decision.rsd > 0.5
    assert "stayed within 5% of itself for 0.50 s" in sampled.decision.reason
    assert 50 * 10 <= len(sampled.times) <= 60 * 10  # about half a second of 10 ms batches
    # with the steady rule off, the timeout
    sampled = sample_until(StopRule(rsd=0.01, min_time=0, max_time=2, settle=0),
                           batches(noisy), FakeClock(0.01))
    assert sampled.decision.rule == "timeout"


@pytest.mark.parametrize("kwargs", [dict(settle=-1), dict(steady=float("nan")),
                                    dict(steady=True)])
def test_stop_rule_refuses_a_bad_settle_or_steady(kwargs):
    with pytest.raises(ValueError, match=f"StopRule: {next(iter(kwargs))} must be"):
        StopRule(**kwargs)


def test_noise_that_keeps_changing_is_not_steady():
    # the spread grows batch after batch (a clock ramping down, say): no steady window
    def growing():
        for i in itertools.count(1):
            yield [1e-5, 1e-5 * (1 + 0.05 * i)] * 5

    rule = StopRule(rsd=0.001, min_time=0, max_time=3, settle=0.5, steady=0.05)
    assert sample_until(rule, batches(growing()), FakeClock(0.01)).decision.rule == "timeout"


def test_noise_history_needs_a_whole_window_and_a_steady_mean():
    from torchmark.timing.stopping import NoiseHistory

    history, stats = NoiseHistory(), RunningStats()
    for t in range(5):  # 0.0 to 0.4 s: under a whole window of history
        stats.extend([1e-5, 3e-5] * 50)
        assert not history.steady_for(t / 10, stats, settle=0.5, steady=0.05)
    stats.extend([1e-5, 3e-5] * 50)
    assert history.steady_for(0.5, stats, settle=0.5, steady=0.05)
    stats.extend([1e-5, 9e-5] * 50)  # a jump in the spread
    assert not history.steady_for(0.6, stats, settle=0.5, steady=0.05)
    assert len(history.points) <= 52


def test_throttled_batches_are_dropped_and_counted():
    rule = StopRule(rsd=0.5, min_time=0, max_time=100, min_samples=10)
    keep = itertools.chain([False, False], itertools.repeat(True))
    sampled = sample_until(rule, batches(itertools.repeat([1e-5] * 10), keep), FakeClock(0.01))
    assert sampled.dropped == 20 and sampled.decision.samples == 10
    assert not sampled.decision.all_below_clock
    assert "all_below_clock" not in sampled.decision.to_dict()


def test_when_every_batch_is_throttled_they_are_kept_and_flagged():
    # clocks locked below the threshold: the run is measured and says so, not refused
    rule = StopRule(rsd=0.5, min_time=0, max_time=100, min_samples=10)
    sampled = sample_until(
        rule, batches(itertools.repeat([1e-5] * 10), itertools.repeat(False)), FakeClock(0.01))
    # ten batches, then accepted
    assert len(sampled.times) == len(sampled.host_times) == 100 and sampled.dropped == 0
    assert sampled.decision.all_below_clock is True and sampled.decision.rule == "noise"
    assert sampled.decision.to_dict()["all_below_clock"] is True
    # a noisy throttled run goes on to the timeout, then reports what it has
    sampled = sample_until(
        StopRule(rsd=0.01, min_time=0, max_time=0.25),
        batches(itertools.cycle([[1e-5, 5e-5] * 5]), itertools.repeat(False)), FakeClock(0.1))
    assert sampled.decision.rule == "timeout" and sampled.decision.all_below_clock is True
    assert len(sampled.times) == sampled.decision.samples == 30


def test_running_stats_match_the_statistics_module():
    import random
    import statistics

    values = [random.Random(3).lognormvariate(-11, 0.3) for _ in range(1000)]
    stats = RunningStats(values[:10])
    stats.extend(values[10:])
    assert stats.count == 1000 and stats.total == pytest.approx(sum(values))
    expected = statistics.stdev(values) / statistics.fmean(values)
    assert stats.relative_std() == pytest.approx(expected, rel=1e-9)
    assert RunningStats([1e-6]).relative_std() == float("inf")


def test_a_long_run_of_tiny_samples_is_judged_in_constant_time_per_batch():
    # a 3 us kernel needs ~17k samples for min_time=0.05 s; each check must stay O(1)
    import time

    rule = StopRule(rsd=0.02, min_time=0.05, max_time=1e9, min_samples=10)
    tiny = itertools.repeat([3e-6 * (1 + 0.001 * i) for i in range(10)])
    started = time.perf_counter()
    sampled = sample_until(rule, batches(tiny), FakeClock(1e-6))
    assert sampled.decision.rule == "noise" and len(sampled.times) >= 16_000
    assert time.perf_counter() - started < 2.0  # recomputing over all samples took ~30 s


def test_identical_samples_are_converged_and_the_decision_is_json():
    # a statement that launches no kernel: every interval is 0; it stops on noise, and
    # its report saves
    import json

    rule = StopRule(rsd=0.02, min_time=0, max_time=100, min_samples=10)
    decision = sample_until(rule, batches(itertools.repeat([0.0] * 10)),
                            FakeClock(0.01)).decision
    assert decision.rule == "noise" and decision.rsd == 0.0
    never = StopRule(rsd=0.02, min_time=0, max_time=0.05, min_samples=10)
    decision = sample_until(never, batches(itertools.repeat([1e-6])), FakeClock(0.1)).decision
    assert decision.rsd is None and "relative std undefined" in decision.reason
    json.dumps(decision.to_dict(), allow_nan=False)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(rsd=-1), "rsd must be a number >= 0"),
    (dict(min_time=2, max_time=1), "max_time (1) is below min_time (2)"),
    (dict(min_samples=1), "min_samples must be an int >= 2"),
])
def test_stop_rule_errors(kwargs, fragment):
    with pytest.raises(ValueError) as e:
        StopRule(**kwargs)
    assert fragment in str(e.value)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(l2="warm"), "l2 must be 'cold' or 'hot'"),
    (dict(mode="fast"), "mode must be one of events, blocking, graph"),
    (dict(rsd=-0.1), "rsd must be a finite number >= 0"),
    (dict(graph_calls=0), "graph_calls must be a positive int"),
    (dict(mode="graph", graph_calls=4), "only the first of graph_calls=4 calls would start"),
    (dict(min_clock_ratio=2), "min_clock_ratio must be in [0, 1]"),
])
def test_device_time_argument_errors(kwargs, fragment):
    with pytest.raises(ValueError) as e:
        Timer("x", "x = 1").device_time(**kwargs)
    assert fragment in str(e.value)
    with pytest.raises(ValueError, match="only Python statements"):
        Timer("x;", language="cpp").device_time()


@pytest.mark.skipif(CUDA, reason="checks the error raised without CUDA")
def test_without_cuda_a_clear_error():
    with pytest.raises(RuntimeError, match="device time needs a CUDA device"):
        Timer("x + 1", "x = torch.ones(4)").device_time()


@pytest.mark.skipif(CUDA, reason="checks the error raised without CUDA")
def test_cli_device_cuda_without_cuda(capsys):
    assert main(["timeit", "x + 1", "-s", "x = 1", "--device", "cuda"]) == 2
    assert "there is no CUDA device here" in capsys.readouterr().err


def test_cli_statement_that_exits_says_so(capsys):
    assert main(["timeit", "import sys; sys.exit(3)"]) == 3
    assert "called sys.exit(3)" in capsys.readouterr().err


def test_cli_statement_errors_are_one_line(capsys):
    assert main(["timeit", "y + 1"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == ("torchmark: error: the statement raised NameError: "
                           "name 'y' is not defined")
    # which piece of user code raised, or does not parse, with its own line
    for argv, message in [
            (["x", "-s", "x = y"], "the setup raised NameError: name 'y' is not defined"),
            (["f()", "-s", "def f():", "-s", "    raise ValueError('deep')"],
             "the statement raised ValueError: deep"),
            (["1", "--vs", "z"], "the --vs statement raised NameError: name 'z' is not defined"),
            (["a = 1", "b = 1", "c = )"], "the statement, line 3: SyntaxError: unmatched ')'"),
            (["1", "--vs", "1 +"], "the --vs statement, line 1: SyntaxError: invalid syntax"),
            (["1", "-s", "x = ("], "the setup, line 1: SyntaxError")]:
        code = main(["timeit", *argv, "--min-run-time", "0.01"])
        err = capsys.readouterr().err
        assert message in err and code == (2 if "SyntaxError" in message else 1), err
        assert "--help" not in err
    # indented code is dedented, as Timer does
    assert main(["timeit", "  x = 1", "-s", "  import math", "--min-run-time", "0.01"]) == 0
    capsys.readouterr()


def device_measurement(description=None):
    meta = {"clock": "cuda_events", "l2": "cold", "mode": "events",
            "stop": {"rule": "noise", "reason": "relative std 1.00% <= 2.00% after 40 samples",
                     "samples": 40, "rsd": 0.01},
            "dropped_low_clock": 0, "clock_check": "samples below 75% of the max SM clock dropped",
            "host_times": [4.5e-6] * 40}
    return Measurement(1, [1.8e-4] * 40, TaskSpec("x.copy_(y)", "pass", label="copy",
                                                  description=description), meta)


def test_measurement_reports_its_clock_and_round_trips():
    m = device_measurement()
    assert m.clock == "device"
    text = m.summary()
    assert "Device time (CUDA events; L2 cold, events mode); stopped by noise: relative std " \
        "1.00% <= 2.00% after 40 samples" in text
    assert "Host launch time: median 4.50 us" in text
    again = Measurement.from_json(m.to_json())
    assert again.clock == "device" and again.metadata["stop"]["samples"] == 40
    host = m.host_measurement()
    assert host.clock == "host" and host.median == pytest.approx(4.5e-6)
    with pytest.raises(ValueError):
        host.host_measurement()


def test_compare_names_the_clock_of_each_column():
    m = device_measurement("copy")
    table = str(Compare([m, m.host_measurement()]))
    assert "copy [device, L2 cold]" in table and "copy [host launch]" in table


def test_compare_puts_kernel_and_batch_time_in_columns_of_their_own():
    device = device_measurement("copy")
    kernel = Measurement(1, [1.5e-4] * 40, device.task_spec,
                         {"clock": "cupti", "l2": "cold", "stop": {"rule": "noise"},
                          "kernels": [{"name": "copy_kernel", "per_call": 1,
                                       "seconds": 1.5e-4, "share": 1.0}]})
    batch = Measurement(1, [1.2e-4] * 40, device.task_spec,
                        {**device.metadata, "l2": "hot", "mode": "batch", "batch_calls": 100})
    assert (device.quantity, kernel.quantity, batch.quantity) == ("device", "kernel", "batch")
    table = Compare([device, kernel, batch, device.host_measurement()])
    text = str(table)
    for column in ("copy [device, L2 cold]", "copy [kernel, L2 cold]", "copy [batch, L2 hot]",
                   "copy [host launch]"):
        assert column in text
    assert "180.0" in text and "150.0" in text and "120.0" in text
    table.quantities("kernel", "device")
    text = str(table)
    assert "[kernel, L2 cold]" in text and "[device, L2 cold]" in text
    assert "[host launch]" not in text and "[batch" not in text and "120.0" not in text
    with pytest.raises(ValueError, match="expected some of"):
        table.quantities("cycles")



@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["events", "blocking", "graph"])
def test_device_time_on_a_gpu(mode):
    t = Timer("y.copy_(x)", "x = torch.ones(1 << 20, device='cuda'); y = torch.empty_like(x)")
    m = t.device_time(mode=mode, l2="hot", max_run_time=2)
    assert m.clock == "device" and m.median > 0 and m.metadata["stop"]["samples"] == len(m.times)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.cuda
def test_device_time_follows_the_setups_tensors():
    from torchmark.timing.device_time import device_of_tensors

    last = torch.cuda.device_count() - 1
    t = Timer("y.copy_(x)", f"x = torch.ones(1 << 20, device='cuda:{last}'); "
                            "y = torch.empty_like(x)")
    assert t.device_time(l2="hot", max_run_time=1).median > 0
    x = torch.ones(2, device=f"cuda:{last}")
    assert device_of_tensors({"x": x, "m": torch.nn.Linear(2, 2).to(x.device)}) == x.device
    assert device_of_tensors({"x": x, "c": torch.ones(2)}) == x.device
    assert device_of_tensors({"c": torch.ones(2)}) is None


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.cuda
def test_blocking_mode_on_a_gpu_covers_launches_and_names_a_syncing_statement():
    import time

    setup = "x = torch.ones(128, device='cuda'); y = torch.ones_like(x)"
    m = Timer("x * y", setup).device_time(mode="blocking", l2="hot", max_run_time=3)
    assert m.metadata["spin"]["uncovered"] <= m.metadata["spin"]["batches"] // 10, m.metadata
    # .item() waits for the device: no spin can cover it, and the spin must not grow
    started = time.perf_counter()
    m = Timer("(x * y).sum().item()", setup).device_time(mode="blocking", l2="hot",
                                                         max_run_time=3)
    assert time.perf_counter() - started < 10 and m.metadata["spin"]["spin_dropped"]
    assert "launch gaps" in repr(m)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.cuda
def test_timeit_cli_on_a_gpu_reports_device_and_host_time(capsys, tmp_path):
    saved = tmp_path / "m.json"
    assert main(["timeit", "--device", "cuda", "-s", "x = torch.ones(1 << 20, device='cuda')",
                 "--max-run-time", "2", "--save", str(saved), "x * 2"]) == 0
    out = capsys.readouterr().out
    assert "Device time (CUDA events; L2 cold" in out and "Host launch time" in out
    from torchmark.timing.files import load_measurements

    assert [m.clock for m in load_measurements(saved)] == ["device", "host"]


def test_options_defaults():
    options = DeviceTimeOptions()
    assert (options.l2, options.mode, options.rule.rsd) == ("cold", "events", 0.02)
    # a cold L2 is flushed before each graph replay: one call a graph; hot: ten
    assert DeviceTimeOptions(mode="graph").graph_calls == 1
    assert DeviceTimeOptions(mode="graph", l2="hot").graph_calls == 10
    assert DeviceTimeOptions(mode="graph", l2="hot", graph_calls=3).graph_calls == 3


class _FakeNvml:
    """pynvml's surface that SmClock uses: two GPUs, found by UUID or by index."""

    NVML_CLOCK_SM = 1

    def __init__(self):
        self.by_uuid = {"GPU-bbbb": "second", "GPU-aaaa": "first"}
        self.clocks = {"first": (1000, 2000), "second": (1500, 1500)}  # (now, max)

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, name):
        return self.by_uuid[name]

    def nvmlDeviceGetHandleByIndex(self, index):
        return ["first", "second"][index]

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return self.clocks[handle][1]

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return self.clocks[handle][0]


def test_sm_clock_finds_the_device_by_uuid(monkeypatch):
    from torchmark.timing.device_time import SmClock

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    # CUDA_VISIBLE_DEVICES=1: torch's device 0 is NVML's device 1, known by its UUID
    assert SmClock(0, uuid="bbbb").ratio() == 1.0
    assert SmClock(0, uuid="GPU-aaaa").ratio() == 0.5
    assert SmClock(1).ratio() == 1.0  # no UUID: torch's index
    missing = SmClock(0, uuid="cccc")
    assert missing.ratio() is None and "not checked" in missing.note


def test_sm_clock_that_fails_mid_run_stops_checking(monkeypatch):
    from torchmark.timing.device_time import SmClock

    nvml = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    clock = SmClock(0, uuid="aaaa")
    del nvml.clocks["first"]  # the next read raises
    assert clock.ratio() is None and "check stopped" in clock.note
    assert clock.ratio() is None


def test_sm_clock_without_nvml_says_so(monkeypatch):
    from torchmark.timing.device_time import SmClock

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    clock = SmClock(0)
    assert clock.ratio() is None and "nvidia-ml-py" in clock.note


NCU_OUTPUT = '''==PROF== Connected to process 4242 (/usr/bin/python3.11)
==PROF== Profiling "vectorized_elementwise_kernel": 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.11","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, T2, T3)","1","7","(128, 1, 1)","(524288, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,234,560"
"1","4242","python3.11","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, T2, T3)","1","7","(128, 1, 1)","(524288, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,236.5"
'''


def test_ncu_csv_of_the_gpu_benchmark_is_parsed():
    # benchmarks/gpu_vs_do_bench.py runs on a GPU machine only; its parser runs here
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "benchmarks" / "gpu_vs_do_bench.py"
    spec = importlib.util.spec_from_file_location("gpu_vs_do_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.parse_ncu_csv(NCU_OUTPUT) == pytest.approx([1.23456e-3, 1.2365e-3])
    with pytest.raises(ValueError, match="no CSV table"):
        module.parse_ncu_csv("==ERROR== no kernels were profiled")
    with pytest.raises(ValueError, match="unknown time unit 'cycle'"):
        module.parse_ncu_csv(NCU_OUTPUT.replace('"usecond"', '"cycle"'))
