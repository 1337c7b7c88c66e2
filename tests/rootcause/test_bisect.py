"""`torchmark bisect` on throw-away repositories of 64 commits with a planted step:
the first bad commit, the commit skipped for not importing, the measurements taken, the
results stored with the bisection's tag; and the refusals."""

from __future__ import annotations

import shutil

import pytest

from torchmark.cli.main import main
from torchmark.demos.planted_repo import plant_repository
from torchmark.rootcause.search import most_probes
from torchmark.store.store import Store

from conftest import requires_valgrind


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _bisect(capsys, repo, *extra):
    return run(capsys, "bisect", "--good", repo.commits[0], "--bad", repo.commits[-1],
               "--repo", str(repo.root), "-s", repo.setup, repo.statement, *extra)


@pytest.mark.slow
@requires_valgrind
def test_counts_find_a_half_percent_step_and_skip_a_commit_that_does_not_import(
        capsys, tmp_path):
    # the search tries commit 31 first: it does not import, so its neighbour is tried
    repo = plant_repository(tmp_path / "repo", step=0.005, first_bad=45, broken=31)
    db = tmp_path / "store.db"
    code, out, err = _bisect(capsys, repo, "--metric", "instructions", "--db", str(db))
    assert code == 0, err
    lines = out.splitlines()
    assert f"first bad commit: {repo.first_bad[:10]} make work() do more (2026-01-02T" \
        "21:00:00+00:00)" in lines, out
    change = next(line for line in lines if line.startswith("change: "))
    assert 0.004 < float(change.split()[1].rstrip("%")) / 100 < 0.006, change
    assert f"skipped {repo.broken[:10]}: " in out and "planted_missing_dependency" in out
    measured = int(lines[-2].split()[0])
    assert measured <= most_probes(64) + 2  # the ends and the search (a skip measures nothing)
    assert "commits left; trying" in err  # progress
    store = Store(f"sqlite:///{db}")
    try:
        runs = store.runs()
        assert len(runs) == measured  # a run a count; the skipped commit recorded nothing
        tags = {r["tags"]["bisect"] for r in runs}
        assert len(tags) == 1 and tags.pop() in lines[-2]
        commits = {r["git_commit"]: r["tags"]["bisect_role"] for r in runs}
        assert commits[repo.commits[0]] == "good" and commits[repo.commits[-1]] == "bad"
        assert commits[repo.first_bad] == "probe"
    finally:
        store.close()
    # the per-function counts bisect stored explain the step without measuring again
    explain = lines[-1].split("explain it: ")[1].split()
    assert explain[:2] == ["torchmark", "explain"]
    code, out, err = run(capsys, *explain[1:], "--db", str(db), "--top", "3")
    assert code == 0, err
    assert "instructions a run: " in out and "(+0.5" in out
    assert "python +" in out and "\n  torchmark callgrind 'work()'" in out  # as pasted
    assert all(ref.startswith("commit:") for ref in explain[2:4])  # --bisect: bare commits
    bare = [ref.removeprefix("commit:") for ref in explain[2:4]]
    assert run(capsys, "explain", "--bisect", *bare, "--db", str(db), "--top", "3") == \
        (0, out, err)


@pytest.mark.slow
@requires_valgrind
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_a_native_extension_is_built_in_each_worktree(capsys, tmp_path):
    repo = plant_repository(tmp_path / "repo", commits=16, step=0.02, first_bad=11,
                            native=True)
    code, out, err = _bisect(capsys, repo, "--metric", "instructions", "--build", repo.build,
                             "--number", "5", "--no-store")
    assert code == 0, err
    assert f"first bad commit: {repo.first_bad[:10]} make work() do more" in out, out
    assert "building " in err and "(0 skipped)" in out


@pytest.mark.slow
@requires_valgrind
def test_a_pytest_benchmark_is_bisected_by_its_node_id(capsys, tmp_path):
    from torchmark.demos.planted_repo import PYTEST_NODE

    repo = plant_repository(tmp_path / "repo", commits=6, step=0.01, first_bad=4,
                            broken=2, pytest_test=True)  # commit 2, tried first, skipped
    code, out, err = run(capsys, "bisect", "--good", repo.commits[0], "--bad",
                         repo.commits[-1], "--repo", str(repo.root), PYTEST_NODE,
                         "--no-store")
    assert code == 0, err
    assert f"first bad commit: {repo.first_bad[:10]} make work() do more" in out, out
    [skipped] = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert skipped.startswith(f"skipped {repo.broken[:10]}: pytest {PYTEST_NODE} ")
    code, out, err = run(capsys, "bisect", "--good", repo.commits[0], "--bad",
                         repo.commits[-1], "--repo", str(repo.root), PYTEST_NODE,
                         "--metric", "wall", "--no-store")
    assert code == 2 and "bisected by its instruction counts" in err


@requires_valgrind
def test_ends_without_a_step_are_no_regression(capsys, tmp_path):
    repo = plant_repository(tmp_path / "repo", commits=6, first_bad=5)
    code, out, err = run(capsys, "bisect", "--good", repo.commits[0], "--bad",
                         repo.commits[4], "--repo", str(repo.root), "-s", repo.setup,
                         repo.statement, "--metric", "instructions", "--number", "5",
                         "--no-store")
    assert code == 1
    assert "no increase of 0.20% or more to bisect" in err.splitlines()[-1]


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    repo = plant_repository(tmp_path / "repo", commits=4, first_bad=2)
    for argv, message in (
            (("--good", "nope", "--bad", "HEAD"), "--good nope: no such commit"),
            (("--good", "HEAD", "--bad", "HEAD~2"), "is not an ancestor of --bad"),
            (("--good", "HEAD~1", "--bad", "HEAD", "--import-path", "nowhere"),
             "--import-path nowhere: no such folder")):
        code, out, err = run(capsys, "bisect", *argv, "--repo", str(repo.root), "--metric",
                             "wall", "--no-store", "work()")
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1 or "bisect:" in err
    code, out, err = run(capsys, "bisect", "--good", "HEAD~1", "--bad", "HEAD", "--repo",
                         str(tmp_path), "work()")
    assert code == 2 and "not a git repository" in err
    code, out, err = run(capsys, "bisect", "--good", "HEAD~1", "--bad", "HEAD", "--repo",
                         str(repo.root), "--db", str(tmp_path / "s.db"), "case:nope")
    assert code == 2 and "no store at" in err
    Store(f"sqlite:///{tmp_path / 's.db'}").close()  # a store, without that case
    code, out, err = run(capsys, "bisect", "--good", "HEAD~1", "--bad", "HEAD", "--repo",
                         str(repo.root), "--db", str(tmp_path / "s.db"), "case:nope")
    assert code == 2 and "case:nope: no such case in the store (" in err
    code, out, err = run(capsys, "bisect", "--good", "HEAD~1", "--bad", "HEAD", "--repo",
                         str(repo.root), "work(")
    assert code == 2 and "the statement, line 1: SyntaxError" in err
