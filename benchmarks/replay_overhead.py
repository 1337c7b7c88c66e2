"""Replay against the original program: one MLP training step (forward, cross-entropy,
backward), timed as the program runs it (torchmark's Timer) and as the replay of its
recorded execution trace runs it, in one process.

Target (issue #9): the replayed iteration within 25% of the original's time on the CPU
(replay recreates the work, not more). There is no other replay tool to run beside it
here: PARAM's replay does not import on a CPU-only torch.

    python benchmarks/replay_overhead.py [--rounds 5] [--batch 64]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path


def build(batch: int):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    x, target = torch.randn(batch, 256), torch.randint(0, 10, (batch,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--min-run-time", type=float, default=1.0)
    args = parser.parse_args()
    import torch

    from torchmark import Timer
    from torchmark.replay import record
    from torchmark.replay.replayer import Replayer
    from torchmark.replay.trace import load_trace

    step = build(args.batch)
    for _ in range(3):
        step()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mlp.json"
        with record(path):
            step()
        replayer = Replayer(load_trace(path))
        replayer.prepare()
    print(f"replayed {len(replayer.replayed)} of {len(replayer.ops)} ops; "
          f"threads: {torch.get_num_threads()}")
    threads = torch.get_num_threads()
    ratios = []
    for i in range(args.rounds):  # alternate, so drift on a shared machine hits both
        original = Timer("step()", globals={"step": step}, num_threads=threads) \
            .blocked_autorange(min_run_time=args.min_run_time).median
        replayed = Timer("replay()", globals={"replay": replayer.run_once},
                         num_threads=threads).blocked_autorange(
                             min_run_time=args.min_run_time).median
        ratios.append(replayed / original)
        print(f"round {i}: original {original * 1e6:.1f} us, replay {replayed * 1e6:.1f} us, "
              f"ratio {replayed / original:.3f}")
    print(f"\nmedian ratio replay / original: {statistics.median(ratios):.3f} "
          f"(target within 0.75 to 1.25)")


if __name__ == "__main__":
    main()
