"""A large results file is parsed by worker processes (store/importing.py): the same
store as a file parsed in one process, a bad record named by its line whatever chunk
holds it, a torn last line skipped, and no worker left behind. Chunks are made small
here so a small file spans many of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from torchmark.core.errors import UsageError
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.store import Store, importing
from torchmark.store.importing import Importer


def write_file(path: Path, runs: int = 3, cases: int = 120, torn: str = "") -> Path:
    lines = [json.dumps({"schema": "torchmark.results", "version": 1})]
    for run in range(runs):
        provenance = Provenance.capture(command=["suite", "run"])
        lines.append(json.dumps({"schema": "torchmark.run", "version": 1,
                                 "provenance": {**provenance.to_dict(),
                                                "git_commit": f"{run:040x}"}}))
        for c in range(cases):
            case = Case(id=f"suite:c{c}", frontend="suite", stmt=f"torch.add(x, {c})",
                        label=f"add {c}", params={"n": c})
            result = Result(case=case, metric="wall", number_per_run=10,
                            samples=tuple(1e-6 * (1 + c + run / 10 + k / 100)
                                          for k in range(5)))
            lines.append(json.dumps(result.to_dict(with_provenance=False)))
    path.write_text("\n".join(lines) + "\n" + torn)
    return path


def content(url: str) -> tuple:
    store = Store(url)
    runs = sorted((r["started"], r["git_commit"], r["results"]) for r in store.runs())
    results = sorted((r.case.id, r.case.title, r.metric, r.samples, r.number_per_run)
                     for _, results in store.iter_runs_results() for r in results)
    store.close()
    return runs, results


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(importing, "CHUNK_BYTES", 3000)


def test_workers_store_what_one_process_stores(tmp_path, small_chunks):
    path = write_file(tmp_path / "r.jsonl", torn='{"schema": "torchmark.result", "ver')
    alone, shared = (f"sqlite:///{tmp_path / name}" for name in ("one.db", "workers.db"))
    assert Importer(Store(alone), path, workers=1).run() == 360
    assert Importer(Store(shared), path, workers=2, parallel_from=0).run() == 360
    runs, results = content(shared)
    assert (runs, results) == content(alone)
    assert [r[2] for r in runs] == [120, 120, 120] and len({r[1] for r in runs}) == 3
    # again: the file's digest is known, nothing added
    assert Importer(Store(shared), path, workers=2, parallel_from=0).run() == 0


def test_a_bad_record_in_a_late_chunk_is_named_by_its_line(tmp_path, small_chunks):
    path = write_file(tmp_path / "r.jsonl")
    lines = path.read_text().splitlines()
    bad = json.loads(lines[300])
    bad["samples"][2] = -1.0
    lines[300] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(UsageError, match=r"r\.jsonl: line 301: suite:c\d+: a sample is zero "
                                         r"or negative"):
        Importer(Store(url), path, workers=2, parallel_from=0).run()
    store = Store(url)
    assert store.runs() == [] and store.info()["results"] == 0  # nothing stored
    store.close()
    assert not import_workers()  # each closed


def import_workers() -> list[str]:
    """The import workers this process started that are still running."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if "torchmark.store.import_worker" in command and parent == os.getpid():
            found.append(command)
    return found
