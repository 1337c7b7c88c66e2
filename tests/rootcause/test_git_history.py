"""The git side of bisect: the commits between two ends, what each is, worktrees that
never touch the user's checkout, and one-line errors for bad references."""

from __future__ import annotations

import subprocess

import pytest

from torchmark.core.errors import UsageError
from torchmark.demos.planted_repo import plant_repository
from torchmark.rootcause.git_history import Worktrees, commits_between, repository, resolve


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return plant_repository(tmp_path_factory.mktemp("git") / "repo", commits=8, first_bad=5,
                            broken=2)


def test_the_commits_between_the_ends_oldest_first(planted):
    repo = repository(planted.root / "planted")  # any folder inside finds the top
    commits = commits_between(repo, planted.commits[1], planted.commits[6])
    assert [c.sha for c in commits] == list(planted.commits[1:7])
    assert commits[4].subject == "make work() do more"
    assert commits[0].date == "2026-01-01T01:00:00+00:00"
    assert commits[4].describe().startswith(planted.commits[5][:10] + " make work() do more (")


def test_references_resolve_and_bad_ones_are_one_line_errors(planted):
    repo = planted.root
    assert resolve(repo, "HEAD~2", "--bad") == planted.commits[-3]
    with pytest.raises(UsageError, match=r"^--good nope: no such commit in "):
        resolve(repo, "nope", "--good")
    with pytest.raises(UsageError, match="--bad '--all': not a git reference"):
        resolve(repo, "--all", "--bad")
    with pytest.raises(UsageError, match="is not an ancestor of --bad"):
        commits_between(repo, planted.commits[5], planted.commits[2])
    with pytest.raises(UsageError, match="the same commit"):
        commits_between(repo, planted.commits[3], planted.commits[3])
    with pytest.raises(UsageError, match="no such folder"):
        repository(planted.root / "missing")


def test_worktrees_leave_the_checkout_alone_and_go_away(planted):
    repo = planted.root
    (repo / "planted" / "work.py").write_text("edited, not committed\n")  # the user's work
    try:
        with Worktrees(repo) as trees:
            tree = trees.get(planted.commits[2])
            assert trees.get(planted.commits[2]) == tree  # made once
            assert "planted_missing_dependency" in (tree / "planted" / "work.py").read_text()
            listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"],
                                    capture_output=True, text=True).stdout
            assert str(tree) in listed
        assert not tree.exists()
        listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"],
                                capture_output=True, text=True).stdout
        assert len(listed.splitlines()) == 1
        assert (repo / "planted" / "work.py").read_text() == "edited, not committed\n"
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        assert head == planted.commits[-1]
    finally:
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
