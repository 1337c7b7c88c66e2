"""One error hierarchy; the CLI maps classes to exit codes, never message text."""

from __future__ import annotations

from torchmark.callgrind.collector import CallgrindError
from torchmark.cli.main import main
from torchmark.core.errors import (
    BusyError,
    LimitError,
    MeasurementError,
    PolicyError,
    ToolMissingError,
    TorchmarkError,
    UsageError,
)
from torchmark.cpp.compile_cache import CompileError
from torchmark.cpp.cpp_timer import SnippetError
from torchmark.ops.schema import ConfigError
from torchmark.replay.trace import TraceError
from torchmark.suite.workers import CaseFailed, WorkerLost


def test_the_hierarchy_keeps_the_builtin_bases_callers_catch():
    for cls in (UsageError, PolicyError, LimitError, ConfigError, TraceError):
        assert issubclass(cls, TorchmarkError) and issubclass(cls, ValueError)
    for cls in (CallgrindError, SnippetError, CompileError, WorkerLost, CaseFailed):
        assert issubclass(cls, MeasurementError) and issubclass(cls, RuntimeError)
    assert issubclass(ToolMissingError, OSError) and issubclass(BusyError, TorchmarkError)


def test_a_statement_raising_a_timer_like_message_is_its_own_failure(capsys):
    """The old CLI turned any ValueError starting with "Timer" into a usage error."""
    code = main(["timeit", "raise ValueError('Timer: not a torchmark error')",
                 "--min-run-time", "0.01"])
    err = capsys.readouterr().err
    assert code == 1 and "the statement raised ValueError: Timer: not a torchmark" in err
    code = main(["timeit", "pass", "--device", "cpu", "--min-run-time", "0.01",
                 "--threads", "0"])
    assert code == 2
