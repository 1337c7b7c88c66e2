"""Which verdicts a table explains below itself (compare/verdict_table.py reasons): every
slower, failed or unmeasured case, and an unsure one whose interval lies wholly off no
change (read alone, it looks like a change)."""

from __future__ import annotations

from torchmark.compare.verdict_table import reasons
from torchmark.verdicts.drift import Drift
from torchmark.verdicts.verdict import CaseVerdict, Verdict


def _row(kind: str, lower: float, upper: float, reason: str) -> CaseVerdict:
    verdict = Verdict(kind, 1.5, lower, upper, lower, upper, Drift(0.0, "given"), 0.05, 0.99,
                      "medians", reason)
    return CaseVerdict("timeit:a", "a", "wall", "s", 1.0, 1.5, verdict)


def test_an_unsure_case_off_no_change_is_explained_one_reaching_it_is_not():
    off = _row("unsure", 1.15, 1.9, "not significant (p = 0.034, not under 0.0125)")
    assert reasons([off]) == ["a [wall]: unsure: not significant (p = 0.034, not under "
                              "0.0125)"]
    assert reasons([_row("unsure", 0.9, 1.9, "the interval includes no change")]) == []
    assert reasons([_row("slower", 1.2, 1.9, "beyond")]) == ["a [wall]: slower: beyond"]
