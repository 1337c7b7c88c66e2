"""Memory per call from torch's allocator: hand-computed bytes, warnings when samples
differ or a call keeps what it allocates, the Results round trip, the CLI, Compare, the
gate and change detection on a planted allocation."""

from __future__ import annotations

import pytest

import torchmark
from torchmark.cli.main import main
from torchmark.records import results_of
from torchmark.timing.memory import MemorySample
from torchmark.timing.results import result_to_memory
from torchmark.verdicts import Side, judge

SETUP = "x = torch.rand(1000); y = torch.rand(1000)"


@pytest.mark.parametrize("stmt, peak, allocated, allocations", [
    ("x + y", 4000, 4000, 1),
    ("(x + y) * y", 8000, 8000, 2),  # a temporary, alive until the product exists
    ("torch.cat([x, y])", 8000, 8000, 1),
    ("x.add_(y)", 0, 0, 0),
    ("x.view(10, 100)", 0, 0, 0),
])
def test_a_calls_bytes_equal_the_hand_computed_ones(stmt, peak, allocated, allocations):
    m = torchmark.Timer(stmt, SETUP).memory(samples=3)
    assert (m.peak, m.allocated, m.allocations) == (peak, allocated, allocations)
    assert m.agree and m.warnings == () and len(m.samples) == 3
    assert f"peak {peak:,} bytes above the start of a call" in repr(m)


def test_samples_that_differ_and_bytes_kept_are_reported():
    grows = torchmark.Timer("kept.append(torch.empty(256)) if len(kept) < 2 else None",
                            "kept = []").memory(samples=4, warm_up=0)
    assert not grows.agree and grows.peak == 0  # the last sample: the settled state
    assert [s.peak for s in grows.samples] == [1024, 1024, 0, 0]
    assert "the 4 samples differ in peak, allocated, allocations, retained" in \
        grows.warnings[0]
    leaks = torchmark.Timer("kept.append(torch.empty(256))", "kept = []").memory(samples=2)
    assert leaks.agree and leaks.steady.retained == 1024
    assert leaks.warnings == ("each call keeps 1,024 bytes allocated after it returns",)
    assert "WARNING: each call keeps 1,024 bytes" in repr(leaks)


def test_a_memory_measurement_is_two_exact_results_and_back():
    m = torchmark.Timer("x + y", SETUP, label="add", sub_label="1000").memory(samples=3)
    memory, allocated = results_of(m)
    assert (memory.metric, memory.unit, memory.samples) == ("memory", "bytes", (4000.0,) * 3)
    assert (allocated.metric, allocated.samples) == ("allocated", (4000.0,) * 3)
    assert memory.case == allocated.case and memory.case.title == "add: 1000"
    assert result_to_memory(memory) == m
    nothing = results_of(torchmark.Timer("x.add_(y)", SETUP).memory(samples=2))
    assert all(r.storable_problem() is None for r in nothing)  # zero bytes are storable


def test_the_engine_calls_any_change_of_bytes_including_from_nothing():
    assert judge(Side([4000.0]), Side([4000.0]), metric="memory").kind == "same"
    assert judge(Side([4000.0]), Side([8096.0]), metric="allocated",
                 threshold=0.0).kind == "slower"
    grew = judge(Side([0.0] * 3), Side([4096.0] * 3), metric="memory")
    assert grew.kind == "slower" and grew.reason == "exact: 0 -> 4,096, from nothing"
    assert judge(Side([4096.0]), Side([0.0]), metric="memory").kind == "faster"


def test_timeit_memory_saves_compares_and_gates(capsys, tmp_path, monkeypatch):
    files = []
    planted = "x * y\nif os.environ.get('PLANT'):\n    torch.empty(1024)"  # 4 KiB more
    for side in ("before", "after"):
        if side == "after":
            monkeypatch.setenv("PLANT", "1")
        path = tmp_path / f"{side}.jsonl"
        for name, stmt in (("x + y", "x + y"), ("x * y", planted)):
            code = main(["timeit", "--metric", "memory", "-s", "import os; " + SETUP,
                         "--label", "ops", "--sub-label", name, "--samples", "2",
                         "--no-store", "--save", str(path), stmt])
            assert code == 0
        files.append(str(path))
    out = capsys.readouterr().out
    assert "peak 4,000 bytes above the start of a call, 4,000 bytes in 1 allocation(s) " \
           "(cpu)" in out
    assert main(["compare", files[0]]) == 0
    table = capsys.readouterr().out
    assert "x + y  |  4000" in table and "x * y  |  4000" in table
    assert "Memory: each call's peak bytes allocated above its start (B)." in table
    assert main(["gate", "--baseline", files[0], "--candidate", files[1],
                 "--max-slowdown", "0"]) == 1
    text = capsys.readouterr().out
    rows = {" ".join(line.split()[:5]): line.split()[5:]
            for line in text.splitlines() if line.startswith("ops: ")}
    assert rows["ops: x * y allocated"] == ["4,000", "8,096", "+102.4%", "[+102.4%,",
                                            "+102.4%]", "none", "exact", "slower"]
    assert rows["ops: x + y memory"][-1] == rows["ops: x + y allocated"][-1] == "same"
    assert main(["ab", *files]) == 2  # ab judges times: it says which command judges bytes
    assert "holds memory results (bytes), which `ab` does not judge (it judges times): " \
        "`torchmark gate --baseline A --candidate B` does" in capsys.readouterr().err


def test_timeit_memory_refuses_what_it_cannot_do(capsys):
    for extra, message in ((["--processes", "2"], "--processes times wall time"),
                           (["--l2", "hot"], "--l2: for GPU time, not --metric memory"),
                           (["--vs", "x - y"], "--metric memory")):
        code = main(["timeit", "--metric", "memory", "-s", SETUP, "x + y", *extra])
        assert code == 2, extra
        assert message in capsys.readouterr().err
    assert main(["timeit", "--samples", "3", "x = 1"]) == 2
    assert "--samples: for --metric memory" in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():
        from torchmark.core.errors import UsageError

        with pytest.raises(UsageError, match="there is no CUDA device here"):
            torchmark.Timer("x + y", SETUP).memory(device="cuda")


def test_a_memory_step_in_the_history_is_detected(capsys, tmp_path):
    import dataclasses
    import datetime as dt

    from torchmark.core.provenance import Provenance
    from torchmark.store import Store

    before = results_of(torchmark.Timer("x + y", SETUP).memory(samples=3))
    after = [dataclasses.replace(r, samples=tuple(s + 4096 for s in r.samples))
             for r in before]
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    base, first = Provenance.capture(env="ci"), dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc)
    for k in range(12):
        run = store.start_run(dataclasses.replace(
            base, git_commit=f"{k:02d}" + "d" * 38, git_dirty=False,
            started=(first + dt.timedelta(hours=k)).isoformat()))
        store.record(before if k < 6 else after, run)
        store.finish_run(run, "ok")
    store.close()
    assert main(["regressions", "--db", db, "--metric", "memory"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("x + y")]
    assert "+102.4%" in row and "run 6 05dddddd  run 7 06dddddd" in row  # the step, exactly


def test_a_memory_sample_is_read_back_only_when_whole():
    from torchmark.core.errors import UsageError

    m = torchmark.Timer("x + y", SETUP).memory(samples=2)
    memory = results_of(m)[0]
    assert result_to_memory(memory).steady == MemorySample(4000, 4000, 1, 0)
    broken = dataclasses_replace_extra(memory, {"memory": {"samples": [{"peak": "4000"}]}})
    with pytest.raises(UsageError, match="a memory sample is not whole numbers"):
        result_to_memory(broken)


def dataclasses_replace_extra(result, extra):
    import dataclasses

    return dataclasses.replace(result, extra=extra)


def test_show_lists_a_stored_run_s_memory(capsys, tmp_path):
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["timeit", "--metric", "memory", "-s", SETUP, "--label", "ops",
                 "--sub-label", "add", "--samples", "2", "--db", db, "x + y"]) == 0
    capsys.readouterr()
    assert main(["show", "1", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "ops: add: 4,000 bytes (memory, median of 2)" in lines
    assert "ops: add: 4,000 bytes (allocated, median of 2)" in lines


def test_a_statement_that_replaces_what_it_keeps_samples_alike():
    """`w = x + y` frees the previous call's `w` as it makes its own: each sampled call
    keeps nothing more, the first too (its warm-up's `w` is one the profiler saw)."""
    m = torchmark.Timer("w = x + y", SETUP).memory()
    assert [s.retained for s in m.samples] == [0] * len(m.samples)
    assert {s.peak for s in m.samples} == {4000} and not m.warnings
