"""The bisection's search, apart from measuring: exact answers in at most
ceil(log2(commits - 1)) judgements, skipped and unsure commits left out, ranges."""

from __future__ import annotations

import random

import pytest

from torchmark.rootcause.search import bisect_indexes, first_bad_range, most_probes


@pytest.mark.parametrize("count", [2, 3, 4, 5, 17, 64, 65, 200])
def test_every_first_bad_commit_is_found_within_the_log2_bound(count):
    for first_bad in range(1, count):
        seen = []

        def judge(i, seen=seen, first_bad=first_bad):
            seen.append(i)
            return "bad" if i >= first_bad else "good"

        outcome = bisect_indexes(count, judge)
        assert outcome.exact and outcome.first_bad == first_bad
        assert len(seen) <= most_probes(count) and len(set(seen)) == len(seen)
        assert all(0 < i < count - 1 for i in seen)  # the ends are the caller's


def test_most_probes_is_the_ceiling_of_log2():
    assert [most_probes(n) for n in (2, 3, 4, 5, 9, 64, 65)] == [0, 1, 2, 2, 3, 6, 6]


def test_a_skipped_commit_is_left_out_and_its_neighbour_tried():
    def judge(i):
        return "skip" if i == 31 else "bad" if i >= 40 else "good"

    outcome = bisect_indexes(64, judge)
    assert outcome.exact and outcome.first_bad == 40
    assert outcome.judged("skip") == [31] and outcome.tried[1][0] in (30, 32)


def test_a_skipped_first_bad_commit_gives_a_range_that_holds_it():
    outcome = bisect_indexes(64, lambda i: "skip" if i == 20 else "bad" if i >= 20 else "good")
    assert not outcome.exact and list(outcome.candidates) == [20, 21]
    assert first_bad_range(outcome, [f"c{i}" for i in range(64)]) == \
        "one of c20 .. c21 (2 commits)"


def test_unsure_commits_never_give_a_wrong_single_commit():
    rng = random.Random(4)
    for _ in range(300):
        count, first_bad = rng.randrange(3, 80), None
        first_bad = rng.randrange(1, count)
        unsure = {i for i in range(1, count - 1) if rng.random() < 0.3}
        outcome = bisect_indexes(count, lambda i, fb=first_bad, u=unsure: "unsure" if i in u
                                 else "bad" if i >= fb else "good")
        assert first_bad in outcome.candidates
        if outcome.exact:
            assert outcome.first_bad == first_bad


def test_progress_tells_the_commits_left_before_each_judgement():
    told = []
    bisect_indexes(10, lambda i: "bad" if i >= 7 else "good",
                   lambda left, i: told.append((left, i)))
    assert told[0] == (8, 4) and [left for left, _ in told] == sorted(
        (left for left, _ in told), reverse=True)


def test_a_judge_answering_nonsense_is_an_error():
    with pytest.raises(ValueError, match="answered 'maybe'"):
        bisect_indexes(5, lambda i: "maybe")


def test_the_search_stops_at_a_range_after_max_unsure_commits():
    outcome = bisect_indexes(64, lambda i: "unsure" if 20 <= i <= 40 else
                             "bad" if i >= 50 else "good", max_unsure=2)
    assert len(outcome.judged("unsure")) == 2 and len(outcome.tried) == 2
    assert not outcome.exact and 50 in outcome.candidates
