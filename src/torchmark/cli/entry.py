"""The `torchmark` console script: Ctrl-C while the command line is still importing
(torch takes seconds) exits 130 with one line, as it does once a command runs; once the
command has returned, its exit status stands. The current folder is on the import path,
last, so that a statement's `import mymodule` finds the user's module as `python -m
torchmark` does, while nothing installed can be shadowed by a file there."""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)
    try:
        from torchmark.cli.main import main as run

        code = run()
    except KeyboardInterrupt:  # while importing, or as the command's last line was written
        sys.stderr.write("torchmark: error: interrupted\n")
        return 130
    # the outcome is decided: a Ctrl-C during the interpreter's exit does not change it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code
