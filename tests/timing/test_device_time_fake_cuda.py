"""Device time's CUDA control flow, run on the CPU against a simulated GPU.

CI has no GPU, so the code between `require_cuda()` and the events would otherwise never
run there. A fake `torch.cuda` (events that read a simulated device clock, a graph that
replays what was captured, a spin kernel that busies the device) checks the bookkeeping:
per-call times, graph replays divided by their calls, the flush outside the events, the
device made current, the spin sized from what enqueueing took, the report.
"""

import pytest

from torchmark import Timer
from torchmark.timing import device_time, gpu_sampler
from torchmark.timing.device_time import DeviceTimeOptions, measure_device_time
from torchmark.timing.gpu_sampler import spin_rate as measured_spin_rate  # the fixture fakes it
from torchmark.timing.stopping import StopRule

RULE = StopRule(rsd=0.05, min_time=0, max_time=2, min_samples=10)


@pytest.mark.parametrize("mode, l2", [("events", "cold"), ("events", "hot"),
                                      ("blocking", "cold"), ("graph", "cold"),
                                      ("graph", "hot")])
def test_per_call_device_time(fake_gpu, mode, l2):
    gpu = fake_gpu
    times, report = measure_device_time(lambda: gpu.kernel(2e-6),
                                        DeviceTimeOptions(l2=l2, mode=mode, rule=RULE))
    hosts = report.host_times
    assert times and all(t == pytest.approx(2e-6) for t in times)  # never the flush's 1 ms
    assert len(hosts) == len(times) and all(h > 0 for h in hosts)
    assert report.stop.rule == "noise" and report.mode == mode and report.l2 == l2
    assert (gpu.flushes > 0) == (l2 == "cold")
    assert not any(gpu.flush_clean)  # device time's cold L2: do_bench's zero fill
    assert (gpu.spins > 0) == (mode == "blocking")
    # each spin outlasts the enqueueing it covers, the first one sized by the warm-up
    assert all(s > 2e-4 for s in gpu.spin_seconds)
    if mode == "graph":
        assert report.graph_calls == (1 if l2 == "cold" else 10)


def test_the_named_device_is_made_current(fake_gpu):
    gpu = fake_gpu
    measure_device_time(lambda: gpu.kernel(1e-6), DeviceTimeOptions(l2="hot", rule=RULE),
                        device="cuda:1")
    assert gpu.devices_used == {1} and gpu.current == 0  # and put back afterwards


def test_graph_is_captured_on_a_stream_of_the_measured_device(fake_gpu):
    gpu = fake_gpu
    measure_device_time(lambda: gpu.kernel(1e-6),
                        DeviceTimeOptions(l2="hot", mode="graph", rule=RULE), device="cuda:1")
    assert [arg for kind, arg in gpu.log if kind == "capture"] == [1]


def test_blocking_mode_never_waits_out_its_spin(fake_gpu):
    gpu = fake_gpu
    measure_device_time(lambda: gpu.kernel(1e-6),
                        DeviceTimeOptions(l2="hot", mode="blocking", rule=RULE))
    kinds = [kind for kind, _ in gpu.log]
    assert all(kinds[i + 1] == "record" for i, kind in enumerate(kinds) if kind == "spin")


def test_timer_device_time_on_a_named_device(fake_gpu):
    gpu = fake_gpu
    seen = []
    Timer("gpu.kernel(1e-6)", "seen.append(gpu.current)", globals={"gpu": gpu, "seen": seen}
          ).device_time(device="cuda:1", l2="hot", rsd=0.05, min_run_time=0, max_run_time=2)
    assert seen == [1] and gpu.devices_used == {1}  # the setup too ran with it current
    for bad, fragment in (("cpu", "must be a CUDA device"), ("cuda:7", "does not exist"),
                          ("gpu", "must be a CUDA device")):
        with pytest.raises(ValueError, match=fragment):
            Timer("pass").device_time(device=bad)


def test_timer_device_time_on_the_fake_gpu(fake_gpu):
    gpu = fake_gpu
    m = Timer("gpu.kernel(5e-6)", globals={"gpu": gpu}).device_time(
        mode="blocking", rsd=0.05, min_run_time=0, max_run_time=2)
    assert m.clock == "device" and m.median == pytest.approx(5e-6)
    assert m.metadata["stop"]["samples"] == len(m.times)
    assert m.host_measurement().median > 0


def test_blocking_spin_is_sized_from_covered_batches_and_bounded(fake_gpu):
    from torchmark.timing.gpu_sampler import MAX_SPIN_S

    gpu = fake_gpu
    _, report = measure_device_time(lambda: gpu.kernel(1e-6),
                                    DeviceTimeOptions(l2="hot", mode="blocking", rule=RULE))
    assert report.spin.uncovered == 0 and report.spin_note is None
    assert "spin_note" not in report.to_dict()
    assert all(2e-4 < s <= MAX_SPIN_S for s in gpu.spin_seconds)


def test_a_statement_that_synchronizes_cannot_be_covered_and_is_reported(fake_gpu):
    # `.item()` in the statement: the spin ends before the batch is queued; sizing the next
    # spin from that batch's enqueue time (which waited the spin out) would double it
    # every batch; instead it grows to its bound, then is dropped, and the report says so
    from torchmark.timing.gpu_sampler import MAX_SPIN_S, SPIN_GIVE_UP

    gpu = fake_gpu

    def syncs():
        gpu.kernel(1e-6)
        gpu.host_sync()

    rule = StopRule(rsd=0.05, min_time=0, max_time=2, min_samples=100)
    times, report = measure_device_time(syncs, DeviceTimeOptions(l2="hot", mode="blocking",
                                                                 rule=rule))
    assert len(times) >= 100 and report.spin.spin_dropped is True
    assert gpu.spins == SPIN_GIVE_UP and max(gpu.spin_seconds) <= MAX_SPIN_S
    assert report.spin.uncovered == report.spin.batches
    assert "outlasted the spin" in report.spin_note and "spin was dropped" in report.spin_note
    m = Timer("syncs()", globals={"syncs": syncs}).device_time(
        mode="blocking", l2="hot", rsd=0.05, min_run_time=0, max_run_time=2)
    assert "Blocking: " in repr(m) and "launch gaps" in repr(m)


def test_the_spin_bound_follows_a_statement_slow_to_enqueue(fake_gpu):
    from torchmark.timing.gpu_sampler import MAX_SPIN_S, SpinCover

    assert SpinCover(None, 1e-3).cap == MAX_SPIN_S
    slow = SpinCover(None, 0.03)  # a batch that takes 30 ms to enqueue
    assert slow.cap == pytest.approx(0.12) and slow.seconds() == pytest.approx(0.0602)
    assert SpinCover(None, 10.0).cap == 1.0


def test_the_spin_rate_is_measured_not_read_from_the_clock_rate_property(fake_gpu, monkeypatch):
    import torch

    monkeypatch.setattr(gpu_sampler, "_SPIN_RATES", {})
    monkeypatch.setattr(gpu_sampler, "spin_rate", measured_spin_rate)

    class MegahertzProps:  # a clock rate in other units than kHz: 1000x too few cycles
        name, clock_rate, L2_cache_size, uuid = "fake", 1000, 1 << 20, None

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: MegahertzProps())
    assert measured_spin_rate(torch) == pytest.approx(1e9)  # the fake's cycle: 1 ns
    calibration = fake_gpu.spins
    assert calibration == 6  # three timed spins, each behind one that hides its launch
    gpu_sampler.spin(torch, 1e-3)
    assert fake_gpu.spins == calibration + 1  # measured once per device and process
    assert fake_gpu.spin_seconds[-1] == pytest.approx(1e-3)


def test_a_spin_timed_at_a_low_clock_takes_the_listed_rate(fake_gpu, monkeypatch):
    import torch

    monkeypatch.setattr(gpu_sampler, "_SPIN_RATES", {})

    class TwoGigahertz:  # listed at 2 GHz; the fake device spins at 1 GHz (idle, say)
        name, clock_rate, L2_cache_size, uuid = "fake", 2_000_000, 1 << 20, None

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: TwoGigahertz())
    assert measured_spin_rate(torch) == pytest.approx(2e9)


@pytest.mark.parametrize("clock_rate, expected", [(1_000_000, 1e9), (None, 1.5e9)])
def test_a_spin_that_cannot_be_timed_falls_back_to_the_property(fake_gpu, monkeypatch,
                                                                clock_rate, expected):
    import torch

    monkeypatch.setattr(gpu_sampler, "_SPIN_RATES", {})
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)  # no device time passes

    class Props:
        name, L2_cache_size, uuid = "fake", 1 << 20, None

    if clock_rate is not None:
        Props.clock_rate = clock_rate
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: Props())
    assert measured_spin_rate(torch) == pytest.approx(expected)


def fake_sm_clock(monkeypatch, readings) -> None:
    """An SM clock (max 2000 MHz) whose readings, as shares of the max, come from
    `readings`."""

    class Clock:
        note, max_mhz = "", 2000

        @classmethod
        def for_device(cls, torch, device):
            return cls()

        def ratio(self):
            return next(readings)

    monkeypatch.setattr(device_time, "SmClock", Clock)


def test_the_sm_clock_read_during_the_batches_is_reported(fake_gpu, monkeypatch):
    # two readings a batch, as it starts and as it ends: the lower one counts
    readings = iter([0.9, 1.0, 1.0, 0.8, 1.0, 1.0] * 1000)

    fake_sm_clock(monkeypatch, readings)
    rule = StopRule(rsd=0.05, min_time=0, max_time=2, min_samples=30)  # three batches
    _, report = measure_device_time(lambda: fake_gpu.kernel(1e-6),
                                    DeviceTimeOptions(l2="hot", rule=rule))
    sm = report.sm_clock
    assert (sm.median_mhz, sm.min_mhz, sm.max_mhz, sm.batches) == \
        (1800, 1600, 2000, 3)  # batches read 0.9, 0.8 and 1.0
    m = Timer("gpu.kernel(1e-6)", globals={"gpu": fake_gpu}).device_time(
        l2="hot", rsd=0.05, min_run_time=0, max_run_time=2)
    assert "SM clock: median " in repr(m) and "(max 2000 MHz, the lower of two readings a batch)" in repr(m)


def test_clock_summary_of_an_even_count_takes_the_middle_pair():
    assert device_time.clock_summary([0.5, 1.0], 1000).median_mhz == 750


def test_a_batch_whose_clock_falls_before_it_ends_is_dropped(fake_gpu, monkeypatch):
    # read only as the batch started, a power-capped batch would pass for a full-clock one
    readings = iter([1.0, 0.5] * 3 + [1.0, 1.0] * 1000)

    fake_sm_clock(monkeypatch, readings)
    rule = StopRule(rsd=0.05, min_time=0, max_time=2, min_samples=10)
    _, report = measure_device_time(lambda: fake_gpu.kernel(1e-6),
                                    DeviceTimeOptions(l2="hot", rule=rule))
    assert report.dropped_low_clock == 30 and report.sm_clock.min_mhz == 1000


def test_an_uncovered_batch_among_covered_ones_is_left_out(fake_gpu):
    # a host pause (here: a synchronization in the first call of every 7th batch, the
    # batches counted by the spins queued ahead of them) lets the GPU catch up; that
    # batch's times hold launch gaps, and the spin covers the others. (Counted by spins,
    # not by calls: the warm-up runs for a time, so a call count would put the first
    # pause in the first batch on some runs, and that one is kept, nothing being covered
    # yet.)
    gpu = fake_gpu
    paused: set[int] = set()

    def sometimes_syncs():
        if gpu.spins % 7 == 0 and gpu.spins and gpu.spins not in paused:
            paused.add(gpu.spins)
            gpu.host_sync()
        gpu.kernel(2e-6)

    rule = StopRule(rsd=0.05, min_time=0, max_time=2, min_samples=300)
    times, report = measure_device_time(sometimes_syncs,
                                        DeviceTimeOptions(l2="hot", mode="blocking", rule=rule))
    spin = report.spin
    assert spin.uncovered >= 4 and spin.left_out == spin.uncovered
    assert not spin.spin_dropped
    assert len(times) == 10 * (spin.batches - spin.left_out)
    assert f"; {spin.left_out} left out" in report.spin_note
    assert "include launch gaps" not in report.spin_note


# -- batch time and the event cost ---------------------------------------------------------

def test_batch_mode_times_many_calls_between_one_pair_of_events(fake_gpu):
    gpu = fake_gpu
    times, report = measure_device_time(
        lambda: gpu.kernel(2e-6), DeviceTimeOptions(mode="batch", batch_calls=50, rule=RULE))
    assert times and all(t == pytest.approx(2e-6) for t in times)
    assert report.l2 == "hot" and gpu.flushes == 0  # batch mode's default: a hot L2
    assert report.batch_calls == 50 and gpu.spins > 0  # behind the spin
    # a pass is one batch behind its own spin (the launches queued behind a spin must
    # fit CUDA's launch queue): a pair of events around 50 calls
    records = [kind for kind, _ in gpu.log].count("record")
    assert records >= 2 * len(times) and gpu.spins >= len(times)
    data = report.to_dict()
    assert data["batch_calls"] == 50 and data["batch_graph"] is False


def test_batch_mode_sizes_its_batch_from_the_warm_up(fake_gpu):
    gpu = fake_gpu
    _, report = measure_device_time(lambda: gpu.kernel(1e-6),
                                    DeviceTimeOptions(mode="batch", rule=RULE))
    assert device_time.MIN_BATCH_CALLS <= report.batch_calls <= device_time.MAX_BATCH_CALLS
    assert device_time.batch_size(1e-5) == 200 and device_time.batch_size(1.0) == 10
    assert device_time.batch_size(1e-9) == 256


def test_batch_mode_in_one_graph(fake_gpu):
    gpu = fake_gpu
    times, report = measure_device_time(
        lambda: gpu.kernel(3e-6),
        DeviceTimeOptions(mode="batch", batch_calls=20, batch_graph=True, rule=RULE))
    assert all(t == pytest.approx(3e-6) for t in times) and report.batch_graph
    assert [kind for kind, _ in gpu.log].count("capture") == 1


def test_batch_options_are_checked():
    with pytest.raises(ValueError, match="hot L2"):
        DeviceTimeOptions(mode="batch", l2="cold")
    with pytest.raises(ValueError, match="for mode='batch'"):
        DeviceTimeOptions(mode="blocking", batch_calls=10)
    with pytest.raises(ValueError, match="positive int"):
        DeviceTimeOptions(mode="batch", batch_calls=0)
    with pytest.raises(ValueError, match="per-call modes"):
        DeviceTimeOptions(mode="batch", subtract_event_overhead=True)
    assert DeviceTimeOptions().l2 == "cold" and DeviceTimeOptions(mode="batch").l2 == "hot"


def test_event_overhead_is_an_empty_kernels_device_time_less_its_kernel_time(
        fake_gpu, monkeypatch):
    gpu = fake_gpu
    # on the fake GPU the events cost nothing: the empty kernel's own 1.5 us stands in
    # for the cost of a pair of events around a kernel, its kernel time (CUPTI) 0.5 us
    monkeypatch.setattr(device_time, "empty_kernel", lambda torch: gpu.kernel(1.5e-6))
    monkeypatch.setattr(device_time, "empty_kernel_time", lambda torch, d, o: 0.5e-6)
    monkeypatch.setattr(device_time, "_OVERHEADS", {})
    options = DeviceTimeOptions(mode="blocking", rule=RULE, subtract_event_overhead=True)
    times, report = measure_device_time(lambda: gpu.kernel(5e-6), options)
    assert report.event_overhead == pytest.approx(1e-6)
    assert all(t == pytest.approx(4e-6) for t in times)
    # measured once per device, mode and L2 state
    assert list(device_time._OVERHEADS) == [(0, "blocking", "cold")]
    m = Timer("gpu.kernel(5e-6)", globals={"gpu": gpu}).device_time(
        mode="blocking", rsd=0.05, min_run_time=0, max_run_time=2,
        subtract_event_overhead=True)
    assert m.median == pytest.approx(4e-6) and m.quantity == "device"
    assert "Event cost subtracted: 1.00 us a call" in repr(m)


def test_timer_batch_time_is_its_own_quantity(fake_gpu):
    from torchmark.timing.results import measurement_to_result

    gpu = fake_gpu
    m = Timer("gpu.kernel(2e-6)", globals={"gpu": gpu}).device_time(
        mode="batch", batch_calls=30, rsd=0.05, min_run_time=0, max_run_time=2)
    assert m.quantity == "batch" and m.median == pytest.approx(2e-6)
    assert "Batch time (CUDA events around 30 calls back to back, per call; L2 hot)" \
        in repr(m)
    assert measurement_to_result(m).metric == "batch"
