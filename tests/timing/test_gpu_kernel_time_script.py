"""benchmarks/gpu_kernel_time.py runs on a GPU machine only: its ncu CSV parsing and the
split of ncu's launches into cases (by the child's marker kernels) run here, and without
CUDA it exits 2 with a message."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).parents[2] / "benchmarks" / "gpu_kernel_time.py"
HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
        '"Metric Value"')


def script():
    spec = importlib.util.spec_from_file_location("gpu_kernel_time", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(launches):
    """ncu --csv lines: each launch (name, ns, active cycles, cycles/s) as three metric
    rows, as ncu writes them."""
    out = ["==PROF== Connected to process 4242", HEAD]
    for i, (name, ns, cycles, rate) in enumerate(launches):
        prefix = f'"{i}","4242","python3","host","{name}","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics"'
        out.append(f'{prefix},"gpu__time_duration.sum","nsecond","{ns:,}"')
        out.append(f'{prefix},"sm__cycles_active.max","cycle","{cycles:,}"')
        out.append(f'{prefix},"gpc__cycles_elapsed.avg.per_second","cycle/second","{rate}"')
    return "\n".join(out)


MARK = "at::cuda::<unnamed>::spin_kernel(long)"


def test_ncu_rows_split_into_cases_by_the_markers():
    module = script()
    text = rows([(MARK, 1000, 10, 1.9e9),
                 ("relu_kernel", 3000, 3800, 1.9e9), ("relu_kernel", 3200, 3800, 1.9e9),
                 (MARK, 1000, 10, 1.9e9),
                 ("conv_a", 40000, 70000, 1.9e9), ("bias_b", 6000, 9500, 1.9e9),
                 ("conv_a", 41000, 70000, 1.9e9), ("bias_b", 5000, 9500, 1.9e9),
                 (MARK, 1000, 10, 1.9e9)])
    parsed = module.parse_ncu_rows(text)
    assert len(parsed) == 9 and parsed[1]["duration"] == pytest.approx(3e-6)
    assert parsed[1]["cycles_per_s"] == 1.9e9 and parsed[1]["active_cycles"] == 3800
    cases = module.split_cases(parsed, ["relu", "conv"], calls=2)
    duration, active, kernels, _ = cases["conv"]
    assert duration == pytest.approx(46e-6) and kernels == 2
    assert active == pytest.approx((70000 + 9500) / 1.9e9)
    assert cases["relu"][0] == pytest.approx(3.1e-6)
    # the launch order, a position at a time, averaged over the calls
    assert [(n, d) for n, d, _ in cases["conv"].steps] == \
        [("conv_a", pytest.approx(40.5e-6)), ("bias_b", pytest.approx(5.5e-6))]
    assert cases["relu"].steps[0][2] == pytest.approx(3800 / 1.9e9)
    odd = module.split_cases(parsed[:6] + parsed[8:], ["relu", "conv"], calls=2)
    assert odd["conv"].steps is None  # calls launched different kernels: no launch order
    three = module.split_cases(parsed[:7] + parsed[8:], ["relu", "conv"], calls=2)
    assert three["conv"].steps is None and three["conv"].kernels == 2  # 3 launches, 2 calls
    with pytest.raises(ValueError, match="2 complete cases, 3 were run"):
        module.split_cases(parsed, ["relu", "conv", "mm"], calls=2)
    with pytest.raises(ValueError, match="1 complete cases, 2 were run"):  # cut mid-case
        module.split_cases(parsed[:-1], ["relu", "conv"], calls=2)


def ncu_case(module, steps):
    """An NcuCase of one call's launch order [(name, duration s, SM-active s)]."""
    return module.NcuCase(sum(d for _, d, _ in steps), sum(a for _, _, a in steps),
                          len(steps), steps)


def test_checks_go_kernel_by_kernel_where_the_launch_orders_align():
    module = script()
    clean = {"conv": ncu_case(module, [("t", 17e-6, 15e-6), ("gemm", 63e-6, 60e-6)])}
    warm = {"conv": ncu_case(module, [("t", 21e-6, 19e-6), ("gemm", 64e-6, 61e-6)])}
    row = {"kernel_cold": 78e-6, "kernel_hot": 88e-6, "bench": 90e-6, "device": 90.5e-6,
           "steps_cold": [("t", 16e-6), ("gemm", 62e-6)],
           "steps_hot": [("t", 18e-6), ("gemm", 70e-6)]}
    lines = module.check("conv", row, clean, warm)
    # the first kernel cold against ncu's flushed run, in its window (17 us < 20 us)
    assert lines[0].startswith("PASS  conv #1 t:") and "cold, --cache-control all" in lines[0]
    # a later kernel hot against --cache-control none: 70 / 64 is over 3%
    assert lines[1].startswith("FAIL  conv #2 gemm:") and "1.094" in lines[1]
    assert "hot, --cache-control none" in lines[1]
    assert lines[2].startswith("info  PASS for the call as a whole")  # 78 / 80 us
    assert lines[-1].startswith("PASS  conv: device time")  # 90.5 / 90: within 2%
    row["steps_cold"] = [("t_and_gemm_fused", 78e-6)]  # orders that differ: the call
    lines = module.check("conv", row, clean, warm)
    assert lines[0].startswith("PASS  conv: kernel time / ncu duration = 0.975")
    assert "the call, cold" in lines[0]
    row["steps_cold"] = [("gemm", 62e-6), ("t", 16e-6)]  # the same count, other kernels
    assert module.check("conv", row, clean, warm)[0].startswith("PASS  conv: kernel time")


def test_a_one_kernel_call_is_checked_on_its_median_and_names_match_loosely():
    module = script()
    cupti = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, int)"
    ncu = "void native::<unnamed>::cunn_SoftMaxForward<4, float, float>(T4 *, int)"
    clean = {"softmax": ncu_case(module, [(ncu, 113e-6, 111e-6)])}
    # the mean a position (118 us) is pulled up by a few slow calls; the median is 114.9
    row = {"kernel_cold": 114.9e-6, "kernel_hot": 117e-6, "bench": None, "device": 118e-6,
           "steps_cold": [(cupti, 118e-6)], "steps_hot": [(cupti, 119e-6)]}
    line = module.check("softmax", row, clean, {})[0]
    assert line.startswith("PASS  softmax: kernel time / ncu duration = 1.017"), line


def test_ncu_units_are_read_or_refused():
    module = script()
    text = rows([("k", 1000, 10, 1.9)]).replace('"cycle/second","1.9"', '"cycle/nsecond","1.9"')
    assert module.parse_ncu_rows(text)[0]["cycles_per_s"] == pytest.approx(1.9e9)
    with pytest.raises(ValueError, match="unknown rate unit"):
        module.parse_ncu_rows(text.replace("cycle/nsecond", "furlongs"))
    with pytest.raises(ValueError, match="no CSV table"):
        module.parse_ncu_rows("==ERROR== no kernels were profiled")


def test_the_cases_are_the_issues():
    names = list(script().CASES)
    for op in ("relu", "add", "mul"):
        assert [n for n in names if n.startswith(op + " ")] == \
            [f"{op} 1K", f"{op} 16K", f"{op} 128K", f"{op} 1M"]
    assert any(n.startswith("softmax") for n in names)
    assert any(n.startswith("layer_norm") for n in names)
    assert any(n.startswith("conv2d") for n in names) and any(n.startswith("mm") for n in names)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_it_exits_2_with_a_message():
    done = subprocess.run([sys.executable, str(PATH), "--no-ncu"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "no CUDA device here" in done.stderr


def test_the_spread_over_fresh_processes_is_read_from_their_output():
    module = script()
    module.ONE_FIGURE = "import sys; print('noise'); print(repr(float(sys.argv[3]) * 1e-4))"
    ncu = ncu_case(module, [("softmax", 1.25e-4, 1.2e-4)])
    line = module.spread_line("softmax 8192x4096", 1.1e-4, ncu, 3)
    assert "100.00" in line and "this process 110.00" in line
    assert "median / ncu 0.800" in line and "max / min 1.000" in line
    module.ONE_FIGURE = "raise SystemExit('no CUDA here')"
    assert "failed: no CUDA here" in module.spread_line("softmax 8192x4096", 1e-4, None, 2)
    module.ONE_FIGURE = "pass"  # exits 0 and prints nothing
    assert "failed: no output" in module.spread_line("softmax 8192x4096", 1e-4, None, 1)
    module.ONE_FIGURE = "print('done')"
    assert "printed 'done', not a figure" in module.spread_line("softmax 8192x4096", 1e-4,
                                                                None, 1)


def test_placements_check_each_kernel_on_its_medians_and_stand_in_for_one_copy():
    module = script()
    pads = module.PADS[:5]
    module.PADS = pads
    mine, clean, warm = {}, {}, {}
    # one placement reads 5% slow on torchmark's side; @2 is replaced below
    for pad, ours in zip(pads, (131e-6, 0.0, 124e-6, 125e-6, 126e-6), strict=True):
        label = f"ln @{pad}"
        mine[label] = ([("vectorized_ln<4>", ours)], [("vectorized_ln<4>", ours + 8e-6)])
        clean[label] = ncu_case(module, [("native::vectorized_ln<4>(T *)", 126e-6, 124e-6)])
        warm[label] = ncu_case(module, [("native::vectorized_ln<4>(T *)", 128e-6, 126e-6)])
    mine["ln @2"] = ([("other_kernel", 124e-6)], [("other_kernel", 130e-6)])  # left out
    positions = module.placement_positions("ln", mine, clean, warm)
    assert [(p.kernel, len(p.ours)) for p in positions] == [("vectorized_ln", 4)]
    placed = module.placement_checks("ln", positions)
    # the median of 124, 125, 126 and 131 is 125.5; / 126 = 0.996
    assert placed[0].startswith("PASS  ln: kernel time / ncu duration = 0.996"), placed
    assert "medians over 4 placements" in placed[0] and "124.00..131.00" in placed[0]
    row = {"kernel_cold": 131e-6, "kernel_hot": 139e-6, "bench": None, "device": 140e-6,
           "steps_cold": [("vectorized_ln<4>", 131e-6)],
           "steps_hot": [("vectorized_ln<4>", 139e-6)]}
    one = {"ln": ncu_case(module, [("native::vectorized_ln<4>(T *)", 126e-6, 124e-6)])}
    lines = module.check("ln", row, one, {}, placed)
    assert lines[0] == placed[0]
    assert lines[1].startswith("info  FAIL in this process's one copy: ln: kernel time")
    assert not any(line.startswith("FAIL") for line in lines)


def test_a_placement_that_ran_other_kernels_is_left_out_and_too_few_are_not_checked(capsys):
    module = script()
    pads = module.PADS[:5]
    module.PADS = pads
    two = [("transpose<4>", 16e-6), ("gemm<4>", 63e-6)]
    mine, clean, warm = {}, {}, {}
    for pad in pads:
        label = f"conv @{pad}"
        mine[label] = (two, two)
        clean[label] = ncu_case(module, [("native::transpose(T *)", 17e-6, 15e-6),
                                         ("native::gemm(T *)", 64e-6, 60e-6)])
        warm[label] = clean[label]
    # another algorithm for one copy: three kernels (once an IndexError), and one with
    # the same count but another kernel on both sides (once mixed into the first's)
    mine["conv @2"] = (two + [("bias", 1e-6)], two + [("bias", 1e-6)])
    other = [("transpose<4>", 16e-6), ("winograd<4>", 50e-6)]
    mine["conv @6"] = (other, other)
    clean["conv @6"] = warm["conv @6"] = ncu_case(
        module, [("native::transpose(T *)", 17e-6, 15e-6), ("native::winograd(T *)", 51e-6, 48e-6)])
    positions = module.placement_positions("conv", mine, clean, warm)
    assert [(p.kernel, len(p.ours)) for p in positions] == [("transpose", 3), ("gemm", 3)]
    assert capsys.readouterr().out.count("left out") == 2
    # a one-kernel call needs no --cache-control none figure
    one = {"ln @0": ([("ln", 1e-4)], [("ln", 1e-4)])}
    positions = module.placement_positions(
        "ln", one, {"ln @0": ncu_case(module, [("ln", 1e-4, 9e-5)])}, {})
    assert len(positions) == 1 and positions[0].ours == [1e-4]
    # one usable copy is fewer than MIN_PLACEMENTS: no checks, the one copy's stand
    assert module.placement_checks("ln", positions) == []
    assert "fewer than" in capsys.readouterr().out
