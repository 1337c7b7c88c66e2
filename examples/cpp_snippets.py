"""C++ snippets with torchmark: timing, instruction counts, and pass-by-value vs reference.

1. The Timer quick start's C++ case: `x * y` timed in compiled code, beside Python.
2. Its instruction counts: the C++ snippet under callgrind, and an A/B diff against a
   broadcasting multiply.
3. The benchmark recipe's calling-convention study: `batched_dot_mul_sum` written in C++
   taking tensors by value (v0) and by reference (v1), built with
   `torch.utils.cpp_extension.load_inline`, timed, then counted with callgrind; the
   per-function delta shows what passing by value costs.

    python examples/cpp_snippets.py
"""

from __future__ import annotations

import shutil
import textwrap

import torch

import torchmark as benchmark

HAVE_VALGRIND = shutil.which("valgrind") is not None


def section(title: str) -> None:
    print(f"\n# {title}\n")


# 1. A C++ timer next to the Python one ------------------------------------------------------
section("1. C++ snippets")
py_timer = benchmark.Timer("x * y", "x = torch.ones((128,))\ny = torch.ones((128,))")
cpp_timer = benchmark.Timer(
    "x * y;",
    """
        auto x = torch::ones({128});
        auto y = torch::ones({128});
    """,
    language=benchmark.Language.CPP,
)
py_m = py_timer.blocked_autorange(min_run_time=0.2)
cpp_m = cpp_timer.blocked_autorange(min_run_time=0.2)
print(py_m)
print(cpp_m)
print(f"C++ / Python: {cpp_m.median / py_m.median:.2f}")

# 2. Instruction counts of the C++ snippet, and an A/B diff ----------------------------------
section("2. Instruction counts of C++ snippets")
if HAVE_VALGRIND:
    stats = cpp_timer.collect_callgrind()
    print(stats)
    broadcasting = benchmark.Timer(
        "x * y;", "auto x = torch::ones({128}); auto y = torch::ones({1});", language="cpp",
    ).collect_callgrind()
    delta = broadcasting.as_standardized().delta(stats.as_standardized())
    print(delta.filter(lambda fn: "TensorIterator" in fn))
    print(f"broadcasting: {(broadcasting.counts() - stats.counts()) / 100:+.0f} "
          "instructions per multiply")
else:
    print("(valgrind is not installed: `apt-get install valgrind`; skipped)")

# 3. Pass by value or by reference? ------------------------------------------------------------
section("3. batched_dot_mul_sum in C++: by value (v0) or by reference (v1)")
from torch.utils import cpp_extension  # noqa: E402

batched_dot_src = textwrap.dedent("""
    // Python: def batched_dot_mul_sum(a, b): return a.mul(b).sum(-1)
    torch::Tensor batched_dot_mul_sum_v0(const torch::Tensor a, const torch::Tensor b) {
      return a.mul(b).sum(-1);
    }

    torch::Tensor batched_dot_mul_sum_v1(const torch::Tensor& a, const torch::Tensor& b) {
      return a.mul(b).sum(-1);
    }
""")
cpp_lib = cpp_extension.load_inline(
    name="torchmark_example_batched_dot",
    cpp_sources=batched_dot_src,
    extra_cflags=["-O2"],
    functions=["batched_dot_mul_sum_v0", "batched_dot_mul_sum_v1"],
)

# The counted process imports the extension again from its file.
module_import = textwrap.dedent(f"""
    import importlib.util
    spec = importlib.util.spec_from_file_location({cpp_lib.__name__!r}, {cpp_lib.__file__!r})
    cpp_lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cpp_lib)
""")


def batched_dot_mul_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.mul(b).sum(-1)


timers = {
    "Python": benchmark.Timer("batched_dot_mul_sum(x, x)",
                              "from __main__ import batched_dot_mul_sum\nx = torch.randn(2, 2)"),
    "C++ v0 (by value)": benchmark.Timer("cpp_lib.batched_dot_mul_sum_v0(x, x)",
                                         f"{module_import}\nx = torch.randn(2, 2)"),
    "C++ v1 (by reference)": benchmark.Timer("cpp_lib.batched_dot_mul_sum_v1(x, x)",
                                             f"{module_import}\nx = torch.randn(2, 2)"),
}
for name, timer in timers.items():
    m = timer.blocked_autorange(min_run_time=0.2)
    print(f"{name:<24} median {m.median * 1e6:6.2f} us   IQR {m.iqr * 1e6:5.2f} us")

if HAVE_VALGRIND:
    from torchmark.callgrind import collect_many  # noqa: E402

    counts = dict(zip(timers, collect_many(list(timers.values())), strict=True))
    for name, stats in counts.items():
        print(f"{name:<24} {stats.counts() / stats.number_per_run:8,.0f} instructions per call")
    v0 = counts["C++ v0 (by value)"].as_standardized()
    v1 = counts["C++ v1 (by reference)"].as_standardized()
    delta = v1.delta(v0).denoise()
    for before, after in (("batched_dot_mul_sum_v0", "batched_dot_mul_sum_v1"),
                          ("at::Tensor, at::Tensor", "..."),
                          ("at::Tensor const&, at::Tensor const&", "...")):
        delta = delta.transform(lambda fn, b=before, a=after: fn.replace(b, a))
    torch.set_printoptions(linewidth=160)
    print("v1 - v0 (negative: what passing by reference saves):")
    print(delta)
    print(f"v1 - v0 in total: {delta.sum() / 100:+.0f} instructions per call")
