"""The executor a command runs on, from its options: `--executor local|ray`,
`--ray-address auto|HOST:PORT`, `--ray-resources JSON`, `--retries N`; checked before
anything runs (bad input: a UsageError naming the option)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from torchmark.core.errors import UsageError

EXECUTORS = ("local", "ray")
DEFAULT_RETRIES = 2
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


@dataclasses.dataclass(frozen=True)
class RayOptions:
    """Where and how items run on Ray: `address` None starts a local instance (with
    `num_cpus` CPUs, default all), "auto" joins the cluster this machine belongs to,
    HOST:PORT the one whose head listens there; `resources` are added to every task
    (CPU / GPU replace the item's own); `retries` extra tries after a node failure."""

    address: str | None = None
    resources: Mapping[str, float] = dataclasses.field(default_factory=dict)
    retries: int = DEFAULT_RETRIES
    num_cpus: int | None = None


def parse_address(value: str | None) -> str | None:
    if value is None:
        return None
    text = value.strip()
    if text == "auto":
        return text
    match = _HOST_PORT.match(text)
    if match is None or not 1 <= int(match.group(2)) <= 65535:
        raise UsageError(f"--ray-address {value!r}: expected auto or HOST:PORT (the head "
                         "node's GCS address, e.g. 10.0.0.1:6379)")
    return text


def parse_resources(value: str | None, *, wall: bool = True) -> dict[str, float]:
    """A JSON object of resource name -> amount (`{"a100": 1}`); "CPU" may lower the
    CPUs of instruction-count-only work (it packs), never of wall-time work."""
    if value is None or not value.strip():
        return {}
    try:
        data: Any = json.loads(value)
    except json.JSONDecodeError as e:
        raise UsageError(f"--ray-resources: not JSON ({e.msg} at character {e.pos}); "
                         "expected an object such as '{\"a100\": 1}'") from None
    if not isinstance(data, dict) or not data:
        raise UsageError("--ray-resources: expected a non-empty JSON object of resource "
                         "name -> amount, such as '{\"a100\": 1}'")
    out: dict[str, float] = {}
    for name, amount in data.items():
        if not name or name.startswith("node:") or name in ("memory", "object_store_memory"):
            raise UsageError(f"--ray-resources: {name!r} cannot be asked for; name a "
                             "custom resource the nodes were started with")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) \
                or not math.isfinite(amount) or amount < 0 or (amount == 0 and name == "CPU"):
            raise UsageError(f"--ray-resources: {name} must be a number >= 0, got "
                             f"{json.dumps(amount)}")
        if amount > 1 and amount != int(amount):
            raise UsageError(f"--ray-resources: {name} above 1 must be a whole number, got "
                             f"{amount}")
        out[str(name)] = float(amount)
    if wall and "CPU" in out and out["CPU"] < 1:
        raise UsageError("--ray-resources: a wall-time case takes a whole CPU; pack cases "
                         "(CPU below 1) only with instruction counts alone (--no-wall)")
    return out
