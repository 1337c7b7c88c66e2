"""Human-readable summaries of op cases and records (renderers never measure)."""

from __future__ import annotations

from typing import Any

from torchmark.core.stats import select_unit


def describe_arg(arg: dict[str, Any]) -> str:
    kind = arg["type"]
    if kind == "tensor":
        dims = "x".join(str(d) for d in arg["shape"]) or "scalar"
        return f"{dims} {arg.get('dtype', 'float')}"
    if kind in ("genericlist", "tuple"):
        inner = ", ".join(describe_arg(a) for a in arg["value"])
        return f"[{inner}]" if kind == "genericlist" else f"({inner})"
    if kind == "none":
        return "None"
    if arg.get("value") is None and arg.get("value_range") is not None:
        return f"{kind} in {arg['value_range']}"
    value = arg.get("value")
    if kind in ("float", "double") and value in ("inf", "-inf", "nan"):
        value = float(value)  # as a results file writes them: a row reads the same either way
    return repr(value)


def describe_spec(spec: dict[str, Any] | None) -> str:
    if not spec:
        return ""
    parts = [describe_arg(a) for a in spec.get("args", [])]
    parts += [f"{k}={describe_arg(v)}" for k, v in spec.get("kwargs", {}).items()]
    return ", ".join(parts)


def describe_config(config: dict[str, Any]) -> str:
    build = describe_spec(config.get("build"))
    text = describe_spec(config.get("input"))
    return f"build({build}) -> {text}" if build else text


def format_seconds(seconds: float) -> str:
    unit, scale = select_unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


def _compute_bound(amount: dict[str, Any]) -> bool:
    """Whether FLOP/s says more than bytes/s: 4 or more flops a byte."""
    return "tflops" in amount and amount.get("flops", 0) >= 4 * amount.get("bytes", 0)


def format_bytes(value: float) -> str:
    return f"{value:,.0f} B"


def throughput(record: dict[str, Any], flops: bool | None = None) -> str:
    """The record's throughput: TFLOP/s for compute-bound work, else GB/s (`flops`
    chooses, where both are known)."""
    amount = (record.get("metrics") or {}).get("work") or {}
    use_flops = _compute_bound(amount) if flops is None else flops
    if use_flops and "tflops" in amount:
        return f"{amount['tflops']:.3g} TFLOP/s"
    if "gbps" in amount:
        return f"{amount['gbps']:.3g} GB/s"
    if "tflops" in amount:
        return f"{amount['tflops']:.3g} TFLOP/s"
    return ""


def record_notes(record: dict[str, Any]) -> list[str]:
    """What a record's timed phases say about their figures ("forward: ..."), e.g. that
    device times can include launch gaps."""
    metrics = record.get("metrics") or {}
    return [f"{phase}: {metrics[phase]['note']}" for phase in ("forward", "backward")
            if isinstance(metrics.get(phase), dict) and metrics[phase].get("note")]


_STATUS_WIDTH = 40  # a failure's first line, cut; the whole message is in the results


def quantity_of(options: Any) -> str:
    """What an ops or replay run's times are (docs/gpu.md), for column headers: kernel
    time (--metric kernel), device time (CUDA events: continuous_events on a GPU, or the
    replay's per-op events), host time otherwise (the clock around synchronized calls)."""
    metric = getattr(options, "metric", None) or "time"
    device = str(getattr(options, "device", "cpu"))
    if metric == "kernel":
        return "kernel time"
    if metric == "memory":
        return "peak bytes"
    if device.startswith("cuda") and getattr(options, "exec_mode", "continuous_events") \
            == "continuous_events":
        return "device time"
    return "host time"


def records_table(records: list[dict[str, Any]], title: str = "operator benchmarks",
                  quantity: str | None = None):
    """A rich Table: op, config, median forward (and backward) time (`quantity` named in
    the headers: "kernel time", ...), throughput (in one unit per op: what most of its
    cases are bound by), status."""
    from rich.markup import escape
    from rich.table import Table

    bound: dict[str, list[bool]] = {}
    for r in records:
        amount = (r.get("metrics") or {}).get("work") or {}
        if amount:
            bound.setdefault(r["op"], []).append(_compute_bound(amount))
    flops = {op: 2 * sum(votes) >= len(votes) for op, votes in bound.items()}
    table = Table(title=title)
    suffix = f" ({quantity})" if quantity else ""
    for name, justify in (("op", "left"), ("config", "left"), ("forward" + suffix, "right"),
                          ("backward" + suffix, "right"), ("throughput", "right"),
                          ("status", "left")):
        table.add_column(name, justify=justify,  # type: ignore[arg-type]
                         overflow="fold" if name in ("op", "config") else "ellipsis")
    for r in records:
        metrics = r.get("metrics") or {}
        fwd = metrics.get("forward", {}).get("median")
        bwd = metrics.get("backward", {}).get("median")
        status = "ok"
        if record_notes(r):
            status = "ok (note below)"
        if r["status"] != "ok":
            first = ((r.get("error") or "").strip().splitlines() or [""])[0]
            cut = first if len(first) <= _STATUS_WIDTH else first[:_STATUS_WIDTH - 3] + "..."
            status = f"failed: {cut}"
        shown = format_bytes if "bytes" in metrics.get("forward", {}) else format_seconds
        table.add_row(escape(r["op"]), escape(describe_config(r["config"])),
                      shown(fwd) if fwd is not None else "",
                      shown(bwd) if bwd is not None else "",
                      throughput(r, flops.get(r["op"])), escape(status))
    return table
