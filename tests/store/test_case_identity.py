"""Cases keep their identity wherever the store shows them: an ops sweep of 121 shapes
is 121 rows, named by shape, in `show`, `compare`, `gate` and the CSV export, never one
row `torch.mm` pooling them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from torchmark.cli.main import main

SWEEP = Path(__file__).resolve().parents[2] / "examples" / "ops" / "mm_sweep.json"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two runs of the 121-shape matmul sweep in one store."""
    folder = tmp_path_factory.mktemp("sweep")
    db = f"sqlite:///{folder / 'store.db'}"
    for name in ("a", "b"):
        assert main(["ops", "-c", str(SWEEP), "-w", "1", "-i", "5", "--db", db,
                     "-o", str(folder / f"{name}.jsonl")]) == 0
    return db, folder


def shape_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if "x64 float, 64x32 float" in line]


def test_show_compare_gate_and_csv_keep_121_shapes_apart(swept, capsys):
    db, folder = swept
    capsys.readouterr()
    assert main(["show", "1", "--db", db]) == 0
    rows = shape_rows(capsys.readouterr().out)
    assert len(rows) == 121 and rows[0].split("|")[0].strip() == "128x64 float, 64x32 float"
    main(["compare", "run:1", "run:2", "--db", db])
    out = capsys.readouterr().out
    table, verdicts = out.split("baseline: run:1")
    assert len(shape_rows(table)) == 121
    named = [line for line in shape_rows(verdicts) if not line.split()[-1].endswith(":")
             and "[wall]:" not in line]
    assert len(named) == 121 and len({line.split(" [")[0] for line in named}) == 121
    main(["gate", "--baseline", "1", "--candidate", "2", "--db", db, "--allow-unmeasured"])
    gated = [line for line in shape_rows(capsys.readouterr().out) if "[wall]:" not in line]
    assert len(gated) == 121
    assert main(["export", "--format", "csv", "-o", str(folder / "x.csv"), "--db", db]) == 0
    with open(folder / "x.csv", newline="") as f:
        records = list(csv.DictReader(f))
    assert len(records) == 242 and len({r["title"] for r in records}) == 121
    first = [r for r in records if r["title"].startswith("torch.mm: 128x64 float,")][0]
    assert first["param:exec_mode"] == "discrete" and '"shape":[128,64]' in first[
        "param:config"]
