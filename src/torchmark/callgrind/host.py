"""The long-lived process that runs under valgrind: imports torch once, then forks one
child per measurement request. Started by `torchmark.callgrind.collector`.

    valgrind --tool=callgrind --instr-atstart=no ... python -m torchmark.callgrind.host \
        --requests FD --responses FD --out-dir DIR --helper LIBRARY
"""

from __future__ import annotations

import argparse
import builtins
import functools
import gc
import glob
import os
import pickle
import signal
import struct
import sys
import textwrap
import time
import traceback
import types

from torchmark.callgrind.messages import (
    CountReply,
    CountRequest,
    HostReady,
    Ping,
    Shutdown,
    Stopped,
)

BLOCK_SIZE = 100


def blocked_source(stmt: str, number: int) -> str:
    """`stmt` run `number` times, unrolled in blocks of 100, between collection toggles.

    Runs at module level (as torch's generated script does), so name lookups cost the
    same as there.
    """
    loops = number // BLOCK_SIZE
    if loops == 1:
        loops = 0
    remainder = number - BLOCK_SIZE * loops
    parts = ["__torchmark_toggle()"]
    if loops:
        body = textwrap.indent("\n".join([stmt] * BLOCK_SIZE), "    ")
        parts.append(f"for __torchmark_i in range({loops}):\n{body}")
    if remainder:
        parts.append("\n".join([stmt] * remainder))
    parts.append("__torchmark_toggle_and_dump()")
    return "\n".join(parts) + "\n"


def _die_of(signum: int) -> None:
    """End this process by `signum`, as a counted child of it just ended: the client
    then reports a crash (killed by that signal), not a failed statement."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _run_cpp(request: CountRequest, folder: str) -> None:
    """Count a compiled C++ snippet: its own entry point does setup, warm-up and the
    fork-per-repeat loop; the repeats' process ids go to the manifest."""
    import ctypes

    lib = ctypes.CDLL(request.library)
    fn = getattr(lib, "tm_callgrind" + request.entry_suffix)
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                   ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p, ctypes.c_int]
    fn.restype = ctypes.c_int
    pids = (ctypes.c_int64 * request.repeats)()
    error = ctypes.create_string_buffer(4096)
    sys.stdout.flush()
    sys.stderr.flush()
    status = fn(request.num_threads, request.number, request.warmup,
                request.repeats, int(request.num_threads == 1), pids, error, len(error))
    if status == 4:  # a repeat was killed by the signal in pids[0]
        _die_of(pids[0])
    if status != 0:
        raise RuntimeError(f"C++ snippet failed: {error.value.decode(errors='replace')}")
    with open(os.path.join(folder, "manifest.txt"), "w") as f:
        f.write("\n".join(str(p) for p in pids))


def _collection_toggles(requests) -> tuple:
    """(toggle, toggle-and-dump) callables: torch's own bindings where it was built with
    them (what torch's collector calls, so the counted region holds the same toggling
    code, and the same baseline), else the helper library's (through ctypes)."""
    import torch

    bindings = torch._C
    supported = getattr(bindings, "_valgrind_supported_platform", lambda: False)
    if supported() and hasattr(bindings, "_valgrind_toggle") and \
            hasattr(bindings, "_valgrind_toggle_and_dump_stats"):
        return bindings._valgrind_toggle, bindings._valgrind_toggle_and_dump_stats
    return requests.toggle_collect, functools.partial(requests.toggle_collect_and_dump,
                                                      b"torchmark")


def _count_blocks(request: CountRequest, requests, namespace: dict) -> None:
    """Warm the statement up, then count each block in a fork; the pids go to the
    manifest."""
    folder = request.folder
    stmt, number = request.stmt, request.number
    warmup = compile(f"for __torchmark_i in range({request.warmup}):\n"
                     f"{textwrap.indent(stmt, '    ')}\n", "<warmup>", "exec")
    # One code object for every repeat: what runs before counting must not depend on
    # how many repeats were asked for, or two requests would start from other states.
    stmt_block = compile(blocked_source(stmt, number), "<stmt>", "exec")
    blocks = [stmt_block] * request.repeats
    if request.collect_baseline:
        blocks.append(compile(blocked_source("pass", number), "<baseline>",
                              "exec"))
    namespace["__torchmark_toggle"], namespace["__torchmark_toggle_and_dump"] = \
        _collection_toggles(requests)

    exec(warmup, namespace)  # lazy initialization, symbol binding, caches: not counted
    exec(warmup, namespace)
    gc.collect()
    gc.disable()
    # Every block runs in its own fork of this (warmed-up) process, so each starts
    # from the same memory state: the allocator's free lists, Python's arenas and
    # caches are identical, and so are the counts, repeat after repeat. A process
    # that runs more than one thread cannot fork safely (a thread pool that holds a
    # lock at the fork never releases it in the child), so with num_threads > 1 the
    # blocks run one after another in this process.
    manifest = []
    for block in blocks:
        if request.num_threads > 1:
            exec(block, namespace)
            manifest.append(os.getpid())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            exec(block, namespace)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        exit_code = os.waitstatus_to_exitcode(status)
        if exit_code < 0:  # the block was killed by a signal
            _die_of(-exit_code)
        if exit_code != 0:
            if os.path.exists(os.path.join(folder, "error.txt")):
                os._exit(3)  # the block's own traceback is there: keep it
            raise RuntimeError(f"a counted block exited with status {exit_code}")
        manifest.append(pid)
    with open(os.path.join(folder, "manifest.txt"), "w") as f:
        f.write("\n".join(str(p) for p in manifest))


def _run_child(request: CountRequest, requests) -> None:
    """Body of the forked child: never returns."""
    folder = request.folder
    code = 3
    try:
        log = os.open(os.path.join(folder, "output.log"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        if request.cwd and os.path.isdir(request.cwd):
            os.chdir(request.cwd)
        if request.sys_path:
            sys.path[:] = request.sys_path

        if request.library:
            _run_cpp(request, folder)
            code = 0
            return

        import torch

        from torchmark.callgrind.globals_bridge import load_globals
        from torchmark.core.threads import use_torch_threads

        use_torch_threads(request.num_threads)
        # The statement's namespace is this process's __main__ module, so that
        # `from __main__ import f` in setup finds the globals sent along.
        main_module = types.ModuleType("__main__")
        sys.modules["__main__"] = main_module
        namespace = main_module.__dict__
        namespace.update(__builtins__=builtins, torch=torch)
        # Modules this process has not imported yet are imported with instrumentation
        # off: 2.5x faster for a module importing pytest (benchmarks/callgrind_imports.py:
        # 10.2 s a collection instrumented, 4.1 s not), for the cost of translating the
        # hot paths again in the warm-up (0.5 to 1.5 s), so only when there is something
        # new to import.
        fresh = [m for m in request.imports if m not in sys.modules]
        if fresh:
            with open(os.path.join(folder, "fresh_imports.txt"), "w") as f:
                f.write("\n".join(fresh))
            requests.stop_instrumentation()
        load_globals(request.globals, namespace)
        exec(compile(request.setup or "pass", "<setup>", "exec"), namespace)
        if fresh:
            # Callgrind forgets its call stack when instrumentation starts, so this frame
            # is its bottom again, as the host's main frame is for the zygote's children:
            # the statement's frames get the same recursion depths (and names) either way.
            requests.start_instrumentation()
        _count_blocks(request, requests, namespace)
        code = 0
    except BaseException:
        try:
            with open(os.path.join(folder, "error.txt"), "w") as f:
                f.write(traceback.format_exc())
        except OSError:
            pass
    finally:
        os._exit(code)


WARM_UP = """
import torch
from torchmark.core.threads import set_torch_threads
with set_torch_threads(1):
    for _ in range(3):
        _x = torch.ones(64)
        _y = torch.ones(64)
        _z = _x * _y + _x - _y / 2
        _z.sum(); _z.mean(); _z.relu(); _z.view(8, 8); _z[0]; _z.clone(); _z.reshape(-1)
        torch.mm(_z.view(8, 8), _z.view(8, 8)); torch.empty(())
        torch.zeros(4, dtype=torch.long)
"""


def _warm_up_common_paths() -> None:
    try:
        exec(compile(WARM_UP, "<host warm-up>", "exec"), {"__name__": "__warmup__"})
    except Exception:  # a warm-up is an optimization only
        pass


_REPLY = struct.Struct("!qq")


def _zygote(commands: int, replies: int, requests, closed: tuple[int, ...]) -> None:
    """The process every measurement is forked from; never returns.

    It does nothing but wait for a request folder, fork and report, so its memory is the
    same before every fork: two measurements of one statement start from identical
    states, whatever the host did in between.
    """
    for fd in closed:
        os.close(fd)
    # The request is read into one buffer made before the first fork: `os.read` would
    # allocate a 4 KiB block and shrink it, leaving the heap a little different after each
    # request, so the n-th measurement would start from another state than the first
    # (counts then drifted by up to a few % with the order of requests). What is left
    # (waitpid's tuple, the reply bytes) is freed as it was allocated, restoring the heap,
    # and the pid's and status's ints are freed before the next fork: a pid kept until the
    # next fork rebound it left the small-object free lists in one of three states in
    # turn, and a Python loop's count moved 0.4% with it, request after request.
    buffer = bytearray(4096)
    view = memoryview(buffer)
    # One empty cycle first, so that whatever the first read, fork, wait and reply
    # initialize is done before the first real measurement forks.
    dummy_r, dummy_w = os.pipe()
    for _cycle in range(2):
        os.write(dummy_w, b"/")
        os.readv(dummy_r, [view])
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        os.write(dummy_w, _REPLY.pack(pid, status))
        del pid, _, status
        os.readv(dummy_r, [view])
    os.close(dummy_r)
    os.close(dummy_w)
    while True:
        n = os.readv(commands, [view])
        if not n:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            os.close(commands)
            os.close(replies)
            with open(os.path.join(bytes(view[:n]).decode(), "request.pkl"), "rb") as f:
                request = pickle.load(f)
            _run_child(request, requests)
        _, status = os.waitpid(pid, 0)
        os.write(replies, _REPLY.pack(pid, status))
        del pid, _, status


def _start_zygote(requests, closed: tuple[int, ...]) -> _Zygote:
    """Fork the zygote; returns the host's handle on it.

    A plain function, called from the host's main frame without a C-level call in
    between (a class's __init__ would be one): on Python 3.11+, where Python-to-Python
    calls stay in one C eval loop, the counted statement then runs one interpreter frame
    above the bottom of callgrind's call stack, as in torch's collector, so functions get
    the same names (no `'2` recursion suffix on the eval loop).
    """
    command_r, commands = os.pipe()
    replies, reply_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        _zygote(command_r, reply_w, requests, (commands, replies, *closed))
    os.close(command_r)
    os.close(reply_w)
    return _Zygote(commands, replies)


class _Zygote:
    """The host's handle on its zygote: send a request folder, get (pid, status)."""

    def __init__(self, commands: int, replies: int) -> None:
        self.commands, self.replies = commands, replies

    def measure(self, request: CountRequest, out_dir: str) -> CountReply:
        started = time.perf_counter()
        with open(os.path.join(request.folder, "request.pkl"), "wb") as f:
            pickle.dump(request, f)
        os.write(self.commands, request.folder.encode())
        reply = os.read(self.replies, _REPLY.size)
        if len(reply) != _REPLY.size:
            raise SystemExit("the measurement zygote exited")
        pid, status = _REPLY.unpack(reply)
        child_s = time.perf_counter() - started
        dumps, pids = [], [pid]
        try:
            with open(os.path.join(request.folder, "manifest.txt")) as f:
                pids += [int(line) for line in f.read().split()]
        except OSError:
            pass
        for p in dict.fromkeys(pids[1:]):  # a pid listed for several repeats: its dumps in order
            dumps += sorted(glob.glob(os.path.join(out_dir, f"callgrind.out.{p}.*")),
                            key=lambda path: int(path.rsplit(".", 1)[1]))
        for p in pids:  # exit-time dumps: collection was off, nothing in them
            leftover = os.path.join(out_dir, f"callgrind.out.{p}")
            if os.path.exists(leftover):
                os.unlink(leftover)
        try:
            with open(os.path.join(request.folder, "fresh_imports.txt")) as f:
                fresh = f.read().split()
        except OSError:
            fresh = []
        return CountReply(pid=pid, exit_code=os.waitstatus_to_exitcode(status),
                          dumps=tuple(dumps), child_s=child_s,
                          host_s=time.perf_counter() - started, fresh_imports=tuple(fresh))


def _prepare(helper: str, phases: dict):
    """Import torch, switch instrumentation on, warm up, freeze the GC; the seconds each
    step took go to `phases`."""
    started = time.perf_counter()
    import torch  # noqa: F401  (the point of this process: pay for it once)

    import torchmark.callgrind.globals_bridge  # noqa: F401  (children use it)
    from torchmark.callgrind.client_requests import ClientRequests

    requests = ClientRequests(helper)
    phases["import_s"] = time.perf_counter() - started
    started = time.perf_counter()
    # Everything alive now goes to the permanent generation: the collection each
    # measurement makes before counting then only walks what that measurement created.
    # (Collected before instrumentation goes on: walking torch's half a million objects
    # instrumented took 0.7 s of every start; uninstrumented 0.14 s.)
    gc.collect()
    gc.freeze()
    # Instrumentation goes on here, once: code translated with instrumentation from now on
    # is inherited by every forked measurement. A short warm-up of common paths
    # (interpreter, dispatcher, TensorIterator, allocator) saves each measurement from
    # translating them again.
    requests.start_instrumentation()
    _warm_up_common_paths()
    gc.collect()  # what the warm-up left (the frozen objects are not walked)
    gc.freeze()
    phases["warm_up_s"] = time.perf_counter() - started
    return requests


def serve_pipes(args: argparse.Namespace) -> None:
    """Serve the one client that started us, over the pipes it passed."""
    from torchmark.core.framing import recv_frame, send_frame

    phases: dict[str, float] = {}
    requests = _prepare(args.helper, phases)
    zygote = _start_zygote(requests, (args.requests, args.responses))
    send_frame(args.responses, HostReady(pid=os.getpid(), phases=phases,
                                         on_valgrind=bool(requests.running_on_valgrind())))
    while True:
        request = recv_frame(args.requests)
        if request is None or isinstance(request, Shutdown):
            return
        send_frame(args.responses, zygote.measure(request, args.out_dir))


def serve_socket(args: argparse.Namespace) -> None:
    """Serve any client of this user on a unix socket, one request per connection, until
    `args.idle` seconds pass without one (a host shared between processes)."""
    import socket

    from torchmark.core.framing import recv_frame, send_frame
    from torchmark.core.private_folder import check_private, peer_uid

    check_private(os.path.dirname(args.socket))  # only this user can reach the socket
    requests = _prepare(args.helper, {})
    zygote = _start_zygote(requests, ())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    listener.bind(args.socket)
    ours = os.stat(args.socket).st_ino
    listener.listen(16)
    listener.settimeout(args.idle)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return  # idle for too long
            with conn:
                conn.setblocking(True)
                try:
                    if peer_uid(conn) != os.getuid():
                        continue  # never unpickle what another user sends
                    request = recv_frame(conn.fileno())
                    if request is None:
                        continue
                    if isinstance(request, Shutdown):
                        send_frame(conn.fileno(), Stopped())
                        return
                    if isinstance(request, Ping):
                        send_frame(conn.fileno(), HostReady(
                            pid=os.getpid(), on_valgrind=bool(requests.running_on_valgrind())))
                        continue
                    if not isinstance(request, CountRequest):
                        continue  # not a message of this torchmark
                    send_frame(conn.fileno(), zygote.measure(request, args.out_dir))
                except OSError:  # the client went away; serve the next one
                    continue
    finally:
        try:  # only our own socket: a host started after this one may have replaced it
            if os.stat(args.socket).st_ino == ours:
                os.unlink(args.socket)
        except OSError:
            pass
        # (the out folder stays: valgrind writes this process's exit-time dump into it;
        # the next shared host removes folders left a day ago)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int)
    parser.add_argument("--responses", type=int)
    parser.add_argument("--socket")
    parser.add_argument("--idle", type=float, default=600.0)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--helper", required=True)
    args = parser.parse_args()
    if args.socket:
        serve_socket(args)
    else:
        serve_pipes(args)
    # Done serving: leave without the interpreter's finalization, which under valgrind
    # (torch's teardown, instrumented) took ~12 s a host and held up the end of a run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
