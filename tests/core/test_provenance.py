"""What a run's provenance says of the code it measured: the commit, and whether the tree
held changes the commit does not (tracked files changed, or untracked source files)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from torchmark.core.provenance import _git_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(folder, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_an_untracked_module_makes_the_tree_dirty_but_results_and_ignored_files_do_not(
        tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "lib.py").write_text("def f():\n    return 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert _git_state(str(tmp_path)) == (head, False)
    (tmp_path / "results.json").write_text("{}")  # what a run writes: not code
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "ext.so").write_bytes(b"")  # ignored
    assert _git_state(str(tmp_path)) == (head, False)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "pkg" / "scratch.py").write_text("def g():\n    return 2\n")
    assert _git_state(str(tmp_path)) == (head, True)  # a module the commit does not hold
    assert _git_state(str(tmp_path / "benchmarks")) == (head, True)  # from a subfolder too
    (tmp_path / "pkg" / "scratch.py").unlink()
    (tmp_path / "lib.py").write_text("def f():\n    return 3\n")
    assert _git_state(str(tmp_path)) == (head, True)  # a tracked file changed
