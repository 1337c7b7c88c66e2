"""The executors on a real Ray cluster (`ray start --head` on this machine, 1 CPU): the
same cases and instruction counts as the local pool, a Ray worker killed mid-run loses
no finished result and its case is tried again, a case that raises is failed once."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.records import load_results
from torchmark.store import Store
from torchmark.suite.results import read_records

from conftest import deliverable_sigint, requires_valgrind
from ray_cluster import RayCluster

HERE = Path(__file__).parent
OPS = str(HERE / "ops_small.json")
DEFS = str(HERE / "defs_ray.py")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster():
    """One cluster for this module's tests (skipped where Ray is not installed)."""
    pytest.importorskip("ray")
    cluster = RayCluster(cpus=1)
    try:
        yield cluster
    finally:
        cluster.stop()


def torchmark(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    """`torchmark ARGV` in a process of its own (a Ray driver; this one never is)."""
    return subprocess.run([sys.executable, "-m", "torchmark", *argv], capture_output=True,
                          text=True, timeout=600,
                          env=dict(os.environ, **RayCluster.env, **env))


def stored_cases(db: str) -> dict[str, str | None]:
    store = Store(db)
    try:
        [run] = store.runs()
        return {r["case_id"]: r["failure"] for r in store.results(run=run["id"])}
    finally:
        store.close()


def test_an_op_sweep_on_ray_gives_the_local_cases(ray_cluster, tmp_path):
    common = ["ops", "-c", OPS, "-w", "1", "-i", "3", "--quiet"]
    assert main([*common, "-o", str(tmp_path / "local"), "--db",
                 str(tmp_path / "local.db")]) == 1  # the 4x4 + 5x5 case fails
    proc = torchmark([*common, "-o", str(tmp_path / "ray"), "--db", str(tmp_path / "ray.db"),
                      "--executor", "ray", "--ray-address", ray_cluster.address])
    assert proc.returncode == 1, proc.stderr

    def results(name):  # whatever the file's format: its Results
        return {(r.case.id, r.metric): r for r in load_results(tmp_path / f"{name}.jsonl")}

    local, ray = results("local"), results("ray")
    assert sorted(ray) == sorted(local) and len(ray) == 5
    for key, r in ray.items():
        assert r.case == local[key].case and len(r.samples) == len(local[key].samples)
        assert (r.failure and r.failure.error) == (local[key].failure and
                                                   local[key].failure.error)
    failed = [key for key, r in ray.items() if r.failure]
    assert [case.split("@")[0] for case, _ in failed] == ["torch.add|0|0|1"]  # its own error
    assert stored_cases(str(tmp_path / "ray.db")) == stored_cases(str(tmp_path / "local.db"))


@requires_valgrind
def test_suite_instruction_counts_on_ray_match_the_local_pool(ray_cluster, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", "counts")
    counts: dict[str, tuple[int, int]] = {}  # id -> (on Ray, local)
    common = ["suite", "run", "--definitions", DEFS, "--no-wall", "--repeats", "2",
              "--number", "20"]
    # both from a process of the same command line: the counted process sees its sys.path
    proc = torchmark([*common, "--workers", "1", "--out", str(tmp_path / "local.jsonl"),
                      "--db", str(tmp_path / "local.db")])
    assert proc.returncode == 1, proc.stderr  # one case raises
    # a case's count depends a little on what its valgrind host counted before it (two
    # local slots differ as much, docs/suite.md): the cluster's one CPU gives its one
    # worker the cases in the order the local pool's one slot had them
    proc = torchmark([*common, "--out", str(tmp_path / "ray.jsonl"), "--executor", "ray",
                      "--ray-address", ray_cluster.address, "--db", str(tmp_path / "ray.db")])
    assert proc.returncode == 1, proc.stderr
    local = {r["id"]: r for r in read_records(tmp_path / "local.jsonl")}
    ray = {r["id"]: r for r in read_records(tmp_path / "ray.jsonl")}
    assert sorted(ray) == sorted(local) and len(ray) == 5
    for case_id, r in ray.items():
        assert r["status"] == local[case_id]["status"], case_id
        if r["status"] != "ok":
            assert r["attempts"] == 1 and "boom from the case" in r["error"]
            continue
        counts[case_id] = (r["instructions"]["median"], local[case_id]["instructions"]["median"])
    # the same: Ray's worker counts as a local run would (the driver's settings,
    # interpreter path, sys.path and folder)
    assert all(ours == theirs for ours, theirs in counts.values()), counts
    assert stored_cases(str(tmp_path / "ray.db")) == stored_cases(str(tmp_path / "local.db"))


def first_records(proc: subprocess.Popen, out: Path) -> list[dict]:
    """The records of `out` once the run writing it has finished its first case (or has
    ended, or 300 s passed: then whatever the file holds)."""
    deadline = time.monotonic() + 300
    before: list[dict] = []
    while time.monotonic() < deadline and proc.poll() is None and not before:
        before = read_records(out) if out.exists() else []
        time.sleep(0.1)
    return before


def test_a_killed_ray_worker_loses_nothing_and_its_case_runs_again(ray_cluster, tmp_path):
    out = tmp_path / "results.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchmark", "suite", "run", "--definitions", DEFS,
         "--no-instructions", "--min-run-time", "1.0", "--out", str(out),
         "--executor", "ray", "--ray-address", ray_cluster.address, "--no-store"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, **RayCluster.env, TORCHMARK_TEST_DEFS="slow"))
    try:
        before = first_records(proc, out)
        busy = ray_cluster.processes("ray::run_item")
        assert before and busy, "no case finished, or no Ray worker was busy"
        os.kill(busy[0], signal.SIGKILL)  # a worker dies in the middle of a case
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    records = read_records(out)
    ids = [r["id"] for r in records]
    assert sorted(ids) == sorted(f"case {i} [py explicit t1]" for i in range(6))
    assert len(set(ids)) == 6 and all(r["status"] == "ok" for r in records)
    assert records[:len(before)] == before  # what had finished is kept as it was
    assert sorted(r["attempts"] for r in records) == [1] * 5 + [2]  # the killed one


def test_a_fuzzed_sweep_on_ray_gives_the_local_cases(ray_cluster, tmp_path):
    # the statement fails on the three-dimensional case (the first of two): recorded
    # failed, not retried
    common = ["fuzz", "binary", "-n", "2", "--time", "assert x.dim() < 3; x + y",
              "--min-run-time", "0.01"]
    main([*common, "-o", str(tmp_path / "local.jsonl"), "--db", str(tmp_path / "local.db")])
    proc = torchmark([*common, "-o", str(tmp_path / "ray.jsonl"), "--db",
                      str(tmp_path / "ray.db"), "--executor", "ray", "--ray-address",
                      ray_cluster.address])
    assert proc.returncode in (0, 1), proc.stderr
    local = {r.case.id: r for r in load_results(tmp_path / "local.jsonl")}
    ray = {r.case.id: r for r in load_results(tmp_path / "ray.jsonl")}
    assert sorted(ray) == sorted(local) and len(ray) == 2
    for case_id, r in ray.items():
        assert r.case == local[case_id].case
        assert (r.failure is None) == (local[case_id].failure is None)
        if r.failure is not None:
            assert "AssertionError" in r.failure.error and r.extra["attempts"] == 1
    assert sum(r.failure is not None for r in ray.values()) == 1
    assert stored_cases(str(tmp_path / "ray.db")) == stored_cases(str(tmp_path / "local.db"))


def test_ctrl_c_cancels_what_is_in_flight_and_keeps_what_finished(ray_cluster, tmp_path,
                                                                  monkeypatch):
    out = tmp_path / "results.jsonl"
    argv = ["suite", "run", "--definitions", DEFS, "--no-instructions", "--min-run-time",
            "2.0", "--out", str(out), "--executor", "ray", "--ray-address",
            ray_cluster.address, "--no-store"]
    # an xdist worker ignores SIGINT, and a child inherits that: the signal must reach it
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **RayCluster.env, TORCHMARK_TEST_DEFS="slow"),
                            preexec_fn=deliverable_sigint)
    try:
        before = first_records(proc, out)
        assert before and ray_cluster.processes("ray::run_item")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "torchmark: error: interrupted"
    records = read_records(out)
    assert 1 <= len(records) < 6 and records[:len(before)] == before
    assert all(r["status"] == "ok" for r in records)  # nothing recorded as the kill's failure
    deadline = time.monotonic() + 30  # the cancelled task's worker is gone
    while ray_cluster.processes("ray::run_item") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ray_cluster.processes("ray::run_item")
    # --resume on this machine's pool runs the rest: across executors, no case twice
    monkeypatch.setenv("TORCHMARK_TEST_DEFS", "slow")
    assert main([*argv[:argv.index("--executor")], "--no-store", "--resume"]) == 0
    ids = [r["id"] for r in read_records(out)]
    assert sorted(ids) == sorted(f"case {i} [py explicit t1]" for i in range(6))


def test_a_stale_cluster_note_neither_hangs_nor_is_joined(tmp_path):
    """A machine where a Ray cluster once ran and is gone: /tmp/ray/ray_current_cluster
    still names it. The default starts a private local instance (ray.init without an
    address would wait on the dead one); `--ray-address auto` fails with one line."""
    import shutil
    import tempfile

    pytest.importorskip("ray")
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # Ray's socket paths must be short
    try:
        (Path(temp) / "ray").mkdir()
        (Path(temp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
        common = ["ops", "-c", OPS, "-w", "1", "-i", "3", "--quiet", "--executor", "ray",
                  "--db", str(tmp_path / "s.db")]
        started = time.monotonic()
        proc = torchmark([*common, "-o", str(tmp_path / "ray")], RAY_TMPDIR=temp)
        assert proc.returncode == 1, proc.stderr  # ran: the 4x4 + 5x5 case fails
        assert len(stored_cases(str(tmp_path / "s.db"))) == 5
        proc = torchmark([*common, "-o", str(tmp_path / "auto"), "--ray-address", "auto"],
                         RAY_TMPDIR=temp)
        assert proc.returncode == 1 and "no Ray cluster answers at 127.0.0.1:9" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert time.monotonic() - started < 300
    finally:  # the private instance went with its driver
        shutil.rmtree(temp, ignore_errors=True)
