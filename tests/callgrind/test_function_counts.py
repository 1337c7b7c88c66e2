"""FunctionCounts and CallgrindStats without valgrind: algebra, repr, serialization."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from torchmark import CallgrindStats, FunctionCount, FunctionCounts, TaskSpec


def fc(pairs, inclusive=False):
    return FunctionCounts(tuple(FunctionCount(c, fn) for c, fn in pairs), inclusive,
                          _linewidth=80)


A = fc([(500, "/build/../aten/src/ATen/x.cpp:at::add [/lib/libtorch_cpu.so]"),
        (300, "Objects/dictobject.c:lookdict_unicode [/lib/libpython.so]"),
        (200, "???:malloc [/lib/libc.so]")])
B = fc([(450, "/build/../aten/src/ATen/x.cpp:at::add [/lib/libtorch_cpu.so]"),
        (200, "???:malloc [/lib/libc.so]"),
        (50, "???:free [/lib/libc.so]")])


def test_sequence_protocol():
    assert len(A) == 3
    assert A[0] == FunctionCount(500, A[0].function)
    sliced = A[1:]
    assert isinstance(sliced, FunctionCounts) and len(sliced) == 2
    assert [c for c, _ in A] == [500, 300, 200]
    assert A.sum() == 1000


def test_add_sub_mul():
    d = B - A
    assert {fn.split(":")[-1].split(" ")[0]: c for c, fn in d} == {
        "free": 50, "add": -50, "lookdict_unicode": -300}
    assert (A + A).sum() == 2000
    assert (A * 0.5).sum() == 500 and (2 * A).sum() == 2000
    assert [c for c, _ in d] == sorted((c for c, _ in d), reverse=True)
    with pytest.raises(ValueError, match="inclusive and exclusive"):
        _ = A + fc([(1, "f")], inclusive=True)


def test_transform_filter_denoise():
    by_lib = A.transform(lambda fn: fn.rsplit("[", 1)[-1].rstrip("]"))
    assert {fn: c for c, fn in by_lib} == {"/lib/libtorch_cpu.so": 500,
                                          "/lib/libpython.so": 300, "/lib/libc.so": 200}
    assert A.filter(lambda fn: "malloc" in fn).sum() == 200
    assert A.denoise().sum() == 700


def test_repr_truncates_long_names_and_rows():
    long = fc([(i, f"fn_{i:02d}_" + "x" * 100) for i in range(30, 0, -1)])
    text = repr(long)
    lines = text.splitlines()
    assert lines[0].startswith("<torchmark.callgrind.function_counts.FunctionCounts object")
    assert " ... " in lines[1] and len(lines[1]) <= 80
    assert lines[10].strip() == "..."
    assert lines[-1] == f"Total: {long.sum()}"
    assert "Total" not in repr(fc([(1, "f")], inclusive=True))


def make_stats(counts=A, baseline=B):
    spec = TaskSpec("x * y", "x = torch.ones(1)", label="mul")
    return CallgrindStats(spec, 100, False, baseline, baseline, counts, counts, None,
                          repeat_totals=(1000, 1002, 1001))


def test_stats_repr_and_totals():
    s = make_stats()
    text = repr(s)
    assert "Instructions:         1000                        700" in text
    assert "Baseline:              700                        700" in text
    assert "100 runs per measurement, 1 thread" in text
    # this repeat's total (1000) is not the median one: an element of repeats=3's tuple
    assert "one of 3 repeats, spread 0.20%" in text
    median = dataclasses.replace(s, repeat_totals=(1002, 1000, 999))
    assert "median of 3 repeats, spread 0.30%" in repr(median)
    assert "not built with debug symbols" in text
    assert s.counts() == 1000 and s.counts(denoise=True) == 700
    assert s.spread == pytest.approx(2 / 1001)


def test_delta_and_standardized():
    a, b = make_stats(A), make_stats(B)
    assert b.delta(a).sum() == -300
    std = a.as_standardized()
    names = [fn for _, fn in std.stats()]
    assert "build/../aten/src/ATen/x.cpp:at::add" in names
    assert "Objects/dictobject.c:lookdict_unicode" in names
    assert all("[" not in n for n in names)
    assert std.stmt_callgrind_out is None


def test_pickle_and_json_round_trips():
    s = make_stats()
    for copy in (pickle.loads(pickle.dumps(s)), CallgrindStats.from_json(s.to_json())):
        assert list(copy.stats()) == list(s.stats())
        assert copy.repeat_totals == s.repeat_totals and copy.task_spec == s.task_spec
    f = pickle.loads(pickle.dumps(A))
    assert list(f) == list(A) and FunctionCounts.from_dict(A.to_dict()).sum() == 1000
    with pytest.raises(ValueError, match="schema"):
        CallgrindStats.from_json('{"a": 1}')


def test_describe_delta_compares_different_run_counts_per_run():
    import dataclasses

    from torchmark.callgrind.report import describe_delta

    before = make_stats()  # 1000 instructions for 100 runs
    after = dataclasses.replace(make_stats(A * 0.1), number_per_run=10)  # the same per run
    text = describe_delta(before, after)
    assert "delta:  +0 (+0.00%) for 100 runs" in text
    assert "(after counted 10 runs: scaled to 100)" in text
    same = describe_delta(before, before)
    assert "delta:  +0 (+0.00%) for 100 runs" in same and "scaled" not in same
    double = dataclasses.replace(make_stats(A * 2), number_per_run=100)
    assert "delta:  +1,000 (+100.00%) for 100 runs" in describe_delta(before, double)
