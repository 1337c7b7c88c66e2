"""Measurement: the times a Timer recorded, their statistics and their printed form."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from torchmark.core.bounded_input import brief_repr, load_json
from torchmark.core.stats import population_std, quantile, select_unit
from torchmark.core.task_spec import TASK_SPEC_FIELDS, TaskLabels, TaskSpec, plain_int
from torchmark.timing.stopping import StopDecision
from torchmark.timing.warm_up import TRENDING_WARNING, WarmUp
from torchmark.verdicts.replicates import MAX_REPLICATES

SCHEMA_NAME = "torchmark.measurement"
SCHEMA_VERSION = 1

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # seconds
MAX_NUMBER_PER_RUN = 2**53  # runs a block: beyond, per-run times lose their precision
MAX_TIME_S = 1e9  # a block time above 31 years is a corrupted file, and overflows the stats
IQR_WARN_THRESHOLD = 0.1
IQR_GROSS_WARN_THRESHOLD = 0.25


def plausible_time(t: Any) -> bool:
    """A JSON time that the statistics survive: a number from 0 to MAX_TIME_S."""
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        return False
    try:
        return 0 <= float(t) <= MAX_TIME_S
    except OverflowError:  # an int too large for a float
        return False


def _typed(value: Any, kind: type | tuple[type, ...]) -> Any:
    """`value` when it is a `kind` (a bool is no int), else None: device reports read
    from files may hold anything."""
    if isinstance(value, bool) and kind is not bool:
        return None
    return value if isinstance(value, kind) else None


@dataclasses.dataclass(frozen=True)
class SpinReport:
    """How blocking mode's spin kernel covered the batches (see gpu_sampler.SpinCover)."""

    batches: int
    uncovered: int
    left_out: int
    spin_dropped: bool


@dataclasses.dataclass(frozen=True)
class SmClockSummary:
    """The SM clock read during the batches: median and lowest MHz, the maximum."""

    median_mhz: int
    min_mhz: int
    max_mhz: int
    batches: int


@dataclasses.dataclass(frozen=True)
class DeviceReport:
    """How a device-time Measurement was taken: its metadata, typed. `to_dict()` writes
    the JSON object device time has always written (same keys, same order) and
    `from_dict()` reads any of them back; optional parts are None when absent."""

    CLOCK: ClassVar[str] = "cuda_events"

    l2: str | None
    mode: str | None
    stop: StopDecision | None
    dropped_low_clock: int = 0
    clock_check: str = ""
    sm_clock: SmClockSummary | None = None
    graph_calls: int | None = None
    spin: SpinReport | None = None
    spin_note: str | None = None
    host_times: tuple[float, ...] = ()
    batch_calls: int | None = None  # batch mode: calls between one pair of events
    batch_graph: bool = False  # batch mode: those calls in one CUDA graph
    event_overhead: float | None = None  # seconds taken off each sample (subtracted)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "clock": self.CLOCK, "l2": self.l2, "mode": self.mode,
            "stop": self.stop.to_dict() if self.stop is not None else None,
            "dropped_low_clock": self.dropped_low_clock, "clock_check": self.clock_check}
        for key in ("sm_clock", "graph_calls", "spin", "spin_note"):
            value = getattr(self, key)
            if value is not None:
                data[key] = dataclasses.asdict(value) \
                    if isinstance(value, (SmClockSummary, SpinReport)) else value
        if self.batch_calls is not None:
            data["batch_calls"] = self.batch_calls
            data["batch_graph"] = self.batch_graph
        if self.event_overhead is not None:
            data["event_overhead"] = self.event_overhead
        data["host_times"] = list(self.host_times)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceReport:
        """The report in a Measurement's metadata; a field missing or of the wrong type
        reads as absent (results files may come from others)."""
        stop, sm, spin = (_typed(data.get(key), dict) for key in ("stop", "sm_clock", "spin"))
        host = _typed(data.get("host_times"), list) or []
        return cls(
            l2=_typed(data.get("l2"), str), mode=_typed(data.get("mode"), str),
            stop=StopDecision.from_dict(stop) if stop is not None else None,
            dropped_low_clock=_typed(data.get("dropped_low_clock"), int) or 0,
            clock_check=_typed(data.get("clock_check"), str) or "",
            sm_clock=_record(SmClockSummary, sm, int),
            graph_calls=_typed(data.get("graph_calls"), int),
            spin=_record(SpinReport, spin, int, spin_dropped=bool),
            spin_note=_typed(data.get("spin_note"), str),
            batch_calls=_typed(data.get("batch_calls"), int),
            batch_graph=data.get("batch_graph") is True,
            event_overhead=_finite(data.get("event_overhead")),
            host_times=tuple(float(t) for t in host if _typed(t, (int, float)) is not None))


# processes a measurement over several may hold (measure_in_processes starts at most
# this many; more read from a file are not trusted): the verdict engine's own bound
MAX_PROCESSES = MAX_REPLICATES


def _finite(value: Any) -> float | None:
    """A finite number >= 0 read from a file, else None."""
    value = _typed(value, (int, float))
    return float(value) if value is not None and math.isfinite(value) and value >= 0 \
        else None


def _record(cls: Any, data: dict[str, Any] | None, kind: type, **kinds: type) -> Any:
    """`cls` from the fields of `data` (each a `kind`, or as `kinds` names), or None
    when `data` is absent or a field is missing or mistyped."""
    if data is None:
        return None
    values = {f.name: _typed(data.get(f.name), kinds.get(f.name, kind))
              for f in dataclasses.fields(cls)}
    return None if None in values.values() else cls(**values)


@dataclasses.dataclass(init=True, repr=False)
class Measurement(TaskLabels):
    """One or more timings of one TaskSpec.

    `raw_times[i]` is the time of one block of `number_per_run` runs; the statistics
    (`times`, `median`, `mean`, `iqr`) are per run. TaskSpec fields (`stmt`, `label`,
    `num_threads`, ...) can be read directly from the Measurement.
    """

    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None

    def __post_init__(self) -> None:
        self._sorted_times: tuple[float, ...] = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0
        self._warnings: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: forward TaskSpec fields.
        if name in TASK_SPEC_FIELDS:
            return getattr(self.task_spec, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {brief_repr(name)}")

    # -- statistics (per run) ---------------------------------------------------------
    @property
    def times(self) -> list[float]:
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """A rough count of trustworthy digits, from the spread of the middle half.

        Uses the interquartile points only, z = 1.645 and a floor of 25 ns on the
        confidence interval; clamped to 1..4. Compare uses it to trim digits.
        """
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4 : math.ceil(3 * n / 4)]
        interval = max(
            1.645 * population_std(middle) / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL
        )
        if not self._median > 0:  # zero (an empty CUDA-event interval) or NaN: no digits
            return 1
        figures = math.floor(math.log10(self._median / interval))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        self._lazy_init()
        return bool(self._warnings)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warning lines shown in the repr (empty when the spread is small)."""
        self._lazy_init()
        return self._warnings

    def meets_confidence(self, threshold: float = IQR_WARN_THRESHOLD) -> bool:
        """True when IQR / median is below `threshold` (a zero median: when there is no
        spread)."""
        if self.median == 0:
            return self.iqr <= 0
        return self.iqr / self.median < threshold

    def _lazy_init(self) -> None:
        if self._sorted_times:
            return
        if not self.raw_times:
            raise ValueError("this Measurement holds no times")
        # plain floats, whatever the times were given as (numpy scalars, ints), as torch's
        self._sorted_times = tuple(sorted(float(t) for t in self.times))
        self._median = quantile(self._sorted_times, 0.5)
        self._mean = math.fsum(self._sorted_times) / len(self._sorted_times)
        self._p25 = quantile(self._sorted_times, 0.25)
        self._p75 = quantile(self._sorted_times, 0.75)
        if not self.meets_confidence(IQR_GROSS_WARN_THRESHOLD):
            self._add_warning("This suggests significant environmental influence.")
        elif not self.meets_confidence(IQR_WARN_THRESHOLD):
            self._add_warning("This could indicate system fluctuation.")
        warm = self.warm_up
        if warm is not None and not warm.stationary:
            self._warnings += (TRENDING_WARNING.format(warm.describe()),)

    @property
    def warm_up(self) -> WarmUp | None:
        """How the warm-up went (Timer.blocked_autorange, adaptive_autorange, device and
        kernel time: see timing/warm_up.py), or None when the measurement does not say."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        stop = meta.get("stop")  # device and kernel time: their stop decision holds it
        return WarmUp.from_dict(meta.get("warm_up") or
                                (stop.get("warm_up") if isinstance(stop, dict) else None))

    def _add_warning(self, message: str) -> None:
        relative_iqr = self.iqr / self.median * 100 if self.median != 0 else math.inf
        self._warnings += (
            f"  WARNING: Interquartile range is {relative_iqr:.1f}% "
            f"of the median measurement.\n           {message}",
        )

    def __repr__(self) -> str:
        return f"{object.__repr__(self)}\n{self._body()}"

    def summary(self) -> str:
        """The repr without its first (object address) line."""
        return self._body().lstrip("\n")

    def _body(self) -> str:
        """The lines under the address: the task (an empty line when it has no title),
        then the statistics."""
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        threads = self.task_spec.num_threads
        lines = [self.task_spec.summarize()]
        lines.append(f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}")
        if n >= 4:
            lines.append(
                f"  IQR:    {self.iqr / scale:.2f} {unit} "
                f"({self._p25 / scale:.2f} to {self._p75 / scale:.2f})"
            )
        runs = "runs per measurement," if n > 1 else "runs,"
        lines.append(
            f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} {runs} "
            f"{threads} thread{'s' if threads > 1 else ''}"
        )
        lines.extend(self.clock_lines())
        warm = self.warm_up
        if warm is not None and warm.dropped_blocks and warm.stationary:
            lines.append(f"  Warm-up: {warm.describe()} ({warm.dropped_blocks} first blocks "
                         "left out: still getting faster)")
        lines.extend(self._warnings)
        return "\n".join(lines).rstrip()

    @property
    def clock(self) -> str:
        """Which clock the times come from: "host" (wall time) or "device" (CUDA events,
        or the GPU's kernel timestamps)."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        return "device" if meta.get("clock") in ("cuda_events", "cupti") else "host"

    @property
    def quantity(self) -> str:
        """What the times are (docs/gpu.md): "wall" (host time), "host_launch" (the
        host's time to launch a device-time call), "device" (CUDA events around each
        call: its kernels and the gaps between them), "batch" (events around many calls
        back to back, per call) or "kernel" (the sum of a call's kernel durations)."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        clock = meta.get("clock")
        if clock == "cupti":
            return "kernel"
        if clock == "cuda_events":
            return "batch" if meta.get("mode") == "batch" else "device"
        return "host_launch" if clock == "host_launch" else "wall"

    @property
    def device_report(self) -> DeviceReport | None:
        """How a device-time (or batch-time) measurement was taken (its metadata, typed);
        None for host and kernel times."""
        if self.quantity not in ("device", "batch"):
            return None
        return DeviceReport.from_dict(self.metadata or {})

    @property
    def process_medians(self) -> list[float]:
        """Per-run medians of the fresh processes the times came from, in the order they
        ran (`measure_in_processes`, `timeit --processes`); [] for a one-process
        measurement."""
        return self._process_figures("medians", positive=True)

    @property
    def process_spreads(self) -> list[float]:
        """Each of those processes' own spread: the IQR of its per-run times over their
        median ([] where not recorded)."""
        return self._process_figures("spreads", positive=False)

    def _process_figures(self, key: str, positive: bool) -> list[float]:
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        processes = _typed(meta.get("processes"), dict) or {}
        figures = _typed(processes.get(key), list) or []
        if len(figures) > MAX_PROCESSES:  # a file's claim: the exact test's cost grows
            return []  # with the square of the count on each side
        values = [_finite(v) for v in figures]
        if None in values or (positive and not all(values)):
            return []  # a figure missing, negative or not a number: none are trusted
        return [float(v) for v in values if v is not None]

    def _process_lines(self) -> list[str]:
        """A measurement over several processes: how far apart their medians were."""
        medians = self.process_medians
        if len(medians) < 2:
            return []
        low, high = min(medians), max(medians)
        unit, scale = select_unit(low)
        return [f"  {len(medians)} processes, their medians {low / scale:.4g} to "
                f"{high / scale:.4g} {unit} (max / min {high / low:.3f})"]

    def clock_lines(self) -> list[str]:
        """For device-time measurements: the quantity, clock, cache state, stopping rule,
        host time (docs/gpu.md)."""
        if self.quantity == "kernel":
            return self._kernel_lines()
        report = self.device_report
        if report is None:
            return self._process_lines()
        rule, reason = (report.stop.rule, report.stop.reason) if report.stop else (None, None)
        if self.quantity == "batch":
            how = f"{report.batch_calls} calls back to back" + \
                (" in one CUDA graph" if report.batch_graph else "")
            lines = [f"  Batch time (CUDA events around {how}, per call; L2 {report.l2}); "
                     f"stopped by {rule}: {reason}"]
        else:
            lines = [f"  Device time (CUDA events; L2 {report.l2}, {report.mode} mode); "
                     f"stopped by {rule}: {reason}"]
        if report.event_overhead is not None:
            unit, scale = select_unit(self.median or report.event_overhead)  # the median's
            lines.append(f"  Event cost subtracted: {report.event_overhead / scale:.2f} {unit} "
                         "a call (an empty kernel's device time less its kernel time)")
        host = sorted(report.host_times)
        if host:
            median = host[len(host) // 2]
            unit, scale = select_unit(median)
            lines.append(f"  Host launch time: median {median / scale:.2f} {unit}")
        sm = report.sm_clock
        if sm is not None and sm.max_mhz:
            lines.append(f"  SM clock: median {sm.median_mhz} MHz, lowest {sm.min_mhz} MHz "
                         f"(max {sm.max_mhz} MHz, the lower of two readings a batch)")
        if report.dropped_low_clock:
            lines.append(f"  {report.dropped_low_clock} samples dropped: SM clock throttled")
        elif report.clock_check.startswith("SM clock not checked"):
            lines.append(f"  {report.clock_check}")
        if report.spin_note:
            lines.append(f"  Blocking: {report.spin_note}")
        return lines

    def _launch_order_lines(self, meta: dict[str, Any]) -> list[str]:
        """A call of 2 to 8 kernels: its launch order, each kernel's mean time."""
        from torchmark.timing.kernel_names import kernel_base

        sequence: dict[str, Any] = _typed(meta.get("sequence"), dict) or {}
        steps: list[Any] = _typed(sequence.get("kernels"), list) or []
        share = _finite(sequence.get("share"))
        if not 1 < len(steps) <= 8 or share is None or not all(
                isinstance(k, dict) and isinstance(k.get("name"), str) and
                _finite(k.get("seconds")) is not None for k in steps):
            return []
        unit, scale = select_unit(min(float(k["seconds"]) for k in steps))
        order = ", ".join(f"{kernel_base(k['name'])} {float(k['seconds']) / scale:.3g}"
                          for k in steps)
        return [f"  Launch order ({share:.0%} of calls), {unit} each: {order}"]

    def _kernel_lines(self) -> list[str]:
        """Kernel time: what it sums, the stop rule, the kernels by share, copies."""
        meta: dict[str, Any] = self.metadata if isinstance(self.metadata, dict) else {}
        stop: dict[str, Any] = _typed(meta.get("stop"), dict) or {}
        lines = [f"  Kernel time (CUPTI: sum of the call's kernel durations, gaps not "
                 f"counted; L2 {meta.get('l2')}"
                 f"{' (flushed clean)' if meta.get('l2_flush') == 'clean' else ''}); stopped by {stop.get('rule')}: "
                 f"{stop.get('reason')}"]
        kernels: list[Any] = _typed(meta.get("kernels"), list) or []
        for k in kernels[:5]:
            if not isinstance(k, dict):
                continue
            name, share, per_call = k.get("name"), k.get("share"), k.get("per_call")
            if not isinstance(name, str) or _typed(share, (int, float)) is None:
                continue
            short = name if len(name) <= 70 else name[:67] + "..."
            count = f" x{per_call:.3g}" if _typed(per_call, (int, float)) is not None \
                and per_call != 1 else ""
            lines.append(f"    {share:6.1%}  {short}{count}")
        if len(kernels) > 5:
            lines.append(f"    ... {len(kernels) - 5} more kernel names in the metadata")
        lines.extend(self._launch_order_lines(meta))
        copies = _finite(meta.get("copies_s"))
        if copies:
            unit, scale = select_unit(copies)
            lines.append(f"  Copies and memsets (not counted): {copies / scale:.2f} {unit} "
                         "a call")
        return lines

    def host_measurement(self) -> Measurement:
        """The host launch times of a device-time measurement, as a Measurement."""
        report = self.device_report
        if report is None:
            raise ValueError(f"host_measurement: this measurement holds {self.quantity} "
                             "times, with no host launch times beside them")
        return Measurement(number_per_run=1, raw_times=list(report.host_times),
                           task_spec=self.task_spec, metadata={"clock": "host_launch"})

    # -- combining --------------------------------------------------------------------
    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Pool replicates of the same TaskSpec into one Measurement each.

        Times are normalised to `number_per_run=1`; metadata is dropped, since it may
        differ between replicates, but for a replicate's warm-up that had not settled
        (its warning stays). Order follows first appearance.
        """
        groups: dict[TaskSpec, list[float]] = {}
        trending: dict[TaskSpec, WarmUp] = {}  # a replicate still warming up: said
        for m in map(Measurement.coerce, measurements):
            groups.setdefault(m.task_spec, []).extend(m.times)
            warm = m.warm_up
            if warm is not None and not warm.stationary:
                trending.setdefault(m.task_spec, warm)
        return [
            Measurement(number_per_run=1, raw_times=times, task_spec=spec,
                        metadata={"warm_up": trending[spec].to_dict()} if spec in trending
                        else None)
            for spec, times in groups.items()
        ]

    # -- serialization ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a versioned schema tag."""
        if self.metadata is not None:
            if not isinstance(self.metadata, dict):
                raise ValueError(f"Measurement.metadata must be a dict to be written as JSON, "
                                 f"got {type(self.metadata).__name__}")
            for key, value in self.metadata.items():
                if not isinstance(key, str):  # JSON would turn it into a str, or fail
                    raise ValueError(f"Measurement.metadata key {brief_repr(key)} is not a str: JSON "
                                     "keys are strings; use pickle, or a str key")
                try:
                    json.dumps({key: value}, allow_nan=False)
                except (TypeError, ValueError) as e:
                    raise ValueError(
                        f"Measurement.metadata[{brief_repr(key)}] cannot be written as JSON ({e}); "
                        "use pickle, or store a JSON-compatible value"
                    ) from None
        if not all(math.isfinite(t) and t >= 0 for t in self.raw_times):
            raise ValueError("Measurement.raw_times holds a negative, NaN or infinite time, "
                             "which no statistic survives (and JSON cannot carry NaN)")
        data = {
            "schema": SCHEMA_NAME,
            "version": SCHEMA_VERSION,
            "number_per_run": plain_int(self.number_per_run),
            "raw_times": [float(t) for t in self.raw_times],
            "task_spec": self.task_spec.to_dict(),
            "metadata": self.metadata,
        }
        try:  # what is written must read back
            type(self).from_dict(data)
        except ValueError as e:
            raise ValueError(f"this Measurement cannot be written as JSON: {e}") from None
        return data

    def to_json(self, **dumps_kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **dumps_kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
            raise ValueError(f"not a {SCHEMA_NAME} object (missing or wrong 'schema' field)")
        if data.get("version") != SCHEMA_VERSION:
            raise ValueError(
                f"{SCHEMA_NAME} version {brief_repr(data.get('version'))} is not supported "
                f"(this torchmark reads version {SCHEMA_VERSION})"
            )
        missing = [k for k in ("number_per_run", "raw_times", "task_spec") if k not in data]
        if missing:
            raise ValueError(f"{SCHEMA_NAME}: missing field {brief_repr(missing[0])}")
        number, raw = data["number_per_run"], data["raw_times"]
        if isinstance(number, bool) or not isinstance(number, int) or \
                not 1 <= number <= MAX_NUMBER_PER_RUN:
            raise ValueError(f"{SCHEMA_NAME}: number_per_run must be an int in 1.."
                             f"{MAX_NUMBER_PER_RUN}, got {str(number)[:40]}")
        if not isinstance(raw, list) or not raw or not all(map(plausible_time, raw)):
            raise ValueError(f"{SCHEMA_NAME}: raw_times must be a non-empty list of times "
                             f"from 0 to {MAX_TIME_S:g} s, got {str(raw)[:60]}")
        if not isinstance(data["task_spec"], dict):
            raise ValueError(f"{SCHEMA_NAME}: task_spec must be an object")
        metadata = data.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise ValueError(f"{SCHEMA_NAME}: metadata must be an object or null")
        spec = TaskSpec.from_dict(data["task_spec"])
        return cls(number_per_run=number, raw_times=[float(t) for t in raw], task_spec=spec,
                   metadata=metadata)

    @classmethod
    def coerce(cls, m: Any) -> Measurement:
        """`m` itself when it is a Measurement; a copy when it is torch.utils.benchmark's
        Measurement (or anything with its fields: number_per_run, raw_times, task_spec),
        so results pickled with torch compare beside torchmark's. Otherwise a TypeError."""
        if isinstance(m, Measurement):
            return m
        spec = getattr(m, "task_spec", None)
        if not (hasattr(m, "number_per_run") and hasattr(m, "raw_times")
                and all(hasattr(spec, name) for name in TASK_SPEC_FIELDS)):
            raise TypeError(f"{type(m).__module__}.{type(m).__qualname__} is not a "
                            "Measurement (torchmark's or torch.utils.benchmark's)")
        fields = {name: getattr(spec, name) for name in TASK_SPEC_FIELDS}
        return cls(number_per_run=int(m.number_per_run), raw_times=list(m.raw_times),
                   task_spec=TaskSpec(**fields), metadata=getattr(m, "metadata", None))

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> Measurement:
        if isinstance(text, dict):
            return cls.from_dict(text)
        try:
            data = load_json(text, "measurement")
        except json.JSONDecodeError as e:
            raise ValueError(f"not valid JSON: {e}") from None
        return cls.from_dict(data)
