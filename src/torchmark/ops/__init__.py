"""Operator benchmarks from JSON (or YAML) configs in PARAM's format."""

from torchmark.ops.executor import EXEC_MODES, RunOptions
from torchmark.ops.expansion import Case, iter_cases
from torchmark.ops.loading import config_from_data, load_config
from torchmark.ops.registry import register_op
from torchmark.ops.results_file import read_records
from torchmark.ops.runner import run
from torchmark.ops.schema import BenchmarkConfig, ConfigError

__all__ = ["EXEC_MODES", "BenchmarkConfig", "Case", "ConfigError", "RunOptions",
           "config_from_data", "iter_cases", "load_config", "read_records", "register_op",
           "run"]
