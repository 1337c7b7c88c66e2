"""Reading a PyTorch execution trace (`torch.profiler.ExecutionTraceObserver`) and
choosing the operators to replay.

The trace is a JSON object (`.json` or `.json.gz`) with a `schema` version and `nodes`:
each node has an `id`, a `name`, `ctrl_deps` (its parent), `inputs` / `outputs` (values,
shapes, types, strides) and `attrs` (among them `rf_id` and `op_schema`). Replay runs the
top-level `aten::` operators: those with no `aten::` ancestor (the operators an operator
calls are run by it, not again), in the order they started.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import brief, brief_repr, gunzip, load_json, read_bytes
from torchmark.core.errors import UsageError

SUPPORTED_SCHEMAS = ("1.0.", "1.1.")


class TraceError(UsageError):
    """The file is not an execution trace torchmark can read."""


@dataclasses.dataclass
class Node:
    id: int
    name: str
    parent: int
    inputs: dict[str, list]
    outputs: dict[str, list]
    attrs: dict[str, Any]
    children: list[int] = dataclasses.field(default_factory=list)

    @property
    def schema(self) -> str:
        return self.attrs.get("op_schema") or ""

    @property
    def rf_id(self) -> int | None:
        return self.attrs.get("rf_id")

    @property
    def is_aten(self) -> bool:
        return self.name.startswith("aten::")


@dataclasses.dataclass
class ExecutionTrace:
    path: str
    schema: str
    nodes: dict[int, Node]

    def ancestors(self, node: Node):
        seen = set()
        while node.parent in self.nodes and node.parent != node.id and node.parent not in seen:
            seen.add(node.parent)
            node = self.nodes[node.parent]
            yield node

    def subtree(self, root: Node) -> list[Node]:
        out, stack, seen = [], [root.id], {root.id}
        while stack:  # a malformed trace may link nodes in a cycle: each visited once
            node = self.nodes[stack.pop()]
            out.append(node)
            fresh = [c for c in node.children if c not in seen]
            seen.update(fresh)
            stack.extend(fresh)
        return out

    def find(self, name: str) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.name == name), key=lambda n: n.id)

    def top_level_ops(self, subgraph: str | None = None, step: int | None = None) -> list[Node]:
        """The `aten::` nodes to replay, in execution order: under the first node named
        `subgraph`, or under `ProfilerStep#<step>`, or the whole trace."""
        scope = list(self.nodes.values())
        if subgraph is not None and step is not None:
            raise ValueError(f"choose a subgraph ({brief_repr(subgraph)}) or a step ({step}), not both")
        if subgraph is not None or step is not None:
            name = subgraph if subgraph is not None else f"ProfilerStep#{step}"
            roots = self.find(name)
            if not roots:
                # in order of appearance: a script's own labels come before backward nodes
                names = list(dict.fromkeys(n.name for n in sorted(
                    self.nodes.values(), key=lambda n: n.id) if not n.is_aten and n.name))
                more = f" and {len(names) - 10} more" if len(names) > 10 else ""
                raise TraceError(f"{self.path}: no node named {brief_repr(name)} (non-aten nodes, first "
                                 f"seen first: {', '.join(names[:10])}{more})")
            scope = self.subtree(roots[0])
        under_aten = self._under_aten()
        ops = [n for n in scope if n.is_aten and not under_aten[n.id]]
        return sorted(ops, key=lambda n: n.id)

    def _under_aten(self) -> dict[int, bool]:
        """Whether each node has an `aten::` ancestor, each node worked out once from its
        parent's answer (walking every node's ancestors was quadratic in a deep trace: a
        crafted 0.4 MB trace took 3.7 s, 64 MiB would take a day). A parent cycle (a
        malformed trace) ends the walk."""
        known: dict[int, bool] = {}
        for start in self.nodes.values():
            path, on_path, node = [], set(), start
            while node.id not in known:
                path.append(node)
                on_path.add(node.id)
                parent = self.nodes.get(node.parent)
                if parent is None or parent.id in on_path:
                    known[node.id] = False
                    path.pop()
                    break
                node = parent
            answer = known[node.id] or node.is_aten if path else known[node.id]
            for member in reversed(path):
                known[member.id] = answer
                answer = answer or member.is_aten
        return known


def _read_json(path: Path) -> Any:
    raw = read_bytes(path, "trace")
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gunzip(raw, f"trace {brief(str(path))}")
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{path}: a damaged gzip file ({e})") from None
    try:
        return load_json(raw, f"trace {brief(str(path))}")
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not JSON (binary data)") from None
    except json.JSONDecodeError as e:
        near_end = e.pos >= len(raw.rstrip()) - 1 or e.msg.startswith("Unterminated string")
        raise TraceError(f"{path}: {'truncated JSON' if near_end else 'not JSON'} "
                         f"(line {e.lineno}, column {e.colno}: {e.msg})") from None


def _io(raw: dict, key: str) -> dict[str, list]:
    """A node's inputs or outputs: {values, shapes, types, strides}. Schema 1.0.x kept
    them in parallel lists (`inputs`, `input_shapes`, `input_types`)."""
    side = raw.get(key, {})
    if isinstance(side, dict):
        return {field: list(side.get(field, [])) for field in
                ("values", "shapes", "types", "strides")}
    prefix = key[:-1]  # "input" / "output"
    return {"values": list(side), "shapes": list(raw.get(f"{prefix}_shapes", [])),
            "types": list(raw.get(f"{prefix}_types", [])),
            "strides": list(raw.get(f"{prefix}_strides", []))}


def _node(raw: Any, path: Path) -> Node:
    try:
        attrs = {a["name"]: a.get("value") for a in raw.get("attrs", [])}
        for key in ("op_schema", "rf_id"):  # top-level keys in schema 1.0.x
            if key in raw and key not in attrs:
                attrs[key] = raw[key]
        io = {key: _io(raw, key) for key in ("inputs", "outputs")}
        parent = raw.get("ctrl_deps", raw.get("parent", 0))
        return Node(int(raw["id"]), str(raw["name"]), int(parent),
                    io["inputs"], io["outputs"], attrs)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise TraceError(f"{path}: a node is malformed ({type(e).__name__}: {e}): "
                         f"{str(raw)[:120]}") from None


def load_trace(path: str | os.PathLike) -> ExecutionTrace:
    """Parse an execution trace (JSON or gzipped JSON) and link its node tree."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or "nodes" not in data or "schema" not in data:
        raise TraceError(f"{path}: not an execution trace (expected a JSON object with "
                         "'schema' and 'nodes')")
    schema = str(data["schema"])
    if not schema.startswith(SUPPORTED_SCHEMAS):
        raise TraceError(f"{path}: execution-trace schema {brief_repr(schema)} is not supported "
                         f"(torchmark reads {', '.join(s + '*' for s in SUPPORTED_SCHEMAS)})")
    if not isinstance(data["nodes"], list):
        raise TraceError(f"{path}: 'nodes' is not a list")
    nodes = {}
    for raw in data["nodes"]:
        node = _node(raw, path)
        nodes[node.id] = node
    for node in nodes.values():
        if node.parent in nodes and node.parent != node.id:
            nodes[node.parent].children.append(node.id)
    return ExecutionTrace(str(path), schema, nodes)
