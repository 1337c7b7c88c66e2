"""Every fenced code block in README.md and docs/*.md runs as written.

The convention (also in README.md, "Documentation code blocks are tested"):

- The fence's info string says what a block is:
  - ```python: run. The Python blocks of one document run in order in one fresh
    interpreter process, as a reader pasting them one after the other would: a block
    may use the names an earlier block of the same document defined. No `...`
    placeholders (an Ellipsis anywhere in the code is refused).
  - ```bash, ```sh, ```shell: run by bash (`set -e -o pipefail`), one script a block;
    ```console: the `$ ` lines are run, the other lines are output (not checked).
    Shell blocks run in the same folder as the document's Python blocks, in document
    order, so a command may read a file an earlier block wrote. A shell block that looks
    like a usage synopsis (`[--option]` brackets, `a|b` alternatives) is refused: fence
    a synopsis as ```text.
  - ```json: parsed (json.loads).
  - ```text (or txt): not code, not run: synopses, layouts, sample output.
  - a fence without an info string is refused: say what the block is.
- An HTML comment on the line right before the fence (blank lines between allowed)
  says what a block needs:
  - `<!-- doc-test: needs cuda -->`: skipped unless torch.cuda.is_available();
  - `<!-- doc-test: needs valgrind -->`: skipped unless valgrind is on PATH;
  - `<!-- doc-test: needs compiler -->`: skipped unless c++ or g++ is on PATH;
    several at once: `<!-- doc-test: needs valgrind, compiler -->`;
  - `<!-- doc-test: skip (reason) -->`: never run, for a block that cannot run here at
    all (it needs the reader's own program); the reason is required.
  A block that is not run here shows up as a skipped test of its own,
  `test_block_not_run[DOC:LINE]`, with the reason; the rest of its document still runs
  (so later blocks must not depend on a block that may be skipped).
- Everything runs in a fresh temporary folder (blocks write files by relative paths,
  never into the checkout) that holds a copy of the checkout's examples/ (so
  `examples/ops/mm_sweep.json` reads as from the checkout's root), with the venv's bin
  first on PATH, TORCHMARK_CACHE_DIR at the checkout's build/test-cache (as
  tests/conftest.py sets it) and private callgrind hosts (TORCHMARK_CALLGRIND_KEEPALIVE=0).
- Keep blocks quick: small tensors, min_run_time of 0.2 s or less, `needs valgrind`
  blocks few and small (the first collection of a document starts a valgrind host,
  about 20 s). The whole set takes about 45 s on a 2-core machine with the C++ snippet
  cached, about 90 s from an empty cache.

XFAIL lists blocks of documents whose owners must fix them; each entry names the block.
An entry whose block passes, or matches no block, fails the test: remove it then.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("doc_driver.py")
DOCUMENTS = ["README.md", *sorted(p.relative_to(REPO).as_posix()
                                  for p in (REPO / "docs").glob("*.md"))]

PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell", "console"}
NOT_RUN = {"text", "txt"}
KNOWN = PYTHON | SHELL | NOT_RUN | {"json"}
NEEDS = ("cuda", "valgrind", "compiler")

# seconds a block may take; blocks that need valgrind or a compiler get the longer one
TIMEOUT = 300
SLOW_TIMEOUT = 900

# (document, text the block contains) -> why it fails; its owners fix it, then remove it.
XFAIL: dict[tuple[str, str], str] = {}

DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
# `[-x ...]` / `[--opt ...]` brackets and bare `a|b` alternatives (not `||`, not `| cmd`)
SYNOPSIS = re.compile(r"\[--?[A-Za-z]|(?<![|\s])\|(?![|\s])")


@dataclasses.dataclass(frozen=True)
class Block:
    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    needs: tuple[str, ...] = ()
    skip: str | None = None  # the reason of a `skip (reason)` directive
    problem: str | None = None  # a malformed directive or fence

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_blocks(doc: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of `doc` (a path under the checkout), or of `text` if given."""
    if text is None:
        text = (REPO / doc).read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks: list[Block] = []
    directives: set[int] = set()  # lines of doc-test comments outside blocks
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if DIRECTIVE.match(lines[i]):
                directives.add(i)
            i += 1
            continue
        start, fence, indent = i, m["fence"], len(m["indent"])
        lang = m["info"].lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1
        needs: tuple[str, ...] = ()
        skip = problem = None
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        directive = DIRECTIVE.match(lines[j]) if j >= 0 else None
        if directive:
            directives.discard(j)
            text = directive["body"]
            if text.startswith("needs "):
                needs = tuple(w for w in re.split(r"[,\s]+", text[len("needs "):]) if w)
                unknown = [w for w in needs if w not in NEEDS]
                if unknown or not needs:
                    problem = f"unknown need {unknown or text!r} (known: {', '.join(NEEDS)})"
            elif re.fullmatch(r"skip\s*\((.*\S.*)\)", text):
                skip = re.fullmatch(r"skip\s*\((.*)\)", text)[1].strip()
            else:
                problem = (f"directive {text!r}: expected 'needs {'|'.join(NEEDS)}' or "
                           "'skip (reason)' (a skip must give its reason)")
        if not lang:
            problem = problem or "a fence without an info string: say what it is (```text, ...)"
        elif lang not in KNOWN:
            problem = problem or (f"unknown info string {lang!r}: use one of "
                                  f"{', '.join(sorted(KNOWN))}")
        blocks.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", needs, skip, problem))
    for j in sorted(directives):
        blocks.append(Block(doc, j + 1, "text", "", problem="a doc-test comment with no "
                            "fenced block right after it"))
    return blocks


def missing_tools() -> dict[str, str]:
    """Each need this machine cannot meet -> why."""
    missing = {}
    if shutil.which("valgrind") is None:
        missing["valgrind"] = "valgrind is not installed"
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing["compiler"] = "no C++ compiler (c++ or g++) on PATH"
    import torch

    if not torch.cuda.is_available():
        missing["cuda"] = "no CUDA device (torch.cuda.is_available() is False)"
    return missing


MISSING = missing_tools()


def why_not_run(block: Block) -> str | None:
    if block.skip is not None:
        return f"{block.name}: doc-test skip ({block.skip})"
    unmet = [MISSING[n] for n in block.needs if n in MISSING]
    if unmet:
        return f"{block.name} needs {', '.join(block.needs)}: {'; '.join(unmet)}"
    return None


ALL_BLOCKS = {doc: parse_blocks(doc) for doc in DOCUMENTS}
NOT_RUN_HERE = [(b, why) for doc in DOCUMENTS for b in ALL_BLOCKS[doc]
                if b.lang not in NOT_RUN and b.problem is None
                and (why := why_not_run(b)) is not None]


def xfail_reason(block: Block) -> str | None:
    for (doc, text), reason in XFAIL.items():
        if doc == block.doc and text in block.code:
            return reason
    return None


def child_env(venv_bin: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    # tests/conftest.py points it at the checkout's build/test-cache; so does this
    env["TORCHMARK_CACHE_DIR"] = (os.environ.get("TORCHMARK_CACHE_DIR")
                                  or str(REPO / "build" / "test-cache"))
    env["TORCHMARK_CALLGRIND_KEEPALIVE"] = "0"
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    for name in [n for n in env if n.startswith("PYTEST_")]:  # as a reader's shell: no
        env.pop(name)  # xdist worker variables (pytest-benchmark turns itself off on them)
    return env


def ellipsis_lines(code: str) -> list[int]:
    tree = ast.parse(code)
    return sorted({n.lineno for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and n.value is Ellipsis})


class PythonSession:
    """One interpreter for a document's Python blocks (tests/docs/doc_driver.py)."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path):
        self.log_path = log
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER)], cwd=cwd, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, start_new_session=True)

    def run(self, block: Block, timeout: float) -> str | None:
        """None when the block ran; else what went wrong."""
        if self.proc.poll() is not None:
            return f"the interpreter had exited (status {self.proc.returncode})"
        start = self.log_path.stat().st_size
        request = {"path": str(REPO / block.doc), "line": block.line, "code": block.code}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return f"timed out after {timeout} s\n{self.output(start)}"
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            return (f"the interpreter died (status {self.proc.returncode})\n"
                    f"{self.output(start)}")
        reply = json.loads(line)
        return None if reply["ok"] else f"{self.output(start)}\n{reply['error']}"

    def output(self, start: int) -> str:
        self.log.flush()
        with open(self.log_path, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        return text[-6000:]

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pass
        # whatever the blocks started and left behind in the driver's session
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def shell_script(block: Block) -> str:
    if block.lang != "console":
        return block.code
    commands, continuing = [], False
    for line in block.code.splitlines():
        if line.startswith("$ ") or continuing:
            commands.append(line[2:] if line.startswith("$ ") and not continuing else line)
            continuing = line.rstrip().endswith("\\")
    return "\n".join(commands) + "\n"


def synopsis_line(block: Block) -> str | None:
    """Why a shell block reads as a usage synopsis, or None."""
    for n, line in enumerate(block.code.splitlines(), block.line + 1):
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        if SYNOPSIS.search(code.replace("||", "")):
            return (f"line {n} looks like a usage synopsis ({line.strip()!r}): fence a "
                    "synopsis as ```text, or write commands that run")
    return None


def run_shell(block: Block, cwd: Path, env: dict[str, str], timeout: float) -> str | None:
    synopsis = synopsis_line(block)
    if synopsis:
        return synopsis
    script = "set -e -o pipefail\n" + shell_script(block)
    proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return f"timed out after {timeout} s\n{out.decode(errors='replace')[-6000:]}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc.returncode:
        return f"exit status {proc.returncode}\n{out.decode(errors='replace')[-6000:]}"
    return None


def run_block(block: Block, session_factory, cwd: Path, env: dict[str, str]) -> str | None:
    if block.problem:
        return block.problem
    timeout = SLOW_TIMEOUT if {"valgrind", "compiler"} & set(block.needs) else TIMEOUT
    if block.lang in PYTHON:
        try:
            lines = ellipsis_lines(block.code)
        except SyntaxError as e:
            return f"syntax error at line {block.line + (e.lineno or 0)}: {e.msg}"
        if lines:
            return (f"`...` placeholder at line(s) "
                    f"{', '.join(str(block.line + n) for n in lines)}: write real code")
        return session_factory().run(block, timeout)
    if block.lang in SHELL:
        return run_shell(block, cwd, env, timeout)
    if block.lang == "json":
        try:
            json.loads(block.code)
        except json.JSONDecodeError as e:
            return f"not JSON: {e}"
        return None
    return None


def doc_params() -> list:
    """A document a test; `slow` where it has blocks to run (a document's test is not
    marked valgrind / compiler / cuda: its blocks that need one skip on their own)."""
    return [pytest.param(doc, id=doc, marks=[pytest.mark.slow] if any(
        b.lang in PYTHON | SHELL for b in ALL_BLOCKS[doc]) else []) for doc in DOCUMENTS]


def run_document(blocks: list[Block], tmp_path: Path) -> tuple[list[str], list[str], list[str]]:
    """Run a document's blocks in order: (failures, expected failures, xfail blocks that
    passed). Blocks that are not run here are left out by the caller."""
    work = tmp_path / "work"
    # blocks read examples/... as from the checkout's root, and write beside them
    shutil.copytree(REPO / "examples", work / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = child_env(os.path.dirname(sys.executable))
    session: list[PythonSession] = []

    def python_session() -> PythonSession:
        if not session:
            session.append(PythonSession(work, env, tmp_path / "python.log"))
        return session[0]

    failures, expected, xpassed = [], [], []
    try:
        for block in blocks:
            t0 = time.perf_counter()
            error = run_block(block, python_session, work, env)
            print(f"{block.name} ({block.lang}): {time.perf_counter() - t0:.1f} s")
            reason = xfail_reason(block)
            if error and reason:
                expected.append(f"{block.name}: {reason}")
            elif error:
                failures.append(f"{block.name} ({block.lang}) failed:\n{error}")
            elif reason:
                xpassed.append(f"{block.name} passes now: remove its XFAIL entry ({reason})")
    finally:
        if session:
            session[0].close()
    return failures, expected, xpassed


@pytest.mark.parametrize("doc", doc_params())
def test_doc(doc: str, tmp_path: Path) -> None:
    blocks = [b for b in ALL_BLOCKS[doc]
              if b.problem or (b.lang not in NOT_RUN and why_not_run(b) is None)]
    stale = [f"{d}: no block contains {text!r}: remove its XFAIL entry" for (d, text) in XFAIL
             if d == doc and not any(text in b.code for b in ALL_BLOCKS[doc])]
    failures, expected, xpassed = run_document(blocks, tmp_path)
    problems = failures + xpassed + stale
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
    if expected:
        pytest.xfail("; ".join(expected))


@pytest.mark.parametrize("block,why", NOT_RUN_HERE, ids=[b.name for b, _ in NOT_RUN_HERE])
def test_block_not_run(block: Block, why: str) -> None:
    pytest.skip(why)


def test_convention_parsing() -> None:
    """The directives and fences the module docstring describes, on a made-up document."""
    text = "\n".join([
        "<!-- doc-test: needs valgrind, compiler -->", "", "```python", "x = 1", "```",
        "<!-- doc-test: skip (needs your own train.py) -->", "```bash", "python train.py",
        "```",
        "<!-- doc-test: skip -->", "```python", "pass", "```",
        "```", "no word", "```",
        "<!-- doc-test: needs gpu -->", "```python", "pass", "```",
        "<!-- doc-test: needs cuda -->", "some prose", "",
        "````text", "```python", "inside a text block", "```", "````",
    ])
    blocks = parse_blocks("made-up.md", text)
    summary = [(b.line, b.lang, b.needs, b.skip, bool(b.problem)) for b in blocks]
    assert summary == [
        (3, "python", ("valgrind", "compiler"), None, False),
        (7, "bash", (), "needs your own train.py", False),
        (11, "python", (), None, True),  # a skip without its reason
        (14, "", (), None, True),
        (18, "python", ("gpu",), None, True),
        (24, "text", (), None, False),
        (21, "text", (), None, True),  # the comment before prose
    ]
    assert blocks[0].code == "x = 1\n"
    assert blocks[5].code == "```python\ninside a text block\n```\n"


@pytest.mark.parametrize("line,synopsis", [
    ("torchmark ops -c a.json [-w 5]", True),
    ("torchmark compare a.json --format text|markdown", True),
    ('torchmark timeit "x * y" -s "x = torch.ones(128)"', False),
    ("torchmark fuzz binary -n 3 | head -3 || true", False),
    ("python -c 'print(x[-1])'", False),
])
def test_synopsis_detection(line: str, synopsis: bool) -> None:
    block = Block("made-up.md", 1, "bash", line + "\n")
    assert (synopsis_line(block) is not None) == synopsis


def test_ellipsis_refused() -> None:
    assert ellipsis_lines("Compare([m, ...])\nx = 1\n") == [1]
    assert ellipsis_lines("x = [1, 2]\n") == []


def test_runner_on_a_made_up_document(tmp_path: Path) -> None:
    """Blocks share one interpreter and one folder, in order; a failure names its block
    and line, and the later blocks still run."""
    text = "\n".join([
        "```python", "import sys", "x = 6 * 7", "open('x.txt', 'w').write(str(x))", "```",
        "```bash", 'test "$(cat x.txt)" = 42', "cat examples/ops/simple_add.json > /dev/null",
        "```",
        "```python", "assert x == 42 and sys.stdin.read() == ''", "print('hello')",
        "raise ValueError('boom')", "```",
        "```console", "$ echo one", "one", "$ false", "```",
        "```python", "assert __name__ == '__main__'", "```",
    ])
    failures, expected, xpassed = run_document(parse_blocks("made-up.md", text), tmp_path)
    assert expected == xpassed == []
    assert len(failures) == 2
    assert failures[0].startswith("made-up.md:10 (python) failed:")
    assert "hello" in failures[0] and "ValueError: boom" in failures[0]
    assert 'made-up.md", line 13' in failures[0]
    assert failures[1].startswith("made-up.md:15 (console) failed:\nexit status 1")
    assert not (REPO / "x.txt").exists()
