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


def test_cases_unpack_as_torchs_label_autolabels_timer_args_tuples():
    # torch's benchmarks/instruction_counts: `for label, autolabels, timer_args in
    # materialize(...)`; torchmark's code reads the same three by name
    cases = materialize({"A": {("b", "c"): GroupedStmts("y = x + 1", signature="f(x) -> y",
                                                         torchscript=True),
                               "d": TimerArgs("y")}})
    assert len(cases) == 3
    for case in cases:
        assert isinstance(case, tuple) and len(case) == 3
        label, autolabels, timer_args = case
        assert label is case.label and autolabels is case.auto_labels
        assert timer_args is case.timer_args
        assert case._fields == ("label", "auto_labels", "timer_args")
        assert case._asdict() == {"label": label, "auto_labels": autolabels,
                                  "timer_args": timer_args}
    assert [c[0] for c in cases] == [("A", "b", "c"), ("A", "b", "c"), ("A", "d")]
    assert [c.auto_labels.runtime for c in cases] == ["eager", "jit", "explicit"]


def test_the_scripted_model_rides_outside_the_tuple_and_survives_copies():
    import copy
    import pickle

    eager, jit = materialize({"m": GroupedStmts("y = x + 1", signature="f(x) -> y",
                                                torchscript=True)})
    assert eager.scripted is None and jit.scripted is not None
    assert jit.scripted not in tuple(jit)
    assert "scripted=" in repr(jit) and "scripted=" not in repr(eager)
    for clone in (pickle.loads(pickle.dumps(jit)), copy.copy(jit), copy.deepcopy(jit)):
        assert clone == jit and clone.id == jit.id and clone.scripted == jit.scripted
    renamed = jit._replace(label=("n",))
    assert renamed.label == ("n",) and renamed.scripted is jit.scripted
    assert renamed.id == "n [py jit fwd t1]"
    assert jit._replace(scripted=None).scripted is None
    assert type(jit)._make(tuple(jit)).scripted is None
    assert jit.to_dict()["id"] == jit.id and len({eager, jit}) == 2  # hashable


def test_cases_are_immutable():
    (case,) = materialize({"a": TimerArgs("y")})
    for name in ("label", "timer_args", "scripted", "other"):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(case, name, None)
    with pytest.raises(AttributeError, match="immutable"):
        del case.scripted
