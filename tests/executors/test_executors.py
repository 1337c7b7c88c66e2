"""Executors without a cluster: options checked before anything runs, Ray imported only
when a Ray run starts (and its absence one line, exit 2), the local pool, the files a
case loads written on a machine that lacks them, results of other machines stored in
runs of their own."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.executors import Item, LocalExecutor
from torchmark.executors.base import Here
from torchmark.executors.options import parse_address, parse_resources

HERE = Path(__file__).parent
OPS = str(HERE / "ops_small.json")
DEFS = str(HERE / "defs_ray.py")


def run_without_ray(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = ("import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
            "from torchmark.cli.main import main\n"
            f"sys.exit(main({argv!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("command", [
    ["ops", "-c", OPS, "--executor", "ray", "-o", "out", "--no-store"],
    ["suite", "run", "--definitions", DEFS, "--executor", "ray", "--out", "out.jsonl",
     "--no-store"],
])
def test_without_ray_the_ray_executor_is_one_line_and_exit_2(command, tmp_path):
    proc = run_without_ray(command, tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'torchmark[ray]'" in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []  # refused before any file was written


def test_torchmark_and_its_runners_do_not_import_ray():
    code = ("import sys, torchmark, torchmark.executors, torchmark.suite.runner, "
            "torchmark.ops.runner, torchmark.cli.suite_cmd, torchmark.cli.ops_cmd, "
            "torchmark.cli.fuzz_cmd\n"
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("extra, message", [
    (["--executor", "ray", "--ray-address", "nowhere"], "expected auto or HOST:PORT"),
    (["--executor", "ray", "--ray-address", "10.0.0.1:99999"], "expected auto or HOST:PORT"),
    (["--executor", "ray", "--ray-resources", "{a100: 1}"], "--ray-resources: not JSON"),
    (["--executor", "ray", "--ray-resources", "[1]"], "expected a non-empty JSON object"),
    (["--executor", "ray", "--ray-resources", '{"a100": -1}'], "must be a number"),
    (["--executor", "ray", "--ray-resources", '{"CPU": 0.5}'], "takes a whole CPU"),
    (["--ray-address", "auto"], "--ray-address is for --executor ray"),
    (["--executor", "slurm"], "'slurm' is not one of 'local', 'ray'"),
])
def test_bad_executor_options_are_one_line_and_exit_2(extra, message, tmp_path, capsys):
    pytest.importorskip("ray")
    out = tmp_path / "out.jsonl"
    code = main(["suite", "run", "--definitions", DEFS, "--out", str(out), "--no-store",
                 *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_option_parsing():
    assert parse_address(" auto ") == "auto" and parse_address(None) is None
    assert parse_address("head.example:6379") == "head.example:6379"
    assert parse_address("[::1]:6379") == "[::1]:6379"
    assert parse_resources('{"a100": 1, "CPU": 0.25}', wall=False) == {"a100": 1.0,
                                                                       "CPU": 0.25}
    with pytest.raises(ValueError, match="whole number"):
        parse_resources('{"a100": 1.5}')
    with pytest.raises(ValueError, match="cannot be asked for"):
        parse_resources('{"node:10.0.0.1": 1}')


@dataclasses.dataclass
class CountingJob:
    """Records which worker ran what; item payload "raise" raises outside any case."""

    key: str = "counting"

    def make_state(self, slot):
        return {"slot": slot, "closed": None}

    def close_state(self, state, kill=False):
        state["closed"] = "killed" if kill else "closed"

    def run(self, state, item, attempt):
        if item.payload == "raise":
            raise RuntimeError("a fault outside the case")
        return {"id": item.id, "status": "ok", "slot": state["slot"], "attempts": attempt}

    def lost(self, item, error, attempts):
        return {"id": item.id, "status": "failed", "error": error, "attempts": attempts}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_local_pool_runs_every_item_once(workers):
    items = [Item(f"i{n}", "raise" if n == 3 else n) for n in range(6)]
    outcomes = []
    LocalExecutor(workers).run(CountingJob(), items, outcomes.append)
    by_id = {o.item_id: o.record for o in outcomes}
    assert sorted(by_id) == sorted(i.id for i in items) and len(outcomes) == 6
    assert by_id["i3"] == {"id": "i3", "status": "failed", "attempts": 1,
                           "error": "RuntimeError: a fault outside the case"}
    assert {r["slot"] for r in by_id.values() if "slot" in r} <= set(range(workers))
    assert all(o.provenance is None for o in outcomes)  # measured here


def test_a_case_file_missing_on_a_node_is_written_where_the_case_loads_it(tmp_path):
    from torchmark.suite import TimerArgs, materialize
    from torchmark.suite.runner import RunOptions, SuiteJob

    [case] = materialize({"c": TimerArgs("1 + 1")})
    library = tmp_path / "node-cache" / "bundle.so"
    job = SuiteJob(RunOptions(), {case.id: (str(library), "_0")},
                   {str(library): Here(b"\x7fELF library bytes")})
    job._place_files(case)
    assert library.read_bytes() == b"\x7fELF library bytes"
    job.files[str(library)] = Here(b"other")  # present: left as it is
    job._place_files(case)
    assert library.read_bytes() == b"\x7fELF library bytes"


def test_results_of_another_machine_go_to_a_run_of_that_machine(tmp_path, capsys):
    from torchmark.cli.store_options import resumed_cases
    from torchmark.store import Store
    from torchmark.store.recorder import RunRecorder

    db = str(tmp_path / "store.db")
    here = Provenance.capture()
    node = dataclasses.replace(here, machine=dataclasses.replace(here.machine,
                                                                 hostname="node-7"))

    def result(name, provenance):
        return Result(Case(id=f"suite:{name}", frontend="suite", stmt=name), "wall",
                      samples=(1e-6,), provenance=provenance)

    from torchmark.store.store import this_process

    with RunRecorder(db, tags={"suite": "x"}, env="before") as rec:
        rec.add([result("a", None), result("b", node), result("c", here)])
    store = Store(db)
    try:
        runs = {r["id"]: r for r in store.runs()}
        assert len(runs) == 2
        main_run = rec.run_id
        [node_run] = [r for r in runs.values() if r["id"] != main_run]
        assert node_run["tags"] == {"suite": "x", "cluster_run": main_run,
                                    "process": this_process()}  # this one runs it
        assert node_run["machine"] == node.machine_fingerprint != here.machine_fingerprint
        assert runs[main_run]["machine"] == here.machine_fingerprint
        assert store.finished_cases(main_run) == {"suite:a", "suite:c"}
        assert store.finished_cases(node_run["id"]) == {"suite:b"}
        assert {r["status"] for r in runs.values()} == {"ok"}
        assert {r["env"] for r in runs.values()} == {"before"}  # the node's run too
    finally:
        store.close()
    # --resume-run continues both: the node's cases count as done, its run reopened
    assert resumed_cases(db, False, main_run, "suite") == {"suite:a", "suite:b", "suite:c"}
    with RunRecorder(db, resume_run=main_run) as rec:
        rec.add([result("d", node)])
    assert rec.node_runs == {node.machine_fingerprint: node_run["id"]}
    store = Store(db)
    try:
        assert store.finished_cases(node_run["id"]) == {"suite:b", "suite:d"}
        assert len(store.runs()) == 2
    finally:
        store.close()


def test_records_from_ray_name_their_node(tmp_path):
    from torchmark.ops.runner import with_node

    here = Provenance.capture()
    record = with_node({"id": "x", "status": "ok"}, here)
    assert record["node"] == here.machine.hostname
    assert Provenance.from_dict(json.loads(json.dumps(record["provenance"]))) == here
    assert with_node({"id": "x"}, None) == {"id": "x"}
