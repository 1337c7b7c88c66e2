"""torchmark's error hierarchy, and one-line descriptions of exceptions for records,
reports and CLI messages.

The CLI maps classes to exit codes, never message text: a UsageError (bad input: an
argument, a file, a config, something refused by policy or beyond a bound) and a
BusyError exit 2; other TorchmarkErrors (MeasurementError, ToolMissingError) exit 1."""

from __future__ import annotations


class TorchmarkError(Exception):
    """The root of torchmark's own errors."""


class UsageError(TorchmarkError, ValueError):
    """Bad input: an argument, option, file, config or trace that cannot be used as given
    (exit 2). A ValueError too, as torchmark's argument errors always were."""


class MeasurementError(TorchmarkError, RuntimeError):
    """A measurement that could not be made: the statement or snippet failed, a worker
    or host died (exit 1)."""


class ToolMissingError(TorchmarkError, OSError):
    """A tool a measurement needs is not installed (valgrind, a C or C++ compiler)."""


class PolicyError(UsageError):
    """A name from a file (an operator, an aten op) that the operator policy refuses."""


class LimitError(UsageError):
    """Input beyond a bound: a file too large or not a regular file, nesting too deep,
    YAML aliases over budget, a tensor with too many dimensions or bytes."""


class BusyError(TorchmarkError):
    """A results file another run is writing (it holds the file's lock)."""


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
