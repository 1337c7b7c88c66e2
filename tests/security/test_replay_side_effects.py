"""Replaying a trace from someone else runs no op that touches files or process-wide
state: such ops are refused (and named in the coverage report) unless the user passes
--allow-unsafe-ops."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from torchmark.replay import record, replay


def crafted_trace(tmp_path, victim):
    """The reported exploit: a trace that maps `victim` with aten::from_file(shared=True)
    and fills it. Recorded on a scratch file, then pointed at the victim."""
    scratch = tmp_path / "scratch.bin"
    scratch.write_bytes(b"\0" * 16)
    path = tmp_path / "trace.json"
    with record(path, with_timing=False):
        t = torch.from_file(str(scratch), shared=True, size=16, dtype=torch.uint8)
        t.fill_(65)
    text = path.read_text()
    assert str(scratch) in text and "aten::from_file" in text
    path.write_text(text.replace(str(scratch), str(victim)))
    return path


def test_from_file_then_fill_does_not_touch_the_file(tmp_path):
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious data!!!")
    path = crafted_trace(tmp_path, victim)
    report = replay(path, warmup=1, iterations=2)
    assert victim.read_bytes() == b"precious data!!!"
    refused = [op for op in report.ops if op.status == "refused"]
    assert [op.op for op in refused] == ["aten::from_file"]
    assert refused[0].reason.startswith("refused: side effect: ")


def test_the_cli_lists_refused_ops_and_records_them(tmp_path):
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious data!!!")
    path = crafted_trace(tmp_path, victim)
    proc = subprocess.run([sys.executable, "-m", "torchmark", "replay", str(path), "-w", "0",
                           "-i", "1", "-o", str(tmp_path / "r")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused (1): (--allow-unsafe-ops runs them)" in proc.stdout
    assert "aten::from_file" in proc.stdout and "side effect" in proc.stdout
    from torchmark.ops.results_file import read_records

    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    statuses = {r["op"]: r["status"] for r in read_records(tmp_path / "r.jsonl")}
    assert statuses["aten::from_file"] == "refused"
    assert lines[-1]["refused"] == 1
    assert victim.read_bytes() == b"precious data!!!"


def test_allow_unsafe_ops_is_the_users_choice(tmp_path):
    """With the flag the op runs: the route was real, and the gate is what stops it."""
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious data!!!")
    path = crafted_trace(tmp_path, victim)
    report = replay(path, warmup=0, iterations=1, allow_unsafe_ops=True)
    assert not [op for op in report.ops if op.status == "refused"]
    assert victim.read_bytes() == b"A" * 16
