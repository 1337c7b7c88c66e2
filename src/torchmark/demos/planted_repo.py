"""A throw-away git repository with a planted regression, for `torchmark bisect` and
`explain`: a small Python package, `planted`, whose `work()` runs a Python loop, in
`commits` commits. Every commit changes something (a note list grows, so the files and
their sizes change as real histories do); the commit `first_bad` makes the loop do
`step` more work, and stays so in every later commit. Optional: a commit whose package
does not import, and a C extension (`planted/_native.c`, built in place by
`python setup.py build_ext --inplace`) whose loop holds the step instead.

    repo = plant_repository(tmp / "repo", commits=64, step=0.005, seed=3)
    torchmark bisect --good repo.commits[0] --bad repo.commits[-1] --repo repo.root \\
        --setup repo.setup repo.statement
"""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
from pathlib import Path

BASE_ITERATIONS = 4000  # of the loop before the step: the statement's work is about all loop
STATEMENT = "work()"
SETUP = "from planted.work import work"

_WORK = '''"""The planted package's work, revision {revision}."""

from planted.notes import NOTES


def helper(value):
    return value + 1


def work():
    """A loop of {iterations} steps."""
    value = 0
    for _ in range({iterations}):
        value = helper(value)
    return value + len(NOTES)
'''

_PARTS_WORK = '''"""The planted package's work, revision {revision}: {count} parts."""

from planted.notes import NOTES

{parts}

def work():
    return {calls} + len(NOTES)
'''

_PART = '''
def part_{k}(value=0):
    for _ in range({iterations}):
        value = value + {k} % 3 + 1
    return value
'''

_TENSOR_WORK = '''"""The planted package's work, revision {revision}: tensor arithmetic."""

import torch

from planted.notes import NOTES

X = torch.ones({size})


def work():
    return float((X * 2 + 1).sum()) + len(NOTES)
'''

_NATIVE_WORK = '''"""The planted package's work, revision {revision}: a loop in C."""

from planted._native import spin
from planted.notes import NOTES


def work():
    return spin() + len(NOTES)
'''

_NATIVE_C = '''#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *spin(PyObject *self, PyObject *args) {{
    volatile long value = 0;
    for (long i = 0; i < {iterations}L; i++) value = value + i % 7;
    return PyLong_FromLong(value);
}}

static PyMethodDef methods[] = {{{{"spin", spin, METH_NOARGS, "a loop"}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods}};
PyMODINIT_FUNC PyInit__native(void) {{ return PyModule_Create(&module); }}
'''

_SETUP_PY = '''from setuptools import Extension, setup

setup(name="planted", ext_modules=[Extension("planted._native", ["planted/_native.c"])])
'''

BUILD_COMMAND = "python setup.py -q build_ext --inplace"
PYTEST_NODE = "tests/test_work.py::test_work"
_PYTEST_FILE = '''from planted.work import work


def test_work(torchmark):
    torchmark(work)
'''


@dataclasses.dataclass(frozen=True)
class PlantedRepo:
    """The repository made: its folder, its commits (oldest first), the first commit with
    the step, the commit that does not import (or None), and the case to bisect."""

    root: Path
    commits: tuple[str, ...]
    first_bad: str
    broken: str | None
    planted_function: str = "work"  # the function the step is in
    statement: str = STATEMENT
    setup: str = SETUP
    build: str | None = None  # the --build command a native repository needs

    @property
    def first_bad_index(self) -> int:
        return self.commits.index(self.first_bad)


def plant_repository(root: str | os.PathLike[str], *, commits: int = 64,
                     step: float = 0.005, first_bad: int | None = None,
                     broken: int | None = None, native: bool = False,
                     pytest_test: bool = False, parts: int = 0, tensor: bool = False,
                     seed: int = 0) -> PlantedRepo:
    """Make the repository in `root` (a new folder). `step`: the relative growth of the
    loop at commit `first_bad` (default: drawn from 1 .. commits - 1 with `seed`).
    `broken`: a commit (index) whose package raises on import (a later commit repairs
    it). `native`: the loop lives in a C extension (built by `BUILD_COMMAND`).
    `pytest_test`: the repository holds a pytest benchmark of work() (`PYTEST_NODE`).
    `parts`: work() calls `parts` functions part_0 .. (loops of different lengths), and
    the step goes into one of them, drawn with `seed`. `tensor`: work() is tensor
    arithmetic, and the step makes its tensor larger (a change in torch's C++, not in
    Python)."""
    if commits < 3:
        raise ValueError(f"plant_repository: commits must be >= 3, got {commits}")
    rng = random.Random(seed)
    bad = rng.randrange(1, commits) if first_bad is None else first_bad
    if not 1 <= bad < commits:
        raise ValueError(f"plant_repository: first_bad must be in 1..{commits - 1}, got {bad}")
    if broken is not None and not 1 <= broken < commits - 1:
        raise ValueError(f"plant_repository: broken must be in 1..{commits - 2}, got {broken}")
    if broken == bad:
        raise ValueError("plant_repository: the broken commit cannot be the first bad one")
    target = rng.randrange(parts) if parts else None
    folder = Path(root)
    folder.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "Planter", "GIT_AUTHOR_EMAIL": "planter@example.com",
           "GIT_COMMITTER_NAME": "Planter", "GIT_COMMITTER_EMAIL": "planter@example.com"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=folder, env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    package = folder / "planted"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package of a planted regression."""\n')
    (folder / ".gitignore").write_text("build/\n*.so\n__pycache__/\n")
    if native:
        (folder / "setup.py").write_text(_SETUP_PY)
    if pytest_test:
        (folder / "tests").mkdir()
        (folder / "tests" / "test_work.py").write_text(_PYTEST_FILE)
    made = []
    for k in range(commits):
        iterations = BASE_ITERATIONS + (round(BASE_ITERATIONS * step) if k >= bad else 0)
        notes = [rng.randrange(1000) for _ in range(k)]
        (package / "notes.py").write_text(f"NOTES = {notes!r}\n")
        if native:
            (package / "_native.c").write_text(_NATIVE_C.format(iterations=iterations * 50))
            text = _NATIVE_WORK.format(revision=k)
        elif parts:
            text = _PARTS_WORK.format(revision=k, count=parts, parts="".join(
                _PART.format(k=j, iterations=BASE_ITERATIONS // parts * (j + 1) + (
                    round(BASE_ITERATIONS * step) if j == target and k >= bad else 0))
                for j in range(parts)), calls=" + ".join(f"part_{j}()" for j in range(parts)))
        elif tensor:
            text = _TENSOR_WORK.format(revision=k, size=BASE_ITERATIONS * 4 + (
                round(BASE_ITERATIONS * 4 * step) if k >= bad else 0))
        else:
            text = _WORK.format(revision=k, iterations=iterations)
        if k == broken:
            text = text.replace('"""\n\n', '"""\n\nimport planted_missing_dependency  # noqa\n', 1)
        (package / "work.py").write_text(text)
        subject = "make work() do more" if k == bad else \
            "import a missing module" if k == broken else f"grow the notes ({k})"
        git("add", "-A")
        # dates an hour apart from 2026-01-01: the same seed makes the same hashes
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{1767225600 + k * 3600} +0000"
        git("commit", "-q", "-m", subject)
        made.append(git("rev-parse", "HEAD"))
    return PlantedRepo(folder, tuple(made), made[bad], made[broken] if broken is not None
                       else None, f"part_{target}" if parts else "work",
                       build=BUILD_COMMAND if native else None)
