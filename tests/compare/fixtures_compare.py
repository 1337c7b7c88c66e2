"""Deterministic measurements for Compare tests."""

from __future__ import annotations

from conftest import make_measurement

MEDIANS = {  # (threads, shape) -> (mul/sum, bmm) medians in seconds
    (1, "[1, 1]"): (5.8e-6, 9.8e-6),
    (1, "[64, 64]"): (13.5e-6, 14.9e-6),
    (1, "[1024, 64]"): (120.8e-6, 81.9e-6),
    (1, "[10000, 1024]"): (16860.5e-6, 21691.8e-6),
    (2, "[1, 1]"): (5.9e-6, 9.7e-6),
    (2, "[64, 64]"): (12.0e-6, 30.1e-6),
    (2, "[1024, 64]"): (70.2e-6, 44.0e-6),
    (2, "[10000, 1024]"): (9000.1e-6, 50000.0e-6),
}


def batched_dot_results(env=None):
    results = []
    for seed, ((threads, shape), medians) in enumerate(MEDIANS.items()):
        for j, (description, median) in enumerate(zip(("mul/sum", "bmm"), medians, strict=True)):
            spread = 0.3 if (seed, j) == (2, 1) else 0.015 * (1 + seed % 3)
            results.append(make_measurement(
                median, spread=spread, n=12, seed=seed * 2 + j, stmt="batched_dot(x, x)",
                label="Batched dot", sub_label=shape, description=description,
                num_threads=threads, env=env))
    return results


def ab_results():
    results = []
    for k, env in enumerate(("environment A: mul/sum", "environment B: bmm")):
        for i, (shape, median) in enumerate((("[1, 1]", 6e-6 + k * 4e-6),
                                             ("[1024, 10000]", 2e-2),
                                             ("[10000, 1]", 35e-6 + k * 18e-6))):
            results.append(make_measurement(median, spread=0.01, seed=10 * k + i,
                                            stmt="batched_dot(x, x)", label="Batched dot",
                                            description=shape, env=env))
    return results


def to_torch(measurements):
    from torch.utils.benchmark import Measurement, TaskSpec

    return [Measurement(m.number_per_run, list(m.raw_times), TaskSpec(**m.task_spec.to_dict()))
            for m in measurements]
