"""Work counted for GB/s and TFLOP/s: bytes read and written, flops."""

import torch

from torchmark.ops.throughput import work

N = 1024
F32 = 4 * N  # bytes of one float tensor of N elements


def test_elementwise_reads_its_inputs_and_writes_its_output():
    a, b = torch.ones(N), torch.ones(N)
    assert work("torch.add", [a, b], {}, torch.add(a, b)) == {"flops": N, "bytes": 3 * F32}


def test_an_out_tensor_is_written_not_read():
    a, b, c = torch.ones(N), torch.ones(N), torch.empty(N)
    assert work("torch.add", [a, b], {"out": c}, torch.add(a, b, out=c))["bytes"] == 3 * F32
    # unless it is an input too
    assert work("torch.add", [a, b], {"out": a}, torch.add(a, b, out=a))["bytes"] == 3 * F32


def test_in_place_ops_read_self_unless_they_overwrite_it():
    a, b = torch.ones(N), torch.ones(N)
    assert work("torch.Tensor.add_", [a, b], {}, a.add_(b))["bytes"] == 3 * F32
    dst, src = torch.empty(N), torch.ones(N)
    assert work("torch.Tensor.copy_", [dst, src], {}, dst.copy_(src)) == \
        {"flops": 0, "bytes": 2 * F32}
    assert work("torch.clone", [src], {}, src.clone()) == {"flops": 0, "bytes": 2 * F32}


def test_matmul_and_linear_flops():
    a, b = torch.ones(8, 16), torch.ones(16, 4)
    assert work("torch.mm", [a, b], {}, a @ b)["flops"] == 2 * 8 * 4 * 16
    layer = torch.nn.Linear(16, 4)
    out = work("torch.nn.Linear", [a], {}, layer(a), built=layer)
    assert out["flops"] == 2 * 8 * 4 * 16
    assert out["bytes"] == 4 * (8 * 16 + 8 * 4 + 16 * 4 + 4)  # input, output, weights


def test_the_table_keeps_one_unit_per_op_and_short_failures():
    from rich.console import Console

    from torchmark.ops.report import records_table

    def record(op, flops, nbytes, status="ok", error=None):
        work = {"flops": flops, "bytes": nbytes, "tflops": flops / 1e12, "gbps": nbytes / 1e9}
        return {"op": op, "id": op, "config": {"build": None, "input": {}}, "status": status,
                "error": error, "metrics": {"forward": {"median": 1.0}, "work": work}}

    records = [record("torch.nn.functional.linear", 10, 1), record("torch.nn.functional.linear",
                                                                    20, 1),
               record("torch.nn.functional.linear", 1, 100),  # memory-bound, the odd one out
               {**record("torch.add", 0, 0, "failed", "RuntimeError: " + "x" * 200 + "\nmore"),
                "metrics": None}]
    console = Console(width=80, record=True)
    console.print(records_table(records))
    text = console.export_text()
    assert "GB/s" not in text and text.count("TFLOP/s") == 3
    assert "ional.linear" in text  # folded, not cut to "torch.nn.f…"
    assert "failed:" in text and "more" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_records_note_is_flagged_in_the_table_and_listed():
    from rich.console import Console

    from torchmark.ops.report import record_notes, records_table

    noted = {"op": "torch.nonzero", "id": "torch.nonzero|0|0|0", "status": "ok", "error": None,
             "config": {"build": None, "input": {}},
             "metrics": {"forward": {"median": 1e-5, "note": "launch gaps"},
                         "backward": {"median": 2e-5}}}
    assert record_notes(noted) == ["forward: launch gaps"]
    assert record_notes({**noted, "metrics": None}) == []
    console = Console(width=100, record=True)
    console.print(records_table([noted]))
    assert "ok (note below)" in console.export_text()
