"""GPU checks of the operator executor (skipped without CUDA)."""

import pytest
import torch

from torchmark.ops import RunOptions, config_from_data, run

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs a CUDA device")]


def _median(records):
    assert records[0]["status"] == "ok", records[0]["error"]
    return records[0]["metrics"]["forward"]["median"]


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


def test_events_and_discrete_agree_on_a_large_matmul():
    config = config_from_data({"torch.mm": {"config": [{"input": [{"args": [
        {"type": "tensor", "shape": [4096, 4096], "requires_grad": False},
        {"type": "tensor", "shape": [4096, 4096], "requires_grad": False}]}]}]}})
    events = _median(run(config, RunOptions(device="cuda", warmup=10, iterations=50,
                                            exec_mode="continuous_events")))
    discrete = _median(run(config, RunOptions(device="cuda", warmup=10, iterations=50)))
    assert abs(events - discrete) / events < 0.05, (events, discrete)


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
