"""Runs a document's Python blocks one after the other in this one process, as a reader
pasting them into an interpreter would (run by tests/docs/test_doc_blocks.py, never
imported).

Protocol: one JSON request a line on the original stdin, {"path", "line", "code"}; one
JSON reply a line on the original stdout, {"ok": bool, "error": str}. The blocks read an
empty stdin, and what they print goes to the log (this process's stderr, a file the test
reads when a block fails).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types


def main() -> int:
    # the protocol's pipes move to private descriptors (not inherited by what blocks
    # start); the blocks' stdin is empty and their prints go to the log with their errors
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = os.fdopen(0, "r", closefd=False)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    # as an interactive interpreter: the current folder first on the path, a bare __main__
    sys.path[0] = ""
    main_module = types.ModuleType("__main__")
    main_module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main_module
    namespace = main_module.__dict__
    for request_line in requests:
        request = json.loads(request_line)
        print(f"----- {request['path']}:{request['line']}", flush=True)
        try:
            # line numbers in tracebacks are the document's own
            code = compile("\n" * request["line"] + request["code"], request["path"], "exec")
            exec(code, namespace)
            reply = {"ok": True, "error": ""}
        except BaseException as e:  # SystemExit, KeyboardInterrupt in a block: its failure
            # the traceback from the block's own frame down, not this loop's
            tb = e.__traceback__.tb_next if e.__traceback__ else None
            reply = {"ok": False, "error": "".join(traceback.format_exception(type(e), e, tb))}
        sys.stdout.flush()
        sys.stderr.flush()
        replies.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
