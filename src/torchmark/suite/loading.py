"""Where suite definitions come from: the standard suite, or a user's Python file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from torchmark.core.bounded_input import read_bytes
from torchmark.core.errors import USER_CODE_FAILURES, error_line
from torchmark.suite.materialize import Case, materialize


def load_cases(definitions: str | None = None) -> list[Case]:
    """The standard cases, or those of a Python file that defines `DEFINITIONS` (a nested
    dict of grouped definitions) or a function `definitions()` returning one."""
    if definitions is None:
        from torchmark.suite.standard import standard_cases

        return standard_cases()
    path = Path(definitions)
    read_bytes(path, "--definitions")  # a regular file under the size cap (never a pipe)
    spec = importlib.util.spec_from_file_location(f"torchmark_definitions_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"--definitions {definitions}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        if hasattr(module, "DEFINITIONS"):
            value = module.DEFINITIONS
        elif callable(getattr(module, "definitions", None)):
            value = module.definitions()
        else:
            value = None
    except USER_CODE_FAILURES as e:  # the file's own code failed: one line, naming it
        raise ValueError(f"--definitions {definitions}: running it raised "
                         f"{error_line(e)}") from None
    if value is None:
        raise ValueError(f"--definitions {definitions}: define DEFINITIONS (a dict of grouped "
                         "definitions) or a function definitions() returning one")
    return materialize(value)
