"""The search of a bisection, apart from any measuring: commits oldest first, the first
known good and the last known bad; each step tries the untried commit nearest the middle
of what is left, and a judge says good, bad, skip (it does not build or import) or
unsure (its measurement could not tell). Skipped and unsure commits are left out, as
`git bisect skip` does, so the answer is either one commit or a range of commits whose
other members could not be judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal

Judgement = Literal["good", "bad", "skip", "unsure"]


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """`last_good` and `first_bad`: indexes into the commits; the first bad commit is
    `first_bad` when `exact`, else somewhere in `last_good + 1 .. first_bad` (whose
    others were skipped or unsure). `tried`: (index, judgement) in the order judged."""

    last_good: int
    first_bad: int
    tried: tuple[tuple[int, Judgement], ...]

    @property
    def exact(self) -> bool:
        return self.first_bad - self.last_good == 1

    @property
    def candidates(self) -> range:
        """The indexes that may be the first bad commit."""
        return range(self.last_good + 1, self.first_bad + 1)

    def judged(self, kind: Judgement) -> list[int]:
        return [i for i, j in self.tried if j == kind]


def bisect_indexes(count: int, judge: Callable[[int], Judgement],
                   progress: Callable[[int, int], None] | None = None, *,
                   max_unsure: int | None = None) -> SearchOutcome:
    """Bisect commits 0 .. count - 1, 0 good and count - 1 bad (judged by the caller).
    `progress(untried_left, index)` is called before each judgement, with the number of
    commits that may still be the first bad one. The search stops at a range once
    `max_unsure` commits were unsure (each costs a measurement and tells nothing)."""
    if count < 2:
        raise ValueError(f"bisect_indexes: need 2 commits or more, got {count}")
    lo, hi = 0, count - 1
    left_out: set[int] = set()
    tried: list[tuple[int, Judgement]] = []
    while True:
        open_ = [i for i in range(lo + 1, hi) if i not in left_out]
        if not open_:
            break
        middle = (lo + hi) / 2
        pick = min(open_, key=lambda i: (abs(i - middle), i))
        if progress is not None:
            progress(hi - lo - 1, pick)
        verdict = judge(pick)
        tried.append((pick, verdict))
        if verdict == "good":
            lo = pick
        elif verdict == "bad":
            hi = pick
        elif verdict in ("skip", "unsure"):
            left_out.add(pick)
            unsure = sum(1 for _, j in tried if j == "unsure")
            if max_unsure is not None and unsure >= max_unsure:
                break
        else:
            raise ValueError(f"bisect_indexes: a judge answered {verdict!r}")
    return SearchOutcome(lo, hi, tuple(tried))


def most_probes(count: int) -> int:
    """The judgements a search of `count` commits needs at most when none is skipped or
    unsure: ceil(log2(count - 1))."""
    steps, span = 0, count - 1
    while span > 1:
        span = (span + 1) // 2
        steps += 1
    return steps


def first_bad_range(outcome: SearchOutcome, names: Sequence[str]) -> str:
    """The answer in words: "abc123" or "one of abc123 .. def456 (3 commits)"."""
    if outcome.exact:
        return names[outcome.first_bad]
    span = outcome.candidates
    return f"one of {names[span[0]]} .. {names[span[-1]]} ({len(span)} commits)"
