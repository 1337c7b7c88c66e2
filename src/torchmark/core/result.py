"""The one result record every front-end emits, and its JSON form.

A `Result` says what was measured (`Case`: a stable id, the labels, the statement, op or
trace node, parameters such as shapes, dtypes, threads and device), how (the front-end,
the metric kind: wall time, device, kernel or batch time, instructions or memory, its unit, the runs per
sample), the raw samples (per run, in the unit), warnings, a failure if the case failed,
and optionally the run's provenance. Summary statistics are computed from the samples,
never stored apart from them. `to_dict` / `from_dict` give one versioned JSON object a
result; a results file is JSON lines of them (`dump_results` / `load_results`, which also
read every older torchmark file format: see torchmark.results_files)."""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from torchmark.core.provenance import Provenance
from torchmark.core.task_spec import TaskSpec

SCHEMA = "torchmark.result"
SCHEMA_VERSION = 1
# device: CUDA events around each call; batch: events around many calls back to back,
# per call; kernel: the sum of a call's kernel durations (CUPTI). See docs/gpu.md.
# memory: a call's peak bytes allocated above its start; allocated: the bytes it
# allocated in all (torch's allocators: timing/memory.py); compile: seconds a
# torch.compile of the statement's first call took (compilation/measure.py).
METRICS = {"wall": "s", "device": "s", "kernel": "s", "batch": "s",
           "instructions": "instructions", "memory": "bytes", "allocated": "bytes",
           "compile": "s"}
EXACT_METRICS = ("instructions", "memory", "allocated")  # counted, not sampled: no noise
BYTE_METRICS = ("memory", "allocated")  # samples may be 0 (a call that allocates nothing)
FRONTENDS = ("timeit", "callgrind", "cpp", "suite", "ops", "replay", "fuzz", "pytest",
             # other tools' results, imported (store/formats/)
             "pytest-benchmark", "pyperf", "asv", "google-benchmark", "nvbench")
STATED = "stated"  # extra key: the statistics a file stated where it kept no raw samples
MAX_ID_CHARS = 2048  # a case id's length, at most
MAX_CASE_THREADS = 4096
MAX_SAMPLES = 10_000_000  # samples a result may hold (80 MB packed)
MAX_NUMBER_PER_RUN = 2**53  # runs a sample: beyond, a float cannot count them
MAX_SAMPLE_VALUE = 1e15  # a sample past this (seconds, instructions, bytes) is no reading


def case_id(frontend: str, **what: Any) -> str:
    """A stable id for a case from what defines it: `frontend:` and a hash of the sorted
    JSON of `what` (the same statement, setup, labels and parameters always give the
    same id, on any machine)."""
    text = json.dumps(what, sort_keys=True, default=str, separators=(",", ":"))
    return f"{frontend}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


@dataclasses.dataclass(frozen=True)
class Case:
    """What was measured."""

    id: str
    frontend: str
    stmt: str = ""  # the statement, the op name, or the trace node
    setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    threads: int = 1
    device: str = "cpu"
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.frontend not in FRONTENDS:
            raise ValueError(f"Case: frontend must be one of {', '.join(FRONTENDS)}, got "
                             f"{self.frontend!r}")
        if not isinstance(self.id, str) or not self.id or len(self.id) > MAX_ID_CHARS:
            raise ValueError(f"Case: id must be a non-empty str of at most {MAX_ID_CHARS} "
                             "characters")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or \
                not 1 <= self.threads <= MAX_CASE_THREADS:
            raise ValueError(f"Case {self.id[:80]}: threads must be an int from 1 to "
                             f"{MAX_CASE_THREADS}, got {str(self.threads)[:40]!r}")
        for name in ("stmt", "setup", "device"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"Case {self.id[:80]}: {name} must be a str")
        for name in ("label", "sub_label", "description", "env"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ValueError(f"Case {self.id[:80]}: {name} must be a str or null")
        if not isinstance(self.params, Mapping):
            raise ValueError(f"Case {self.id[:80]}: params must be an object")
        object.__setattr__(self, "params", dict(self.params))

    def __hash__(self) -> int:
        return hash((self.id, self.frontend))

    @classmethod
    def from_dict(cls, data: Any) -> Case:
        """The Case of a result's JSON "case" object (unknown keys ignored)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{SCHEMA}: 'case' must be an object")
        return cls(**{k: v for k, v in data.items() if k in _CASE_FIELDS})

    def named(self, patterns: Sequence[str], glob: bool = False) -> bool:
        """Whether one of `patterns` names this case: its id, its title or a title
        distinct_titles gives it exactly, or, with `glob`, a shell pattern of one (no
        patterns name every case)."""
        told = _with_statement(self.title, self)
        return names_match((self.id, self.title, told, f"{told} ({self.id})"), patterns,
                           glob)

    @property
    def title(self) -> str:
        """A one-line name for people: the label (and sub-label), else the statement's
        first line; the description and a thread count above one after it."""
        name = self.label or (self.stmt.strip().splitlines() or [self.id])[0]
        if self.sub_label:
            name += f": {self.sub_label}"
        if self.description:
            name += f" [{self.description}]"
        if self.threads > 1:
            name += f" ({self.threads} threads)"
        return name


def distinct_titles(cases: Iterable[Case]) -> dict[str, str]:
    """Each case's title by id, told apart where several cases share one (statements
    under one label, no sub-label): then followed by " / " and the statement's first
    line, and where that is shared too, by the case id in parentheses."""
    by_id = {case.id: case for case in cases}
    out = {i: case.title for i, case in by_id.items()}
    seen = collections.Counter(out.values())
    return told_apart({i: _with_statement(title, by_id[i]) if seen[title] > 1 else title
                       for i, title in out.items()})


def _with_statement(title: str, case: Case) -> str:
    """`title` followed by " / " and the case's statement's first line, unless the
    title holds that line already (a case without a label is titled by it)."""
    line = (case.stmt.strip().splitlines() or [""])[0]
    return f"{title} / {line}" if line and line not in title else title


def told_apart(names: Mapping[str, str]) -> dict[str, str]:
    """`names` (by case id), each that several ids share followed by the id in
    parentheses: rows of one table that would otherwise merge or read alike."""
    seen = collections.Counter(names.values())
    return {i: f"{name} ({i})" if seen[name] > 1 else name for i, name in names.items()}


def cases_named(titles: Mapping[str, str], patterns: Sequence[str],
                glob: bool = False) -> list[str]:
    """The case ids that `patterns` name among `titles` (id -> title), in natural order
    of their titles: each pattern an id or a title exactly, or with `glob`, a shell
    pattern of either (brackets in a title such as "test_relu_sum[256]" are then a
    pattern, not itself); no patterns: every case."""
    from torchmark.core.stats import natural_key

    return sorted((case_id for case_id, title in titles.items()
                   if names_match((case_id, title), patterns, glob)),
                  key=lambda case_id: natural_key(titles[case_id]))


def names_match(names: Sequence[str], patterns: Sequence[str], glob: bool = False) -> bool:
    """Whether one of `patterns` is one of `names` (with `glob`: a shell pattern of one);
    no patterns match anything. A pytest node id (`tests/test_x.py::test_x[8]`) names
    the case titled as the plugin titles it (`tests/test_x.py: test_x[8]`)."""
    if not patterns:
        return True
    patterns = [*patterns, *(node_title(p) for p in patterns if "::" in p)]
    if glob:
        import fnmatch

        return any(fnmatch.fnmatchcase(name, p) for p in patterns for name in names)
    return any(name in patterns for name in names)


def node_title(node_id: str) -> str:
    """The title of the pytest benchmark `node_id` (a file's path from the project's
    root, `::`, its name in the file) where its marker names no group."""
    path, _, name = node_id.partition("::")
    return f"{path}: {name}"


def timer_case(spec: TaskSpec, frontend: str, device: str = "cpu",
               params: Mapping[str, Any] | None = None) -> Case:
    """The case a Timer measured: its id from everything that defines it."""
    what = {"stmt": spec.stmt, "setup": spec.setup, "global_setup": spec.global_setup,
            "label": spec.label, "sub_label": spec.sub_label,
            "description": spec.description, "threads": spec.num_threads,
            "device": device, "params": dict(params or {})}
    extra = {"global_setup": spec.global_setup} if spec.global_setup else {}
    return Case(id=case_id(frontend, **what), frontend=frontend, stmt=spec.stmt,
                setup=spec.setup, label=spec.label, sub_label=spec.sub_label,
                description=spec.description, env=spec.env, threads=spec.num_threads,
                device=device, params={**extra, **dict(params or {})})


def unpaired_why(baseline: Iterable[Case], candidate: Iterable[Case]) -> str:
    """Why two sides hold no case in common although they measured the same statements:
    " (the same statements, measured with other threads: 1 against 2)", naming each
    field of the cases' ids that tells them apart; "" when no statement is on both."""
    fields = ("threads", "device", "description", "setup", "label", "sub_label")
    a, b = list(baseline), list(candidate)
    shared = {case.stmt for case in a} & {case.stmt for case in b}
    if not shared:
        return ""
    differ = []
    for name in fields:
        left = sorted({str(getattr(c, name)) for c in a if c.stmt in shared})
        right = sorted({str(getattr(c, name)) for c in b if c.stmt in shared})
        if left != right:
            differ.append(f"{name}: {', '.join(left)[:40]} against {', '.join(right)[:40]}")
    return f" (the same statements, measured with other {'; '.join(differ)})" if differ \
        else ""


@dataclasses.dataclass(frozen=True)
class Failure:
    """Why a case has no samples: its error's first line and the tail of its output."""

    error: str
    output_tail: str = ""


@dataclasses.dataclass(frozen=True)
class Summary:
    """Statistics of a result's samples (per run, in the result's unit)."""

    n: int
    median: float
    mean: float
    iqr: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary | None:
        """The statistics of `samples`: the median, statistics.fmean's mean and the
        spread between statistics.quantiles' inclusive quartiles, computed once on the
        sorted values (an import summarises a million results)."""
        if not samples:
            return None
        return cls(len(samples), *summary_values(samples))


def summary_values(samples: Sequence[float]) -> tuple[float, float, float, float, float]:
    """(median, mean, iqr, min, max) of samples (not empty): Summary's fields after n,
    without making one (an import's rows take these for a million results)."""
    values = sorted(samples)
    n = len(values)
    half = n // 2
    median = values[half] if n % 2 else (values[half - 1] + values[half]) / 2
    return (median, math.fsum(values) / n, quartile(values, 3) - quartile(values, 1),
            values[0], values[-1])


def quartiles(samples: Sequence[float]) -> tuple[float, float] | None:
    """The first and third quartiles of samples (`quartile`'s), None for no samples: what
    a case's history draws as its band (stored with each result: store/schema.py)."""
    if not samples:
        return None
    values = sorted(samples)
    return quartile(values, 1), quartile(values, 3)


def quartile(values: Sequence[float], i: int) -> float:
    """Quartile `i` (1, 2 or 3) of sorted values (not empty), as
    statistics.quantiles(values, n=4, method="inclusive") and numpy.quantile's default
    (linear) place it."""
    if len(values) < 2:
        return values[0]
    j, delta = divmod(i * (len(values) - 1), 4)
    return (values[j] * (4 - delta) + values[j + 1] * delta) / 4


@dataclasses.dataclass(frozen=True)
class Stated:
    """The statistics another tool's file states for a case whose raw samples it did not
    keep (per run, in the result's unit): how many samples, their mean and standard
    deviation, and the median and IQR where the file gives them. Such a Result's
    samples are only the median (or mean) as one value; the verdict engine compares
    these statistics instead (verdicts/engine.py)."""

    n: int
    mean: float
    stdev: float | None = None
    median: float | None = None
    iqr: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or \
                not 1 <= self.n <= MAX_NUMBER_PER_RUN:
            raise ValueError(f"stated statistics: n must be an int from 1 to "
                             f"{MAX_NUMBER_PER_RUN}, got {str(self.n)[:40]!r}")
        for name in ("mean", "stdev", "median", "iqr"):
            value = getattr(self, name)
            if value is None and name != "mean":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or not 0 <= value <= MAX_SAMPLE_VALUE:
                raise ValueError(f"stated statistics: {name} must be a number from 0 to "
                                 f"{MAX_SAMPLE_VALUE:g}, got {str(value)[:40]!r}")
            object.__setattr__(self, name, float(value))

    @property
    def spread(self) -> float | None:
        """IQR / median where stated, else the IQR a normal distribution with this mean
        and deviation has (1.349 sd) / mean; None without either."""
        if self.iqr is not None and self.median:
            return self.iqr / self.median
        if self.stdev is not None and self.mean > 0:
            return 1.349 * self.stdev / self.mean
        return None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def of(cls, result: Result) -> Stated | None:
        """The statistics `result` states instead of raw samples (its extra's STATED);
        None for a result with raw samples; a ValueError when they are malformed."""
        return cls.from_extra(result.extra)

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> Stated | None:
        """The statistics an `extra` (or a Measurement's metadata, which carries a stored
        result's) states under STATED; None when it states none."""
        data = extra.get(STATED)
        if data is None:
            return None
        if not _is_mapping(data):
            raise ValueError(f"{SCHEMA}: extra.{STATED} must be an object")
        return cls(**{k: data.get(k) for k in ("n", "mean", "stdev", "median", "iqr")})


@dataclasses.dataclass(frozen=True)
class Result:
    """One measured (or failed) case; see the module docstring."""

    case: Case
    metric: str
    samples: tuple[float, ...] = ()
    number_per_run: int = 1
    unit: str = ""
    warnings: tuple[str, ...] = ()
    failure: Failure | None = None
    provenance: Provenance | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"Result: metric must be one of {', '.join(METRICS)}, got "
                             f"{self.metric!r}")
        object.__setattr__(self, "unit", self.unit or METRICS[self.metric])
        samples = tuple(map(float, self.samples))
        if not all(map(math.isfinite, samples)):
            raise ValueError(f"Result {self.case.id}: samples must be finite numbers")
        object.__setattr__(self, "samples", samples)
        object.__setattr__(self, "warnings", tuple(self.warnings))
        object.__setattr__(self, "extra", dict(self.extra))
        if isinstance(self.number_per_run, bool) or not isinstance(self.number_per_run, int) \
                or self.number_per_run < 1:
            raise ValueError(f"Result {self.case.id}: number_per_run must be an int >= 1, "
                             f"got {str(self.number_per_run)[:40]!r}")
        if self.unit != METRICS[self.metric]:
            raise ValueError(f"Result {self.case.id}: unit must be {METRICS[self.metric]!r} "
                             f"for {self.metric}, got {str(self.unit)[:40]!r}")
        if self.failure is None and not samples:
            raise ValueError(f"Result {self.case.id}: a result without samples must carry "
                             "its failure")
        if STATED in self.extra:
            Stated.of(self)  # malformed statistics are refused here

    def __hash__(self) -> int:
        return hash((self.case.id, self.metric, self.samples))

    def storable_problem(self) -> str | None:
        """Why this result must not enter the store (its samples not positive: times
        and counts, or negative: bytes; past MAX_SAMPLE_VALUE; too many of them; a run
        count past a float's precision), or None. A store holding such a record had every report fail."""
        if len(self.samples) > MAX_SAMPLES:
            return f"{len(self.samples)} samples, more than {MAX_SAMPLES}"
        if self.number_per_run > MAX_NUMBER_PER_RUN:
            return f"number_per_run {self.number_per_run} is past {MAX_NUMBER_PER_RUN}"
        huge = next((s for s in self.samples if s > MAX_SAMPLE_VALUE), None)
        if huge is not None:
            return f"a sample is {huge!r}, past {MAX_SAMPLE_VALUE:g} {self.unit}: no " \
                   f"{self.metric} reading is that large"
        in_bytes = self.metric in BYTE_METRICS
        least = 0.0 if in_bytes else math.ulp(0.0)
        bad = next((s for s in self.samples if s < least), None)
        if bad is not None:
            what = "negative" if in_bytes else "zero or negative"
            return f"a sample is {what} ({bad!r}): {self.metric} samples must be " \
                   f"{'>= 0' if in_bytes else 'positive'}"
        return None

    @property
    def ok(self) -> bool:
        return self.failure is None

    @functools.cached_property
    def summary(self) -> Summary | None:
        return Summary.of(self.samples)

    def with_provenance(self, provenance: Provenance) -> Result:
        return dataclasses.replace(self, provenance=provenance)

    def to_dict(self, with_provenance: bool = True) -> dict[str, Any]:
        """The versioned JSON object; without the "provenance" key when not
        `with_provenance` (a results file's run line holds it: core/results_file.py)."""
        summary = self.summary
        return {
            "schema": SCHEMA, "version": SCHEMA_VERSION,
            "case": {**dataclasses.asdict(self.case), "params": plain(self.case.params)},
            "metric": self.metric, "unit": self.unit, "number_per_run": self.number_per_run,
            "samples": list(self.samples),
            "summary": dataclasses.asdict(summary) if summary else None,
            "warnings": list(self.warnings),
            "failure": dataclasses.asdict(self.failure) if self.failure else None,
            **({"provenance": self.provenance.to_dict() if self.provenance else None}
               if with_provenance else {}),
            "extra": plain(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], provenance: Provenance | None = None,
                  case: Case | None = None) -> Result:
        """The Result of its JSON object, validated; `case`: its "case" already parsed
        (a reader that met the same case object before)."""
        if not _is_mapping(data) or data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} object (missing or wrong 'schema')")
        if data.get("version") != SCHEMA_VERSION:
            raise ValueError(f"{SCHEMA} version {data.get('version')!r} is not supported")
        if case is None:
            case = Case.from_dict(data.get("case"))
        samples = data.get("samples") or []
        if not isinstance(samples, list) or not _NUMBER_TYPES.issuperset(map(type, samples)) \
                or (samples and max(map(abs, samples)) >= 1e300):
            raise ValueError(f"{SCHEMA}: 'samples' must be a list of finite numbers")
        warnings = data.get("warnings") or ()
        if warnings and (not isinstance(warnings, (list, tuple)) or not all(
                isinstance(w, str) for w in warnings)):
            raise ValueError(f"{SCHEMA}: 'warnings' must be a list of strings")
        extra = data.get("extra") or {}
        if not _is_mapping(extra):
            raise ValueError(f"{SCHEMA}: 'extra' must be an object")
        failure = data.get("failure")
        if failure is not None and _is_mapping(failure):
            if not all(isinstance(failure.get(k, ""), str) for k in ("error", "output_tail")):
                raise ValueError(f"{SCHEMA}: 'failure' must hold strings")
            failure = Failure(**{k: v for k, v in failure.items()
                                 if k in ("error", "output_tail")})
        else:
            failure = None
        if provenance is None:
            raw_provenance = data.get("provenance")
            provenance = Provenance.from_dict(raw_provenance) \
                if raw_provenance is not None and _is_mapping(raw_provenance) else None
        return cls(case=case, metric=data.get("metric", ""), samples=tuple(samples),
                   number_per_run=data.get("number_per_run", 1), unit=data.get("unit", ""),
                   warnings=tuple(warnings), failure=failure, provenance=provenance,
                   extra=dict(extra))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, separators=(",", ":"))


_CASE_FIELDS = frozenset(f.name for f in dataclasses.fields(Case))
_NUMBER_TYPES = frozenset((int, float))  # JSON's numbers (bool is no sample)


def unmeasured_failures(results: Iterable[Result]) -> list[Result]:
    """The failed results of the cases (with their metric) none of `results` measured,
    the first of each: what a comparison shows as failed (a case that failed in one run
    of a side and was measured in another is measured)."""
    results = list(results)
    seen = {(r.case.id, r.metric) for r in results if r.failure is None}
    out = []
    for r in results:
        if r.failure is not None and (r.case.id, r.metric) not in seen:
            seen.add((r.case.id, r.metric))
            out.append(r)
    return out


def _is_mapping(value: Any) -> bool:
    """isinstance(value, Mapping), a dict (what JSON gives) checked first and cheaply."""
    return type(value) is dict or isinstance(value, Mapping)


def plain(value: Any) -> Any:
    """JSON-ready: tuples as lists, anything else unknown as its str."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return str(value)


def dump_results(results: Iterable[Result]) -> str:
    """JSON lines: one result a line."""
    return "".join(r.to_json() + "\n" for r in results)
