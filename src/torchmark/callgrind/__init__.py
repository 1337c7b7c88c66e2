"""Instruction counts with callgrind: collection, parsing, CallgrindStats, FunctionCounts."""

from torchmark.callgrind.batch import collect_many
from torchmark.callgrind.collector import CallgrindError, Host
from torchmark.callgrind.function_counts import FunctionCount, FunctionCounts
from torchmark.callgrind.globals_bridge import CopyIfCallgrind
from torchmark.callgrind.out_parser import parse_callgrind_file
from torchmark.callgrind.stats import CallgrindStats

__all__ = [
    "CallgrindError", "CallgrindStats", "CopyIfCallgrind", "FunctionCount", "FunctionCounts",
    "Host", "collect_many", "parse_callgrind_file",
]
