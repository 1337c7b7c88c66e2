"""The git side of a bisection: resolving the two ends, the commits between them, what
each commit is (hash, subject, author date), and a worktree of each commit tried, made
beside the user's checkout (never touching its working tree) and removed afterwards."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from torchmark.core.errors import ToolMissingError, UsageError

GIT_TIMEOUT_S = 300.0


@dataclasses.dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    date: str  # the author date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:10]

    def describe(self) -> str:
        return f"{self.short} {self.subject} ({self.date})"


def git(repo: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str:
    """`git -C repo ARGS`'s output; a UsageError with git's own first line when it fails."""
    exe = shutil.which("git")
    if exe is None:
        raise ToolMissingError("bisect needs git on PATH")
    done = subprocess.run([exe, "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or "failed").splitlines()[0]
        raise UsageError(f"git {args[0]} in {repo}: {first}")
    return done.stdout


def repository(path: str | os.PathLike[str]) -> Path:
    """The top folder of the git repository holding `path`."""
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"--repo {path}: no such folder")
    return Path(git(folder, "rev-parse", "--show-toplevel").strip())


def resolve(repo: Path, ref: str, given_as: str) -> str:
    """The full hash of `ref` (a commit, branch, tag, HEAD~3); `given_as`: what gave it,
    as a message names it (`--good`, `BEFORE`)."""
    if not ref or ref.startswith("-"):
        raise UsageError(f"{given_as} {ref!r}: not a git reference")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except UsageError:
        raise UsageError(f"{given_as} {ref}: no such commit in {repo}") from None


def commit_info(repo: Path, sha: str) -> Commit:
    sha_, subject, date = git(repo, "show", "-s", "--format=%H%x00%s%x00%aI", sha) \
        .rstrip("\n").split("\x00")
    return Commit(sha_, subject, date)


def commits_between(repo: Path, good: str, bad: str) -> list[Commit]:
    """`good`, then the commits on the way from it to `bad` (those that descend from
    `good` and lead to `bad`, oldest first), ending with `bad`."""
    if good == bad:
        raise UsageError("--good and --bad name the same commit: nothing to bisect")
    try:
        git(repo, "merge-base", "--is-ancestor", good, bad)
    except UsageError:
        raise UsageError(f"--good {good[:10]} is not an ancestor of --bad {bad[:10]}: "
                         "bisect needs the good commit in the bad one's history") from None
    listed = git(repo, "rev-list", "--reverse", "--ancestry-path", "--first-parent",
                 "--format=%H%x00%s%x00%aI", f"{good}..{bad}")
    commits = [commit_info(repo, good)]
    for line in listed.splitlines():
        if line.startswith("commit "):
            continue
        sha, subject, date = line.split("\x00")
        commits.append(Commit(sha, subject, date))
    return commits


class Worktrees:
    """Worktrees of `repo`, one a commit, in a temporary folder; `close` removes them
    and prunes git's records of them."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.folder = Path(tempfile.mkdtemp(prefix="torchmark-bisect-"))
        self._made: dict[str, Path] = {}

    def get(self, sha: str) -> Path:
        """The worktree of `sha`, made on first use (detached: no branch is touched)."""
        if sha not in self._made:
            path = self.folder / sha[:12]
            git(self.repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
            self._made[sha] = path
        return self._made[sha]

    def close(self) -> None:
        for path in self._made.values():
            try:
                git(self.repo, "worktree", "remove", "--force", str(path))
            except (UsageError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.folder, ignore_errors=True)
        try:
            git(self.repo, "worktree", "prune")
        except (UsageError, subprocess.TimeoutExpired):
            pass
        self._made.clear()

    def __enter__(self) -> Worktrees:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
