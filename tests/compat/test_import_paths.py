"""torch.utils.benchmark's module paths under torchmark: each re-exports torchmark's own
objects, covers what torch's module exposes, stays cheap to import, and porting is one
prefix substitution."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

import torchmark
import torchmark.op_fuzzers

# torch path (after `torch.utils.benchmark.`) -> the names it re-exports from torchmark's
# top level
MIRRORS = {
    "utils.common": ["Measurement", "TaskSpec", "ordered_unique", "select_unit",
                     "set_torch_threads", "trim_sigfig", "unit_to_english"],
    "utils.timer": ["Language", "Timer", "timer"],
    "utils.compare": ["Colorize", "Compare"],
    "utils.fuzzer": ["FuzzedParameter", "FuzzedTensor", "Fuzzer", "ParameterAlias"],
    "utils.sparse_fuzzer": ["FuzzedSparseTensor", "FuzzedTensor"],
    "utils.valgrind_wrapper.timer_interface": ["CallgrindStats", "CopyIfCallgrind",
                                               "FunctionCount", "FunctionCounts"],
}
# names defined in torchmark modules other than the top level
ELSEWHERE = {
    "utils.compare": {name: "torchmark.compare.text"
                      for name in ("BEST", "GOOD", "BAD", "VERY_BAD", "BOLD", "TERMINATE")},
    "utils.fuzzer": {"dtype_size": "torchmark.fuzzing.tensors",
                     "prod": "torchmark.fuzzing.tensors"},
    "utils.valgrind_wrapper.timer_interface": {
        "Serialization": "torchmark.callgrind.globals_bridge"},
}
# what torch's modules define and torchmark leaves out (docs/compat.md, "Module paths")
NOT_MIRRORED = {
    "utils.timer": {"CPPTimer"},
    "utils.compare": {"Table", "optional_min"},
    "utils.valgrind_wrapper.timer_interface": {"GlobalsBridge", "wrapper_singleton"},
}
OP_FUZZERS = {"binary": "BinaryOpFuzzer", "unary": "UnaryOpFuzzer",
              "spectral": "SpectralOpFuzzer", "sparse_unary": "UnaryOpSparseFuzzer",
              "sparse_binary": "BinaryOpSparseFuzzer"}


@pytest.mark.parametrize("path", sorted(MIRRORS))
def test_every_name_is_torchmarks_own_object(path):
    module = importlib.import_module(f"torchmark.{path}")
    assert module.__doc__.startswith(f"Mirrors torch.utils.benchmark.{path}:")
    assert "\n" not in module.__doc__.strip()
    for name in MIRRORS[path]:
        assert getattr(module, name) is getattr(torchmark, name), name
    for name, home in ELSEWHERE.get(path, {}).items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name
    star: dict = {}
    exec(f"from torchmark.{path} import *", star)  # noqa: S102
    assert {n for n in star if n != "__builtins__"} == set(module.__all__)
    assert set(module.__all__) <= set(MIRRORS[path])
    assert set(dir(module)) == set(MIRRORS[path]) | set(ELSEWHERE.get(path, {}))


@pytest.mark.parametrize("path", sorted(MIRRORS))
def test_every_public_name_of_torchs_module_is_mirrored_or_listed(path):
    theirs = importlib.import_module(f"torch.utils.benchmark.{path}")
    ours = importlib.import_module(f"torchmark.{path}")
    # what torch's module defines itself, plus the names its __all__ re-exports
    defined = {n for n in dir(theirs) if not n.startswith("_")
               and getattr(getattr(theirs, n), "__module__", None) == theirs.__name__}
    public = defined | set(getattr(theirs, "__all__", ()))
    missing = {n for n in public if not hasattr(ours, n)}
    assert missing == NOT_MIRRORED.get(path, set())
    assert set(getattr(theirs, "__all__", ours.__all__)) == set(ours.__all__)
    for name in NOT_MIRRORED.get(path, ()):
        with pytest.raises(AttributeError, match=f"has no attribute '{name}': .*compat.md"):
            getattr(ours, name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'$"):
        ours.nothing_here  # noqa: B018


def test_colour_codes_are_torchs():
    import torch.utils.benchmark.utils.compare as theirs

    import torchmark.utils.compare as ours

    for name in ("BEST", "GOOD", "BAD", "VERY_BAD", "BOLD", "TERMINATE"):
        assert getattr(ours, name) == getattr(theirs, name)


def test_packages_reach_their_submodules():
    import torchmark.utils

    for name in ("common", "compare", "fuzzer", "sparse_fuzzer", "timer",
                 "valgrind_wrapper"):
        assert getattr(torchmark.utils, name) is sys.modules[f"torchmark.utils.{name}"]
    assert torchmark.utils.valgrind_wrapper.timer_interface.CallgrindStats \
        is torchmark.CallgrindStats
    assert set(dir(torchmark.utils)) == {"common", "compare", "fuzzer", "sparse_fuzzer",
                                         "timer", "valgrind_wrapper"}
    with pytest.raises(AttributeError):
        torchmark.utils.cpp_jit  # noqa: B018  (not mirrored: docs/compat.md)


@pytest.mark.parametrize("module, cls", sorted(OP_FUZZERS.items()))
def test_op_fuzzer_modules_hold_torchmarks_fuzzers(module, cls):
    theirs = importlib.import_module(f"torch.utils.benchmark.op_fuzzers.{module}")
    ours = importlib.import_module(f"torchmark.op_fuzzers.{module}")
    assert getattr(ours, cls) is getattr(torchmark.op_fuzzers, cls)
    assert issubclass(getattr(ours, cls), torchmark.Fuzzer)
    assert hasattr(theirs, cls)


def test_spectral_module_helpers_match_torchs():
    import torch.utils.benchmark.op_fuzzers.spectral as theirs

    import torchmark.op_fuzzers.spectral as ours

    assert ours.REGULAR_SIZES == theirs.REGULAR_SIZES
    assert (ours.MIN_DIM_SIZE, ours.MAX_DIM_SIZE) == (theirs.MIN_DIM_SIZE, theirs.MAX_DIM_SIZE)
    assert list(ours.power_range(1000, 3)) == list(theirs.power_range(1000, 3))


def test_mirrors_import_without_torch_until_a_name_needs_it():
    code = textwrap.dedent("""
        import sys
        import torchmark.utils.common, torchmark.utils.compare, torchmark.utils.timer
        import torchmark.utils.fuzzer, torchmark.utils.sparse_fuzzer
        import torchmark.utils.valgrind_wrapper.timer_interface as ti
        assert "torch" not in sys.modules, "import"
        from torchmark.utils.common import *
        from torchmark.utils.compare import *
        from torchmark.utils.timer import *
        ti.CallgrindStats, ti.FunctionCounts, ti.CopyIfCallgrind
        assert "torch" not in sys.modules, "names"
        from torchmark.utils.fuzzer import Fuzzer
        assert "torch" in sys.modules  # the fuzzers build tensors
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# A short program written for torch.utils.benchmark, using its deep module paths.
TORCH_PROGRAM = '''
import torch.utils.benchmark.utils.common as common
from torch.utils.benchmark.utils.common import Measurement, TaskSpec, select_unit, trim_sigfig
from torch.utils.benchmark.utils.common import ordered_unique, unit_to_english
from torch.utils.benchmark.utils.compare import Compare
from torch.utils.benchmark.utils.fuzzer import FuzzedParameter, FuzzedTensor, Fuzzer
from torch.utils.benchmark.utils.sparse_fuzzer import FuzzedSparseTensor
from torch.utils.benchmark.utils.timer import Language, Timer
from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
    FunctionCount, FunctionCounts)

spec = TaskSpec("x + 1", "x = 1", label="add", sub_label="int", description="one",
                num_threads=1)
runs = [Measurement(100, [1e-4 * (1 + i / 50)], spec) for i in range(5)]
merged = Measurement.merge(runs)[0]
unit, scale = select_unit(merged.median)
with common.set_torch_threads(1):
    timed = Timer("x + 1", "x = 1", language=Language.PYTHON).timeit(10)
fuzzer = Fuzzer(parameters=[FuzzedParameter("n", 1, 16, distribution="loguniform")],
                tensors=[FuzzedTensor("x", size=("n",))], seed=0)
tensors, properties, params = next(iter(fuzzer.take(1)))
sparse = Fuzzer(  # torch's FuzzedSparseTensor reads parameters of these names
    parameters=[FuzzedParameter("density", 0.2, 0.5, distribution="uniform"),
                FuzzedParameter("coalesced", 0, 1, distribution="uniform"),
                FuzzedParameter("sparse_dim", 1, 2, distribution="uniform")],
    tensors=[FuzzedSparseTensor("s", size=(8, 4), min_elements=4, density="density",
                                coalesced="coalesced", sparse_dim="sparse_dim")], seed=0)
s = next(iter(sparse.take(1)))[0]["s"]
counts = FunctionCounts((FunctionCount(30, "f"), FunctionCount(20, "g")), inclusive=False)
RESULT = {
    "unit": unit, "english": unit_to_english(unit),
    "median": round(trim_sigfig(merged.median / scale, 3), 6),  # torch: float32 "runs": len(merged.times),
    "title": merged.title, "table": str(Compare([merged])).splitlines(),
    "timed": isinstance(timed.median, float) and timed.number_per_run == 10,
    "x": tensors["x"].tolist(), "n": params["n"], "sparse": (s.is_sparse, tuple(s.shape)),
    "delta": [tuple(c) for c in counts - counts[1:]],
    "unique": ordered_unique([3, 1, 3, 2]),
}
'''


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_a_torch_program_ports_by_one_prefix_substitution():
    ported = TORCH_PROGRAM.replace("torch.utils.benchmark.", "torchmark.")
    assert "torch.utils" not in ported
    theirs: dict = {}
    ours: dict = {}
    exec(compile(TORCH_PROGRAM, "<torch program>", "exec"), theirs)  # noqa: S102
    exec(compile(ported, "<ported program>", "exec"), ours)  # noqa: S102
    assert ours["RESULT"]["timed"] and theirs["RESULT"]["timed"]
    assert ours["RESULT"] == theirs["RESULT"]
    assert ours["RESULT"]["delta"] == [(30, "f")]
    assert type(ours["merged"]) is torchmark.Measurement
