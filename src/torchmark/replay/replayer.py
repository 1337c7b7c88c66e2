"""Replaying a trace's operators: resolve each from its schema, rebuild its arguments,
run it, and time it per operator and per iteration."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import statistics
from collections.abc import Callable, Iterator
from typing import Any

from torchmark.core.bounded_input import brief_repr
from torchmark.core.errors import USER_CODE_FAILURES, LimitError, error_line
from torchmark.core.operator_policy import REPLAY_PRIVATE_OPS, aten_refusal, safety_refusal
from torchmark.core.task_spec import TaskSpec
from torchmark.replay.trace import ExecutionTrace, Node
from torchmark.replay.values import (
    MEMORY_FORMATS,
    SCALAR_TYPES,
    TensorFactory,
    Unsupported,
    _is_tensor_value,
    _split_list_types,
    schema_name,
    walk_tensors,
)
from torchmark.timing import clocks
from torchmark.timing.gpu_sampler import SPIN_CHUNK, GpuSampler, Phase, warm_up
from torchmark.timing.measurement import Measurement

_REF = object()  # marks an argument slot filled from an earlier op's output


METRICS = ("time", "kernel", "memory")  # what a replay measures of each op


@dataclasses.dataclass
class ReplayedOp:
    """One top-level operator of the trace and what became of it."""

    node: Node
    op: str  # `aten::name.overload`
    status: str = "pending"  # "replayed", "skipped", or "refused" (policy: side effects)
    reason: str | None = None
    times: list[float] = dataclasses.field(default_factory=list)
    output_mismatch: str | None = None
    recorded_us: float | None = None  # its duration in the original run, when known
    fn: Any = None
    args: list[Any] = dataclasses.field(default_factory=list)
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    refs: list[tuple[tuple, tuple[int, int]]] = dataclasses.field(default_factory=list)
    zero_output: bool = False  # an `empty*` op: its output is zeroed (untimed) before use
    call: Any = None  # the operator's C++ callable, resolved once after the dry run
    slots: list[tuple[int, tuple[int, int]]] | None = None  # see _output_slots
    release: tuple[tuple[int, int], ...] = ()  # outputs no later op reads: dropped after it
    memory: list[Any] = dataclasses.field(default_factory=list)  # MemorySamples (--metric)

    @property
    def values(self) -> list[float]:
        """What was measured of it a call: its peak bytes (--metric memory), else its
        times."""
        return [float(s.peak) for s in self.memory] if self.memory else self.times

    @property
    def id(self) -> str:
        return f"{self.node.name}|{self.node.id}"


def resolve_overload(node: Node):
    """torch.ops.aten.<name>.<overload> for a node, or Unsupported with the reason."""
    import torch

    name, overload = schema_name(node)
    try:
        packet = getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        raise Unsupported(f"torch has no operator aten::{name}") from None
    key = overload or "default"
    if key not in packet.overloads():
        raise Unsupported(f"aten::{name} has no overload {brief_repr(key)} in this torch")
    return getattr(packet, key)


class Replayer:
    """Replays the selected operators of a trace on `device`."""

    def __init__(self, trace: ExecutionTrace, device: str = "cpu", *,
                 subgraph: str | None = None, step: int | None = None, seed: int = 0,
                 allow_unsafe_ops: bool = False, metric: str = "time") -> None:
        import torch

        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        # "kernel": each op's kernel time (its kernels' durations summed, CUPTI);
        # "memory": each op's allocations a call (timing/memory.py), no time
        self.metric = metric
        self.torch = torch
        self.trace, self.device = trace, torch.device(device)
        self.factory, self.seed = TensorFactory(device, seed), seed
        self.ops = [ReplayedOp(n, _display_name(n)) for n in trace.top_level_ops(subgraph, step)]
        self._index = {id(rop): i for i, rop in enumerate(self.ops)}
        self.allow_unsafe_ops = allow_unsafe_ops
        # on a GPU: the timed iterations' sampler, one SpinCover a chunk of SPIN_CHUNK ops
        self._sampler: GpuSampler | None = None

    # -- preparation ------------------------------------------------------------------
    def prepare(self) -> None:
        """Resolve every op, rebuild its arguments, run it once (dry run): ops that cannot
        be resolved, rebuilt or run are skipped with their reason; ops the operator policy
        refuses (side effects: files, process-wide state) are not run unless
        `allow_unsafe_ops`."""
        produced: set[tuple[int, int]] = set()
        for rop in self.ops:
            try:
                rop.fn = resolve_overload(rop.node)
                name, overload = schema_name(rop.node)
                refusal = None if self.allow_unsafe_ops else \
                    aten_refusal(name, overload or "default", private_ok=REPLAY_PRIVATE_OPS)
                if refusal:
                    rop.status, rop.reason = "refused", f"refused: {refusal}"
                    continue
                walk_tensors(rop.node, name, self._plan_unless(produced))
            except Unsupported as e:
                rop.status, rop.reason = "skipped", str(e)
                continue
            except LimitError as e:  # a shape beyond the bounds: that op is not replayed
                rop.status, rop.reason = "skipped", str(e)
                continue
            except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
                # a node whose entries are not what a trace holds (a shape of strings, a
                # missing type): that op is skipped, the replay goes on
                rop.status, rop.reason = "skipped", f"malformed in the trace: {error_line(e)}"
                continue
            produced.update(_output_tensor_ids(rop.node))
        env: dict[tuple[int, int], Any] = {}
        self.torch.manual_seed(self.seed)  # random ops of the trace draw the same each run
        with self.torch.no_grad():
            for rop in self.ops:
                if rop.status in ("skipped", "refused"):
                    continue
                try:
                    self._build_arguments(rop, env)
                    refusal = None if self.allow_unsafe_ops else safety_refusal(
                        f"aten::{schema_name(rop.node)[0]}", rop.args, rop.kwargs)
                    if refusal:  # a check switched off may read out of bounds, or crash
                        rop.status, rop.reason = "refused", f"refused: {refusal}"
                        continue
                    out = rop.fn(*self._fill(rop.args, rop, env), **rop.kwargs)
                except Unsupported as e:
                    rop.status, rop.reason = "skipped", str(e)
                    continue
                except USER_CODE_FAILURES as e:  # the op rejected the rebuilt arguments
                    rop.status, rop.reason = "skipped", error_line(e)
                    continue
                rop.status = "replayed"
                rop.zero_output = schema_name(rop.node)[0] in _EMPTY_OPS
                rop.call, rop.slots = getattr(rop.fn, "_op", rop.fn), _output_slots(rop)
                if rop.zero_output:
                    _zero(out)
                rop.output_mismatch = _check_outputs(rop.node, out)
                _store_outputs(rop.node, out, env)
        self.factory.keep_changed_snapshots()
        _plan_releases(self.replayed)

    def _plan_unless(self, produced: set[tuple[int, int]]) -> Callable[..., None]:
        def visit(value, shape, stride, type_name, bound):
            if _key(value) not in produced:
                self.factory.plan(value, shape, stride, type_name, bound)
        return visit

    def _convert(self, value: Any, type_name: str, shape: Any, stride: Any, arg_type: str,
                 env: dict[tuple[int, int], Any], rop: ReplayedOp, slot: tuple) -> Any:
        torch = self.torch
        if type_name.startswith("Tensor(nullptr") or type_name == "Tensor(undefined)":
            return None  # an undefined (optional) tensor
        if type_name.startswith("Tensor("):
            if not _is_tensor_value(value):
                raise Unsupported(f"a tensor argument was recorded as {brief_repr(value)}")
            if _key(value) in env:
                rop.refs.append((slot, _key(value)))
                return _REF
            return self.factory.tensor(value, shape, stride if isinstance(stride, list) else [],
                                       type_name)
        if type_name.startswith("GenericList["):
            types = _split_list_types(type_name)
            return [self._convert(v, types[i] if i < len(types) else "",
                                  shape[i] if isinstance(shape, list) and i < len(shape) else [],
                                  stride[i] if isinstance(stride, list) and i < len(stride) else [],
                                  "", env, rop, (*slot, i))
                    for i, v in enumerate(value)]
        if type_name == "None" or value == "<None>":
            return None
        if type_name == "Int":
            if "ScalarType" in arg_type:
                return getattr(torch, SCALAR_TYPES[value]) if value in SCALAR_TYPES else \
                    _unsupported(f"scalar type code {value}")
            if "MemoryFormat" in arg_type:
                return getattr(torch, MEMORY_FORMATS.get(value, "contiguous_format"))
            if "Layout" in arg_type:
                return torch.strided if value == 0 else _unsupported(f"layout code {value}")
            return int(value)
        if type_name == "Double":
            return float(value)
        if type_name == "Bool":
            return bool(value)
        if type_name == "String":
            return str(value)
        if type_name == "Device":
            return self.device
        raise Unsupported(f"cannot rebuild an argument of type {brief_repr(type_name)}")

    def _build_arguments(self, rop: ReplayedOp, env: dict[tuple[int, int], Any]) -> None:
        schema = rop.fn._schema
        io = rop.node.inputs
        values, types = io["values"], io["types"]
        shapes = io["shapes"] + [[]] * len(values)
        strides = io["strides"] + [[]] * len(values)
        if len(values) > len(schema.arguments):
            raise Unsupported(f"{len(values)} recorded inputs for a schema with "
                              f"{len(schema.arguments)} arguments")
        rop.args, rop.kwargs, rop.refs = [], {}, []
        for i, (value, type_name) in enumerate(zip(values, types, strict=False)):
            argument = schema.arguments[i]
            converted = self._convert(value, type_name, shapes[i], strides[i], str(argument.type),
                                      env, rop, ("kw", argument.name) if argument.kwarg_only
                                      else ("pos", i))
            if argument.kwarg_only:
                rop.kwargs[argument.name] = converted
            else:
                rop.args.append(converted)

    @staticmethod
    def _fill(args: list[Any], rop: ReplayedOp,
              env: dict[tuple[int, int], Any]) -> list[Any]:
        """Arguments with the outputs of earlier ops put in place (positional and kw)."""
        if not rop.refs:
            return args
        args = list(args)
        for slot, tensor_id in rop.refs:
            kind, where, *rest = slot
            container: Any = args if kind == "pos" else rop.kwargs
            target = env[tensor_id]
            if rest:
                item = container[where]
                for index in rest[:-1]:
                    item = item[index]
                item[rest[-1]] = target
            else:
                container[where] = target
        return args

    # -- running ----------------------------------------------------------------------
    @property
    def replayed(self) -> list[ReplayedOp]:
        return [r for r in self.ops if r.status == "replayed"]

    def run_once(self, per_op: Callable[[ReplayedOp, float], None] | None = None,
                 within: Callable[[int], Any] | None = None) -> None:
        """One iteration: every replayed op, outputs feeding later ops. With `per_op`,
        each op is timed (host clock; CUDA events on a GPU) and reported to it. An op
        that fails here is skipped from then on, with its reason.

        On a GPU the iteration is a pass of the GPU sampler (timing/gpu_sampler.py): the
        ops are queued in chunks of SPIN_CHUNK, each behind a spin kernel that outlasts
        its launches (see SpinCover), with a pair of events around each op and one
        synchronization at the end: each op's time is its kernels', not the gap the CPU
        leaves while launching it. Chunks keep the queue short (a few hundred launches,
        where it holds about a thousand); a chunk whose ops synchronize with the host
        cannot be covered, and `spin_note()` says so.

        `within(i)` (a context manager; kernel time's profiler range) wraps the call of
        the i-th op of `ops`, untimed."""
        torch = self.torch
        env: dict[tuple[int, int], Any] = {}
        cuda = self.device.type == "cuda"
        pending: list[ReplayedOp] = []  # the op of each event pair
        # events, streams and the spin kernel work on the current device: the replay's
        on_device = torch.cuda.device(self.device) if cuda else contextlib.nullcontext()
        with torch.no_grad(), on_device:
            timing = self._gpu_sampler().timed_pass() if per_op is not None and cuda else None
            for rop in self.replayed:
                call, slots = rop.call, rop.slots
                try:
                    if timing is not None:  # the arguments filled in the pass, untimed
                        fill = functools.partial(self._fill, rop.args, rop, env) \
                            if rop.refs else None
                        out = timing.time(call, rop.args, rop.kwargs, prepare=fill)
                        pending.append(rop)
                    else:
                        args = self._fill(rop.args, rop, env) if rop.refs else rop.args
                        if within is not None:
                            with within(self._index[id(rop)]):
                                out = call(*args, **rop.kwargs)
                        elif per_op is None:
                            out = call(*args, **rop.kwargs)
                        else:
                            t0 = clocks.timer()
                            out = call(*args, **rop.kwargs)
                            per_op(rop, clocks.timer() - t0)
                except KeyError:
                    self._drop(rop, "an input it reads was not produced (its producer failed)")
                    continue
                except USER_CODE_FAILURES as e:
                    self._drop(rop, f"failed while replaying: {error_line(e)}")
                    continue
                if rop.zero_output:
                    _zero(out)
                if slots is None:
                    _store_outputs(rop.node, out, env)
                else:
                    flat = out if isinstance(out, (tuple, list)) else (out,)
                    for index, key in slots:
                        env[key] = flat[index]
                for key in rop.release:  # as in the original run: freed after its last use
                    env.pop(key, None)
            if timing is not None:
                for rop, seconds in zip(pending, timing.finish(), strict=True):
                    if rop.status == "replayed" and per_op is not None:
                        per_op(rop, seconds)

    def _gpu_sampler(self) -> GpuSampler:
        """The sampler of this replay's timed iterations, calibrated on first use: about
        20 us of host time an op, to begin with; each chunk position keeps its own
        SpinCover across iterations."""
        if self._sampler is None:
            self._sampler = GpuSampler(self.torch, self.device, cover_per_chunk=True)
        if self._sampler.phase not in (Phase.CALIBRATION, Phase.SAMPLING):
            self._sampler.calibrate(SPIN_CHUNK * 2e-5)
        return self._sampler

    def spin_note(self) -> str | None:
        """On a GPU: how many chunks of ops outlasted their spin (their ops' device
        times can include launch gaps); None when every one was covered."""
        covers = self._sampler.covers if self._sampler is not None else []
        chunks = [c for c in covers if c.uncovered]
        if not chunks:
            return None
        return (f"{len(chunks)} of {len(covers)} chunks of up to {SPIN_CHUNK} ops "
                "outlasted their spin (an op synchronizes with the host, as nonzero, "
                "masked_select or .item() do): their ops' device times can include launch "
                "gaps")

    @staticmethod
    def _drop(rop: ReplayedOp, reason: str) -> None:
        rop.status, rop.reason, rop.times = "skipped", reason, []

    def reset(self) -> None:
        """Put back the inputs that in-place ops changed and reseed torch's generators,
        so every iteration starts from the same data and its random ops (dropout,
        randint, normal_) draw the same values (outside any timed region)."""
        self.factory.restore()
        self.torch.manual_seed(self.seed)

    def time_ops(self, warmup: int, iterations: int) -> None:
        """Each op's times over `iterations` iterations, after `warmup` untimed ones (the
        warm-up phase; on a GPU, the sampler's)."""
        def run(_: int) -> None:
            self.reset()
            self.run_once()

        if self.device.type == "cuda":
            self._sampler = GpuSampler(self.torch, self.device, cover_per_chunk=True)
            self._sampler.warm_up(run, warmup, timed=False)
        else:
            warm_up(run, warmup)
        for rop in self.replayed:
            rop.times, rop.memory = [], []
        if self.metric == "kernel":
            self._kernel_iterations(iterations)
            return
        if self.metric == "memory":
            for _ in range(iterations):
                self.reset()
                self.run_once(within=self._memory_of)
            return
        for _ in range(iterations):
            self.reset()
            self.run_once(lambda rop, seconds: rop.times.append(seconds))

    @contextlib.contextmanager
    def _memory_of(self, index: int) -> Iterator[None]:
        """--metric memory: the allocations of the i-th op's call, kept as its sample."""
        from torchmark.timing.memory import sampling

        rop = self.ops[index]
        with sampling(self.device if self.device.type == "cuda" else None) as taken:
            yield
        if rop.status == "replayed":
            rop.memory.extend(taken)

    def _kernel_iterations(self, iterations: int) -> None:
        """Kernel time: each iteration under the profiler, each op in its range; an op's
        sample is the sum of its kernels' durations (0 for an op that launches none).
        A first profiled iteration (the profiler's own start) is thrown away."""
        from torchmark.timing.kernel_time import NO_ACTIVITY, profile_ranges, saw_the_device

        torch = self.torch

        def sync() -> None:
            torch.cuda.synchronize(self.device)

        def iteration(sentinel: bool) -> Any:
            self.reset()

            def body(in_range: Callable[[int], Any]) -> None:
                if sentinel:
                    torch.cuda._sleep(1000)
                self.run_once(within=in_range)
            with torch.cuda.device(self.device):
                return profile_ranges(body, sync)

        if not saw_the_device(iteration(sentinel=True)):
            raise RuntimeError(f"replay --metric kernel: {NO_ACTIVITY}")
        for _ in range(iterations):
            for call in iteration(sentinel=False).calls:
                rop = self.ops[call.index]
                if rop.status == "replayed":
                    rop.times.append(call.seconds)

    def time_iterations(self, iterations: int) -> Measurement:
        """Whole iterations, each timed with torchmark's clock (device synchronized on a
        GPU), inputs reset between them: a Measurement."""
        times = []
        cuda = self.device.type == "cuda"  # clocks.timer() syncs the current device
        with self.torch.cuda.device(self.device) if cuda else contextlib.nullcontext():
            for _ in range(iterations):
                self.reset()
                start = clocks.timer()
                self.run_once()
                times.append(clocks.timer() - start)
        spec = TaskSpec(stmt="replay()", setup="pass", label="replay",
                        sub_label=self.trace.path, num_threads=self.torch.get_num_threads())
        return Measurement(number_per_run=1, raw_times=times, task_spec=spec)


_EMPTY_OPS = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"}


def _zero(out: Any) -> None:
    """Uninitialised memory would be garbage indices and NaNs: replay it as zeros."""
    import torch

    for t in _flatten(out):
        if isinstance(t, torch.Tensor):
            t.zero_()


def _unsupported(reason: str):
    raise Unsupported(reason)


def _display_name(node: Node) -> str:
    name, overload = schema_name(node)
    return f"aten::{name}" + (f".{overload}" if overload else "")


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _key(value: list) -> tuple[int, int]:
    """A recorded tensor's identity: (tensor id, storage id). Tensor ids alone are reused
    once a tensor is freed."""
    return value[0], value[1]


def _output_tensor_ids(node: Node) -> list[tuple[int, int]]:
    return [_key(v) for v in _flatten_values(node.outputs["values"])]


def _flatten_values(values: list) -> list[list]:
    out = []
    for v in values:
        if _is_tensor_value(v):
            out.append(v)
        elif isinstance(v, list):
            out += _flatten_values(v)
    return out


def _recorded_outputs(node: Node) -> list[tuple[Any, Any, str]]:
    """(value, shape, type) of each recorded output, list outputs flattened, positions kept."""
    out = []
    io = node.outputs
    for value, shape, type_name in zip(io["values"], io["shapes"] + [[]] * len(io["values"]),
                                       io["types"], strict=False):
        if type_name.startswith("GenericList[") and isinstance(value, list):
            types = _split_list_types(type_name)
            out += [(v, shape[i] if isinstance(shape, list) and i < len(shape) else [],
                     types[i] if i < len(types) else "") for i, v in enumerate(value)]
        else:
            out.append((value, shape, type_name))
    return out


def _pairs(node: Node, out: Any):
    """(recorded value, shape, type, replayed tensor) for outputs that are tensors on both
    sides (an undefined output, such as an unrequested gradient, is skipped)."""
    import torch

    for (value, shape, type_name), tensor in zip(_recorded_outputs(node), _flatten(out),
                                                 strict=False):
        if isinstance(tensor, torch.Tensor) and _is_tensor_value(value) \
                and not type_name.startswith("Tensor(nullptr"):
            yield value, shape, type_name, tensor


def _output_slots(rop: ReplayedOp) -> list[tuple[int, tuple[int, int]]] | None:
    """(index in the returned tuple, env key) of each output later ops may read; None when
    the outputs are nested (then `_store_outputs` walks them)."""
    if any(t.startswith("GenericList[") for t in rop.node.outputs["types"]):
        return None
    out = []
    for i, (value, type_name) in enumerate(zip(rop.node.outputs["values"],
                                               rop.node.outputs["types"], strict=False)):
        if _is_tensor_value(value) and not type_name.startswith("Tensor(nullptr"):
            out.append((i, _key(value)))
    return out


def _plan_releases(ops: list[ReplayedOp]) -> None:
    """Set each op's `release`: the values to forget once it has run, because no later op
    reads them (what it read for the last time, what it produced that nobody reads), so
    an iteration holds only live tensors, as the traced program did, not every output."""
    last_read: dict[tuple[int, int], int] = {}
    for i, rop in enumerate(ops):
        for _, key in rop.refs:
            last_read[key] = i
    for i, rop in enumerate(ops):
        outputs = [key for _, key in rop.slots] if rop.slots is not None \
            else _output_tensor_ids(rop.node)
        done = {key for _, key in rop.refs if last_read[key] == i}
        done.update(key for key in outputs if last_read.get(key, -1) <= i)
        rop.release = tuple(done)


def _store_outputs(node: Node, out: Any, env: dict[tuple[int, int], Any]) -> None:
    for value, _, _, tensor in _pairs(node, out):
        env[_key(value)] = tensor


def _check_outputs(node: Node, out: Any) -> str | None:
    """A description of how the outputs differ from the recorded ones (None: same)."""
    from torchmark.replay.values import tensor_dtype

    for _, shape, type_name, tensor in _pairs(node, out):
        try:
            dtype = tensor_dtype(type_name)
        except Unsupported:
            continue
        if list(tensor.shape) != list(shape) or tensor.dtype != dtype:
            return f"recorded {shape} {dtype}, replayed {list(tensor.shape)} {tensor.dtype}"
    return None


def median_or_none(times: list[float]) -> float | None:
    return statistics.median(times) if times else None
