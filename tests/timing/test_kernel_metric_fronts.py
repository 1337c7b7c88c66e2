"""`--metric kernel` through timeit, ops and replay: on the CPU against the simulated GPU
(tests/conftest.py) with the profiled pass replaced by one that attributes known kernel
durations (CUPTI does not exist there); and, without CUDA, one line and exit 2."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch

from torchmark.cli.main import main
from torchmark.timing import kernel_time
from torchmark.timing.kernel_time import Attribution, CallKernels

ADD = str(Path(__file__).resolve().parents[2] / "examples" / "ops" / "simple_add.json")


def fake_profile_ranges(gpu, seconds_of):
    """profile_ranges as the real one reduces a trace: each call range entered gets the
    kernel `seconds_of(i)` says; a spin launched outside the ranges (the sentinel) shows
    as device activity outside them."""
    passes = []

    def profile_ranges(body, sync):
        entered: list[int] = []

        @contextlib.contextmanager
        def in_range(i):
            entered.append(i)
            yield

        spins = gpu.spins
        sync()
        body(in_range)
        sync()
        passes.append(len(entered))
        calls = [CallKernels(i, (("kern_a", seconds_of(i)), ("kern_b", 1e-6)))
                 for i in entered]
        return Attribution(calls, outside=gpu.spins - spins, unplaced=0)
    return profile_ranges, passes


def test_timeit_metric_kernel_on_the_simulated_gpu(fake_gpu, monkeypatch, capsys, tmp_path):
    ranges, passes = fake_profile_ranges(fake_gpu, lambda i: 4e-6)
    monkeypatch.setattr(kernel_time, "profile_ranges", ranges)
    db = f"sqlite:///{tmp_path / 's.db'}"
    save = tmp_path / "m.json"
    code = main(["timeit", "--metric", "kernel", "--rsd", "0.1", "--max-run-time", "1",
                 "--min-run-time", "0.01", "--save", str(save), "--db", db, "pass"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "5.00 us" in out and "Kernel time (CUPTI" in out and "80.0%  kern_a" in out
    assert passes[0] == kernel_time.MIN_PASS_CALLS and len(passes) >= 2
    from torchmark.store import Store

    [run] = Store(db).runs()
    assert [r["metric"] for r in Store(db).results(run=run["id"])] == ["kernel"]
    lines = [json.loads(line) for line in save.read_text().splitlines()]
    assert [line.get("metric") for line in lines if "metric" in line] == ["kernel"]


def test_ops_metric_kernel_on_the_simulated_gpu(fake_gpu, monkeypatch):
    from torchmark.ops.executor import RunOptions, measure
    from torchmark.ops.results_file import record_results

    ranges, passes = fake_profile_ranges(fake_gpu, lambda i: 2e-6 * (1 + i % 2))
    monkeypatch.setattr(kernel_time, "profile_ranges", ranges)
    calls = []

    def op(x):
        calls.append(1)
        return x + 1

    options = RunOptions(device="cuda", warmup=2, iterations=600, metric="kernel",
                         l2_flush=True)
    options.validate()
    metrics, out = measure(op, [torch.ones(4)], {}, options)
    forward = metrics["forward"]
    assert torch.equal(out, torch.full((4,), 2.0))
    # the first pass thrown away, then 600 calls in passes of at most MAX_PASS_CALLS
    assert passes == [kernel_time.MIN_PASS_CALLS, kernel_time.MAX_PASS_CALLS, 100]
    assert len(forward["times"]) == 600
    assert forward["times"][:2] == pytest.approx([3e-6, 5e-6])
    assert [k["name"] for k in forward["kernels"]] == ["kern_a", "kern_b"]
    assert fake_gpu.flushes >= 600  # a flush before each timed call, outside its range
    assert fake_gpu.flush_clean == [True]  # flushed clean, as ncu (device time: zero fill)
    record = {"id": "add|0|0|0", "op": "torch.add", "config": {}, "status": "ok",
              "metrics": metrics}
    [result] = record_results(record, {"run_options": {"device": "cuda", "metric": "kernel"}})
    assert result.metric == "kernel"


def test_ops_metric_kernel_is_checked(fake_gpu):
    from torchmark.ops.executor import RunOptions

    with pytest.raises(ValueError, match="add --device cuda"):
        RunOptions(metric="kernel").validate()
    with pytest.raises(ValueError, match="drop --exec-mode continuous_events"):
        RunOptions(device="cuda", metric="kernel", exec_mode="continuous_events").validate()
    with pytest.raises(ValueError, match="metric must be one of"):
        RunOptions(device="cuda", metric="cycles").validate()


def test_replay_metric_kernel_on_the_simulated_gpu(tmp_path, fake_gpu, monkeypatch):
    import torchmark.replay.replayer as replayer_module
    from torchmark.replay import load_trace, record
    from torchmark.replay.replayer import Replayer
    from torchmark.replay.values import TensorFactory

    x = torch.randn(8)
    path = tmp_path / "chain.json"
    with record(path):
        for _ in range(3):
            x = torch.tanh(x)
    monkeypatch.setattr(replayer_module, "TensorFactory",
                        lambda device, seed: TensorFactory("cpu", seed))
    ranges, passes = fake_profile_ranges(fake_gpu, lambda i: 1e-6 * (i + 1))
    monkeypatch.setattr(kernel_time, "profile_ranges", ranges)
    replayer = Replayer(load_trace(path), device="cuda", metric="kernel")
    replayer.prepare()
    replayer.time_ops(warmup=1, iterations=4)
    assert passes == [3] * 5  # the first iteration thrown away
    for i, rop in enumerate(replayer.ops):
        assert rop.times == pytest.approx([1e-6 * (i + 2)] * 4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("argv", [
    ["timeit", "--metric", "kernel", "x"],
    ["ops", "-c", ADD, "-d", "cuda", "--metric", "kernel"],
    ["ops", "-c", ADD, "--metric", "kernel"],
    ["replay", "trace.json", "--metric", "kernel"],
])
def test_metric_kernel_without_cuda_is_one_line_exit_2(capsys, argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trace.json").write_text("{}")  # replay's TRACE must exist
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--metric kernel: there is no CUDA device here" in err


# -- on a real GPU (skipped without one) --------------------------------------------------

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
SETUP = "x = torch.randn(1 << 22, device='cuda'); y = torch.randn_like(x)"


@needs_cuda
@pytest.mark.cuda
def test_kernel_time_on_a_gpu_names_the_kernels_and_stays_below_device_time():
    from torchmark import Timer

    k = Timer("torch.add(x, y)", SETUP).kernel_time(l2="hot", max_run_time=3)
    assert k.quantity == "kernel" and k.median > 0, repr(k)
    names = [s["name"] for s in k.metadata["kernels"]]
    assert len(names) == 1 and "elementwise" in names[0].lower(), names
    assert k.metadata["kernels"][0]["per_call"] == pytest.approx(1.0)
    d = Timer("torch.add(x, y)", SETUP).device_time(mode="blocking", l2="hot",
                                                   max_run_time=3)
    # device time adds the events around the kernel; never less than the kernel
    assert k.median <= d.median * 1.02, (k.median, d.median)
    # two kernels a call: both counted, in one sample a call
    two = Timer("torch.add(x, y); torch.mul(x, y)", SETUP).kernel_time(l2="hot",
                                                                      max_run_time=3)
    assert two.median == pytest.approx(2 * k.median, rel=0.25), (two.median, k.median)
    assert sum(s["per_call"] for s in two.metadata["kernels"]) == pytest.approx(2.0)


@needs_cuda
@pytest.mark.cuda
def test_batch_time_and_the_event_cost_on_a_gpu():
    from torchmark import Timer

    tiny = "a = torch.ones(1024, device='cuda')"
    batch = Timer("torch.relu(a)", tiny).device_time(mode="batch", max_run_time=3)
    assert batch.quantity == "batch" and batch.metadata["batch_calls"] >= 10
    per_call = Timer("torch.relu(a)", tiny).device_time(mode="blocking", l2="cold",
                                                       max_run_time=3)
    minus = Timer("torch.relu(a)", tiny).device_time(mode="blocking", l2="cold",
                                                    max_run_time=3,
                                                    subtract_event_overhead=True)
    cost = minus.metadata["event_overhead"]
    assert 0 < cost < per_call.median, (cost, per_call.median)
    assert minus.median < per_call.median
    # back to back behind the spin, a 1 us kernel's throughput beats one call's events
    # (a batch timing the host's launch rate read 8 us a call, above the 4 us per call)
    assert batch.median < per_call.median, (batch.median, per_call.median)
    graph = Timer("torch.relu(a)", tiny).device_time(mode="batch", batch_graph=True,
                                                    batch_calls=100, max_run_time=3)
    assert graph.metadata["batch_graph"] and graph.median > 0


@needs_cuda
@pytest.mark.cuda
def test_metric_kernel_clis_on_a_gpu(capsys, tmp_path):
    assert main(["timeit", "--metric", "kernel", "-s", SETUP, "--max-run-time", "2",
                 "--no-store", "x * y"]) == 0
    assert "Kernel time (CUPTI" in capsys.readouterr().out
    assert main(["ops", "-c", ADD, "-d", "cuda", "--metric", "kernel", "-o",
                 str(tmp_path / "ops"), "--no-store", "-i", "50"]) == 0
    out = capsys.readouterr().out
    assert "(kernel" in out and "time)" in out  # the column's header, wrapped or not
    lines = [json.loads(line) for line in (tmp_path / "ops.jsonl").read_text().splitlines()]
    metrics = {line["metric"] for line in lines if line.get("schema") == "torchmark.result"}
    assert metrics == {"kernel"}
