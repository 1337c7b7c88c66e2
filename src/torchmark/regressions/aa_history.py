"""The drift between two runs of the same code, from each case's A/A history in the
store: consecutive runs of one build (the same commit with a clean tree, the same torch,
or the rounds of one `torchmark calibrate`) on one machine and env, whose ratios show
how far runs differ when nothing changed.
`torchmark calibrate` adds such runs on purpose; CI jobs that re-run an unchanged
commit add them as they go."""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable
from typing import Any


def aa_ratios(rows: Iterable[dict[str, Any]], exclude: Collection[int] = ()
              ) -> dict[tuple[str, str], list[float]]:
    """(case id, metric) -> log(later / earlier) of each pair of consecutive results
    (oldest first, as `Store.results` gives them) of one build: the same commit, both
    trees clean, the same torch. Rows of the runs in `exclude` (the runs being judged)
    and failed results are left out first."""
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if row["run_id"] in exclude or row["failure"] is not None or \
                not (row["median"] or 0) > 0:
            continue
        series.setdefault((row["case_id"], row["metric"]), []).append(row)
    out: dict[tuple[str, str], list[float]] = {}
    for key, points in series.items():
        ratios = [math.log(b["median"] / a["median"]) for a, b in itertools.pairwise(points)
                  if _build(a) is not None and _build(a) == _build(b)]
        if ratios:
            out[key] = ratios
    return out


def _build(row: dict[str, Any]) -> tuple[str, str | None] | None:
    """What identifies the code a run measured: the rounds of one `torchmark calibrate`
    (tagged `aa`), else the commit of a clean tree and the torch version; None when it
    cannot be told (no commit, or a dirty tree)."""
    tags = row.get("run_tags") or {}
    if isinstance(tags, dict) and tags.get("aa"):
        return f"aa:{tags['aa']}", row.get("torch_version")
    if not row.get("git_commit") or row.get("git_dirty") is not False:
        return None
    return row["git_commit"], row.get("torch_version")


def history_ratios(store: Any, keys: Collection[tuple[str, str]], *, machine: str | None,
                   env: str | None, exclude: Collection[int] = ()
                   ) -> dict[tuple[str, str], list[float]]:
    """(case id, metric) -> the A/A log ratios of its history on `machine` (fingerprint)
    and `env`, for the keys that have any; the verdict engine turns them into a drift
    (verdicts/drift.py: from 3 pairs up)."""
    if not keys:
        return {}
    if not store.builds_repeat(machine=machine, env=env):
        return {}  # no two runs of one build: no A/A pair to read
    rows = store.median_rows(sorted({case for case, _ in keys}), machine=machine, env=env)
    return {key: ratios for key, ratios in aa_ratios(rows, exclude).items() if key in keys}


def pair_histories(store: Any, baseline: Any, candidate: Any
                   ) -> dict[tuple[str, str], list[float]]:
    """The A/A log ratios of the candidate side's cases (regressions/refs.py Sides) on
    its machine and env, the two sides' own runs left out."""
    return history_ratios(store, {(r.case.id, r.metric) for r in candidate.results},
                          machine=candidate.machine, env=candidate.env,
                          exclude={*baseline.runs, *candidate.runs})
