"""torch.utils.benchmark Measurements pickled, imported into the store as torchmark's own
Timer records them (the same case ids); a pickle naming anything else is refused
before anything it names runs."""

from __future__ import annotations

import copy
import os
import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.benchmark import Timer

import torchmark
from torchmark.cli.main import main
from torchmark.store import Store
from torchmark.store.formats import detect_format, torch_pickle
from torchmark.timing.results import measurement_to_result

MUL = {"stmt": "x * 2", "setup": "x = torch.ones(16)", "label": "mul", "sub_label": "16",
       "description": "ones"}
ADD = {"stmt": "x + 1", "setup": "x = torch.ones(16)", "num_threads": 2}


class Point:
    """A class of no benchmark: a pickle naming it is refused."""

    x = 1


class RunsACommand:
    """Pickles as a call of os.system: unpickling it would run the command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def measure(task: dict) -> torch.utils.benchmark.Measurement:
    return Timer(**task).blocked_autorange(min_run_time=0.05)


@pytest.fixture(scope="module")
def pickles(tmp_path_factory) -> dict[str, Path]:
    """One Measurement (the default protocol), a list of two (protocol 2), a dict holding
    a list (protocol 5), and the first statement measured again."""
    folder = tmp_path_factory.mktemp("pickles")
    mul, add = measure(MUL), measure(ADD)
    out = {}
    for name, value, protocol in (("one", mul, pickle.DEFAULT_PROTOCOL),
                                  ("list", [mul, add], 2),
                                  ("dict", {"mul": mul, "more": [add]}, 5),
                                  ("again", measure(MUL), 4)):
        out[name] = folder / f"{name}.pickle"
        out[name].write_bytes(pickle.dumps(value, protocol=protocol))
    return out


def stored_results(db: str) -> list:
    return Store(db).result_records() if Path(db).exists() else []


@pytest.mark.parametrize("name", ["one", "list", "dict"])
def test_pickled_measurements_import_as_torchmark_records_them(pickles, name, tmp_path,
                                                                capsys):
    value = pickle.loads(pickles[name].read_bytes())  # the test's own pickle: trusted
    measurements = {m.task_spec.stmt: m for m in
                    (value if isinstance(value, list) else [value] if name == "one"
                     else [value["mul"], *value["more"]])}
    for db, how in ((str(tmp_path / "auto.db"), []),
                    (str(tmp_path / "from.db"), ["--from", "torch-pickle"])):
        assert main(["import", str(pickles[name]), *how, "--db", db]) == 0
        assert main(["import", str(pickles[name]), *how, "--db", db]) == 0  # adds nothing
        out = capsys.readouterr().out
        assert f"{len(measurements)} result" in out and "0 results added" in out
        results = {r.case.stmt: r for r in stored_results(db)}
        assert sorted(results) == sorted(measurements)
        for stmt, m in measurements.items():
            result = results[stmt]
            assert (result.case.frontend, result.metric) == ("timeit", "wall")
            assert result.number_per_run == m.number_per_run
            assert list(result.samples) == [t / m.number_per_run for t in m.raw_times]
            assert result.summary.median == pytest.approx(m.median, rel=1e-12)
            assert result.case.threads == m.task_spec.num_threads
            assert result.provenance.torchmark_version == "torch.utils.benchmark"


def test_an_imported_measurement_is_the_case_torchmarks_timer_measures(pickles):
    [imported] = torch_pickle.read(pickles["one"])
    ours = torchmark.Timer(**MUL).blocked_autorange(min_run_time=0.02)
    assert imported.case == measurement_to_result(ours).case


def test_the_gate_and_regressions_judge_imported_runs(pickles, tmp_path, capsys):
    db = str(tmp_path / "s.db")
    for name in ("one", "again"):
        assert main(["import", str(pickles[name]), "--db", db]) == 0
    capsys.readouterr()
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db]) in (0, 1)
    out = capsys.readouterr().out
    assert "candidate: run:2" in out and "mul: 16 [ones]" in out
    assert main(["regressions", "--db", db]) in (0, 1)
    captured = capsys.readouterr()
    assert "series checked" in captured.out + captured.err


def _refused(data: bytes, tmp_path: Path, capsys, *how: str) -> str:
    """The one line `torchmark import` refuses a pickle of `data` with (exit 2, nothing
    stored)."""
    path = tmp_path / "bad.pickle"
    path.write_bytes(data)
    db = str(tmp_path / "bad.db")
    assert main(["import", str(path), *how, "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"torchmark: error: {path}: ")
    assert stored_results(db) == []
    return err


@pytest.mark.parametrize("how", [[], ["--from", "torch-pickle"]])
def test_a_pickle_naming_anything_else_is_refused_and_nothing_runs(pickles, how, tmp_path,
                                                                   capsys):
    marker = tmp_path / "ran"
    mul = pickle.loads(pickles["one"].read_bytes())
    with_tensor = copy.copy(mul)
    with_tensor.metadata = {"input": torch.ones(2)}
    refused = ", which is not a torch.utils.benchmark Measurement or plain data"
    for value, named in (
            ([mul, RunsACommand(f"touch {marker}")], f"{os.system.__module__}.system"),
            (Point(), f"{__name__}.Point"),
            (torch.ones(2), "torch._utils._rebuild_tensor_v2"),
            (with_tensor, "torch._utils._rebuild_tensor_v2")):
        err = _refused(pickle.dumps(value), tmp_path, capsys, *how)
        assert err.endswith(f"refused: the pickle names {named}{refused}")
    assert not marker.exists()


def test_malformed_pickles_are_refused(pickles, tmp_path, capsys):
    mul = pickle.loads(pickles["one"].read_bytes())

    def changed(**fields) -> bytes:
        m = copy.copy(mul)
        for name, value in fields.items():
            setattr(m, name, value)
        return pickle.dumps([m])

    data = pickles["list"].read_bytes()
    for value, problem in (
            (data[:len(data) // 2], "not a readable pickle ("),  # EOF or not, by where it is cut
            (changed(raw_times=[1e-3, -1e-3]), "Measurement 1: torchmark.measurement: "
                                               "raw_times must be a non-empty list of times"),
            (changed(raw_times=["fast"]), "raw_times must be a non-empty list of times"),
            (changed(number_per_run=0), "number_per_run must be an int in 1.."),
            (changed(metadata={"when": {1, 2}}), "Measurement 1: metadata is not plain JSON"),
            (changed(metadata=_shared_levels(40)), "metadata holds more than 1000000 values"),
            (pickle.dumps([1.5]), "the pickle holds float, not torch.utils.benchmark "
                                  "Measurements"),
            (pickle.dumps({}), "the pickle holds no torch.utils.benchmark Measurements")):
        assert problem in _refused(value, tmp_path, capsys, "--from", "torch-pickle"), problem


def _shared_levels(levels: int) -> dict:
    """Each level two references to the one below: 2**levels values written out."""
    level: object = ["x"]
    for _ in range(levels):
        level = [level, level]
    return {"bomb": level}


def test_only_a_pickle_of_protocol_2_to_5_is_detected(pickles, tmp_path):
    assert detect_format(pickles["list"]) == "torch-pickle"  # protocol 2
    assert detect_format(pickles["dict"]) == "torch-pickle"  # protocol 5
    for name, data in (("old", pickle.dumps([1], protocol=1)),  # no protocol header
                       ("binary", b"\x80\x07 no pickle protocol 7")):
        (tmp_path / name).write_bytes(data)
        assert detect_format(tmp_path / name) is None
