"""Replaying execution traces recorded here, on the CPU, of small real programs."""

import gzip
import json
import sys

import pytest
import torch

from torchmark.cli.main import main
from torchmark.replay import TraceError, load_trace, record, replay
from torchmark.replay.replayer import Replayer


def mlp_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x, target = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
    return step


def conv_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 4 * 4, 5))
    x = torch.randn(2, 3, 8, 8)

    def step():
        model(x).sum().backward()
    return step


def inplace_step():
    x = torch.ones(4, 4)

    def step():
        x.add_(1)
        x.mul_(2)
        torch.relu_(x)
        x.clamp_(max=100.0)
    return step


def views_step():
    x = torch.zeros(4, 6)

    def step():
        v = x.view(24)
        v.add_(1)
        row = x[1]
        row.mul_(3)
        x.t().contiguous().sum()
    return step


def indexing_step():
    x = torch.randn(6, 3)
    pos = torch.zeros(2, dtype=torch.long)
    bag = torch.nn.EmbeddingBag(10, 4)
    indices, offsets = torch.tensor([1, 2, 3, 4, 5]), torch.tensor([0, 2])

    def step():
        pos.add_(1)  # an input changed in place, then used as an index
        torch.index_select(x, 0, pos % 6)
        x[torch.tensor([0, 2, 5])]  # indices made by torch.tensor (aten::empty + a copy)
        torch.repeat_interleave(torch.tensor([1, 2]))
        bag(indices, offsets)
        torch.cat(torch.split(x, 2))
        torch.chunk(x, 3)[1].sum()
    return step


PROGRAMS = {"mlp": mlp_step, "conv": conv_step, "inplace": inplace_step, "views": views_step,
            "indexing": indexing_step}


def record_program(tmp_path, name):
    step = PROGRAMS[name]()
    step()  # warm up outside the trace
    path = tmp_path / f"{name}.json"
    with record(path):
        step()
    return path


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_recorded_programs_replay_with_full_coverage(tmp_path, name):
    path = record_program(tmp_path, name)
    report = replay(path, warmup=1, iterations=3)
    assert report.ops, "the trace holds top-level ops"
    for op in report.ops:
        assert op.status in ("replayed", "skipped")
        if op.status == "skipped":
            assert op.reason, op.op
        elif name != "indexing":  # its data-dependent shapes (repeat_interleave) may differ
            assert op.output_mismatch is None, (op.op, op.output_mismatch)
        if op.status == "replayed":
            assert len(op.times) == 3 and all(t > 0 for t in op.times)
    assert report.coverage >= 0.95, [(o.op, o.reason) for o in report.skipped]
    assert report.time_weighted is not None and report.time_weighted >= 0.95
    assert report.iteration.median > 0
    assert report.notes == []  # whole durations, no spin on the CPU


def test_only_top_level_ops_are_selected(tmp_path):
    trace = load_trace(record_program(tmp_path, "mlp"))
    selected = trace.top_level_ops()
    names = [n.name for n in selected]
    assert names[:3] == ["aten::linear", "aten::relu", "aten::linear"]
    assert "aten::addmm" not in names[:3]  # run by aten::linear, not again
    for node in selected:
        assert not any(a.is_aten for a in trace.ancestors(node))
    ids = [n.id for n in selected]
    assert ids == sorted(ids)


def test_storage_sharing_and_dataflow(tmp_path):
    base = torch.arange(12.0)
    a, b = base[:6], base[6:]  # two views of one storage, made before recording
    path = tmp_path / "shared.json"
    with record(path, with_timing=False):
        c = torch.add(a, b)
        torch.mul(c, a)
    replayer = Replayer(load_trace(path))
    replayer.prepare()
    add, mul = replayer.ops
    assert add.status == mul.status == "replayed"
    x, y = add.args[0], add.args[1]
    assert x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert y.storage_offset() - x.storage_offset() == 6
    assert len(mul.refs) == 1  # its first input is add's output, not a fresh tensor


def test_subgraph_selection(tmp_path):
    x = torch.ones(4)
    path = tmp_path / "sub.json"
    with record(path):
        torch.sin(x)
        with torch.profiler.record_function("block"):
            torch.cos(x)
            torch.exp(x)
    report = replay(path, warmup=0, iterations=1, subgraph="block")
    assert [op.op for op in report.ops] == ["aten::cos", "aten::exp"]
    with pytest.raises(TraceError, match="no node named 'nope'"):
        replay(path, subgraph="nope")


def test_an_unresolvable_op_is_skipped_with_its_reason(tmp_path):
    path = record_program(tmp_path, "inplace")
    data = json.loads(path.read_text())
    for node in data["nodes"]:
        if node["name"] == "aten::mul_":
            node["name"] = "aten::no_such_op"
            for attr in node["attrs"]:
                if attr["name"] == "op_schema":
                    attr["value"] = "aten::no_such_op(Tensor self) -> Tensor"
    gz = tmp_path / "edited.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(data).encode()))
    report = replay(gz, warmup=0, iterations=1)
    skipped = {op.op: op.reason for op in report.skipped}
    assert skipped == {"aten::no_such_op": "torch has no operator aten::no_such_op"}
    assert report.time_weighted is None  # no timing trace beside the edited copy


@pytest.mark.parametrize("damage", ["shapes", "strides"])
def test_an_op_malformed_in_the_trace_is_skipped_and_the_replay_goes_on(tmp_path, damage):
    path = record_program(tmp_path, "mlp")
    data = json.loads(path.read_text())
    # the first linear's input comes from outside the trace: its entries are read
    node = next(n for n in data["nodes"] if n["name"] == "aten::linear")
    node["inputs"][damage][0] = ["x"]  # a dimension that is not a number
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(data))
    report = replay(damaged, warmup=0, iterations=1)
    skipped = {op.op: op.reason for op in report.skipped}
    assert "malformed in the trace" in skipped["aten::linear"], skipped
    assert report.replayed  # the ops that do not depend on it


def test_jsonl_output_has_the_ops_shape(tmp_path):
    path = record_program(tmp_path, "mlp")
    replay(path, warmup=0, iterations=2, out=tmp_path / "r.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert lines[0]["schema"] == "torchmark.ops.results" and lines[0]["source"] == "replay"
    from torchmark.ops.results_file import read_records

    records = read_records(tmp_path / "r.jsonl")
    assert all({"op", "id", "config", "status", "metrics", "error"} <= set(r) for r in records)
    assert records[0]["op"] == "aten::linear" and records[0]["status"] == "ok"
    assert len(records[0]["metrics"]["forward"]["times"]) == 2
    assert lines[-1]["type"] == "footer" and lines[-1]["coverage"] >= 0.95
    from torchmark.ops.as_measurements import ops_measurements

    assert lines[0]["threads"] == 1  # 1 by default; compare shows the count used
    assert {m.num_threads for m in ops_measurements(tmp_path / "r.jsonl")} == {1}
    before = torch.get_num_threads()
    replay(path, warmup=0, iterations=1, threads=1, out=tmp_path / "one.jsonl")
    header = json.loads((tmp_path / "one.jsonl").read_text().splitlines()[0])
    assert header["threads"] == 1 and header["run_options"]["threads"] == 1
    assert torch.get_num_threads() == before  # restored
    with pytest.raises(ValueError, match="threads must be an int >= 1, got 0"):
        replay(path, threads=0)


@pytest.mark.parametrize("content, message", [
    (b"\x00\x01binary", "not JSON"),
    (b'{"nodes": [', "truncated JSON"),
    (b'{"traceEvents": []}', "not an execution trace"),
    (b'{"schema": "9.0.0", "nodes": []}', "schema '9.0.0' is not supported"),
    (b'{"schema": "1.1.1", "nodes": [{"name": "x"}]}', "a node is malformed"),
])
def test_bad_files_give_one_line_errors(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_trace(bad)
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_trace_then_replay(tmp_path, capsys):
    script = tmp_path / "prog.py"
    script.write_text("import sys, torch\nn = int(sys.argv[1])\nx = torch.randn(n, n)\n"
                      "(x @ x).relu().sum()\n")
    out = tmp_path / "prog.json"
    assert main(["trace", "-o", str(out), "--", sys.executable, str(script), "8"]) == 0
    assert out.exists() and (tmp_path / "prog.kineto.json").exists()
    capsys.readouterr()
    prefix = tmp_path / "r"
    assert main(["replay", str(out), "-i", "2", "-o", str(prefix)]) == 0
    text = capsys.readouterr().out
    assert "replayed 4 of 4 top-level ops (100.0%)" in text
    assert (tmp_path / "r.jsonl").exists()
    assert main(["trace", "--", "ls"]) == 2


def test_old_schema_nodes_and_truncated_strings(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "1.0.1", "nodes": [
        {"id": 1, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 1,
         "inputs": [], "input_shapes": [], "input_types": [], "outputs": [],
         "output_shapes": [], "output_types": []},
        {"id": 2, "name": "aten::neg", "parent": 1, "op_schema": "aten::neg(Tensor self) -> Tensor",
         "inputs": [[10, 11, 0, 4, 4, "cpu"]], "input_shapes": [[4]],
         "input_types": ["Tensor(float)"], "outputs": [[12, 13, 0, 4, 4, "cpu"]],
         "output_shapes": [[4]], "output_types": ["Tensor(float)"]}]}))
    report = replay(old, warmup=0, iterations=1)
    assert [(op.op, op.status) for op in report.ops] == [("aten::neg", "replayed")]
    cut = tmp_path / "cut.json"
    cut.write_text('{"schema": "1.1.1", "nodes": [{"name": "aten::ad')
    with pytest.raises(TraceError, match="truncated JSON"):
        load_trace(cut)


def test_cyclic_parents_and_a_step_without_ops(tmp_path, capsys):
    cyclic = tmp_path / "cyclic.json"
    node = {"inputs": [], "input_shapes": [], "input_types": [], "outputs": [],
            "output_shapes": [], "output_types": []}
    cyclic.write_text(json.dumps({"schema": "1.0.1", "nodes": [
        {**node, "id": 1, "name": "step", "parent": 2},
        {**node, "id": 2, "name": "ProfilerStep#3", "parent": 1}]}))
    trace = load_trace(cyclic)
    assert sorted(n.id for n in trace.subtree(trace.nodes[1])) == [1, 2]  # ends
    assert main(["replay", str(cyclic), "--subgraph", "step"]) == 2
    assert "no aten operators to replay under 'step'" in capsys.readouterr().err
    assert main(["replay", str(cyclic), "--step", "3"]) == 2
    assert "no aten operators to replay under ProfilerStep#3" in capsys.readouterr().err
    assert main(["replay", str(cyclic), "--subgraph", "step", "--step", "3"]) == 2
    assert "choose a subgraph ('step') or a step (3), not both" in capsys.readouterr().err


def test_random_ops_draw_the_same_values_every_run(tmp_path):
    x = torch.randn(64)
    path = tmp_path / "random.json"
    with record(path):
        mask = torch.rand(64) > 0.5
        x[mask].sum()
    after_prepare = []
    for seed in (1, 2):  # whatever the caller's generator held before
        torch.manual_seed(seed)
        replayer = Replayer(load_trace(path))
        replayer.prepare()
        assert any(r.op.startswith("aten::rand") for r in replayer.replayed)
        after_prepare.append(float(torch.rand(1)))
    assert after_prepare[0] == after_prepare[1]
    replayer.reset()
    first = float(torch.rand(1))
    replayer.reset()  # every iteration starts from the same generator state
    assert float(torch.rand(1)) == first
    torch.manual_seed(7)
    expected = float(torch.rand(1))
    torch.manual_seed(7)
    replay(path, warmup=0, iterations=1)  # replay() leaves the caller's generator alone
    assert float(torch.rand(1)) == expected


def test_a_script_exiting_with_a_message_or_a_code(tmp_path, capsys):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nsys.exit(sys.argv[1] if sys.argv[1] != '3' else 3)\n")
    out = tmp_path / "exits.json"
    assert main(["trace", "-o", str(out), "--", sys.executable, str(script), "bad config"]) == 1
    assert "exits.py exited with status 1 (bad config)" in capsys.readouterr().err
    assert main(["trace", "-o", str(out), "--", sys.executable, str(script), "3"]) == 3
    assert "exits.py exited with status 3;" in capsys.readouterr().err


def test_an_output_is_freed_after_its_last_reader(tmp_path):
    import weakref

    x = torch.randn(64)
    path = tmp_path / "chain.json"
    with record(path, with_timing=False):
        y = torch.relu(x)
        z = torch.mul(y, 2)
        torch.sum(z)
    replayer = Replayer(load_trace(path))
    replayer.prepare()
    relu, mul, total = replayer.replayed
    assert [len(r.release) for r in (relu, mul, total)] == [0, 1, 2]  # y; z and the sum
    made = []
    call = relu.call
    relu.call = lambda *a, **k: made.append(weakref.ref(out := call(*a, **k))) or out
    alive_at = {}
    replayer.run_once(lambda rop, seconds: alive_at.setdefault(rop.id, made[-1]() is not None))
    # relu's output is read by mul only: dropped once mul has run, before sum runs
    assert alive_at == {relu.id: True, mul.id: True, total.id: False}


def test_per_op_gpu_timing_on_a_simulated_device(tmp_path, fake_gpu, monkeypatch):
    # The CUDA branch of the replay (events around each op behind a spin, one sync at the
    # end) on the CPU: tensors stay on the CPU, torch.cuda is simulated (tests/conftest.py).
    import torchmark.replay.replayer as replayer_module
    from torchmark.replay.values import TensorFactory

    path = record_program(tmp_path, "mlp")
    monkeypatch.setattr(replayer_module, "TensorFactory",
                        lambda device, seed: TensorFactory("cpu", seed))
    fake_gpu.host_clock = True  # the ops really run on the CPU: events read its clock
    replayer = Replayer(load_trace(path), device="cuda:1")
    replayer.prepare()
    assert replayer.replayed
    replayer.time_ops(warmup=1, iterations=3)
    for rop in replayer.replayed:
        assert len(rop.times) == 3 and all(t > 0 for t in rop.times), rop.id
    assert fake_gpu.spins == 3 and all(s > 2e-4 for s in fake_gpu.spin_seconds)  # timed only
    # nothing waits for the device between a spin and the ops it holds back
    kinds = [kind for kind, _ in fake_gpu.log]
    spins = [i for i, kind in enumerate(kinds) if kind == "spin"]
    assert all(kinds[i + 1] == "record" for i in spins), kinds
    assert fake_gpu.current == 0  # the replay's device was current only while it ran


def simulated_gpu_chain(tmp_path, monkeypatch, fake_gpu, ops: int) -> Replayer:
    """A prepared replay of `ops` tanh calls in a row on the simulated GPU (the tensors
    stay on the CPU; events read the host's clock)."""
    import torchmark.replay.replayer as replayer_module
    from torchmark.replay.values import TensorFactory

    x = torch.randn(8)
    path = tmp_path / "long.json"
    with record(path):
        for _ in range(ops):
            x = torch.tanh(x)
    monkeypatch.setattr(replayer_module, "TensorFactory",
                        lambda device, seed: TensorFactory("cpu", seed))
    fake_gpu.host_clock = True
    replayer = Replayer(load_trace(path), device="cuda")
    replayer.prepare()
    assert len(replayer.replayed) == ops
    return replayer


def test_gpu_replay_runs_through_the_gpu_sampler(tmp_path, fake_gpu, monkeypatch):
    # the sampler's phases (its warm-up untimed), a pass an iteration, a pair of events
    # an op created by the sampler, each chunk position its own spin cover
    from torchmark.timing import gpu_sampler
    from torchmark.timing.gpu_sampler import Phase

    replayer = simulated_gpu_chain(tmp_path, monkeypatch, fake_gpu, 70)
    events = []
    monkeypatch.setattr(gpu_sampler, "cuda_event",
                        lambda torch, timing: events.append(timing) or torch.cuda.Event())
    replayer.time_ops(warmup=2, iterations=3)
    sampler = replayer._sampler
    assert sampler.phases == [Phase.WARM_UP, Phase.CALIBRATION, Phase.SAMPLING]
    assert all(len(rop.times) == 3 for rop in replayer.replayed)
    assert len(sampler.covers) == 2 and all(c.batches == 3 for c in sampler.covers)
    assert events.count(True) == 2 * 70 * 3 and events.count(False) == 2 * 3
    assert fake_gpu.spins == 2 * 3 and replayer.spin_note() is None


def test_gpu_replay_queues_chunks_behind_their_own_spins(tmp_path, fake_gpu, monkeypatch):
    # A long iteration is split into chunks, each behind a spin (the launch queue holds
    # about a thousand entries); a chunk holding an op that synchronizes with the host
    # cannot be covered: its spin stays bounded, then is dropped, and the report says so.
    from torchmark.replay.session import ReplayReport, summary_lines
    from torchmark.timing.gpu_sampler import MAX_SPIN_S, SPIN_GIVE_UP

    replayer = simulated_gpu_chain(tmp_path, monkeypatch, fake_gpu, 100)
    path = replayer.trace.path
    syncing = replayer.replayed[80]  # in the second chunk
    real = syncing.call

    def call_and_sync(*args, **kwargs):
        fake_gpu.host_sync()
        return real(*args, **kwargs)

    syncing.call = call_and_sync
    replayer.time_ops(warmup=0, iterations=8)
    assert all(len(rop.times) == 8 for rop in replayer.replayed)
    first, second = replayer._sampler.covers
    assert first.uncovered == 0 and not first.dropped
    assert second.uncovered == 8 and second.dropped
    assert fake_gpu.spins == 8 + SPIN_GIVE_UP and max(fake_gpu.spin_seconds) <= MAX_SPIN_S
    note = replayer.spin_note()
    assert note.startswith("1 of 2 chunks of up to 64 ops outlasted their spin")
    report = ReplayReport(str(path), "cuda", replayer.ops, None, None, [note])
    assert f"note: {note}" in summary_lines(report)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["mlp", "indexing"])
def test_replay_on_a_gpu(tmp_path, name):
    import time

    started = time.perf_counter()
    report = replay(record_program(tmp_path, name), device="cuda", warmup=2, iterations=20)
    assert time.perf_counter() - started < 60  # a syncing op must not grow the spin
    assert report.coverage >= 0.95 and report.iteration.median > 0
    assert all(len(op.times) == 20 and min(op.times) >= 0 for op in report.replayed)
    if name == "mlp":  # nothing in it synchronizes: every chunk was covered
        assert report.notes == []


def test_text_report_names_outputs_that_differ(tmp_path):
    from torchmark.replay.session import summary_lines

    report = replay(record_program(tmp_path, "indexing"), warmup=0, iterations=1)
    differing = [op for op in report.replayed if op.output_mismatch]
    # repeat_interleave's counts come from torch.tensor (aten::empty, zeroed on replay)
    assert any("repeat_interleave" in op.op for op in differing)
    text = "\n".join(summary_lines(report, top=50))
    assert f"outputs differ from the recording ({len(differing)}" in text
    for op in differing:
        assert f"{op.op} (node {op.node.id}): {op.output_mismatch}" in text


def test_trace_of_a_script_that_raises_keeps_what_ran(tmp_path, capsys):
    script = tmp_path / "fails.py"
    script.write_text("import torch\n(torch.ones(4) * 2).sum()\n"
                      "def f():\n    raise ValueError('boom')\nf()\n")
    out = tmp_path / "fails.json"
    assert main(["trace", "-o", str(out), "--", sys.executable, str(script)]) == 1
    err = capsys.readouterr().err
    assert "fails.py raised ValueError: boom; what ran before is in the execution trace" in err
    assert 'line 5, in <module>' in err and "click" not in err and "runpy" not in err
    assert out.exists() and (tmp_path / "fails.kineto.json").exists()
    report = replay(out, warmup=0, iterations=1)  # the ops before the error replay
    assert report.replayed and report.time_weighted is not None


def test_trace_without_timing_for_scripts_with_their_own_profiler(tmp_path, capsys):
    script = tmp_path / "profiled.py"
    script.write_text("import torch\nx = torch.randn(8, 8)\n"
                      "with torch.profiler.profile() as p:\n"
                      "    for _ in range(2):\n        (x @ x).relu()\n        p.step()\n"
                      "    with torch.profiler.record_function('late'):\n        x.exp()\n")
    out = tmp_path / "profiled.json"
    assert main(["trace", "--no-timing", "-o", str(out), "--", sys.executable,
                 str(script)]) == 0
    assert f"execution trace: {out}" in capsys.readouterr().out
    assert out.exists() and not (tmp_path / "profiled.kineto.json").exists()
    assert replay(out, warmup=0, iterations=1).replayed


def test_a_script_that_starts_its_own_profiler_ends_the_durations_there(tmp_path, capsys):
    # two kineto profilers at once crashed the process (a segfault at exit): torchmark's
    # writes what it has and steps aside; the execution trace records to the end
    script = tmp_path / "profiled.py"
    script.write_text("import torch\nx = torch.randn(8, 8)\n(x + 1).neg()\n"
                      "with torch.profiler.profile() as p:\n"
                      "    for _ in range(2):\n        (x @ x).relu()\n        p.step()\n"
                      "    with torch.profiler.record_function('late'):\n        x.exp()\n"
                      "with torch.autograd.profiler.profile():\n    x.sin()\n"
                      "x.cos()\n")
    out = tmp_path / "profiled.json"
    assert main(["trace", "-o", str(out), "--", sys.executable, str(script)]) == 0
    err = capsys.readouterr().err
    assert err.count("note: the recorded program started its own torch profiler") == 1
    report = replay(out, warmup=0, iterations=1)
    names = [op.op for op in report.ops]
    assert any("cos" in n for n in names) and any("sin" in n for n in names)
    timed = [op.op.split(".")[0] for op in report.ops if op.recorded_us is not None]
    assert timed == ["aten::randn", "aten::add", "aten::neg"]  # those before its profiler
    assert report.time_weighted == 1.0
    assert any("stop where the traced program started its own profiler" in n
               for n in report.notes)  # a replay says its coverage is of a prefix
    stepped = replay(out, warmup=0, iterations=1, subgraph="late")  # inside its profiler
    assert stepped.time_weighted is None
    assert "time-weighted coverage unknown (the recorded op durations stop before these " \
           "ops" in str(stepped)
    with pytest.warns(UserWarning, match="started its own torch profiler"):
        with record(tmp_path / "lib.json"):
            with torch.profiler.profile():
                torch.ones(2).neg()


@pytest.mark.parametrize("kineto", [
    {"traceEvents": "x"}, {"traceEvents": [1, "a", None]}, [1, 2],
    {"traceEvents": [{"ph": "X", "dur": "x", "args": {"Record function id": 3}},
                     {"ph": "X", "dur": 2.5, "args": {"Record function id": 4}}]},
])
def test_a_malformed_timing_file_beside_the_trace_is_skipped(tmp_path, kineto):
    from torchmark.replay.record import timing_path
    from torchmark.replay.session import recorded_durations

    trace = tmp_path / "t.json"
    timing_path(str(trace)).write_text(json.dumps(kineto))
    durations = recorded_durations(str(trace))
    assert durations == ({4: 2.5} if isinstance(kineto, dict) and
                         isinstance(kineto["traceEvents"], list) and
                         kineto["traceEvents"] and isinstance(kineto["traceEvents"][0], dict)
                         else {})


def test_trace_refuses_a_folder_as_its_output(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("x = 1\n")
    assert main(["trace", "-o", str(tmp_path), "--", "python", str(script)]) == 2
    assert "the trace is a file" in capsys.readouterr().err


def test_recording_inside_a_running_profiler_leaves_that_profiler_alone(tmp_path):
    path = tmp_path / "inside.json"
    from torchmark.replay.record import timing_path

    timing_path(path).write_text('{"traceEvents": []}')  # an older run's: must not stay
    notes = []
    with torch.profiler.profile() as theirs:
        with record(path, on_timing_cut=notes.append):
            torch.ones(4).neg()
    assert len(notes) == 1 and "already running" in notes[0]
    assert any("neg" in e.name for e in theirs.events())  # their profile is whole
    assert path.exists() and not timing_path(path).exists()
    assert replay(path, warmup=0, iterations=1).replayed


def test_the_profilers_start_and_stop_lines_are_dropped_and_others_kept(tmp_path, capfd):
    import os

    from torchmark.profiler_logs import quiet

    with quiet():
        os.write(2, b"USDT:2026-11-23 04:43:15 1:1 SyncActivityProfilerHandler.cpp:52] "
                    b"profiler_start\n[W1123 04:43:06.1 execution_trace_observer.cpp:989] "
                    b"Enabling Execution Trace Observer\nkeep me\n")
    assert capfd.readouterr().err == "keep me\n"
    script = tmp_path / "s.py"
    script.write_text("import sys, torch\nprint('from the script', file=sys.stderr)\n"
                      "torch.ones(2).neg()\n")
    assert main(["trace", "-o", str(tmp_path / "t.json"), "--", "python", str(script)]) == 0
    replay(tmp_path / "t.json", warmup=0, iterations=1, profile=tmp_path / "p.json")
    err = capfd.readouterr().err
    assert "from the script" in err and "USDT" not in err and "Trace Observer" not in err


def test_memory_metric_counts_each_replayed_ops_bytes(tmp_path, capsys):
    path = record_program(tmp_path, "mlp")
    report = replay(path, warmup=1, iterations=2, metric="memory", out=tmp_path / "m.jsonl")
    assert "top" in str(report) and " B " in str(report) and "peak bytes" in str(report)
    from torchmark.ops.results_file import read_records
    from torchmark.records import load_results

    linears = [r["metrics"]["forward"]["bytes"] for r in read_records(tmp_path / "m.jsonl")
               if r["op"] == "aten::linear"]
    # mlp_step's two linears, float32: 8 rows into 32 features, then into 4
    assert [b["peak"] for b in linears] == [[8 * 32 * 4] * 2, [8 * 4 * 4] * 2]
    assert [b["allocations"] for b in linears] == [[1, 1], [1, 1]]
    results = load_results(tmp_path / "m.jsonl")
    assert {r.metric for r in results if r.ok} == {"memory", "allocated"}
    assert main(["replay", str(path), "--metric", "memory", "-i", "1", "-w", "0"]) == 0
    assert "by peak bytes" in capsys.readouterr().out
