"""One-line descriptions of exceptions, for records, reports and CLI messages; the
argument-type error the Timer raises."""

from __future__ import annotations


def error_line(error: BaseException) -> str:
    """`TypeName: first line of the message` (messages may start with a newline, or run
    over many lines, as TorchScript's and torch's do)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


# What user code (a statement, an operator, a plugin, a definitions file) may raise that
# fails its own case or load, not the whole run: sys.exit() and GeneratorExit included.
# KeyboardInterrupt (and SIGTERM, raised as one) still stops the run.
USER_CODE_FAILURES = (Exception, SystemExit, GeneratorExit)


class ArgumentTypeError(ValueError, TypeError):
    """An argument of the wrong type: a ValueError, as torchmark's other argument errors,
    and a TypeError, which is what torch.utils.benchmark raises for it."""
