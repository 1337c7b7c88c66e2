"""Reading files that may come from others (configs, traces, definitions and results
files) within bounds: regular files only, a size cap, nesting and YAML aliases limited,
and user values cut short when an error echoes them. Every refusal is a LimitError (exit
2) raised before the input can use much time or memory."""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat
import zlib
from collections.abc import Iterable
from typing import Any

from torchmark.core.errors import LimitError, UsageError

DEFAULT_MAX_BYTES = 64 << 20
MAX_NESTING = 100  # containers inside containers: legitimate files need about ten
MAX_YAML_ALIASES = 100  # `*name` references in one YAML document
MAX_YAML_ALIAS_NODES = 100_000  # nodes the aliases may add once expanded
ECHO_LIMIT = 200  # characters of a user value an error message shows

_max_bytes_override: int | None = None


def parse_size(text: str) -> int:
    """Bytes from `64M`, `1.5G`, `800k` or a plain number (binary units); ValueError."""
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    raw = str(text).strip().lower().removesuffix("ib").removesuffix("b")
    unit = raw[-1:] if raw[-1:] in units and raw[-1:] else ""
    try:
        value = float(raw[:len(raw) - len(unit)])
    except ValueError:
        raise ValueError(f"{brief(text)} is not a size (give bytes, or a number with k, M "
                         "or G)") from None
    if not value > 0 or value * units[unit] > 1 << 50:
        raise ValueError(f"{brief(text)} is not a size between 1 byte and 1 PiB")
    return int(value * units[unit])


RAISE_WITH = "--max-input-size or TORCHMARK_MAX_INPUT_SIZE"
_raise_with = RAISE_WITH  # what a message says raises the cap


def set_max_bytes(limit: int | None, raise_with: str = RAISE_WITH) -> None:
    """The size cap for this process (the CLI's --max-input-size); None: the default.
    `raise_with`: the option that set it, which messages name (`import --max-size`)."""
    global _max_bytes_override, _raise_with
    _max_bytes_override = limit
    _raise_with = raise_with


def max_bytes() -> int:
    """The size cap: --max-input-size, else $TORCHMARK_MAX_INPUT_SIZE, else 64 MiB."""
    if _max_bytes_override is not None:
        return _max_bytes_override
    return env_size("TORCHMARK_MAX_INPUT_SIZE", DEFAULT_MAX_BYTES)


def env_size(name: str, default: int) -> int:
    """The environment variable `name` read as a size (`2G`, `256M`), else `default`; a
    LimitError naming the variable when it is no size."""
    env = os.environ.get(name)
    if env:
        try:
            return parse_size(env)
        except ValueError as e:
            raise LimitError(f"{name}: {e}") from None
    return default


def env_seconds(name: str, default: float, *, positive: bool = False) -> float:
    """The environment variable `name` read as seconds (a finite number >= 0, or > 0 when
    `positive`), else `default`; read where it is used, so that a bad value fails that
    use with the variable's name (a UsageError), not every import."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
        raise UsageError(f"{name} must be a finite number of seconds "
                         f"{'> 0' if positive else '>= 0'}, got {brief_repr(raw)}")
    return value


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _too_large(what: str, path: Any, limit: int) -> LimitError:
    return LimitError(f"{what} {brief(str(path))}: larger than the {human_bytes(limit)} "
                      f"input limit (raise it with {_raise_with})")


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path: str | os.PathLike, what: str, limit: int) -> int:
    """A descriptor of `path`, opened without blocking and checked to be a regular file of
    at most `limit` bytes (a pipe, /dev/zero or a folder is refused before any read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {brief(str(path))}: no such file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise LimitError(f"{what} {brief(str(path))}: is {kind}, not a regular file "
                             "(torchmark reads configs, traces and results from regular "
                             "files only)")
        if info.st_size > limit:
            raise _too_large(what, path, limit)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def first_line(path: str | os.PathLike, what: str, *, limit: int = 1 << 20) -> bytes:
    """The first line of a regular file (at most `limit` bytes of it, whatever the file's
    size; b"" when empty)."""
    fd = open_regular(path, what, 1 << 62)
    with os.fdopen(fd, "rb") as f:
        return f.readline(limit)


def read_bytes(path: str | os.PathLike, what: str, *, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (default: max_bytes()).
    FileNotFoundError when missing; LimitError for anything that is not a regular file
    (a pipe or /dev/zero would never end) or is too large. Nothing blocks: the file is
    opened non-blocking and checked before it is read."""
    limit = max_bytes() if limit is None else limit
    fd = open_regular(path, what, limit)
    try:
        chunks, total = [], 0
        while True:  # the file may grow after fstat: never read past the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_large(what, path, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, what: str, *, limit: int | None = None) -> str:
    """read_bytes decoded as UTF-8; a LimitError naming the file when it is not text."""
    try:
        return read_bytes(path, what, limit=limit).decode("utf-8")
    except UnicodeDecodeError:
        raise LimitError(f"{what} {brief(str(path))}: not a text file (not UTF-8)") from None


def gunzip(data: bytes, what: str, *, limit: int | None = None) -> bytes:
    """Decompress gzip data (one or more members) to at most `limit` bytes: a small file
    that would inflate beyond the cap (a zip bomb) is refused as soon as it does."""
    limit = max_bytes() if limit is None else limit
    out, total = [], 0
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while data:
            piece = inflater.decompress(data, limit + 1 - total)
            out.append(piece)
            total += len(piece)
            if total > limit:
                raise LimitError(f"{what}: decompresses to more than the "
                                 f"{human_bytes(limit)} input limit (raise it with "
                                 f"{_raise_with})")
            data = inflater.unconsumed_tail
            if inflater.eof:
                break
        if not inflater.eof:
            raise EOFError("the gzip data is truncated")
        data = inflater.unused_data.lstrip(b"\0")  # the next member, if any
    return b"".join(out)


def check_nesting(value: Any, what: str, limit: int = MAX_NESTING) -> Any:
    """`value` (parsed JSON or YAML), or a LimitError when containers nest deeper than
    `limit`. Iterative: a deep value cannot exhaust the stack here."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise LimitError(f"{what}: nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return value


def load_json(data: str | bytes, what: str, **kwargs: Any) -> Any:
    """json.loads with nesting bounded (a LimitError, never a RecursionError); a
    json.JSONDecodeError is left to the caller, who knows how to describe the file."""
    try:
        value = json.loads(data, **kwargs)
    except RecursionError:
        raise LimitError(f"{what}: nested deeper than {MAX_NESTING} levels") from None
    return check_nesting(value, what)


def yaml_loader(base: type | None = None) -> type:
    """A yaml.SafeLoader subclass (of `base`, itself a SafeLoader) that refuses, as a
    LimitError, documents nesting deeper than MAX_NESTING, using more than
    MAX_YAML_ALIASES aliases, or whose aliases would expand to more than
    MAX_YAML_ALIAS_NODES nodes (a "billion laughs" bomb is refused before anything is
    constructed)."""
    import yaml

    parent: Any = base or yaml.SafeLoader

    class BoundedLoader(parent):  # type: ignore[misc,valid-type]
        def compose_document(self) -> Any:
            self._aliases, self._depth = 0, 0
            node = super().compose_document()
            _check_alias_expansion(node)
            return node

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > MAX_YAML_ALIASES:
                    raise LimitError(f"more than {MAX_YAML_ALIASES} YAML aliases")
                return super().compose_node(parent, index)
            self._depth += 1
            try:
                if self._depth > MAX_NESTING:
                    raise LimitError(f"nested deeper than {MAX_NESTING} levels")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return BoundedLoader


def _check_alias_expansion(root: Any) -> None:
    """Count the nodes the document would have with every alias expanded (each shared
    node counted once per reference), without expanding anything."""
    import yaml

    sizes: dict[int, int] = {}
    walking: set[int] = set()  # nodes whose children are being counted
    distinct = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            walking.discard(id(node))
            distinct += 1
            continue
        if id(node) in walking:  # `a: &x [*x]`: an anchor inside itself never ends
            raise LimitError("a YAML alias refers to a node that contains it")
        walking.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in walking:
                raise LimitError("a YAML alias refers to a node that contains it")
            if id(child) not in sizes:
                stack.append((child, False))
    if root is not None and sizes[id(root)] - distinct > MAX_YAML_ALIAS_NODES:
        raise LimitError(f"YAML aliases would expand to more than {MAX_YAML_ALIAS_NODES} "
                         "extra nodes")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = ECHO_LIMIT
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 12
_REPR.maxlevel = 4


def brief(value: Any, limit: int = ECHO_LIMIT) -> str:
    """A user value as an error message may echo it: a str as is, anything else as its
    repr, cut to `limit` characters with an ellipsis and the full length. Built with
    reprlib, so a huge nested value is never rendered whole."""
    text = value if isinstance(value, str) else _REPR.repr(value)
    if len(text) <= limit:
        return text
    more = f"... ({len(value)} characters)" if isinstance(value, str) else "..."
    return text[:max(limit - len(more), 0)] + more


def brief_repr(value: Any, limit: int = ECHO_LIMIT) -> str:
    """brief(repr(value)): a str quoted, as `{value!r}` would show it."""
    if isinstance(value, str):
        text = repr(value[:limit + 1])
        if len(text) <= limit:
            return text
        more = f"... ({len(value)} characters)"
        return text[:max(limit - len(more), 0)] + more
    return brief(value, limit)
