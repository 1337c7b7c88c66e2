"""The `torchmark` console script: Ctrl-C while the command line is still importing
(torch takes seconds) exits 130 with one line, as it does once a command runs."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from torchmark.cli.main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("torchmark: error: interrupted\n")
        return 130
    return run()
