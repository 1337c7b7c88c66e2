"""The instruction-count suite: grouped definitions, the standard cases, a runner."""

from torchmark.suite.grouped import GroupedBenchmark, GroupedModules, GroupedSetup, GroupedStmts
from torchmark.suite.materialize import Case, materialize, select
from torchmark.suite.signature import Signature, parse_signature
from torchmark.suite.timer_args import AutoLabels, TimerArgs
from torchmark.suite.variants import GroupedVariants, parse_stmts

__all__ = [
    "AutoLabels", "Case", "GroupedBenchmark", "GroupedModules", "GroupedSetup", "GroupedStmts",
    "GroupedVariants", "Signature", "TimerArgs", "materialize", "parse_signature",
    "parse_stmts", "select",
]
