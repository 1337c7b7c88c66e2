"""The core records: Result, Case, Provenance round-trip through JSON unchanged."""

from __future__ import annotations

import json

import pytest

from torchmark.core.provenance import Machine, Provenance
from torchmark.core.result import Case, Failure, Result, case_id, dump_results


def test_case_ids_are_stable_and_depend_on_what_defines_the_case():
    a = case_id("timeit", stmt="x * y", setup="x = 1", threads=1)
    assert a == case_id("timeit", threads=1, setup="x = 1", stmt="x * y")  # order-free
    assert a.startswith("timeit:") and len(a) == len("timeit:") + 16
    assert a != case_id("timeit", stmt="x * y", setup="x = 1", threads=2)
    assert a != case_id("callgrind", stmt="x * y", setup="x = 1", threads=1)


def test_a_result_round_trips_with_its_provenance():
    provenance = Provenance.capture(env="ci", command=["torchmark", "timeit", "1"])
    case = Case(id="timeit:abc", frontend="timeit", stmt="x * y", setup="x = 1",
                label="mul", threads=2, params={"shape": (4, 4), "dtype": "float32"})
    result = Result(case=case, metric="wall", samples=(1e-6, 1.2e-6, 0.9e-6),
                    number_per_run=1000, warnings=("noisy",), provenance=provenance,
                    extra={"stop_rule": "rsd"})
    data = json.loads(result.to_json())
    assert data["case"]["params"] == {"shape": [4, 4], "dtype": "float32"}
    assert data["summary"]["median"] == pytest.approx(1e-6) and data["unit"] == "s"
    assert data["provenance"]["machine"]["fingerprint"] == provenance.machine_fingerprint
    back = Result.from_dict(data)
    assert back.to_dict() == result.to_dict()
    assert back.provenance == provenance and back.summary == result.summary


def test_failures_have_no_samples_and_bad_records_are_refused():
    case = Case(id="ops:x", frontend="ops", stmt="torch.add")
    failed = Result(case=case, metric="wall", failure=Failure("ValueError: bad", "tail"))
    assert not failed.ok and failed.summary is None
    assert Result.from_dict(json.loads(failed.to_json())) == failed
    with pytest.raises(ValueError, match="must carry its failure"):
        Result(case=case, metric="wall")
    with pytest.raises(ValueError, match="metric must be one of"):
        Result(case=case, metric="speed", samples=(1.0,))
    with pytest.raises(ValueError, match="finite"):
        Result(case=case, metric="wall", samples=(float("nan"),))
    with pytest.raises(ValueError, match="frontend must be one of"):
        Case(id="x", frontend="nope")
    with pytest.raises(ValueError, match="version"):
        Result.from_dict({**failed.to_dict(), "version": 99})
    assert dump_results([failed, failed]).count("\n") == 2


def test_the_machine_fingerprint_ignores_momentary_state():
    a = Machine("h", "cpu", 8, 32 << 30, ("H100",), "580.1", "performance", True)
    b = Machine("h", "cpu", 8, 32 << 30, ("H100",), "580.1", "powersave", False)
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != Machine("other", "cpu", 8, 32 << 30).fingerprint


def test_cases_sharing_a_title_are_told_apart_by_statement_then_id():
    from torchmark.core.result import distinct_titles

    cases = [Case(id=f"t:{i}", frontend="timeit", stmt=stmt, setup=setup, label=label)
             for i, (stmt, setup, label) in enumerate([
                 ("x * y", "", "ops3"), ("x + y\nz", "", "ops3"), ("x * y", "x = 1", "ops3"),
                 ("z", "", "solo"), ("q", "", None), ("q", "b = 2", None)])]
    assert distinct_titles(cases) == {
        "t:0": "ops3 / x * y (t:0)", "t:1": "ops3 / x + y",  # the statement's first line
        "t:2": "ops3 / x * y (t:2)", "t:3": "solo",  # alone: as it was
        "t:4": "q (t:4)", "t:5": "q (t:5)"}  # the statement is the title already


def test_cases_are_named_by_id_or_title_exactly_globs_only_when_asked():
    from torchmark.core.result import cases_named

    titles = {"a": "test_relu_sum[256]", "b": "op 0_10", "c": "op 0_9", "d": "test_relu_sum[2]"}
    assert cases_named(titles, ["test_relu_sum[256]"]) == ["a"]  # brackets: itself
    assert cases_named(titles, ["test_relu_sum[256]"], glob=True) == []  # a class of chars
    assert cases_named(titles, ["test_relu_sum*"], glob=True) == ["d", "a"]  # natural order
    assert cases_named(titles, ["op*"], glob=True) == ["c", "b"]  # 0_9 before 0_10
    assert cases_named(titles, ["b", "op 0_9"]) == ["c", "b"]  # an id, a title
    assert cases_named(titles, []) == ["c", "b", "d", "a"]


def test_two_sides_measuring_one_statement_apart_say_what_tells_them_apart():
    from torchmark.core.result import unpaired_why

    def case(threads: int, stmt: str = "x * 2", label: str | None = "mul") -> Case:
        return Case(id=f"timeit:{stmt}{threads}", frontend="timeit", stmt=stmt,
                    label=label, threads=threads)

    assert unpaired_why([case(1)], [case(2)]) == (
        " (the same statements, measured with other threads: 1 against 2)")
    assert unpaired_why([case(1)], [case(2, label="other")]) == (
        " (the same statements, measured with other threads: 1 against 2; label: mul "
        "against other)")
    assert unpaired_why([case(1)], [case(1, stmt="x + 2")]) == ""  # other statements
    assert unpaired_why([], [case(1)]) == ""
