from pathlib import Path

import pytest

from torchmark.suite import GroupedStmts, TimerArgs, materialize, select
from torchmark.suite.standard import standard_cases

SNAPSHOT = Path(__file__).parent / "golden" / "standard_ids.txt"


def test_standard_suite_case_count_and_labels():
    cases = standard_cases()
    assert len(cases) == 219
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    assert ids == SNAPSHOT.read_text().splitlines()  # regenerate: torchmark suite list


def test_standard_suite_covers_the_upstream_areas():
    cases = standard_cases()
    tops = {c.label[0] for c in cases}
    assert tops == {"Empty", "Pointwise", "Reduction", "Indexing", "MatMul", "Misc",
                    "Mesoscale", "Metadata and views", "nn Modules", "Training",
                    "InferenceMode"}
    # plain statements are TorchScripted too, one returning nothing (`-> None`)
    scripted = {c.label for c in cases if c.auto_labels.runtime == "jit"
                and c.label[0] not in ("Training", "nn Modules")}
    assert ("Indexing", "tensor index (TorchScript)") in scripted
    assert ("Mesoscale", "off-diagonal entries") in scripted
    modules = {c.label[1] for c in cases if c.label[0] == "nn Modules"}
    assert modules == {"BatchNorm2d", "GroupNorm", "LayerNorm", "Conv1d", "Conv2d",
                       "MaxPool2d", "ReLU", "Sigmoid", "Linear", "LSTM"}
    training = [c.auto_labels for c in cases if c.label[0] == "Training"]
    assert {a.num_threads for a in training} == {1, 2}
    assert {a.autograd for a in training} == {"forward", "forward+backward"}
    assert {a.runtime for a in training} == {"eager", "jit"}
    assert {c.auto_labels.language for c in cases if c.label[0] == "InferenceMode"} == {"cpp"}


def test_nested_and_tuple_keys_flatten():
    cases = materialize({"A": {("b", "c"): GroupedStmts("x"), "d": TimerArgs("y")}})
    assert [c.label for c in cases] == [("A", "b", "c"), ("A", "d")]
    assert cases[1].timer_args == TimerArgs("y")


def test_duplicate_labels_are_an_error_naming_the_case():
    with pytest.raises(ValueError, match=r"duplicate case 'A/b \[py eager fwd t1\]'"):
        materialize({"A": {("b",): GroupedStmts("x")}, ("A", "b"): GroupedStmts("y")})


@pytest.mark.parametrize("definitions, fragment", [
    ({"a": 3}, "is a int"),
    ({"": GroupedStmts("x")}, "non-empty str"),
    ({"a": {}}, "a is empty"),
])
def test_materialize_errors(definitions, fragment):
    with pytest.raises(ValueError, match="materialize") as e:
        materialize(definitions)
    assert fragment in str(e.value)


def test_select_by_pattern_and_subset():
    cases = standard_cases()
    assert all("cpp jit" in c.id for c in select(cases, r"cpp jit"))
    subset = select(cases, None, 10)
    assert len(subset) == 10 and subset[0] is cases[0]
    assert len({c.label[0] for c in subset}) >= 5  # spread over the suite
    with pytest.raises(ValueError, match="regular expression"):
        select(cases, "(")
    with pytest.raises(ValueError, match="subset"):
        select(cases, None, 0)
