"""The messages between the instruction-counting client (collector.py) and its valgrind
host (host.py), as typed records. They travel as pickled frames (core/framing.py), over
the host's own pipes or a private socket (only this user's processes are answered), so
both ends share these classes; a host and its client always run the same torchmark (a
shared host's key includes this file)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class CountRequest:
    """Count a statement (or a compiled C++ snippet's entry point) in a forked child."""

    folder: str  # the request's own folder: output.log, error.txt, manifest, globals
    stmt: str
    setup: str
    globals: list[dict[str, Any]]  # the plan of globals_bridge.pack_globals
    imports: tuple[str, ...]  # modules the setup and globals need
    number: int
    repeats: int
    warmup: int
    collect_baseline: bool
    num_threads: int
    cwd: str
    sys_path: tuple[str, ...]
    library: str | None = None  # a C++ snippet's shared library
    entry_suffix: str = ""  # its entry point's suffix


@dataclasses.dataclass(frozen=True)
class CountReply:
    """How the counted child ended, its callgrind dumps in order, and the time taken."""

    pid: int
    exit_code: int
    dumps: tuple[str, ...]
    child_s: float
    host_s: float
    fresh_imports: tuple[str, ...]  # modules imported with instrumentation off


@dataclasses.dataclass(frozen=True)
class HostReady:
    """The host's first frame (pipes) or its answer to a Ping (socket)."""

    pid: int
    on_valgrind: bool
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # start-up seconds


@dataclasses.dataclass(frozen=True)
class Ping:
    """Is a shared host there and ready? (answered with HostReady)"""


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """Exit now (answered with Stopped on a socket)."""


@dataclasses.dataclass(frozen=True)
class Stopped:
    """A shared host's last answer."""
