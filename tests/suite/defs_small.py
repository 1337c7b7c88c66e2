"""Small definitions for runner tests (loaded by path, like `--definitions`)."""

import os

from torchmark.suite import GroupedModules, GroupedSetup, GroupedStmts, TimerArgs

MODE = os.environ.get("TORCHMARK_TEST_DEFS", "e2e")


def _e2e():
    return {
        "py": GroupedStmts("x + 1", setup=GroupedSetup("x = torch.ones(4)")),
        "cpp": GroupedStmts(cpp_stmt="x + 1;",
                            setup=GroupedSetup(cpp_setup="auto x = torch::ones({4});")),
        "jit": TimerArgs("pass"),  # replaced below by the TorchScript case
        "raises": TimerArgs("raise RuntimeError('boom from the case')"),
        "aborts": TimerArgs("import os; os.abort()"),
    }


def definitions():
    if MODE == "e2e":
        defs = _e2e()
        defs["jit"] = GroupedModules("model = torch.nn.ReLU()", setup=GroupedSetup(
            "x = torch.ones(4)"), signature="f(x) -> y", torchscript=True)
        return defs
    if MODE == "hang":
        return {"hangs": TimerArgs("import time; time.sleep(600)"), "ok": TimerArgs("1 + 1")}
    # "many": quick Python cases for the resume test
    return {f"case {i}": TimerArgs(f"{i} + 1") for i in range(8)}
