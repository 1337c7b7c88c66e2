"""Definitions for the executor tests (loaded by path, like `--definitions`)."""

import os

from torchmark.suite import GroupedModules, GroupedSetup, GroupedStmts, TimerArgs

MODE = os.environ.get("TORCHMARK_TEST_DEFS", "counts")


def definitions():
    if MODE == "counts":  # instruction counts, local pool against Ray
        return {
            "add": GroupedStmts("x + 1", setup=GroupedSetup("x = torch.ones(4)")),
            "sum": TimerArgs("x.sum()", "x = torch.ones(64)"),
            "jit": GroupedModules("model = torch.nn.ReLU()", setup=GroupedSetup(
                "x = torch.ones(4)"), signature="f(x) -> y", torchscript=True),
            "raises": TimerArgs("raise RuntimeError('boom from the case')"),
        }
    # "slow": wall times long enough to kill a Ray worker in the middle of one
    return {f"case {i}": TimerArgs(f"{i} + 1") for i in range(6)}
