"""The client side of instruction counting: starts the valgrind host, sends it
measurement requests, and turns the dump files into CallgrindStats.

One host serves any number of measurements, so Python's start-up and `import torch`
under valgrind (about half a minute on a 2-core machine) are paid once per host, not
once per measurement.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import platform
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchmark.callgrind.client_requests import helper_path
from torchmark.callgrind.function_counts import FunctionCounts
from torchmark.callgrind.globals_bridge import modules_needed, pack_globals
from torchmark.callgrind.messages import CountReply, CountRequest, HostReady, Shutdown
from torchmark.callgrind.out_parser import parse_callgrind_file
from torchmark.callgrind.stats import CallgrindStats
from torchmark.core.announce import announced
from torchmark.core.bounded_input import env_seconds
from torchmark.core.errors import MeasurementError, ToolMissingError
from torchmark.core.framing import recv_frame, send_frame
from torchmark.core.private_folder import peer_uid, private_folder
from torchmark.core.procs import pid_alive
from torchmark.core.task_spec import TaskSpec
from torchmark.core.worker import NEUTRAL_CWD, ChildLost, PipedChild

_LOG_TAIL = 3000


class CallgrindError(MeasurementError):
    """A measurement failed in the counted process; `output` holds what it printed.
    `crashed` is true when a process died or stopped answering (the host, or the counted
    process killed by a signal) rather than the statement raising: worth a retry."""

    def __init__(self, message: str, output: str = "", crashed: bool = False) -> None:
        super().__init__(message if not output else f"{message}\n{output}")
        self.output = output
        self.crashed = crashed


def valgrind_path() -> str:
    path = shutil.which("valgrind")
    if path is None:
        raise ToolMissingError("valgrind is not installed (collect_callgrind runs the statement under "
                      "it): install it, e.g. `apt-get install valgrind`")
    return path


def _setarch_prefix() -> list[str]:
    """`setarch <arch> -R` (address randomization off) where the system allows it."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    cmd = [setarch, platform.machine(), "-R"]
    try:
        ok = subprocess.run([*cmd, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return cmd if ok else []


ENV_BLOCK = 4096
_PAD = "TORCHMARK_ENV_PAD"


_KEPT_ENV = ("PATH", "HOME", "USER", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
             "LD_PRELOAD")
_KEPT_PREFIXES = ("LC_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "GOMP_", "TORCH", "PYTORCH_",
                  "CUDA_", "NVIDIA_", "VALGRIND_", "DNNL_", "ONEDNN_", "ATEN_", "XDG_")


def _import_roots() -> list[str]:
    """The folders the host needs on its path: where torchmark and torch are installed."""
    from torchmark.core.torch_install import torch_folder

    roots = [str(Path(__file__).resolve().parents[2])]
    folder = torch_folder()
    if folder is not None:
        roots.append(str(Path(folder).parent))
    return list(dict.fromkeys(roots))


def host_env(client_argv: Sequence[str]) -> dict[str, str]:
    """The host's environment: the same for every caller, so counts do not depend on who
    asks. Only variables that steer torch, its libraries, valgrind or the locale are kept
    (a caller's PWD, terminal or session variables are not), PYTHONPATH names just where
    torchmark and torch live (the caller's sys.path travels with each request); list
    more variables to keep in TORCHMARK_CALLGRIND_ENV ("A,B"). A pad
    makes the strings and the argv fill whole ENV_BLOCKs, so the initial stack sits at the
    same place. (Differences in the environment alone moved counts by up to 1% per call:
    Python's start-up allocations shape the heap that malloc later walks.)"""
    extra = {n.strip() for n in os.environ.get("TORCHMARK_CALLGRIND_ENV", "").split(",")}
    env = {k: v for k, v in os.environ.items()
           if k in _KEPT_ENV or k in extra or k.startswith(_KEPT_PREFIXES)}
    env.update(PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(_import_roots()))
    env.pop(_PAD, None)
    used = sum(len(a.encode()) + 1 for a in client_argv)
    used += sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())
    used += len(_PAD) + 2
    env[_PAD] = "x" * (-(-(used + 1) // ENV_BLOCK) * ENV_BLOCK - used)
    return env


def _client_argv(cmd: list[str]) -> list[str]:
    """The part of a host command the counted process sees as its argv."""
    return cmd[cmd.index(sys.executable):]


_SITE_FOLDERS = ("site-packages", "dist-packages")


def counted_sys_path(path: Sequence[str]) -> tuple[str, ...]:
    """`path` (a sys.path) as the counted process gets it: without the folders inside an
    installed package that the package puts on sys.path when it is imported (setuptools'
    `_vendor`, which `torch.utils.cpp_extension` brings in when C++ snippets compile;
    Ray's `thirdparty_files`). Which of those a process has depends on what it happened to
    import before, and the counts moved with it: one such entry more in the request
    changed the counted process's heap, and so counts, by up to 1.3% (a suite run that
    compiled its C++ bundles against one that found them cached). The counted process
    gets them back if it imports the package itself."""
    roots = [os.path.abspath(p) for p in path
             if os.path.basename(os.path.normpath(p)) in _SITE_FOLDERS]

    def vendored(entry: str) -> bool:
        folder = os.path.abspath(entry)
        for root in roots:
            if folder.startswith(root + os.sep):
                package = folder[len(root) + 1:].split(os.sep, 1)[0]
                if os.path.isfile(os.path.join(root, package, "__init__.py")):
                    return True
        return False

    return tuple(p for p in path if not vendored(p))


def aliased_paths(folder: Path, cwd: str, path: Sequence[str]) -> dict[str, str]:
    """Links in `folder` (names of one length; the first for `cwd`) to `cwd` and to each
    entry of `path` that is the caller's own (not one every caller of this interpreter
    has: `shared_by_every_caller`), as {link: the path it stands for}. The counted
    process works and imports through the links: a module imported from a folder with a
    longer name had longer strings (its `__file__`, its code's file names), which left
    the heap, and so every later call's malloc walk, different: a pytest benchmark
    counted 0.7% more instructions a call from a folder of 70 characters than from one
    of 35 (benchmarks/callgrind_canonical.py). The shared entries stay as they are: the
    host has their import finders already, and links would make it list them again
    (a setup importing one new standard module then moved the counts by 2.9%)."""
    links = folder / "paths"
    links.mkdir()
    roots = shared_roots()
    aliases = {}
    for i, entry in enumerate([cwd, *path]):
        if not entry or (i and shared_by_every_caller(entry, roots)):  # "": working folder
            continue
        link = links / f"{i:04d}"
        os.symlink(os.path.abspath(entry), link)
        aliases[str(link)] = entry
    return aliases


def shared_roots() -> set[str]:
    """The folders every caller of this interpreter imports from: its installation and
    environment (the standard library, site-packages) and where torchmark and torch
    are imported from."""
    return {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            *_import_roots()}


def shared_by_every_caller(entry: str, roots: set[str] | None = None) -> bool:
    """Whether a sys.path entry lies in one of `roots` (default: `shared_roots()`)."""
    folder = os.path.abspath(entry)
    return any(folder == root or folder.startswith(root.rstrip(os.sep) + os.sep)
               for root in (shared_roots() if roots is None else roots))


def unaliased(text: str, aliases: dict[str, str]) -> str:
    """`text` (a traceback, a log) with the links of `aliased_paths` named as the paths
    they stand for."""
    for link, entry in aliases.items():
        text = text.replace(link, entry)
    return text


def host_command(out_dir: Path, mode_args: list[str]) -> list[str]:
    """valgrind (instrumentation off at start) running torchmark.callgrind.host."""
    return [
        *_setarch_prefix(), valgrind_path(), "--tool=callgrind", "--instr-atstart=no",
        "--collect-atstart=no", "--dump-instr=no", "--dump-line=yes",
        f"--callgrind-out-file={out_dir}/callgrind.out.%p",
        sys.executable, "-m", "torchmark.callgrind.host", *mode_args,
        "--out-dir", str(out_dir), "--helper", str(helper_path()),
    ]


def _built_with_debug_symbols() -> bool:
    import torch

    return "BUILD_TYPE=RelWithDebInfo" in torch.__config__.show()


@dataclasses.dataclass
class Request:
    """One measurement: what to count and how often."""

    task_spec: TaskSpec
    globals: dict[str, Any]
    number: int = 100
    repeats: int = 1
    collect_baseline: bool = True
    library: str | None = None  # a compiled C++ snippet (torchmark.cpp) instead of Python
    entry_suffix: str = ""  # which snippet of a bundle library
    # the counted process's working folder and sys.path (default: this process's); a Ray
    # node gives its driver's, so that counts match those of a local run
    cwd: str | None = None
    sys_path: tuple[str, ...] | None = None


class Host:
    """One valgrind process serving measurement requests, started on first use."""

    def __init__(self, cpus: list[int] | None = None) -> None:
        self.cpus = cpus  # pin the host (and so every measurement) to these CPUs
        self._child: PipedChild | None = None
        self._dir: Path | None = None
        self._log: Path | None = None
        self._lock = threading.Lock()
        self.starts = 0
        self.last_timings: dict[str, float] = {}
        # the modules the last measurement imported uninstrumented (its host had not)
        self.last_fresh_imports: list[str] = []
        self.start_timings: dict[str, float] = {}  # the last start: seconds per phase
        self._launched_at: float | None = None  # set while a launched host is not yet ready

    # -- lifecycle --------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._child is not None and self._child.running

    def launch(self) -> None:
        """Start the host without waiting for it (valgrind takes ~20 s to bring up Python
        and torch): work done meanwhile, such as compiling a C++ snippet, overlaps it.
        The first request waits for it to be ready."""
        with self._lock:
            if not self.running:
                self.close()
                self._launch()

    def _start(self) -> None:
        self._launch()
        self._await_ready()

    def _launch(self) -> None:
        start_timeout_seconds(), request_timeout_seconds()  # bad values fail before valgrind
        remove_dead_host_folders()
        self._dir = Path(tempfile.mkdtemp(prefix=HOST_FOLDER_PREFIX))
        self._log = self._dir / "host.log"
        out_dir = self._dir / "out"
        out_dir.mkdir()
        # Fixed-width descriptor numbers: "5" is a cached one-character string in the host,
        # "15" an allocation, and that one allocation made counts depend on which host
        # (of several) served a statement.
        self._child = PipedChild(
            lambda requests, responses: host_command(out_dir, [
                "--requests", f"{requests:05d}", "--responses", f"{responses:05d}"]),
            log=self._log, shutdown=Shutdown(),
            env=lambda argv: host_env(_client_argv(argv)), cpus=self.cpus,
            name="callgrind host", log_tail_chars=_LOG_TAIL)
        (self._dir / HOST_PID_FILE).write_text(str(self._child.proc.pid))
        self.starts += 1
        self._launched_at = time.perf_counter()

    def _await_ready(self) -> None:
        """Wait for the launched host's first frame: ready, and running under valgrind."""
        launched, self._launched_at = self._launched_at, None
        assert launched is not None  # set by _launch
        ready = self._receive(start_timeout_seconds(), "start")
        if not isinstance(ready, HostReady):
            self.close(kill=True)
            raise CallgrindError(f"the callgrind host answered {type(ready).__name__} "
                                 "instead of its ready message", self._log_tail(), crashed=True)
        self.start_timings = {"start_s": time.perf_counter() - launched, **ready.phases}
        if not ready.on_valgrind:
            self.close()
            raise CallgrindError("the callgrind host is not running under valgrind", crashed=True)

    def close(self, kill: bool = False) -> None:
        """Stop the host: ask it to exit, or (`kill`, for a host that stopped answering)
        kill it with every process it forked."""
        child, self._child = self._child, None
        self._launched_at = None
        if child is not None:
            child.close(kill=kill, grace=30)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-_LOG_TAIL:] if self._log else ""
        except OSError:
            return ""

    def _receive(self, timeout: float, what: str) -> Any:
        assert self._child is not None
        try:
            return self._child.receive(timeout, what)
        except ChildLost as e:
            self.close(kill=True)
            message = f"callgrind host: no answer to {what} in {timeout:.0f} s" \
                if e.timed_out else f"callgrind host exited during {what}"
            raise CallgrindError(message, e.log_tail, crashed=True) from None

    # -- measuring --------------------------------------------------------------------
    def _ensure_started(self) -> None:
        with announced(STARTING):
            if not self.running:
                self.close()
                self._start()
            elif self._launched_at is not None:  # launched early: now wait for it
                self._await_ready()

    def _request_dir(self) -> Path:
        assert self._dir is not None
        return Path(tempfile.mkdtemp(prefix="request-", dir=self._dir))

    def _exchange(self, frame: CountRequest, timeout: float) -> CountReply:
        assert self._child is not None
        self._child.send(frame)
        with announced(COUNTING):
            return _count_reply(self._receive(timeout, "a measurement"))

    def run(self, request: Request, retain_out_file: bool = False,
            timeout: float | None = None) -> tuple[CallgrindStats, ...]:
        """Count `request`; a host that gives no answer within `timeout` seconds (default
        TORCHMARK_CALLGRIND_TIMEOUT, 900) is killed and restarted by the next request."""
        with self._lock:
            self._ensure_started()
            folder = self._request_dir()
            try:
                return self._run(request, folder, retain_out_file,
                                 request_timeout_seconds() if timeout is None else timeout)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    def _run(self, request: Request, folder: Path, retain_out_file: bool, timeout: float):
        spec = request.task_spec
        plan = pack_globals(request.globals, folder / "globals")
        path = counted_sys_path(sys.path if request.sys_path is None else request.sys_path)
        aliases = aliased_paths(folder, request.cwd or os.getcwd(), path)
        cwd_link, *_ = aliases
        link_of = {entry: link for link, entry in aliases.items()}
        frame = CountRequest(
            folder=str(folder), stmt=spec.stmt, setup=spec.setup, globals=plan,
            imports=tuple(modules_needed(plan, spec.setup)), number=request.number,
            repeats=request.repeats, warmup=min(request.number, 10),
            collect_baseline=request.collect_baseline, num_threads=spec.num_threads,
            cwd=cwd_link,
            sys_path=tuple(link_of.get(entry, entry) for entry in path),
            library=request.library,
            entry_suffix=request.entry_suffix)
        sent = time.perf_counter()
        reply = self._exchange(frame, timeout)
        self.last_timings = {"child_s": reply.child_s, "host_s": reply.host_s,
                             "round_trip_s": time.perf_counter() - sent}
        self.last_fresh_imports = list(reply.fresh_imports)
        dumps = reply.dumps
        try:
            if reply.exit_code != 0:
                message, crashed = self._failure(reply.exit_code, folder)
                raise CallgrindError(unaliased(message, aliases),
                                     unaliased(_read(folder / "output.log"),
                                               aliases)[-_LOG_TAIL:],
                                     crashed=crashed)
            expected = request.repeats + int(request.collect_baseline)
            if len(dumps) != expected:
                raise CallgrindError(
                    f"the counted process ended before writing all its counts (expected "
                    f"{expected} callgrind dumps, found {len(dumps)}): does the statement or "
                    "setup end the process, e.g. with os._exit()?", self._log_tail())
            parsed = [parse_callgrind_file(p) for p in dumps]
            contents = [_read(Path(p)) if retain_out_file else None for p in dumps]
        finally:
            for p in dumps:
                Path(p).unlink(missing_ok=True)
        if request.collect_baseline:
            baseline = parsed.pop()
            contents.pop()
            base_inclusive, base_exclusive = baseline.inclusive, baseline.exclusive
        else:
            base_inclusive = FunctionCounts((), inclusive=True)
            base_exclusive = FunctionCounts((), inclusive=False)
        totals = tuple(p.total for p in parsed)
        debug = _built_with_debug_symbols()
        return tuple(
            CallgrindStats(
                task_spec=spec, number_per_run=request.number, built_with_debug_symbols=debug,
                baseline_inclusive_stats=base_inclusive, baseline_exclusive_stats=base_exclusive,
                stmt_inclusive_stats=p.inclusive, stmt_exclusive_stats=p.exclusive,
                stmt_callgrind_out=text, repeat_totals=totals,
            )
            for p, text in zip(parsed, contents, strict=True)
        )

    @staticmethod
    def _failure(exit_code: int, folder: Path) -> tuple[str, bool]:
        """(message, whether the counted process crashed rather than raised)."""
        error = _read(folder / "error.txt").strip()
        if error:
            last = error.splitlines()[-1]
            # the outermost frame of the user's code says which of the two was running (a
            # function the setup defined may raise when the statement calls it)
            final = error.rsplit("Traceback (most recent call last):", 1)[-1]  # not a cause's
            frames = [line for line in final.splitlines()
                      if line.strip().startswith(('File "<setup>"', 'File "<stmt>"',
                                                  'File "<warmup>"'))]  # the stmt, warming
            which = "setup" if frames and '"<setup>"' in frames[0] else "statement"
            return f"the {which} failed in the counted process: {last}\n{error}", False
        if exit_code < 0:
            return f"the counted process was killed by signal {-exit_code}", True
        return f"the counted process exited with status {exit_code}", False


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def median_repeat(stats: Sequence[CallgrindStats]) -> CallgrindStats:
    """The repeat whose total is the median (the lower middle one for an even count)."""
    ordered = sorted(stats, key=lambda s: s.counts())
    return ordered[(len(ordered) - 1) // 2]


def _shared_key() -> str:
    """What a shared host must match: interpreter, torch, torchmark's host code, valgrind.
    (The client's sys.path and working folder travel with each request.)"""
    from torchmark.core.torch_install import torch_folder, torch_version

    here = Path(__file__).parent
    parts = [os.path.realpath(sys.executable), valgrind_path(), " ".join(_setarch_prefix())]
    parts.append(f"{torch_version()} {torch_folder()}")
    for path in (here / "host.py", here / "globals_bridge.py", here / "client_requests.py",
                 here / "messages.py", here.parent / "core" / "framing.py",
                 here / "collector.py"):  # collector.py: the host's command line and env
        parts.append(hashlib.sha256(path.read_bytes()).hexdigest())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


STARTING = "starting valgrind (it brings up Python and torch once a host, ~20 s)"
COUNTING = "counting instructions under valgrind"
HOST_FOLDER_PREFIX = "torchmark-callgrind-"
HOST_PID_FILE = "host.pid"


def remove_dead_host_folders() -> None:
    """Remove the temporary folders of hosts that are gone. A host's folder is removed
    when it is closed, but not when its user process was killed (valgrind writes its exit
    dump there later still); the pid file in it says whether its host lives."""
    for folder in Path(tempfile.gettempdir()).glob(f"{HOST_FOLDER_PREFIX}*"):
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            pid = int((folder / HOST_PID_FILE).read_text())
        except FileNotFoundError:  # being set up, or made before pid files: by its age
            with contextlib.suppress(OSError):
                if time.time() - folder.stat().st_mtime > 86400:
                    shutil.rmtree(folder, ignore_errors=True)
            continue
        except (OSError, ValueError):
            continue
        if not pid_alive(pid):
            shutil.rmtree(folder, ignore_errors=True)


def shared_hosts_dir() -> Path:
    """The per-user private folder for the sockets of shared hosts (see
    core.private_folder: made 0700 and checked before every use)."""
    return private_folder()


class SharedHost(Host):
    """A host shared by every process of this user with the same interpreter, torch and
    torchmark: it listens on a unix socket and exits after `idle_s` seconds without a
    request. The first process pays valgrind's start-up; the next ones connect."""

    def __init__(self, idle_s: float) -> None:
        super().__init__()
        self.idle_s = idle_s
        self.socket_path = shared_hosts_dir() / f"callgrind-{_shared_key()}.sock"
        self.started_process: subprocess.Popen | None = None

    def _connect(self, timeout: float | None) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        try:
            conn.connect(str(self.socket_path))
            if peer_uid(conn) != os.getuid():  # its replies are unpickled: ours only
                raise ConnectionRefusedError(f"{self.socket_path}: the listening process "
                                             "belongs to another user")
        except OSError:
            conn.close()
            raise
        return conn

    def _call(self, frame: Any, timeout: float) -> Any:
        with self._connect(timeout=10) as conn:
            conn.setblocking(True)  # framing reads the raw descriptor
            send_frame(conn.fileno(), frame)
            ready, _, _ = select.select([conn], [], [], timeout)
            if not ready:
                raise CallgrindError(f"the shared callgrind host did not answer in {timeout:.0f} s",
                                     self._log_tail(), crashed=True)
            reply = recv_frame(conn.fileno())
        if reply is None:
            raise CallgrindError("the shared callgrind host closed the connection",
                                 self._log_tail(), crashed=True)
        return reply

    @property
    def running(self) -> bool:
        """Whether a host listens on the socket. It binds the socket only once ready, and
        a host busy with another client's long measurement still accepts the connection
        into its backlog: a ping would go unanswered, and a second host start."""
        try:
            with self._connect(timeout=5):
                return True
        except OSError:
            return False

    def _start(self) -> None:
        folder = shared_hosts_dir()
        with open(folder / "start.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process starts it; the others wait
            if self.running:
                return
            for old in [*folder.glob("callgrind-out-*"), *folder.glob("callgrind-*.log")]:
                if time.time() - old.stat().st_mtime > 86400:  # hosts that exited long ago
                    if old.is_dir():
                        shutil.rmtree(old, ignore_errors=True)
                    else:
                        old.unlink(missing_ok=True)
            out_dir = Path(tempfile.mkdtemp(prefix="callgrind-out-", dir=folder))
            self._log = folder / f"{self.socket_path.stem}.log"
            cmd = host_command(out_dir, ["--socket", str(self.socket_path),
                                         "--idle", str(self.idle_s)])
            with open(self._log, "wb") as log:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, cwd=NEUTRAL_CWD,
                                        env=host_env(_client_argv(cmd)),
                                        start_new_session=True)
            self.started_process = proc  # the host this object started (outlives it)
            self.starts += 1
            deadline = time.monotonic() + start_timeout_seconds()
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise CallgrindError("the shared callgrind host exited during start",
                                         self._log_tail(), crashed=True)
                if self.socket_path.exists() and self.running:
                    return
                time.sleep(0.5)
            proc.kill()
            raise CallgrindError("the shared callgrind host did not start in time",
                                 self._log_tail(), crashed=True)

    def launch(self) -> None:
        """A shared host starts (or is found) on first use."""

    def close(self, kill: bool = False) -> None:
        """Nothing to do: the shared host outlives this process and exits when idle."""

    def stop(self) -> None:
        """Ask the shared host to exit now, and wait (up to 30 s) until it has stopped
        listening."""
        try:
            self._call(Shutdown(), timeout=30)
        except (OSError, CallgrindError):
            pass
        deadline = time.monotonic() + 30
        while self.running and time.monotonic() < deadline:
            time.sleep(0.1)

    def _request_dir(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="request-", dir=shared_hosts_dir()))

    def _exchange(self, frame: CountRequest, timeout: float) -> CountReply:
        try:
            with announced(COUNTING):
                return _count_reply(self._call(frame, timeout=timeout))
        except OSError as e:
            raise CallgrindError(f"lost the shared callgrind host: {e}", self._log_tail(),
                                 crashed=True) from None


def _count_reply(reply: Any) -> CountReply:
    """The host's answer to a CountRequest, checked to be one."""
    if not isinstance(reply, CountReply):
        raise CallgrindError(f"the callgrind host answered {type(reply).__name__} to a "
                             "count request", crashed=True)
    return reply


def keep_alive_seconds() -> float:
    """TORCHMARK_CALLGRIND_KEEPALIVE: seconds a shared host waits for work (0: no sharing)."""
    return env_seconds("TORCHMARK_CALLGRIND_KEEPALIVE", 0.0)


def start_timeout_seconds() -> float:
    """TORCHMARK_CALLGRIND_START_TIMEOUT: how long a host may take to start (600 s)."""
    return env_seconds("TORCHMARK_CALLGRIND_START_TIMEOUT", 600.0, positive=True)


def request_timeout_seconds() -> float:
    """TORCHMARK_CALLGRIND_TIMEOUT: how long one measurement may take (900 s)."""
    return env_seconds("TORCHMARK_CALLGRIND_TIMEOUT", 900.0, positive=True)


_DEFAULT_HOST: Host | None = None


def default_host() -> Host:
    """The process-wide host: a private one closed at exit, or, with
    TORCHMARK_CALLGRIND_KEEPALIVE > 0, a host shared between processes."""
    global _DEFAULT_HOST
    if _DEFAULT_HOST is None:
        idle = keep_alive_seconds()
        _DEFAULT_HOST = SharedHost(idle) if idle > 0 else Host()
        atexit.register(_DEFAULT_HOST.close)
    return _DEFAULT_HOST


def collect(request: Request, retain_out_file: bool = False,
            host: Host | None = None) -> tuple[CallgrindStats, ...]:
    """Count `request` on `host` (the default host when None)."""
    return (host or default_host()).run(request, retain_out_file)
