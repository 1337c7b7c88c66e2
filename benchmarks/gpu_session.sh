#!/bin/sh
# Everything issues 8, 28, 37, 38 and 39 need from a GPU, in one run: kernel, device and batch time
# against Nsight Compute and do_bench (gpu_kernel_time.py), the CUDA tests, the CLI on
# the device, and the device-time comparison with do_bench / torch / Nsight Compute.
# Logs go to $OUT (the device tool brings that folder back), else /tmp/gpu_session.
#
# On a lent GPU machine (its python3 holds a CUDA torch, triton, nvidia-ml-py and ncu,
# but not pydantic), from the repository root, with pydantic's wheels for Python 3.12
# in .whl/ (ignored by git, carried with the call):
#     sh benchmarks/gpu_session.sh [SECTION...]
# SECTIONs, run in the order given (default: all of them, issue 28's measurements
# first, so a call cut off at its time limit still brings back those figures):
#     kernel (gpu_kernel_time.py --quick: its figures first, then ncu's, each bounded),
#     tests (pytest -m cuda), cli, flush (gpu_l2_flush.py: about a minute), simulated,
#     measure (gpu_vs_do_bench --ncu: issue 8's), explain (gpu_explain.py: issue 37's),
#     memory (memory_table.py --device cuda: issue 38's), fingerprint (env show's GPU
#     fields beside nvidia-smi's: issue 39's)
# Issue 28 alone (about 5 minutes on an H100; the sections' time limits add up to more):
#     sh benchmarks/gpu_session.sh kernel tests cli
set -u
SECTIONS=${*:-kernel tests cli explain memory fingerprint flush simulated measure}
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

section() { printf '\n===== %s =====\n' "$1" | tee -a "$OUT/summary.txt"; }

section "device"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv \
    2>&1 | tee -a "$OUT/summary.txt"
python3 - <<'EOF' 2>&1 | tee -a "$OUT/summary.txt"
import importlib
for name in ("torch", "triton", "pynvml", "pydantic", "click", "rich"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}")
    except ImportError as e:
        print(f"{name} MISSING ({e})")
import torch
props = torch.cuda.get_device_properties(0)
print(f"cuda {torch.version.cuda}, {props.name}, L2 {props.L2_cache_size / 2**20:.0f} MiB, "
      f"{props.multi_processor_count} SMs, clock_rate property {getattr(props, 'clock_rate', None)}")
import sys
sys.path.insert(0, "src")
from torchmark.timing.gpu_sampler import spin_rate
print(f"spin kernel measured at {spin_rate(torch) / 1e9:.3f} G cycles/s")
EOF
command -v ncu | tee -a "$OUT/summary.txt"

tests() {
    # twice: a test that passes only on a second run (a cold device) must show up
    for round in 1 2; do
        section "pytest -m cuda (round $round of 2)"
        timeout 150 python3 -m pytest -q -m cuda -p no:cacheprovider tests 2>&1 \
            | tee "$OUT/pytest_cuda_$round.log" | tail -25 | tee -a "$OUT/summary.txt"
    done
}

simulated() {
    section "simulated-GPU tests, run where a real torch.cuda exists"
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/timing/test_device_time_fake_cuda.py \
        tests/ops/test_ops_cuda.py tests/replay/test_replay.py -k "simulated or fake or chunks or ncu" \
        2>&1 | tail -5 | tee -a "$OUT/summary.txt"
}

kernel() {
    section "gpu_kernel_time (kernel / device / batch time against ncu and do_bench)"
    timeout 480 python3 benchmarks/gpu_kernel_time.py --quick --spread 3 --placements --ncu-log "$OUT" \
        2>&1 \
        | tee "$OUT/gpu_kernel_time.log" \
        | tee -a "$OUT/summary.txt"
}

flush() {
    section "gpu_l2_flush (what each way of flushing the L2 does to a cold figure)"
    timeout 120 python3 benchmarks/gpu_l2_flush.py 2>&1 | tee -a "$OUT/summary.txt"
}

measure() {
    section "gpu_vs_do_bench --ncu"
    timeout 420 python3 benchmarks/gpu_vs_do_bench.py --ncu 2>&1 | tee "$OUT/gpu_vs_do_bench.log" \
        | tee -a "$OUT/summary.txt"
}

cli() {
    section "CLI"
    for mode in events blocking graph; do
        timeout 60 python3 -m torchmark timeit --device cuda --mode "$mode" --l2 hot \
            -s "x = torch.ones(128, device='cuda'); y = torch.ones_like(x)" "x * y" 2>&1 \
            | tee -a "$OUT/summary.txt"
    done
    timeout 60 python3 -m torchmark timeit --metric kernel --no-store \
        -s "x = torch.ones(1 << 20, device='cuda'); y = torch.ones_like(x)" "x * y" 2>&1 \
        | tee -a "$OUT/summary.txt"
    timeout 60 python3 -m torchmark timeit --device cuda --mode batch --no-store \
        -s "x = torch.ones(1024, device='cuda')" "torch.relu(x)" 2>&1 | tee -a "$OUT/summary.txt"
    timeout 60 python3 -m torchmark timeit --device cuda --mode blocking --minus-event-cost \
        --no-store -s "x = torch.ones(1024, device='cuda')" "torch.relu(x)" 2>&1 \
        | tee -a "$OUT/summary.txt"
    rm -f /tmp/ops_kernel.jsonl /tmp/ops_cuda.jsonl  # a warm machine keeps the last run's
    timeout 90 python3 -m torchmark ops -c examples/ops/simple_mm.json -d cuda --metric kernel \
        -o /tmp/ops_kernel --no-store 2>&1 | tee -a "$OUT/summary.txt"
    timeout 120 python3 -m torchmark ops -c examples/ops/simple_mm.json -d cuda --l2-flush \
        --exec-mode continuous_events -o /tmp/ops_cuda --quiet 2>&1 | tee -a "$OUT/summary.txt"
    timeout 60 python3 -c "import json; r = [json.loads(l) for l in open('/tmp/ops_cuda.jsonl')]; \
    print([(x['case']['id'], x['failure'], (x['summary'] or {}).get('median')) for x in r if 'case' in x])" \
        2>&1 | tee -a "$OUT/summary.txt"
}

memory() {
    section "memory_table --device cuda (issue 38: peaks against max_memory_allocated)"
    timeout 120 python3 benchmarks/memory_table.py --device cuda 2>&1 \
        | tee -a "$OUT/summary.txt"
}

fingerprint() {
    section "env show (issue 39: the GPU fields of the fingerprint, against nvidia-smi)"
    timeout 60 python3 -m torchmark env show 2>&1 | grep -E "gpu\.|torch\.(cuda|cudnn|nccl)" \
        | tee -a "$OUT/summary.txt"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory,\
enforced.power.limit,ecc.mode.current,mig.mode.current --format=csv 2>&1 \
        | tee -a "$OUT/summary.txt"
}

explain() {
    section "gpu_explain (issue 37: a kernel swap and a kernel grown, explained)"
    timeout 300 python3 benchmarks/gpu_explain.py 2>&1 | tee "$OUT/gpu_explain.log" \
        | tee -a "$OUT/summary.txt"
}

for name in $SECTIONS; do
    case $name in
        kernel|measure|cli|tests|simulated|flush|explain|memory|fingerprint) "$name" ;;
        *) echo "unknown section $name (kernel, measure, cli, tests, simulated, flush, explain, memory, fingerprint)"
           exit 2 ;;
    esac
done
