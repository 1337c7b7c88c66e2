"""Ops with --metric memory: each call's allocations, hand-computed for a matmul, an add
and an in-place add, forward and backward; two exact Results a pass; what cannot go
with it refused in one line."""

from __future__ import annotations

import pytest

from torchmark.cli.main import main
from torchmark.ops import RunOptions, config_from_data, run
from torchmark.ops.results_file import record_results


def _tensor(*shape, grad=False):
    return {"type": "tensor", "shape": list(shape), "requires_grad": grad}


CONFIG = {
    "torch.mm": {"config": [{"input": [{"args": [_tensor(64, 32, grad=True),
                                                 _tensor(32, 16, grad=True)]}]}]},
    "torch.add": {"config": [{"input": [{"args": [_tensor(1000), _tensor(1000)]}]}]},
    "torch.Tensor.add_": {"config": [{"input": [{"args": [_tensor(1000), _tensor(1000)]}]}]},
}


def test_each_pass_counts_the_bytes_it_allocates():
    records = {r["op"]: r for r in run(config_from_data(CONFIG),
                                       RunOptions(metric="memory", iterations=3,
                                                  backward=False))}
    assert all(r["status"] == "ok" for r in records.values()), records
    forward = {op: r["metrics"]["forward"]["bytes"] for op, r in records.items()}
    assert forward["torch.mm"]["peak"] == [64 * 16 * 4] * 3  # the product
    assert forward["torch.add"]["allocated"] == [4000] * 3
    assert forward["torch.Tensor.add_"]["allocations"] == [0] * 3  # in place
    mm = run(config_from_data({"torch.mm": CONFIG["torch.mm"]}),
             RunOptions(metric="memory", iterations=2, backward=True))[0]
    # the backward makes both inputs' gradients: 64 x 32 and 32 x 16 floats
    assert mm["metrics"]["backward"]["bytes"]["allocated"] == [(64 * 32 + 32 * 16) * 4] * 2
    results = record_results(mm, {"run_options": {"metric": "memory", "device": "cpu"}})
    assert sorted((r.case.id.rsplit("#", 1)[1], r.metric) for r in results) == [
        ("backward", "allocated"), ("backward", "memory"), ("forward", "allocated"),
        ("forward", "memory")]
    assert {r.case.description for r in results} == {"forward, discrete", "backward, discrete"}


def test_the_ops_command_counts_saves_and_gates_bytes(tmp_path, capsys):
    import json

    config = tmp_path / "ops.json"
    config.write_text(json.dumps({"torch.add": CONFIG["torch.add"]}))
    prefix = tmp_path / "mem"
    assert main(["ops", "-c", str(config), "--metric", "memory", "-o", str(prefix),
                 "--no-store", "-i", "3"]) == 0
    out = capsys.readouterr().out
    assert "(peak bytes)" in out and "4,000 B" in out
    file = f"{prefix}.jsonl"
    assert main(["gate", "--baseline", file, "--candidate", file]) == 0
    assert "2 same" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--exec-mode", "continuous"], "--metric memory counts each call's allocations alone: "
                                    "drop --exec-mode continuous"),
])
def test_what_memory_cannot_go_with_is_refused(tmp_path, capsys, extra, message):
    import json

    config = tmp_path / "ops.json"
    config.write_text(json.dumps({"torch.add": CONFIG["torch.add"]}))
    code = main(["ops", "-c", str(config), "--metric", "memory", "--no-store",
                 "-o", str(tmp_path / "x"), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
