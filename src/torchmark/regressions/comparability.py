"""Whether two sides of a comparison ran in comparable environments: their runs'
fingerprints (core/fingerprint.py) agree on every field that changes performance
(hardware, the torch build, thread settings). `gate`, `compare`, `ab` on runs,
`regressions` and the pytest plugin's baseline ask `check_sides` before they judge: a
difference stops them (exit 2, the differences listed) unless `--allow-env-diff`, which
compares anyway and marks every verdict."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.fingerprint import Difference, differences
from torchmark.core.provenance import Provenance
from torchmark.core.result import Result

ALLOW_FLAG = "--allow-env-diff"


class EnvironmentsDiffer(UsageError):
    """Two sides whose environments differ in what changes performance (exit 2)."""

    def __init__(self, message: str, found: Sequence[Difference]) -> None:
        super().__init__(message)
        self.differences = tuple(found)


def side_fingerprint(results: Iterable[Result]) -> dict[str, Any]:
    """The fingerprint of a side's newest run (its results' first provenance that has
    one; {} when none records one: runs made before fingerprints were kept)."""
    for result in results:
        if result.provenance is not None and result.provenance.environment:
            return result.provenance.fingerprint
    return {}


def blocking_differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    return [d for d in differences(a, b) if d.blocking]


def check_sides(baseline: Iterable[Result], candidate: Iterable[Result], allow: bool,
                what: str = "the two sides") -> list[Difference]:
    """The blocking differences between the sides' fingerprints: [] when comparable;
    with `allow`, the differences (for marking); otherwise an EnvironmentsDiffer naming
    them."""
    found = blocking_differences(side_fingerprint(baseline), side_fingerprint(candidate))
    if found and not allow:
        raise EnvironmentsDiffer(refusal(found, what), found)
    return found


def check_provenances(a: Provenance | None, b: Provenance | None) -> list[Difference]:
    """The blocking differences between two runs' fingerprints ([] when either has none)."""
    if a is None or b is None:
        return []
    return blocking_differences(a.fingerprint, b.fingerprint)


def refusal(found: Sequence[Difference], what: str) -> str:
    """The one-line refusal naming the differing fields."""
    names = ", ".join(d.name for d in found[:6]) + (" ..." if len(found) > 6 else "")
    return (f"{what} ran in environments that differ in {len(found)} field(s) that change "
            f"performance ({names}): their times are not comparable (`torchmark env diff` "
            f"shows them; {ALLOW_FLAG} compares anyway, marking every verdict)")


def marked(found: Sequence[Difference]) -> str:
    """The mark an allowed comparison's verdicts carry."""
    return (f"environments differ ({', '.join(d.name for d in found[:4])}"
            f"{' ...' if len(found) > 4 else ''}; compared with {ALLOW_FLAG})")


def mark_rows(rows: Sequence[Any], found: Sequence[Difference]) -> tuple[Any, ...]:
    """Gate rows (CaseVerdicts) with the mark appended to each verdict's reason."""
    if not found:
        return tuple(rows)
    note = marked(found)
    return tuple(dataclasses.replace(r, verdict=dataclasses.replace(
        r.verdict, reason=f"{r.verdict.reason} [{note}]")) for r in rows)
