"""`torchmark explain` on two planted GPU changes (issue 37), on a CUDA machine:

1. a matmul changed from fp32 to bf16: the explanation must show the kernel swap (the
   fp32 GEMM kernel removed, a bf16 one added);
2. a softmax over a larger shape: the same softmax kernel on both sides, with more time.

Each change is a module `gpu_case.py` in two folders (before, after); the same statement
is timed with `torchmark timeit --metric kernel` with each folder first on the import
path (so both sides are one case), under env labels `before` and `after` (code that
differs where torchmark does not look: the verdict reads the change as one of the code,
not as two runs of one build), saved, and explained from the two files. Prints the
explanation and PASS or FAIL for each check.

    python benchmarks/gpu_explain.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {
    "matmul fp32 -> bf16": (
        "import torch\na = torch.randn(2048, 2048, device='cuda', dtype=torch.{dtype})\n"
        "b = torch.randn(2048, 2048, device='cuda', dtype=torch.{dtype})\n"
        "def run():\n    return a @ b\n", {"dtype": "float32"}, {"dtype": "bfloat16"}),
    "softmax, larger shape": (
        "import torch\nx = torch.randn({rows}, 1024, device='cuda')\n"
        "def run():\n    return x.softmax(-1)\n", {"rows": 4096}, {"rows": 16384}),
}


def explain(name: str, template: str, before: dict, after: dict, root: Path) -> str:
    files = []
    for side, values in (("before", before), ("after", after)):
        folder = root / name.split()[0] / side
        folder.mkdir(parents=True)
        (folder / "gpu_case.py").write_text(template.format(**values))
        path = folder / "result.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(folder), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, "-m", "torchmark", "timeit", "--metric", "kernel",
                        "--no-store", "--save", str(path), "--env", side, "-s", "import gpu_case",
                        "gpu_case.run()"], env=env, check=True, timeout=120)
        files.append(str(path))
    done = subprocess.run([sys.executable, "-m", "torchmark", "explain", *files],
                          capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def main() -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (template, before, after) in CASES.items():
            text = explain(name, template, before, after, Path(tmp))
            print(f"--- {name}\n{text}")
            rows = [line.split() for line in text.splitlines() if line.startswith("  ")]
            status = {row[0] for row in rows if row}
            if name.startswith("matmul"):
                ok = {"added", "removed"} <= status
                what = "a kernel removed and a kernel added (the swap)"
            else:
                changed = [line for line in text.splitlines() if "changed" in line
                           and "oftmax" in line]
                ok = bool(changed) and "added" not in status and "removed" not in status \
                    and "+" in changed[0]
                what = "the same softmax kernel on both sides, with more time"
            print(f"{'PASS' if ok else 'FAIL'}: {name}: {what}")
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
