"""Sides of stated statistics (another tool's file without raw samples): judged by
Welch's interval on the ratio of the means, never slower within the spreads, and
unmeasured without a deviation or with too few samples."""

from __future__ import annotations

import random

import pytest

from torchmark.core.result import Case, Result, Stated
from torchmark.regressions.gate import side_of
from torchmark.verdicts import Side, judge


def stated(n, mean, sd):
    return Side([mean], stated=Stated(n, mean, sd, mean))


def test_a_clear_slowdown_is_slower_and_the_same_is_same():
    verdict = judge(stated(30, 1.0, 0.01), stated(30, 1.5, 0.015))
    assert verdict.kind == "slower" and verdict.ratio == pytest.approx(1.5)
    assert "stated statistics" in verdict.method
    assert judge(stated(30, 1.0, 0.001), stated(30, 1.001, 0.001)).kind == "same"


def test_a_change_within_the_spreads_is_never_slower():
    rng = random.Random(0)
    kinds = []
    for _ in range(200):  # A/A: two summaries of the same distribution
        a = [rng.lognormvariate(0, 0.1) for _ in range(20)]
        b = [rng.lognormvariate(0, 0.1) for _ in range(20)]
        side = [Side([sum(x) / 20], stated=Stated(20, sum(x) / 20, _sd(x))) for x in (a, b)]
        kinds.append(judge(*side).kind)
    assert kinds.count("slower") == 0 and kinds.count("faster") == 0


def _sd(xs):
    mean = sum(xs) / len(xs)
    return (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5


@pytest.mark.parametrize("a, b", [(stated(30, 1.0, None), stated(30, 2.0, 0.1)),
                                  (stated(2, 1.0, 0.01), stated(30, 2.0, 0.1))])
def test_without_a_deviation_or_enough_samples_it_is_unmeasured(a, b):
    assert judge(a, b).kind == "unmeasured"


def test_a_raw_side_against_a_stated_one_uses_its_own_statistics():
    raw = Side([1.0 + 0.01 * (i % 3) for i in range(30)])
    assert judge(raw, stated(30, 2.0, 0.02)).kind == "slower"


def test_the_gate_reads_stated_statistics_from_a_result():
    case = Case(id="asv:x", frontend="asv", stmt="x")
    result = Result(case, "wall", [1.0], extra={"stated": {"n": 5, "mean": 1.0,
                                                           "stdev": 0.1}})
    assert side_of(result).stated == Stated(5, 1.0, 0.1)
    with pytest.raises(ValueError, match="stated statistics"):
        Result(case, "wall", [1.0], extra={"stated": {"n": 0, "mean": 1.0}})
