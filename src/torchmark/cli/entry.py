"""The `torchmark` console script: Ctrl-C while the command line is still importing
(torch takes seconds) exits 130 with one line, as it does once a command runs; once the
command has returned, its exit status stands."""

from __future__ import annotations

import signal
import sys


def main() -> int:
    try:
        from torchmark.cli.main import main as run

        code = run()
    except KeyboardInterrupt:  # while importing, or as the command's last line was written
        sys.stderr.write("torchmark: error: interrupted\n")
        return 130
    # the outcome is decided: a Ctrl-C during the interpreter's exit does not change it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code
