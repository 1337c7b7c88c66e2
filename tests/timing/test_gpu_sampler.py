"""The GPU sampler shared by the Timer's device time, the ops executor and the replay:
its phases on the simulated GPU of tests/conftest.py, the stop-rule interface and its
typed decisions, the typed device report (and files written before it was typed)."""

import json
import pathlib
import re

import pytest

from torchmark import Measurement, Timer
from torchmark.timing import gpu_sampler
from torchmark.timing.gpu_sampler import GpuSampler, Phase, TimedPass, warm_up
from torchmark.timing.measurement import DeviceReport, SmClockSummary, SpinReport
from torchmark.timing.stopping import (
    FixedCount,
    RunningStats,
    StopCriterion,
    StopDecision,
    StopRule,
)

PHASES = [Phase.WARM_UP, Phase.CALIBRATION, Phase.SAMPLING]


def test_cuda_events_are_created_in_one_place():
    src = pathlib.Path(gpu_sampler.__file__).parents[1]
    found = {str(path.relative_to(src)): len(re.findall(r"cuda\.Event\(", path.read_text()))
             for path in src.rglob("*.py") if "cuda.Event(" in path.read_text()}
    assert found == {"timing/gpu_sampler.py": 1}


def recording(monkeypatch, module):
    """The GpuSamplers `module` makes from now on, listed as they are made."""
    made = []

    class Recording(GpuSampler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(module, "GpuSampler", Recording)
    return made


def test_the_timer_goes_through_the_three_phases(fake_gpu, monkeypatch):
    from torchmark.timing import device_time

    made = recording(monkeypatch, device_time)
    m = Timer("gpu.kernel(2e-6)", globals={"gpu": fake_gpu}).device_time(
        mode="blocking", l2="hot", rsd=0.05, min_run_time=0, max_run_time=2)
    assert len(made) == 1 and made[0].phases == PHASES
    assert m.device_report.stop.rule == "noise" and m.median == pytest.approx(2e-6)


def test_ops_continuous_events_go_through_the_sampler_forward_and_backward(fake_gpu,
                                                                          monkeypatch):
    # the backward's own warm-up sizes its spin; the forward that makes its graph, the
    # flush and the inputs put back run untimed, outside the events
    import torch

    from torchmark.ops import RunOptions, executor

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            fake_gpu.kernel(3e-6)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            fake_gpu.kernel(5e-6)
            return grad * 2

    made = recording(monkeypatch, executor)
    options = RunOptions(device="cuda", warmup=2, iterations=70, exec_mode="continuous_events",
                         l2_flush=True, backward=True)
    metrics, _ = executor.measure(Op.apply, [torch.ones(4, requires_grad=True)], {}, options)
    assert metrics["forward"]["times"] == pytest.approx([3e-6] * 70)
    assert metrics["backward"]["times"] == pytest.approx([5e-6] * 70)
    assert len(made) == 1 and made[0].phases == PHASES * 2
    assert fake_gpu.spins == 4  # two chunks of 64 calls, forward and backward
    assert "note" not in metrics["forward"] and "note" not in metrics["backward"]


@pytest.mark.parametrize("mode", ["discrete", "continuous"])
def test_ops_host_clock_modes_make_no_sampler(fake_gpu, monkeypatch, mode):
    import torch

    from torchmark.ops import RunOptions, executor

    made = recording(monkeypatch, executor)
    executor.measure(lambda x: x + 1, [torch.ones(2)], {},
                     RunOptions(device="cuda", warmup=1, iterations=3, exec_mode=mode))
    assert made == [] and fake_gpu.spins == 0


def test_a_pass_queues_chunks_behind_spins_and_prepares_untimed(fake_gpu):
    import torch

    sampler = GpuSampler(torch, torch.device("cuda", 0), flush=lambda: fake_gpu.kernel(1e-3),
                         chunk=4)
    sampler.calibrate(1e-4)
    timing = sampler.timed_pass(host_times=True)
    for i in range(10):
        timing.time(fake_gpu.kernel, prepare=lambda i=i: (fake_gpu.kernel(1.0) or (i * 1e-6,)))
    times = timing.finish()
    assert times == pytest.approx([i * 1e-6 for i in range(10)])  # never the flush's 1 ms
    assert len(timing.host_times) == 10 and timing.kept
    assert fake_gpu.spins == 3 and sampler.covers[0].batches == 3  # 4 + 4 + 2 calls


def test_a_custom_stop_criterion_decides_with_a_typed_decision(fake_gpu):
    import torch

    class AfterPasses:  # any object with decide(): the StopCriterion interface
        def __init__(self):
            self.asked = 0

        def decide(self, samples, elapsed, history=None):
            self.asked += 1
            if self.asked < 3:
                return None
            return StopDecision("passes", "three passes", samples.count, None)

    sampler = GpuSampler(torch, torch.device("cuda", 0), blocking=False)
    sampled = sampler.sample(AfterPasses(), lambda p: [p.time(fake_gpu.kernel, (2e-6,))
                                                       for _ in range(5)])
    assert sampled.decision == StopDecision("passes", "three passes", 15, None)
    assert sampled.times == pytest.approx([2e-6] * 15) and sampled.dropped == 0


def test_fixed_count_stops_at_its_count():
    rule = FixedCount(3)
    assert rule.decide(RunningStats([1.0, 1.0]), 0.0) is None
    decision = rule.decide(RunningStats([1.0, 2.0, 3.0]), 0.0)
    assert (decision.rule, decision.samples) == ("count", 3) and decision.rsd == 0.5
    with pytest.raises(ValueError, match="count must be an int >= 1"):
        FixedCount(0)


def test_warm_up_runs_calls_and_a_minimum_time():
    runs = []
    assert warm_up(runs.append, 3) == [] and runs == [0, 1, 2]
    syncs = []
    times = warm_up(lambda i: None, 2, sync=lambda: syncs.append(1))
    assert len(times) == 2 and len(syncs) == 2
    runs.clear()
    warm_up(runs.append, 1, min_time=0.01)
    assert len(runs) > 1


def test_stop_decisions_round_trip():
    for decision in (StopDecision("noise", "quiet", 40, 0.01),
                     StopDecision("timeout", "late", 3, None, all_below_clock=True)):
        assert StopDecision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision
    assert list(StopDecision("noise", "r", 1, 0.0).to_dict()) == ["rule", "reason", "samples",
                                                                   "rsd"]


# Device-time measurements as written before the report was typed (the fake GPU's).
OLD_FILES = [
    '{"schema": "torchmark.measurement", "version": 1, "number_per_run": 1, "raw_times": '
    '[1e-06, 1e-06, 1e-06, 1e-06], "task_spec": {"stmt": "syncs()", "setup": "pass", '
    '"global_setup": "", "label": "fixture", "sub_label": null, "description": null, "env": '
    'null, "num_threads": 1}, "metadata": {"clock": "cuda_events", "l2": "hot", "mode": '
    '"blocking", "stop": {"rule": "noise", "reason": "relative std 0.00% <= 5.00% after 10 '
    'samples", "samples": 10, "rsd": 0.0}, "dropped_low_clock": 0, "clock_check": "samples '
    'below 75% of the max SM clock dropped", "sm_clock": {"median_mhz": 1800, "min_mhz": 1800, '
    '"max_mhz": 2000, "batches": 1}, "spin": {"batches": 1, "uncovered": 1, "left_out": 0, '
    '"spin_dropped": false}, "spin_note": "1 of 1 batches outlasted the spin (the statement '
    'synchronizes with the host, or queues more launches than fit): the times of 1 include '
    'launch gaps", "host_times": [7.431e-06, 3.245e-06, 2.063e-06, 5.858e-06]}}',
    '{"schema": "torchmark.measurement", "version": 1, "number_per_run": 1, "raw_times": '
    '[2e-06, 2e-06, 2e-06, 2e-06], "task_spec": {"stmt": "gpu.kernel(2e-6)", "setup": "pass", '
    '"global_setup": "", "label": "fixture", "sub_label": null, "description": null, "env": '
    'null, "num_threads": 1}, "metadata": {"clock": "cuda_events", "l2": "hot", "mode": '
    '"graph", "stop": {"rule": "timeout", "reason": "timeout after 2.00 s with relative std '
    '9.00% (target 5.00%)", "samples": 10, "rsd": 0.09, "all_below_clock": true}, '
    '"dropped_low_clock": 0, "clock_check": "every sample ran below 75% of the max SM clock '
    '(clocks locked or power-capped?): kept, not dropped", "sm_clock": {"median_mhz": 1500, '
    '"min_mhz": 1000, "max_mhz": 2000, "batches": 2}, "graph_calls": 10, "host_times": '
    '[2.45e-07, 1.75e-07, 1.6e-07, 1.57e-07]}}',
]


def test_device_reports_written_before_they_were_typed_still_load():
    first, second = (Measurement.from_json(text) for text in OLD_FILES)
    report = first.device_report
    assert report.spin == SpinReport(batches=1, uncovered=1, left_out=0, spin_dropped=False)
    assert report.sm_clock == SmClockSummary(1800, 1800, 2000, 1)
    assert report.stop.rule == "noise" and report.host_times[0] == 7.431e-06
    assert second.device_report.stop.all_below_clock and second.device_report.graph_calls == 10
    for text, m in zip(OLD_FILES, (first, second), strict=True):
        # the typed report writes the same object back, key for key, in the same order
        assert json.dumps(m.device_report.to_dict()) == json.dumps(json.loads(text)["metadata"])
        assert m.to_json() == text
    assert first.summary().splitlines()[4:] == [
        "  Device time (CUDA events; L2 hot, blocking mode); stopped by noise: relative std "
        "0.00% <= 5.00% after 10 samples",
        "  Host launch time: median 5.86 us",
        "  SM clock: median 1800 MHz, lowest 1800 MHz (max 2000 MHz, the lower of two "
        "readings a batch)",
        "  Blocking: 1 of 1 batches outlasted the spin (the statement synchronizes with the "
        "host, or queues more launches than fit): the times of 1 include launch gaps"]
    assert first.host_measurement().times == list(report.host_times)


def test_a_device_report_with_missing_or_mistyped_fields_reads_them_as_absent():
    report = DeviceReport.from_dict({"clock": "cuda_events", "l2": 3, "stop": "x",
                                     "sm_clock": {"median_mhz": 1}, "spin": [],
                                     "dropped_low_clock": True, "host_times": [1e-6, "a"]})
    assert report == DeviceReport(l2=None, mode=None, stop=None, host_times=(1e-6,))
    m = Measurement(1, [1e-6], Timer("pass").timeit(1).task_spec,
                    {"clock": "cuda_events", "clock_check": 5})
    assert "stopped by None: None" in m.summary() and m.device_report.clock_check == ""
    assert Timer("pass").timeit(1).device_report is None


def test_a_device_report_round_trips():
    report = DeviceReport(l2="cold", mode="blocking",
                          stop=StopDecision("steady", "settled", 200, 0.3),
                          dropped_low_clock=10, clock_check="checked",
                          sm_clock=SmClockSummary(1700, 1600, 1980, 20),
                          spin=SpinReport(20, 1, 1, False), spin_note="1 left out",
                          host_times=(1e-6, 2e-6))
    data = json.loads(json.dumps(report.to_dict()))
    assert DeviceReport.from_dict(data) == report
    assert data["clock"] == "cuda_events" and "graph_calls" not in data


def test_stop_rule_is_a_stop_criterion_over_running_stats():
    rule: StopCriterion = StopRule(rsd=0.5, min_time=0)
    assert rule.decide(RunningStats([1.0] * 10), 0.0).rule == "noise"


def test_a_judged_pass_whose_chunk_was_left_out_is_not_kept(fake_gpu):
    import torch

    sampler = GpuSampler(torch, torch.device("cuda", 0), chunk=2, judge=True)
    sampler.calibrate(1e-4)
    covered = sampler.timed_pass()
    covered.time(fake_gpu.kernel, (1e-6,))
    covered.finish()
    paused = sampler.timed_pass()
    paused.time(lambda: fake_gpu.host_sync())  # the spin is over before the chunk ends
    paused.finish()
    assert covered.kept and not paused.kept
    assert isinstance(paused, TimedPass) and sampler.covers[0].left_out == 1
