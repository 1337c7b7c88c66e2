"""Execution-trace replay: re-run a recorded PyTorch workload operator by operator."""

from torchmark.replay.record import record
from torchmark.replay.session import ReplayReport, replay
from torchmark.replay.trace import ExecutionTrace, TraceError, load_trace

__all__ = ["ExecutionTrace", "ReplayReport", "TraceError", "load_trace", "record", "replay"]
