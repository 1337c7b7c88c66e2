"""Kernel time: the profiler's events reduced to each call's kernels (a pure function,
tested on constructed event lists), the real profiler's API shapes on the CPU, and the
measurement's bookkeeping with the profiled pass replaced."""

import pytest
import torch

from torchmark import Timer
from torchmark.core.errors import UsageError
from torchmark.timing import kernel_time
from torchmark.timing.kernel_names import kernel_base
from torchmark.timing.kernel_time import (
    CALL_RANGE,
    CallKernels,
    KernelTally,
    KernelTimeOptions,
    TraceEvent,
    attribute,
    event_kind,
    kernel_metadata,
    kernel_shares,
    pass_calls,
    profiled_pass,
    trace_events,
)
from torchmark.timing.measurement import Measurement
from torchmark.timing.results import measurement_to_result, result_to_measurement

US = 1000  # ns


def window(i, start, end, op_id):
    return TraceEvent(f"{CALL_RANGE}{i}", "annotation", start, end - start, op_id, 0)


def test_each_kernel_goes_to_the_call_that_launched_it():
    events = [
        window(0, 0, 100 * US, 1),
        TraceEvent("aten::add", "op", 10 * US, 20 * US, 2, 0),
        TraceEvent("cudaLaunchKernel", "runtime", 15 * US, 5 * US, 501, 2),
        window(1, 200 * US, 300 * US, 3),
        TraceEvent("aten::softmax", "op", 210 * US, 50 * US, 4, 0),
        TraceEvent("cudaLaunchKernel", "runtime", 220 * US, 5 * US, 502, 4),
        TraceEvent("cudaLaunchKernel", "runtime", 240 * US, 5 * US, 503, 4),
        TraceEvent("cudaMemcpyAsync", "runtime", 250 * US, 5 * US, 504, 4),
        # the flush, between the calls: outside both
        TraceEvent("aten::zero_", "op", 150 * US, 10 * US, 5, 0),
        TraceEvent("cudaLaunchKernel", "runtime", 152 * US, 5 * US, 505, 5),
        # kernels run late (queued behind a spin): their device times say nothing of
        # which call they belong to; listed out of order
        TraceEvent("softmax_b", "kernel", 5000 * US, 3 * US, 503, 4),
        TraceEvent("add_kernel", "kernel", 4000 * US, 2 * US, 501, 2),
        TraceEvent("zero_kernel", "kernel", 4500 * US, 40 * US, 505, 5),
        TraceEvent("softmax_a", "kernel", 4990 * US, 7 * US, 502, 4),
        TraceEvent("Memcpy DtoD (Device -> Device)", "memcpy", 5010 * US, 4 * US, 504, 4),
    ]
    result = attribute(events)
    assert [c.index for c in result.calls] == [0, 1]
    first, second = result.calls
    assert first.kernels == (("add_kernel", 2e-6),) and first.seconds == pytest.approx(2e-6)
    # launch order, the sum of durations (not the span from first start to last end)
    assert [name for name, _ in second.kernels] == ["softmax_a", "softmax_b"]
    assert second.seconds == pytest.approx(10e-6)
    assert second.copies_s == pytest.approx(4e-6)  # reported beside, never added
    assert result.outside == 1 and result.unplaced == 0


def test_a_kernel_without_its_runtime_call_is_placed_by_its_op():
    events = [window(0, 0, 100, 1), TraceEvent("aten::mm", "op", 10, 20, 7, 0),
              TraceEvent("gemm", "kernel", 500, 30, 900, 7),  # runtime call not recorded
              TraceEvent("orphan", "kernel", 600, 30, 901, 0)]
    result = attribute(events)
    assert result.calls[0].kernels == (("gemm", 30e-9),)
    assert result.unplaced == 1


def test_a_runtime_call_of_another_op_is_not_taken_for_the_launch():
    # correlation ids of two id spaces colliding: the launch is linked to op 2, the
    # kernel to op 9 (in the second call): the op decides
    events = [window(0, 0, 100, 1), window(1, 200, 300, 3),
              TraceEvent("cudaLaunchKernel", "runtime", 50, 5, 77, 2),
              TraceEvent("aten::mul", "op", 250, 10, 9, 0),
              TraceEvent("mul_kernel", "kernel", 900, 11, 77, 9)]
    result = attribute(events)
    assert result.calls[0].kernels == () and result.calls[1].kernels == (("mul_kernel", 11e-9),)


def test_a_call_without_kernels_is_kept_as_zero():
    result = attribute([window(0, 0, 10, 1), window(1, 20, 30, 2),
                        TraceEvent("cudaLaunchKernel", "runtime", 25, 1, 5, 2),
                        TraceEvent("k", "kernel", 40, 3, 5, 2)])
    assert [c.seconds for c in result.calls] == [0.0, pytest.approx(3e-9)]


def test_other_ranges_are_not_calls():
    events = [TraceEvent("torchmark.call.x", "annotation", 0, 10, 1, 0),
              TraceEvent("my range", "annotation", 0, 10, 2, 0),
              TraceEvent(f"{CALL_RANGE}0", "other", 0, 10, 3, 0)]  # a GPU-side range
    assert attribute(events).calls == []


@pytest.mark.parametrize("activity, name, on_device, annotation, kind", [
    ("kernel", "void at::native::vectorized_elementwise_kernel<4>", True, False, "kernel"),
    ("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", True, False, "memcpy"),
    ("gpu_memset", "Memset (Device)", True, False, "memset"),
    ("cuda_runtime", "cudaLaunchKernel", False, False, "runtime"),
    ("cuda_driver", "cuLaunchKernel", False, False, "runtime"),
    ("user_annotation", f"{CALL_RANGE}3", False, True, "annotation"),
    ("gpu_user_annotation", f"{CALL_RANGE}3", True, True, "other"),
    ("cpu_op", "aten::add", False, False, "op"),
    ("cuda_sync", "Stream Sync", True, False, "other"),
    # a release naming activities otherwise: by name and device
    ("", "Memcpy DtoD (Device -> Device)", True, False, "memcpy"),
    ("", "gemm_kernel", True, False, "kernel"),
    ("", "cudaGraphLaunch", False, False, "runtime"),
    ("", "aten::mm", False, False, "op"),
])
def test_event_kinds(activity, name, on_device, annotation, kind):
    assert event_kind(activity, name, on_device, annotation) == kind


def test_the_real_profiler_gives_the_shapes_read_here():
    """On the CPU: kineto's events carry what trace_events reads, the ranges come out
    named as profiled_pass names them, one a call, in order."""
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.ones(64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(3):
            with record_function(f"{CALL_RANGE}{i}"):
                torch.add(x, x)
    events = trace_events(prof.profiler.kineto_results.events())
    assert [e.name for e in events if e.kind == "annotation"] == \
        [f"{CALL_RANGE}{i}" for i in range(3)]
    adds = [e for e in events if e.name == "aten::add"]
    assert len(adds) == 3 and all(e.kind == "op" and e.linked == 0 for e in adds)
    assert [c.index for c in attribute(events).calls] == [0, 1, 2]


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_profiled_pass_runs_on_the_cpu_profiler():
    flushes = []
    result = profiled_pass(torch, lambda: torch.ones(8) + 1, 4, lambda: flushes.append(1),
                           lambda: None)
    assert [c.index for c in result.calls] == [0, 1, 2, 3] and len(flushes) == 4
    assert all(c.kernels == () for c in result.calls)  # no GPU: no kernels


def test_shares_count_launches_per_call_and_sum_the_rest():
    calls = [CallKernels(0, (("a", 3e-6), ("b", 1e-6), ("a", 3e-6))),
             CallKernels(1, (("a", 3e-6), ("b", 1e-6), ("a", 3e-6)))]
    shares = kernel_shares(calls)
    assert [s.name for s in shares] == ["a", "b"]
    assert shares[0].per_call == 2 and shares[0].seconds == pytest.approx(6e-6)
    assert shares[0].share == pytest.approx(6 / 7)
    many = KernelTally()
    many.add([CallKernels(0, tuple((f"k{i}", (i + 1) * 1e-6) for i in range(5)))])
    cut = many.shares(limit=2)
    assert [s.name for s in cut] == ["k4", "k3", "(other kernels: 3 names)"]
    assert sum(s.share for s in cut) == pytest.approx(1.0)


def test_kernel_base_drops_namespaces_templates_and_parameters():
    cupti = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, int)"
    ncu = "void native::<unnamed>::cunn_SoftMaxForward<4, float, float>(T4 *, int)"
    assert kernel_base(cupti) == kernel_base(ncu) == "cunn_SoftMaxForward"
    assert kernel_base("sm80_xmma_gemm_f32") == "sm80_xmma_gemm_f32"
    assert kernel_base("") == ""


def test_the_commonest_launch_order_and_each_position_s_mean():
    tally = KernelTally()
    assert tally.sequence() is None
    order = (("transpose", 2e-6), ("gemm", 10e-6), ("transpose", 1e-6))
    tally.add([CallKernels(i, order) for i in range(3)])
    tally.add([CallKernels(3, (("gemm", 12e-6),)), CallKernels(4, ())])  # another order; none
    sequence = tally.sequence()
    # the repeated name keeps its two positions apart; the call without kernels not counted
    assert [n for n, _ in sequence.kernels] == ["transpose", "gemm", "transpose"]
    assert [t for _, t in sequence.kernels] == pytest.approx([2e-6, 10e-6, 1e-6])
    assert sequence.share == pytest.approx(3 / 4)
    assert sequence.to_dict()["kernels"][1] == {"name": "gemm", "seconds": 10e-6}
    many = KernelTally()  # past MAX_SEQUENCES distinct orders, new ones are not followed
    many.add([CallKernels(i, ((f"k{i}", 1e-6),)) for i in range(kernel_time.MAX_SEQUENCES + 3)])
    assert many.sequence().share == pytest.approx(1 / (kernel_time.MAX_SEQUENCES + 3))
    long = KernelTally()
    long.add([CallKernels(0, tuple(("k", 1e-6) for _ in range(kernel_time.MAX_SEQUENCE_KERNELS + 1)))])
    assert long.sequence() is None


def test_pass_size_follows_the_enqueue_time():
    assert pass_calls(1e-5) == 500 and pass_calls(1e-3) == 20 and pass_calls(1.0) == 10
    assert pass_calls(0.0) == 500


def test_options_are_checked():
    with pytest.raises(UsageError, match="l2"):
        KernelTimeOptions(l2="warm")
    with pytest.raises(UsageError, match="calls_per_pass"):
        KernelTimeOptions(calls_per_pass=0)


def fake_pass(per_call):
    """A profiled_pass stand-in: each call's kernels from `per_call(i)` (a pass count
    kept), so the measurement's bookkeeping runs without CUPTI."""
    state = {"passes": 0, "sentinels": 0}

    def run(torch_, call, calls, flush, sync, sentinel=None):
        if sentinel is not None:
            state["sentinels"] += 1
        state["passes"] += 1
        out = []
        for i in range(calls):
            flush()
            call()
            out.append(CallKernels(i, per_call(i)))
        return kernel_time.Attribution(out, outside=1 if sentinel else 0, unplaced=0)
    return run, state


def test_kernel_time_on_the_fake_gpu(fake_gpu, monkeypatch):
    run, state = fake_pass(lambda i: (("gemm", 8e-6), ("epilogue", 2e-6)))
    monkeypatch.setattr(kernel_time, "profiled_pass", run)
    gpu = fake_gpu
    m = Timer("gpu.kernel(1e-5)", globals={"gpu": gpu}).kernel_time(
        rsd=0.05, min_run_time=0, max_run_time=2)
    assert m.quantity == "kernel" and m.clock == "device"
    assert m.median == pytest.approx(1e-5)
    assert state["sentinels"] == 1 and state["passes"] >= 2  # the first pass thrown away
    assert gpu.flushes > 0  # cold L2 by default, flushed clean as ncu's --cache-control all
    assert gpu.flush_clean == [True] and m.metadata["l2_flush"] == "clean"
    steps = m.metadata["sequence"]["kernels"]
    assert [k["name"] for k in steps] == ["gemm", "epilogue"] and m.metadata["sequence"]["share"] == 1
    names = [k["name"] for k in m.metadata["kernels"]]
    assert names == ["gemm", "epilogue"] and m.metadata["kernels"][0]["share"] == 0.8
    text = repr(m)
    assert "Kernel time (CUPTI: sum of the call's kernel durations" in text
    assert "L2 cold (flushed clean)" in text
    assert "Launch order (100% of calls), us each: gemm 8, epilogue 2" in text
    assert "80.0%  gemm" in text
    with pytest.raises(ValueError, match="kernel times"):
        m.host_measurement()


def test_kernel_time_says_when_the_profiler_saw_nothing(fake_gpu, monkeypatch):
    def nothing(torch_, call, calls, flush, sync, sentinel=None):
        return kernel_time.Attribution([CallKernels(i, ()) for i in range(calls)], 0, 0)
    monkeypatch.setattr(kernel_time, "profiled_pass", nothing)
    with pytest.raises(RuntimeError, match="recorded no CUDA activity"):
        Timer("pass").kernel_time(max_run_time=1)
    run, _ = fake_pass(lambda i: ())
    monkeypatch.setattr(kernel_time, "profiled_pass", run)
    with pytest.raises(UsageError, match="launched no CUDA kernel"):
        Timer("pass").kernel_time(max_run_time=0.2, min_run_time=0)


def test_kernel_time_round_trips_as_a_kernel_result():
    from torchmark.core.task_spec import TaskSpec
    from torchmark.timing.kernel_time import KernelRun, KernelShare
    from torchmark.timing.stopping import StopDecision

    run = KernelRun(times=[1e-6, 1.1e-6, 0.9e-6], shares=[KernelShare("k", 1, 1e-6, 1.0)],
                    copies_s=0.0, decision=StopDecision("noise", "ok", 3, 0.01), passes=1,
                    calls_per_pass=3, unplaced=0)
    m = Measurement(1, run.times, TaskSpec("x * y", "pass"), kernel_metadata(run, "hot", "cuda:0"))
    result = measurement_to_result(m)
    assert result.metric == "kernel" and result.unit == "s" and result.case.device == "cuda:0"
    back = result_to_measurement(result)
    assert back.quantity == "kernel" and back.times == m.times
    assert Measurement.from_json(m.to_json()).quantity == "kernel"


def test_timer_kernel_time_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="CUDA"):
        Timer("pass").kernel_time()


def test_stop_rule_is_checked_before_cuda():
    with pytest.raises(UsageError, match="max_time"):
        Timer("pass").kernel_time(max_run_time=0.1, min_run_time=1)
