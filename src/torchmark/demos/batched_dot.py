"""The batched-dot study: mul/sum against bmm over input sizes, threads and devices."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

from torchmark.timing.measurement import Measurement
from torchmark.timing.timer_class import Timer

LABEL = "Batched dot"
FULL_SIZES = (1, 64, 1024, 10000)
QUICK_SIZES = (1, 64, 1024)


def batched_dot_mul_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched dot product by elementwise multiply and sum over the last dim."""
    return a.mul(b).sum(-1)


def batched_dot_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched dot product as a batch of (1 x n) @ (n x 1) matrix products."""
    a = a.reshape(-1, 1, a.shape[-1])
    b = b.reshape(-1, a.shape[-1], 1)
    return torch.bmm(a, b).flatten()


IMPLEMENTATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mul/sum": batched_dot_mul_sum,
    "bmm": batched_dot_bmm,
}


def default_thread_counts() -> list[int]:
    """1 thread and, where the machine has more cores, up to 4."""
    return sorted({1, min(4, torch.get_num_threads() or 1)})


def plan(sizes: Sequence[int], thread_counts: Sequence[int], devices: Sequence[str]) -> list[dict]:
    """Every (device, threads, shape, implementation) case of the study, in run order."""
    cases = []
    for device in devices:
        threads = thread_counts if device == "cpu" else [1]
        for num_threads, (b, n) in itertools.product(threads, itertools.product(sizes, sizes)):
            for description in IMPLEMENTATIONS:
                cases.append({
                    "device": device, "num_threads": num_threads, "shape": (b, n),
                    "description": description,
                })
    return cases


def run(
    sizes: Sequence[int] = FULL_SIZES,
    thread_counts: Sequence[int] | None = None,
    devices: Sequence[str] = ("cpu",),
    min_run_time: float = 0.2,
    on_case: Callable[[dict, Measurement], None] | None = None,
) -> list[Measurement]:
    """Measure every case of `plan(...)`; `on_case` is called after each one."""
    thread_counts = list(thread_counts or default_thread_counts())
    results: list[Measurement] = []
    inputs: dict[tuple, torch.Tensor] = {}
    for case in plan(sizes, thread_counts, devices):
        key = (case["device"], case["shape"])
        if key not in inputs:
            inputs.clear()  # keep at most one (possibly large) input alive
            inputs[key] = torch.ones(case["shape"], device=case["device"])
        b, n = case["shape"]
        label = LABEL if case["device"] == "cpu" else f"{LABEL} ({case['device']})"
        m = Timer(
            stmt="batched_dot(x, x)",
            globals={"x": inputs[key], "batched_dot": IMPLEMENTATIONS[case["description"]]},
            num_threads=case["num_threads"],
            label=label,
            sub_label=f"[{b}, {n}]",
            description=case["description"],
        ).blocked_autorange(min_run_time=min_run_time)
        results.append(m)
        if on_case is not None:
            on_case(case, m)
    return results


def verdicts(shapes: Sequence[tuple[int, int]], min_run_time: float = 0.2) -> list:
    """For each shape on the CPU (one thread): is bmm faster than mul/sum? Interleaved
    blocks compared as pairs (`measure_ab`), mul/sum the baseline."""
    from torchmark.compare.interleave import measure_ab

    out = []
    for b, n in shapes:
        x = torch.ones(b, n)
        a, c = (Timer("batched_dot(x, x)", globals={"x": x, "batched_dot": IMPLEMENTATIONS[d]},
                      label=f"bmm against mul/sum, [{b}, {n}]", description=d)
                for d in ("mul/sum", "bmm"))
        out.append(measure_ab(a, c, min_run_time=min_run_time))
    return out
