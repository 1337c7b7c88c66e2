"""Results files: JSON lines, a header line (`torchmark.results`) then one Result a line;
the results of one run follow a run line (`torchmark.run`) that holds their provenance
once, and leave theirs out (a Result line with its own "provenance", or null, says so
itself: files written before run lines still read). A run line `export` writes also says
how its run ended, when, and its tags ("run": RunState), which `import` keeps.

Written under the file's lock and appended to, so two processes saving at once both keep
what they saved; a line a killed writer left half written is cut off before appending
and skipped on reading."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from torchmark.core.atomic_files import write_atomically
from torchmark.core.bounded_input import brief, first_line, load_json
from torchmark.core.errors import UsageError
from torchmark.core.jsonl import cut_torn_line, iter_lines
from torchmark.core.provenance import CLOCK_SKEW_S, Provenance, parse_time
from torchmark.core.result import SCHEMA as RESULT_SCHEMA
from torchmark.core.result import SCHEMA_VERSION as RESULT_VERSION
from torchmark.core.result import Case, Result
from torchmark.core.results_lock import ResultsLock

RESULTS_FILE_SCHEMA = "torchmark.results"  # the header line of a results file
HEADER = {"schema": RESULTS_FILE_SCHEMA, "version": 1}


def first_schema(path: str | os.PathLike) -> str | None:
    """The `schema` of a file's first line when it is a JSON object naming one."""
    head = first_line(path, "results file").decode("utf-8", "replace").strip()
    try:  # bounded: a line nested too deep is a LimitError naming the file
        value = load_json(head, brief(str(path))) if head else None
    except json.JSONDecodeError:
        return None
    return str(value["schema"]) if isinstance(value, dict) and "schema" in value else None


def is_results_file(path: str | os.PathLike) -> bool:
    """Whether `path` starts as a results file does (its header, or a Result line)."""
    return first_schema(path) in (RESULTS_FILE_SCHEMA, RESULT_SCHEMA)


def save_results(path: str | os.PathLike, results: Iterable[Result], append: bool = True,
                 *, what: str = "results file",
                 older: Callable[[Path], list[Result]] | None = None) -> None:
    """Write `results` to the results file at `path` under its lock (waiting up to 30 s
    for another writer): appended to a results file (`append`, after cutting a
    half-written last line a killed writer left), else the file written anew (the header
    first) and put in place atomically. A non-empty file of another format is refused
    (UsageError) unless `older` converts it (`what`: "measurements file"): then it is
    rewritten as a results file holding `older(path)`, its contents as Results, first."""
    path = Path(path)
    results = list(results)
    with ResultsLock(path, what).acquire(wait=30.0):
        held = append and path.exists() and path.stat().st_size > 0
        if held and is_results_file(path):
            cut_torn_line(path)
            with open(path, "a", encoding="utf-8") as f:
                f.write(results_text(results, header=False))
            return
        if held and older is None:
            raise UsageError(f"{brief(str(path))}: not a torchmark results file (its first "
                             f"line is not a {RESULTS_FILE_SCHEMA} header); refusing to "
                             "append Results to it")
        kept = older(path) if held and older is not None else []
        write_atomically(path, results_text(kept + results))


RUN_SCHEMA = "torchmark.run"  # a line holding the provenance of the results after it
RUN_ENDINGS = ("ok", "failed", "interrupted")  # how a finished run ended
MAX_TAGS_CHARS = 65536  # a run's tags in a file, as JSON, at most
# tags that name what only the store (and machine) that wrote them knows, never imported:
# a process of this machine (a resume's claim), runs of that store by their ids (a Ray
# run's node runs, the baseline run of an `ab`)
LOCAL_TAGS = ("process", "cluster_run", "ab_baseline_run")


@dataclasses.dataclass(frozen=True)
class RunState:
    """What a run line says of its run besides its provenance: how it ended (`status`,
    one of RUN_ENDINGS), when (`ended`, an ISO time, or None) and its tags."""

    status: str
    ended: str | None = None
    tags: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "ended": self.ended, "tags": dict(self.tags)}

    @classmethod
    def from_dict(cls, data: Any) -> RunState:
        """The state a file states (others may write it): a run that was still running
        when it was written is `interrupted` (it runs nowhere now); its end a time no
        later than now (plus a day of clock skew); tags an object of finite JSON
        values, at most MAX_TAGS_CHARS as JSON, those only the writing store knows the
        meaning of (LOCAL_TAGS) left out. A ValueError saying what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("run: must be an object (status, ended, tags)")
        status = data.get("status")
        if status == "running":
            status = "interrupted"
        if status not in RUN_ENDINGS:
            raise ValueError(f"run: status must be one of {', '.join(RUN_ENDINGS)}, got "
                             f"{brief(str(status), 40)!r}")
        ended = data.get("ended")
        if ended is not None:
            moment = parse_time(ended) if isinstance(ended, str) and len(ended) < 64 \
                else None
            latest = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=CLOCK_SKEW_S)
            if moment is None or moment > latest:
                raise ValueError(f"run: ended must be an ISO time no later than now, got "
                                 f"{brief(str(ended), 40)!r}")
        tags = data.get("tags") or {}
        try:  # plain, finite JSON (a store's JSON column refuses NaN)
            text = json.dumps(tags, allow_nan=False) if isinstance(tags, Mapping) and \
                all(isinstance(k, str) for k in tags) else None
        except (ValueError, TypeError):
            text = None
        if text is None or len(text) > MAX_TAGS_CHARS:
            raise ValueError(f"run: tags must be an object of finite JSON values, at most "
                             f"{MAX_TAGS_CHARS} characters")
        return cls(status, ended, {k: v for k, v in tags.items() if k not in LOCAL_TAGS})


def results_text(results: Iterable[Result], header: bool = True,
                 run: RunState | None = None) -> str:
    """A results file's text: the header line (unless `header` is false), then the
    results' lines, each run's after its run line (see the module docstring), which
    holds `run` when given (the results are then one run's)."""
    lines = [json.dumps(HEADER)] if header else []
    current: object = None
    for r in results:
        data = r.to_dict(with_provenance=False)
        if r.provenance is None:
            data["provenance"] = None
        elif r.provenance is not current and r.provenance != current:
            line = {"schema": RUN_SCHEMA, "version": 1, "provenance": r.provenance.to_dict()}
            if run is not None:
                line["run"] = run.to_dict()
            lines.append(json.dumps(line, separators=(",", ":"), default=str))
            current = r.provenance
        lines.append(json.dumps(data, allow_nan=False, separators=(",", ":")))
    return "".join(line + "\n" for line in lines)


class RunLines:
    """Reading a results file's lines in order: the provenance its last run line names
    for the Result lines that leave theirs out. Each provenance is parsed and checked
    once while the lines repeat it (files written before run lines give every line its
    own copy)."""

    CASES_KEPT = 100_000  # cases remembered (parsed once while they repeat)

    def __init__(self, cases: dict[str, tuple[Any, Case]] | None = None) -> None:
        """`cases`: the parsed cases to share with other readers (id -> (its object,
        its Case)), for the chunks of one file."""
        self.current: Provenance | None = None
        self._raw: Any = None
        self._parsed: Provenance | None = None
        self._cases = {} if cases is None else cases
        self._states: dict[int, RunState] = {}  # id of a run line's provenance -> its state

    def _provenance(self, raw: Any) -> Provenance | None:
        if not isinstance(raw, dict):
            return None
        if raw != self._raw:  # a C-level comparison: the common case is a match
            self._parsed, self._raw = Provenance.from_dict(raw), raw
        return self._parsed

    def take(self, line: dict[str, Any]) -> bool:
        """Whether `line` was a run line (its provenance now the current one, and its
        run's state, where it states one, that provenance's)."""
        if line.get("schema") != RUN_SCHEMA:
            return False
        self.current = self._provenance(line.get("provenance"))
        if self.current is not None and line.get("run") is not None:
            state = RunState.from_dict(line["run"])
            began, ended = parse_time(self.current.started), parse_time(state.ended or "")
            if began is not None and ended is not None and ended < began:
                raise ValueError(f"run: ended ({brief(str(state.ended), 40)}) is before the "
                                 f"run started ({brief(self.current.started, 40)})")
            self._states[id(self.current)] = state
        return True

    def state_of(self, provenance: Provenance | None) -> RunState | None:
        """The state a run line of this provenance stated, if one did."""
        return self._states.get(id(provenance)) if provenance is not None else None

    def _case(self, raw: Any) -> Case:
        """The Case of a line's case object, parsed once while the same object (the
        same id and fields) comes back, as it does run after run."""
        key = raw.get("id") if isinstance(raw, dict) else None
        known = self._cases.get(key) if isinstance(key, str) else None
        if known is not None and known[0] == raw:
            return known[1]
        case = Case.from_dict(raw)
        if len(self._cases) >= self.CASES_KEPT:
            self._cases.clear()
        self._cases[case.id] = (raw, case)
        return case

    def result(self, line: dict[str, Any]) -> Result:
        """The Result of a Result line: its own provenance where it names one (or
        null), else the current run line's."""
        if line.get("schema") == RESULT_SCHEMA and line.get("version") == RESULT_VERSION:
            case = self._case(line.get("case"))
        else:
            case = None  # from_dict names what is wrong
        if "provenance" not in line:
            return Result.from_dict(line, self.current, case)
        own = self._provenance(line["provenance"])
        return Result.from_dict(line, own, case) if own is not None else \
            Result.from_dict({**line, "provenance": None}, case=case)


def read_results(path: str | os.PathLike) -> list[Result]:
    """The Results of a results file, in order (a torn last line skipped); a UsageError
    naming the line when one is not a valid Result."""
    out = []
    runs = RunLines()
    for number, line in enumerate(iter_lines(path), start=1):
        try:
            if runs.take(line) or line.get("schema") != RESULT_SCHEMA:
                continue
            out.append(runs.result(line))
        except (ValueError, TypeError) as e:
            raise UsageError(f"{brief(str(path))}: entry {number}: {brief(str(e), 300)}") \
                from None
    return out
