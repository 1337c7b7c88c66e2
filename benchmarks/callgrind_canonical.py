"""Are instruction counts the same for the same code, whoever asks and from where?

Ten sessions each count `x * y` (`torchmark callgrind`, a private valgrind host each:
--keep-alive 0) and a pytest benchmark (the plugin with --torchmark-metric
instructions), started from three folders whose paths differ in length, with argv
(labels) and results paths (--save, --torchmark-json) of different lengths. Each line
printed says the folder, the argv and results path lengths, and the counts; the counts
must be identical in every session (issue 35).

    python benchmarks/callgrind_canonical.py [--sessions 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = '''
import torch


def work(x, y):
    return (x * y).sum()


def test_mul_sum(torchmark):
    x = torch.ones(256)
    y = torch.ones(256)
    torchmark(work, x, y)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="torchmark-canonical-"))
    folders = [root / "a", root / "a_folder_with_a_much_longer_name" / "b" / "c", root / "dd"]
    for folder in folders:
        folder.mkdir(parents=True)
        (folder / "test_counted.py").write_text(TEST)
        (folder / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "TORCHMARK_NO_STORE": "1", "TORCHMARK_CALLGRIND_KEEPALIVE": "0"}
    counts: dict[str, set[int]] = {"x * y": set(), "pytest": set()}
    for k in range(args.sessions):
        folder = folders[k % len(folders)]
        label = "L" * (1 + 7 * k)
        saved = folder / ("r" * (1 + 5 * k) + ".json")
        out = subprocess.run(
            [sys.executable, "-m", "torchmark", "callgrind", "x * y", "-s",
             "x = torch.ones(64); y = torch.ones(64)", "--keep-alive", "0", "--top", "0",
             "--label", label, "--save", str(saved), "--no-store"],
            cwd=folder, env=env, capture_output=True, text=True)
        found = re.search(r"instructions: ([\d,]+) for", out.stdout)
        if found is None:
            raise SystemExit(f"no count in:\n{out.stdout}\n{out.stderr[-2000:]}")
        stmt = int(found.group(1).replace(",", ""))
        results = folder / ("j" * (1 + 9 * k) + ".jsonl")
        test = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "test_counted.py", "--torchmark-metric=instructions", "--torchmark-no-store",
             f"--torchmark-json={results}", *(["-k", "mul"] * (k % 3))],
            cwd=folder, env=env, capture_output=True, text=True)
        if not results.exists():
            raise SystemExit(f"the session wrote no results:\n{test.stdout[-3000:]}")
        [record] = [json.loads(line) for line in results.read_text().splitlines()
                    if '"torchmark.result"' in line]
        per_call = record["samples"][0]
        counts["x * y"].add(stmt)
        counts["pytest"].add(round(per_call * record["number_per_run"]))
        print(f"session {k + 1:2d}: folder {len(str(folder)):3d} chars, label "
              f"{len(label):3d}, --save {len(str(saved)):3d}, --torchmark-json "
              f"{len(str(results)):3d}: x * y {stmt:,} instructions / 100 runs, pytest "
              f"{per_call:,.2f} a call", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    for what, found in counts.items():
        verdict = "PASS" if len(found) == 1 else "FAIL"
        print(f"{verdict}  {what}: {len(found)} distinct count(s) in {args.sessions} "
              f"sessions: {sorted(found)}")


if __name__ == "__main__":
    main()
