"""GPU checks of the operator executor: on a real GPU (skipped without CUDA), and its
CUDA control flow against a simulated one (always)."""

import pytest
import torch

from torchmark.ops import RunOptions, config_from_data, run

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _median(records):
    assert records[0]["status"] == "ok", records[0]["error"]
    return records[0]["metrics"]["forward"]["median"]


@pytest.mark.cuda
@needs_cuda
def test_l2_flush_makes_a_repeated_read_slower():
    # 16 MiB fits in the L2 of an H100 (50 MiB, two halves): without a flush the second and
    # later reads hit L2; with it every read comes from HBM. Discrete mode synchronizes
    # before each call, so both runs pay the same launch cost (with events around
    # back-to-back calls, a hot run would also time the launch gap that a flush hides).
    config = config_from_data({"torch.Tensor.sum": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [4 * 1024 * 1024], "requires_grad": False}]}]}]}})
    hot = _median(run(config, RunOptions(device="cuda", warmup=10, iterations=100)))
    cold = _median(run(config, RunOptions(device="cuda", warmup=10, iterations=100,
                                          l2_flush=True)))
    assert cold > hot * 1.05, (hot, cold)


@pytest.mark.cuda
@needs_cuda
def test_events_and_discrete_agree_on_a_large_matmul():
    config = config_from_data({"torch.mm": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [4096, 4096], "requires_grad": False},
        {"type": "tensor", "shape": [4096, 4096], "requires_grad": False}]}]}]}})
    events = _median(run(config, RunOptions(device="cuda", warmup=10, iterations=50,
                                            exec_mode="continuous_events")))
    discrete = _median(run(config, RunOptions(device="cuda", warmup=10, iterations=50)))
    assert abs(events - discrete) / events < 0.05, (events, discrete)


@pytest.mark.cuda
@needs_cuda
def test_memory_and_cuda_graphs():
    config = config_from_data({"torch.add": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [1024, 1024], "requires_grad": False},
        {"type": "tensor", "shape": [1024, 1024], "requires_grad": False}]}]}]}})
    record = run(config, RunOptions(device="cuda", warmup=3, iterations=10))[0]
    assert record["metrics"]["forward"]["memory"]["peak_bytes"] >= 4 * 1024 * 1024
    graph = run(config, RunOptions(device="cuda", warmup=3, iterations=10, cuda_graph=True))[0]
    assert graph["status"] == "ok", graph["error"]
    # the output lives in the graph's pool, allocated at capture
    assert graph["metrics"]["forward"]["memory"]["peak_bytes"] >= 4 * 1024 * 1024


# The executor's CUDA control flow on the CPU, against the simulated GPU of
# tests/conftest.py: tensors stay on the CPU, every call "runs" a 3 us kernel.
@pytest.mark.parametrize("mode, flush, graph", [
    ("discrete", False, False), ("discrete", True, False), ("continuous", False, False),
    ("continuous_events", False, False), ("continuous_events", True, False),
    ("continuous_events", False, True)])
def test_executor_on_a_simulated_gpu(fake_gpu, mode, flush, graph):
    from torchmark.ops.executor import measure

    fake_gpu.peak_bytes = 4096

    def op(x):
        fake_gpu.kernel(3e-6)
        return x + 1

    options = RunOptions(device="cuda:1", warmup=2, iterations=5, exec_mode=mode,
                         l2_flush=flush, cuda_graph=graph)
    options.validate()
    metrics, out = measure(op, [torch.ones(4)], {}, options)
    forward = metrics["forward"]
    assert torch.equal(out, torch.full((4,), 2.0))
    assert forward["iterations"] == 5 and forward["memory"] == {"peak_bytes": 4096}
    if mode == "continuous_events":  # device time: the kernel, never the flush
        assert forward["times"] == pytest.approx([3e-6] * 5)
    assert (fake_gpu.flushes > 0) == flush
    assert fake_gpu.devices_used == {1} and fake_gpu.current == 0
