"""What an import makes of a results file's lines before the store sees them: each record
validated as a Result (core/result.py) and turned into the values of its results row,
its case's row and its provenance. For a large file this runs in worker processes
(store/importing.py): a Chunk of lines goes in, a Parsed of plain values comes out."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from torchmark.core.bounded_input import brief, check_nesting
from torchmark.core.collector import collector_paused
from torchmark.core.errors import UsageError
from torchmark.core.jsonl import loads
from torchmark.core.provenance import Provenance
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import Result
from torchmark.core.results_file import RESULTS_FILE_SCHEMA, RUN_SCHEMA, RunLines, RunState
from torchmark.store.result_rows import case_row, result_values

RUN_MARK = f'"{RUN_SCHEMA}"'.encode()  # how every run line names its schema


@dataclasses.dataclass
class Chunk:
    """Whole lines of a results file (`where`), numbered from `first`. `run_line`: the
    last run line before them, whose provenance results lines without their own take;
    `torn_end`: the last of them ends the file without a newline (a killed writer's
    torn line, skipped when it does not parse). `offset`: where `data` starts in the
    file; a chunk sent to a worker gives its `length` instead of its data, which the
    worker reads from the file."""

    where: str
    first: int
    data: bytes
    run_line: bytes | None = None
    torn_end: bool = False
    offset: int = 0
    length: int = 0


@dataclasses.dataclass
class Parsed:
    """Results ready for the store: `records` are (index into `provenances`, the
    values of its results row: result_rows.RESULT_VALUES); `cases` the rows of their
    cases, each once; `runs` what the file states of each provenance's run (its run
    line's RunState, or None)."""

    provenances: list[Provenance | None]
    cases: list[dict[str, Any]]
    records: list[tuple[int, tuple[Any, ...]]]
    runs: list[RunState | None] = dataclasses.field(default_factory=list)


def parsed_of(results: Iterable[Result], sent_cases: set[str] | None = None,
              runs: RunLines | None = None) -> Parsed:
    """Validated Results as a Parsed; `sent_cases`: the ids of the cases whose rows
    went out before, in an earlier Parsed of this file (left out), to which this one's
    are added; `runs`: the reader of the file's run lines (their runs' states)."""
    provenances: list[Provenance | None] = []
    index: dict[int, int] = {}  # id(provenance) -> its place in provenances
    cases: dict[str, dict[str, Any]] = {}
    records = []
    for r in results:
        at = index.get(id(r.provenance))
        if at is None or provenances[at] is not r.provenance:
            at = index[id(r.provenance)] = len(provenances)
            provenances.append(r.provenance)
        if r.case.id not in cases and (sent_cases is None or r.case.id not in sent_cases):
            cases[r.case.id] = case_row(r.case)
        records.append((at, result_values(r)))
    if sent_cases is not None:
        sent_cases.update(cases)
    states = [runs.state_of(p) if runs is not None else None for p in provenances]
    return Parsed(provenances, list(cases.values()), records, states)


class ChunkParser:
    """Parses the chunks of one file, in order (a UsageError naming the first bad
    line): a case is parsed once while it comes back unchanged, run after run, and its
    row sent once (the store holds it from then on)."""

    def __init__(self) -> None:
        self.cases: dict[str, tuple[Any, Any]] = {}
        self.sent: set[str] = set()

    def __call__(self, chunk: Chunk) -> Parsed:
        runs = RunLines(self.cases)
        with collector_paused():
            return parsed_of(chunk_results(chunk, runs), self.sent, runs)


def chunk_results(chunk: Chunk, runs: RunLines) -> Iterator[Result]:
    """The Results of a chunk's lines, read with a fresh `runs`: each line JSON, a run
    line (whose schema is spelled plainly, as the reader that cut the chunks found it),
    a results file's header, or a Result record that may be stored."""
    where = chunk.where
    if chunk.run_line is not None:  # checked where it stood, in the chunk before
        try:
            runs.take(orjson.loads(chunk.run_line))
        except (ValueError, TypeError) as e:
            raise UsageError(f"{where}: the run line before line {chunk.first}: "
                             f"{brief(str(e), 300)}") from None
    lines = chunk.data.split(b"\n")
    if not chunk.torn_end:
        lines.pop()  # after the last newline
    last = len(lines) - 1
    for i, line in enumerate(lines):
        number = chunk.first + i
        if not line or line.isspace():
            continue
        try:
            value = loads(line)
        except ValueError as e:
            if i == last and chunk.torn_end:
                return  # the torn last line of a killed writer: skipped
            raise UsageError(f"{where}: line {number}: not a JSON object "
                             f"({brief(str(e), 120)})") from None
        if line.count(b"[") + line.count(b"{") > 200:
            check_nesting(value, f"{where}: line {number}")
        if not isinstance(value, dict) or value.get("schema") == RESULTS_FILE_SCHEMA:
            continue
        try:
            if runs.take(value):
                if RUN_MARK not in line:
                    raise ValueError(f"a run line names its schema as {RUN_MARK.decode()}")
                continue
            if value.get("schema") != RESULT_SCHEMA:
                raise ValueError(f"not a {RESULT_SCHEMA} record")
            result = runs.result(value)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{where}: line {number}: {brief(str(e), 300)}") from None
        problem = result.storable_problem()
        if problem is not None:
            raise UsageError(f"{where}: line {number}: {result.case.id[:80]}: {problem}")
        yield result
