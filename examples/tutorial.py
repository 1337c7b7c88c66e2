"""The PyTorch benchmark recipe, run with torchmark.

Sections 1 to 7 of the recipe "PyTorch Benchmark" (batched dot products timed with
timeit, Timer, blocked_autorange, Compare, A/B results saved and reloaded, and inputs
from fuzzers), with one change to the original: `import torchmark as benchmark`; then
section 8 and the Timer quick start's instruction-count sections (4 to 6), for Python
statements: collect_callgrind, CallgrindStats and FunctionCounts, and an A/B diff.

    python examples/tutorial.py           # the full study (a few minutes)
    python examples/tutorial.py --quick   # small sizes and short runs (used by `make test`)
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import timeit

import torch
from torch import Tensor

import torchmark as benchmark

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="small sizes, short runs")
ARGS = parser.parse_args()
MIN_RUN_TIME = 0.01 if ARGS.quick else 1.0
SIZES = [1, 64, 1024] if ARGS.quick else [1, 64, 1024, 10000]
THREADS = [1, 2] if ARGS.quick else [1, 4, 16, 32]


def section(title: str) -> None:
    print(f"\n# {title}\n")


# 1. Two ways to compute a batched dot product --------------------------------------------
section("1. Defining functions to benchmark")


def batched_dot_mul_sum(a: Tensor, b: Tensor) -> Tensor:
    """Batched dot product: multiply elementwise, then sum the last dimension."""
    return a.mul(b).sum(-1)


def batched_dot_bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched dot product as a batch of (1 x n) @ (n x 1) products."""
    a = a.reshape(-1, 1, a.shape[-1])
    b = b.reshape(-1, a.shape[-1], 1)
    return torch.bmm(a, b).flatten()


x = torch.randn(10000, 64)
assert batched_dot_mul_sum(x, x).allclose(batched_dot_bmm(x, x))
print("mul/sum and bmm agree on a 10000 x 64 input")

# 2. Python's timeit, for reference ------------------------------------------------------
section("2. Benchmarking with timeit.Timer")
t0 = timeit.Timer(stmt="batched_dot_mul_sum(x, x)",
                  setup="from __main__ import batched_dot_mul_sum", globals={"x": x})
t1 = timeit.Timer(stmt="batched_dot_bmm(x, x)",
                  setup="from __main__ import batched_dot_bmm", globals={"x": x})
print(f"mul_sum(x, x):  {t0.timeit(100) / 100 * 1e6:>5.1f} us")
print(f"bmm(x, x):      {t1.timeit(100) / 100 * 1e6:>5.1f} us")

# 3. The same with benchmark.Timer: per-run times, one thread, warm-up, device sync ------
section("3. Benchmarking with benchmark.Timer")
t0 = benchmark.Timer(stmt="batched_dot_mul_sum(x, x)",
                     setup="from __main__ import batched_dot_mul_sum", globals={"x": x})
t1 = benchmark.Timer(stmt="batched_dot_bmm(x, x)",
                     setup="from __main__ import batched_dot_bmm", globals={"x": x})
print(t0.timeit(100))
print(t1.timeit(100))

num_threads = torch.get_num_threads()
print(f"\nthis machine runs torch with {num_threads} threads by default")
for stmt, name, sub_label in (("batched_dot_mul_sum(x, x)", "batched_dot_mul_sum",
                               "Implemented using mul and sum"),
                              ("batched_dot_bmm(x, x)", "batched_dot_bmm",
                               "Implemented using bmm")):
    print(benchmark.Timer(stmt=stmt, setup=f"from __main__ import {name}", globals={"x": x},
                          num_threads=num_threads, label="Multithreaded batch dot",
                          sub_label=sub_label).timeit(100))

if torch.cuda.is_available():
    x_cuda = torch.randn(10000, 1024, device="cuda")
    plain = timeit.Timer(stmt="batched_dot_bmm(x, x)",
                         setup="from __main__ import batched_dot_bmm", globals={"x": x_cuda})
    # timeit does not wait for the GPU: the first call pays cuBLAS loading, later ones
    # only time the kernel launches.
    print(f"timeit bmm (cold):  {plain.timeit(100) / 100 * 1e6:>5.1f} us")
    print(f"timeit bmm (warm):  {plain.timeit(100) / 100 * 1e6:>5.1f} us")
    # benchmark.Timer warms up and synchronizes the device around its clock reads.
    print(benchmark.Timer(stmt="batched_dot_bmm(x, x)",
                          setup="from __main__ import batched_dot_bmm",
                          globals={"x": x_cuda}).timeit(100))
else:
    print("(no CUDA device: the GPU part of this section is skipped)")

# 4. blocked_autorange: many replicates, block size chosen from the clock overhead -------
section("4. Benchmarking with blocked_autorange")
m0 = t0.blocked_autorange(min_run_time=MIN_RUN_TIME)
m1 = t1.blocked_autorange(min_run_time=MIN_RUN_TIME)
print(m0)
print(m1)
print(f"Mean:   {m0.mean * 1e6:6.2f} us")
print(f"Median: {m0.median * 1e6:6.2f} us")

# 5. Compare: a table over sizes and thread counts -----------------------------------------
section("5. Comparing benchmark results")
results = []
for b, n in itertools.product(SIZES, SIZES):
    x = torch.ones((b, n))
    for threads in THREADS:
        for fn_name, description in (("batched_dot_mul_sum", "mul/sum"),
                                     ("batched_dot_bmm", "bmm")):
            results.append(benchmark.Timer(
                stmt=f"{fn_name}(x, x)",
                setup=f"from __main__ import {fn_name}",
                globals={"x": x},
                num_threads=threads,
                label="Batched dot",
                sub_label=f"[{b}, {n}]",
                description=description,
            ).blocked_autorange(min_run_time=MIN_RUN_TIME))

compare = benchmark.Compare(results)
compare.print()
compare.trim_significant_figures()
compare.colorize()
compare.print()

# 6. Saving and loading: A/B results through pickle, and through JSON ------------------------
section("6. Saving/Loading benchmark results")
ab_pickles, ab_json = [], []
for env in ("environment A: mul/sum", "environment B: bmm"):
    for b, n in ((1, 1), (1024, 10000), (10000, 1)):
        x = torch.ones((b, n))
        dot_fn = batched_dot_mul_sum if env == "environment A: mul/sum" else batched_dot_bmm
        m = benchmark.Timer(
            stmt="batched_dot(x, x)",
            globals={"x": x, "batched_dot": dot_fn},
            num_threads=1,
            label="Batched dot",
            description=f"[{b}, {n}]",
            env=env,
        ).blocked_autorange(min_run_time=MIN_RUN_TIME)
        ab_pickles.append(pickle.dumps(m))
        ab_json.append(m.to_json())  # torchmark extra: no pickle needed across environments

ab_results = [pickle.loads(p) for p in ab_pickles]
compare = benchmark.Compare(ab_results)
compare.trim_significant_figures()
compare.colorize()
compare.print()

round_tripped = pickle.loads(pickle.dumps(results))
assert str(benchmark.Compare(results)) == str(benchmark.Compare(round_tripped))
from_json = [benchmark.Measurement.from_json(text) for text in ab_json]
assert str(benchmark.Compare(from_json)) == str(benchmark.Compare(ab_results))
print("pickle and JSON round trips give identical tables")

# 7. Fuzzed inputs: a custom Fuzzer, then a built-in op fuzzer ----------------------------------
section("7. Generating inputs with Fuzzed Parameters")
from torchmark import FuzzedParameter, FuzzedTensor, Fuzzer  # noqa: E402
from torchmark.op_fuzzers import binary  # noqa: E402

# 2-D tensors k0 x k1 with k0, k1 log-uniform in [1, 10000], 128 to 10M elements,
# contiguous 60% of the time.
example_fuzzer = Fuzzer(
    parameters=[
        FuzzedParameter(name="k0", minval=1, maxval=10000, distribution="loguniform"),
        FuzzedParameter(name="k1", minval=1, maxval=10000, distribution="loguniform"),
    ],
    tensors=[
        FuzzedTensor(name="x", size=("k0", "k1"), min_elements=128, max_elements=10000000,
                     probability_contiguous=0.6),
    ],
    seed=0,
)
first_tensors, first_properties, first_params = next(example_fuzzer.take(1))
print(first_params, first_properties["x"])
print(first_tensors["x"])
assert first_params == {"k0": 725, "k1": 257}


def fuzzed_comparison(cases):
    results = []
    for tensors, tensor_params, params in cases:
        contiguous = tensor_params["x"]["is_contiguous"]
        sub_label = f"{params['k0']:<6} x {params['k1']:<4} {'' if contiguous else '(discontiguous)'}"
        for fn_name, description in (("batched_dot_mul_sum", "mul/sum"),
                                     ("batched_dot_bmm", "bmm")):
            results.append(benchmark.Timer(
                stmt=f"{fn_name}(x, x)",
                setup=f"from __main__ import {fn_name}",
                globals=tensors,
                label="Batched dot",
                sub_label=sub_label,
                description=description,
            ).blocked_autorange(min_run_time=MIN_RUN_TIME))
    return benchmark.Compare(results)


N_CASES = 3 if ARGS.quick else 10
compare = fuzzed_comparison(example_fuzzer.take(N_CASES))
compare.colorize()
compare.print()

# The built-in BinaryOpFuzzer (it works in torchmark; torch 2.13's rejects its own
# distributions). Its x has 1 to 3 dims; the batched dot reduces the last one.
compare = fuzzed_comparison(binary.BinaryOpFuzzer(seed=0).take(N_CASES))
compare.trim_significant_figures()
compare.colorize()
compare.print()

# 8. Instruction counts with callgrind (Python statements) ---------------------------------
section("8. Collecting instruction counts with Callgrind")
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402

if shutil.which("valgrind") is None:
    print("(valgrind is not installed: `apt-get install valgrind`; section 8 is skipped)")
    raise SystemExit(0)

# `from __main__ import ...` works as with an in-process Timer: the imported function is
# sent to the counted process along with the other globals.
t_baseline = benchmark.Timer(
    stmt="batched_dot_mul_sum(x, x)",
    setup="from __main__ import batched_dot_mul_sum\nx = torch.randn(2, 2)")
t_bmm = benchmark.Timer(
    stmt="batched_dot_bmm(x, x)",
    setup="from __main__ import batched_dot_bmm\nx = torch.randn(2, 2)")
stats_mul_sum = t_baseline.collect_callgrind()
stats_bmm = t_bmm.collect_callgrind()
print(stats_mul_sum)
print(stats_bmm)
delta = stats_bmm.as_standardized().delta(stats_mul_sum.as_standardized()).denoise()
print("bmm - mul/sum, per function (100 runs):")
print(delta)

# The Timer quick start, sections 4 to 6: x * y, where the instructions go, and an A/B
# diff against a broadcasting multiply.
timer = benchmark.Timer("x * y", "x = torch.ones((128,))\ny = torch.ones((128,))")
stats = timer.collect_callgrind()
print(stats)
inclusive_stats = stats.as_standardized().stats(inclusive=False)
print(inclusive_stats[:10])


def group_by_file(fn_name: str) -> str:
    """Collapse functions into their source file ("folder  file")."""
    if fn_name.startswith("???"):
        fn_dir, fn_file = fn_name.split(":")[:2]
    else:
        fn_dir, fn_file = os.path.split(fn_name.split(":")[0])
        fn_dir = re.sub("^.*build/../", "", fn_dir)
        fn_dir = re.sub("^.*torch/", "torch/", fn_dir)
    return f"{fn_dir:<15} {fn_file}"


print(inclusive_stats.transform(group_by_file)[:10])

broadcasting_stats = benchmark.Timer(
    "x * y", "x = torch.ones((128,))\ny = torch.ones((1,))").collect_callgrind()
broadcasting_stats = pickle.loads(pickle.dumps(broadcasting_stats))  # A/B across processes
broadcasting = broadcasting_stats.as_standardized().stats(inclusive=False)
delta = broadcasting - inclusive_stats


def extract_fn_name(fn: str) -> str:
    """Everything but the file, with argument lists shortened."""
    fn = ":".join(fn.split(":")[1:])
    return re.sub(r"\(.+\)", "(...)", fn)


print(delta.transform(extract_fn_name))
print(delta.transform(extract_fn_name).filter(lambda fn: "TensorIterator" in fn))
per_run = (broadcasting_stats.counts() - stats.counts()) / stats.number_per_run
print(f"broadcasting costs {per_run:+.0f} instructions per multiply "
      f"({broadcasting_stats.counts() / stats.counts() - 1:+.1%})")
