"""An exact Python-level profile of a statement: the calls and the executed lines of each
Python function, over `number` runs after a warm-up, counted with a trace function (as
deterministic as instruction counts: the same code gives the same numbers). Callgrind
attributes a Python function's work to the interpreter's C functions; this names the
Python function, its file and line.

The profile runs in a fresh process whose import path starts with the code under test
(`profile_python`), so two commits of a project can be profiled side by side."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from torchmark.core.errors import MeasurementError

PROFILE_TIMEOUT_S = 600.0


@dataclasses.dataclass(frozen=True)
class FunctionWork:
    """One Python function's work a run: `calls` and executed `lines`."""

    file: str  # relative to the import root when under it, else as Python names it
    line: int  # the first line of its definition
    name: str  # the qualified name
    calls: float
    lines: float

    @property
    def key(self) -> tuple[str, str]:
        return self.file, self.name  # lines move between commits; names and files do not


def profile_python(stmt: str, setup: str, root: Path | None,
                   number: int = 10) -> list[FunctionWork]:
    """The profile of `number` runs of `stmt` after `setup`, in a fresh process importing
    from `root` first (None: this process's path)."""
    here = str(Path(__file__).resolve().parents[2])  # the folder torchmark is imported from
    path = [str(root)] if root is not None else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*path, here, *filter(None, [os.environ.get("PYTHONPATH")])])}
    request = json.dumps({"stmt": stmt, "setup": setup, "number": number,
                          "root": str(root) if root is not None else ""})
    done = subprocess.run([sys.executable, "-m", "torchmark.rootcause.python_profile"],
                          input=request, capture_output=True, text=True, env=env, cwd="/",
                          timeout=PROFILE_TIMEOUT_S)
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if line.strip()][-1:]
        raise MeasurementError(f"the Python profile failed: {last[0] if last else 'no output'}")
    return [FunctionWork(**row) for row in json.loads(done.stdout)]


def _profile(stmt: str, setup: str, number: int, root: str) -> list[dict[str, Any]]:
    """The profile, in this process (see the module docstring)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(setup, "<setup>", "exec"), namespace)
    code = compile(stmt, "<stmt>", "exec")
    exec(code, namespace)  # warm-up: first-call imports and caches are not the statement's
    calls: dict[Any, int] = {}
    lines: dict[Any, int] = {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            lines[frame.f_code] = lines.get(frame.f_code, 0) + 1
        return local

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        if event == "call":
            calls[frame.f_code] = calls.get(frame.f_code, 0) + 1
            return local
        return None

    sys.settrace(on_call)
    try:
        for _ in range(number):
            exec(code, namespace)
    finally:
        sys.settrace(None)
    rows = []
    for code_object in set(calls) | set(lines):
        file = code_object.co_filename
        if file == "<stmt>":
            continue
        if root and os.path.abspath(file).startswith(root + os.sep):
            file = os.path.relpath(file, root)
        rows.append({"file": file, "line": code_object.co_firstlineno,
                     "name": getattr(code_object, "co_qualname", code_object.co_name),
                     "calls": calls.get(code_object, 0) / number,
                     "lines": lines.get(code_object, 0) / number})
    return sorted(rows, key=lambda r: (r["file"], r["line"], r["name"]))


Change = tuple[FunctionWork | None, FunctionWork | None, float]


def changed_functions(before: list[FunctionWork], after: list[FunctionWork]) -> list[Change]:
    """The functions whose work changed, most first: (before, after, change in the lines
    it executed itself a run), the change in calls breaking ties (a function called more
    often because its caller loops longer ranks after that caller, whose own lines grew
    as much); a function only one side has gets None on the other."""
    a = {f.key: f for f in before}
    b = {f.key: f for f in after}
    out = []
    for key in set(a) | set(b):
        old, new = a.get(key), b.get(key)
        lines = [f.lines if f is not None else 0.0 for f in (old, new)]
        calls = [f.calls if f is not None else 0.0 for f in (old, new)]
        if lines[1] != lines[0] or calls[1] != calls[0]:
            out.append((old, new, lines[1] - lines[0], abs(calls[1] - calls[0])))
    out.sort(key=lambda t: (-abs(t[2]), t[3], _named(t).file, _named(t).name))
    return [(old, new, delta) for old, new, delta, _ in out]


def _named(change: tuple[FunctionWork | None, FunctionWork | None, Any, Any]) -> FunctionWork:
    found = change[1] or change[0]
    assert found is not None
    return found


def main() -> None:
    request = json.loads(sys.stdin.read())
    print(json.dumps(_profile(request["stmt"], request["setup"], int(request["number"]),
                              request["root"])))


if __name__ == "__main__":
    main()
