"""Building C++ snippets into shared libraries, cached on disk between processes.

The cache key covers the snippet source, torch's version, the compiler and the flags,
so a second process (or a second day) reuses the build. Two processes building the same
snippet serialize on a lock file; the library appears under its final name only when
complete (written to a temporary name, then renamed), so no half-written entry is ever
used. A precompiled header of <torch/torch.h> is built once per torch version and
compiler and reused by every later snippet.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from torchmark.core.errors import MeasurementError
from torchmark.core.paths import cache_dir
from torchmark.core.procs import pid_alive
from torchmark.core.torch_install import torch_folder, torch_version
from torchmark.cpp.snippet_source import DEFAULT_HEADER, bundle_layout, snippet_source

LIBRARY = "libsnippet.so"
_USER_FILES = ("<stmt", "<setup", "<global_setup")


class CompileError(MeasurementError):
    """The compiler rejected a snippet; the message is the compiler's, at the user's lines."""

    def __init__(self, message: str, compiler_output: str) -> None:
        super().__init__(message)
        self.compiler_output = compiler_output


def cxx_compiler() -> str:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise OSError("no C++ compiler found (tried $CXX, c++, g++, clang++): C++ snippets need "
                  "one, e.g. `apt-get install g++`")


def _compiler_version(cxx: str) -> str:
    proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.splitlines()[0] if proc.stdout else cxx


def _callgrind_header_flags() -> list[str]:
    for folder in ("/usr/include", "/usr/local/include"):
        if Path(folder, "valgrind", "callgrind.h").exists():
            return []
    from torchmark.core.torch_install import torch_callgrind_header_dir

    local = torch_callgrind_header_dir()
    return ["-DTORCHMARK_LOCAL_CALLGRIND_HEADER", f"-I{local}"] if local else []


def torch_flags() -> tuple[list[str], list[str]]:
    """(compile flags, link flags) for code using libtorch."""
    import torch
    from torch.utils import cpp_extension

    compile_flags = ["-O2", "-fPIC", "-std=c++20", "-w",
                     f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    compile_flags += [f"-I{p}" for p in cpp_extension.include_paths()]
    compile_flags += _callgrind_header_flags()
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    link_flags = ["-shared", f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}", "-ltorch", "-ltorch_cpu",
                  "-lc10", "-lpthread"]
    return compile_flags, link_flags


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _user_errors(output: str) -> str:
    """The compiler's diagnostics about the user's code first, then the rest."""
    lines = output.splitlines()
    mine = [ln for ln in lines if ln.startswith(_USER_FILES)]
    if not any("error" in ln for ln in mine):  # e.g. only notes point at the user's lines
        mine += [ln for ln in lines if not ln.startswith(_USER_FILES)
                 and (": error:" in ln or ": fatal error:" in ln)][:5]
    return "\n".join(mine) if mine else "\n".join(lines[-30:])


FLAGS_REVISION = "1"  # change when torch_flags() changes what it produces


def _torch_identity() -> str:
    """torch's version and location, read without importing torch (a cache lookup stays
    fast: only a cache miss imports torch to compute the compile flags)."""
    folder = torch_folder()
    if folder is None:
        raise OSError("torch is not installed")
    return f"torch {torch_version()} at {folder}"


class SnippetBuilder:
    """Compiles snippets with a shared precompiled header, caching the libraries."""

    def __init__(self, use_pch: bool | None = None) -> None:
        if use_pch is None:
            use_pch = os.environ.get("TORCHMARK_CPP_PCH", "1") not in ("0", "no", "false")
        self.use_pch = use_pch
        self.cxx = cxx_compiler()
        self.identity = "\n".join([_torch_identity(), _compiler_version(self.cxx),
                                   FLAGS_REVISION])
        self._flags: tuple[list[str], list[str]] | None = None
        self.last_build: dict[str, float] = {}

    @property
    def compile_flags(self) -> list[str]:
        if self._flags is None:
            self._flags = torch_flags()
        return self._flags[0]

    @property
    def link_flags(self) -> list[str]:
        if self._flags is None:
            self._flags = torch_flags()
        return self._flags[1]

    def _key(self, text: str) -> str:
        return hashlib.sha256((self.identity + "\n" + text).encode()).hexdigest()[:20]

    # -- precompiled header ---------------------------------------------------------------
    def pch_folder(self) -> Path:
        return cache_dir("cpp", "pch-" + self._key(DEFAULT_HEADER))

    def pch(self) -> Path | None:
        """The folder of torch.h's precompiled header when it is built, else None.

        A missing header is built in a background process (TORCHMARK_CPP_PCH=sync builds
        it here, first; =0 never uses one): the snippet that finds it missing compiles
        without it rather than waiting for it, later snippets use it.
        """
        if not self.use_pch:
            return None
        folder = self.pch_folder()
        if (folder / "torchmark_pch.h.gch").exists():
            if not (folder / PCH_IDENTITY).exists():  # built before headers recorded it
                self._write_identity(folder)
            return folder
        if os.environ.get("TORCHMARK_CPP_PCH") == "sync":
            return self.build_pch()
        self._start_background_pch(folder)
        return None

    def _start_background_pch(self, folder: Path) -> None:
        marker = folder / ".building"
        if (folder / "error.log").exists():
            return  # it failed before: compile without it (delete error.log to retry)
        try:
            if marker.exists() and time.time() - marker.stat().st_mtime < 900 \
                    and _builder_alive(marker):
                return  # another process is building it
            marker.write_text(str(os.getpid()))
            with open(folder / "build.log", "wb") as log:
                builder = subprocess.Popen([sys.executable, "-m", "torchmark.cpp.build_pch"],
                                           stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
            marker.write_text(str(builder.pid))
            _OWN_BUILDS.append(builder)
        except OSError:
            pass  # the header is an optimization only

    def _write_identity(self, folder: Path) -> None:
        """Record what the header is built for (for `cache info` and stale removal)."""
        import socket

        try:
            (folder / PCH_IDENTITY).write_text(
                f"{self.identity}\nhost: {socket.gethostname()}\n")
        except OSError:
            pass

    def build_pch(self) -> Path | None:
        """Build the precompiled header now (under a lock); None if the compiler fails."""
        folder = self.pch_folder()
        gch = folder / "torchmark_pch.h.gch"
        with _locked(folder / ".lock"):
            if gch.exists():
                return folder
            remove_orphan_builds(folder, mine=True)  # a killed build's 700 MB
            header = folder / "torchmark_pch.h"
            header.write_text(DEFAULT_HEADER + "\n")
            self._write_identity(folder)
            tmp = folder / f".torchmark_pch.h.gch.{os.getpid()}"
            start = time.perf_counter()
            proc = subprocess.run([self.cxx, *self.compile_flags, "-x", "c++-header",
                                   str(header), "-o", str(tmp)],
                                  capture_output=True, text=True, check=False)
            (folder / ".building").unlink(missing_ok=True)
            if proc.returncode != 0:
                tmp.unlink(missing_ok=True)
                (folder / "error.log").write_text(proc.stderr)
                return None  # snippets compile without it
            _flush_to_disk(tmp)
            os.replace(tmp, gch)
            self.last_build["pch_s"] = time.perf_counter() - start
        remove_stale_pch(keep=folder)
        return folder

    # -- snippets -----------------------------------------------------------------------
    def build(self, stmt: str, setup: str, global_setup: str) -> Path:
        """The shared library for this snippet, from the cache or freshly compiled."""
        source = snippet_source(stmt, setup, global_setup)
        return self._library(source, {"stmt": stmt, "setup": setup,
                                      "global_setup": global_setup})

    def build_bundle(self, snippets: Sequence[tuple[str, str, str]]) -> Path:
        """One library holding every (stmt, setup, global_setup) snippet; snippet i's entry
        points end in `bundle_entry_suffix(i)`. A snippet that does not compile raises
        BundleCompileError, whose `failed` maps its index to the compiler's message."""
        source, regions = bundle_layout(snippets)
        try:
            return self._library(source, {"bundle": len(snippets)})
        except CompileError as e:
            failed: dict[int, list[str]] = {}
            first_error = True
            for line in e.compiler_output.splitlines():
                found = _BUNDLE_LINE.match(line)
                if found:
                    failed.setdefault(int(found.group(2)), []).append(line)
                generated = None if found else _GENERATED_ERROR.match(line)
                # an error in the code around a snippet is that snippet's when it is the
                # compiler's first (later ones may follow from it, in other regions) and
                # not at the end of the file (an unclosed brace of any snippet ends there)
                if generated and first_error and "at end of input" not in line:
                    row = int(generated.group(1))
                    index = next((i for i, (first, last) in enumerate(regions)
                                  if first <= row <= last), None)
                    if index is not None:
                        failed.setdefault(index, []).append(line)
                first_error = first_error and ": error:" not in line \
                    and ": fatal error:" not in line
            raise BundleCompileError(str(e), e.compiler_output,
                                     {i: "\n".join(v) for i, v in failed.items()}) from None

    def _library(self, source: str, meta: dict) -> Path:
        folder = cache_dir("cpp", "snippet-" + self._key(source))
        library = folder / LIBRARY
        if library.exists():
            self.last_build = {"cached": 1.0}
            return library
        with _locked(folder / ".lock"):
            if library.exists():  # another process built it while we waited
                self.last_build = {"cached": 1.0}
                return library
            self.last_build = {}
            remove_orphan_builds(folder, mine=True)
            pch = self.pch()
            (folder / "snippet.cpp").write_text(source, encoding="utf-8")
            tmp = folder / f".{LIBRARY}.{os.getpid()}"
            start = time.perf_counter()
            proc = self._compile(folder, tmp, pch)
            if proc.returncode != 0 and pch is not None and _pch_unreadable(proc.stderr):
                # a damaged header: drop it (it is rebuilt later) and compile without it
                (pch / "torchmark_pch.h.gch").unlink(missing_ok=True)
                pch = None
                proc = self._compile(folder, tmp, pch)
            self.last_build["compile_s"] = time.perf_counter() - start
            if proc.returncode != 0:
                tmp.unlink(missing_ok=True)
                output = proc.stderr + proc.stdout
                raise CompileError("C++ snippet failed to compile:\n" + _user_errors(output),
                                   output)
            (folder / "meta.json").write_text(json.dumps({
                **meta, "compile_s": self.last_build["compile_s"], "pch": pch is not None,
                "created": time.time()}))
            _flush_to_disk(tmp)  # a crash must not leave a short library under the name
            os.replace(tmp, library)
        return library

    def _compile(self, folder: Path, out: Path, pch: Path | None
                 ) -> subprocess.CompletedProcess:
        cmd = [self.cxx, *self.compile_flags]
        if pch is not None:
            cmd += ["-include", str(pch / "torchmark_pch.h"), "-Winvalid-pch"]
        cmd += [str(folder / "snippet.cpp"), "-o", str(out), *self.link_flags]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def forget(self, library: Path) -> None:
        """Remove a cached library that cannot be loaded (damaged), so that the next
        build compiles it again."""
        with _locked(library.parent / ".lock"):
            library.unlink(missing_ok=True)


_OWN_BUILDS: list[subprocess.Popen] = []  # background header builds this process started


def wait_for_own_builds() -> None:
    """Wait for the background precompiled-header builds this process started: a
    compiler running beside a measurement would disturb it (on a 2-core machine a first
    C++ measurement read 5-7x its later value). Said on a terminal while it lasts."""
    from torchmark.core.announce import announced

    while _OWN_BUILDS:
        try:
            builder = _OWN_BUILDS[0]
        except IndexError:  # another thread waited for the last one meanwhile
            return
        with announced("building torch.h's precompiled header (once per torch install; "
                       "timing waits, a compiler beside it would disturb it)"):
            builder.wait()
        with contextlib.suppress(ValueError):  # several threads may wait for one build
            _OWN_BUILDS.remove(builder)


def _builder_alive(marker: Path) -> bool:
    """Whether the header build a `.building` marker names still runs (a killed build
    must not block the next one for the marker's 15 minutes)."""
    try:
        return pid_alive(int(marker.read_text()))
    except (OSError, ValueError):  # no marker any more, or not a pid
        return False


def _pch_unreadable(compiler_errors: str) -> bool:
    """Whether the compiler failed on the precompiled header itself."""
    return "precompiled header" in compiler_errors or "PCH file" in compiler_errors


def _flush_to_disk(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


class BundleCompileError(CompileError):
    """A bundle failed to compile; `failed` maps snippet indices to their errors."""

    def __init__(self, message: str, compiler_output: str, failed: dict[int, str]) -> None:
        super().__init__(message, compiler_output)
        self.failed = failed


_BUNDLE_LINE = re.compile(r"^<(stmt|setup|global_setup):(\d+)>")
_GENERATED_ERROR = re.compile(r"^(?:.*/)?snippet\.cpp:(\d+):\d+: (?:fatal )?error:")


_BUILDER: SnippetBuilder | None = None


def default_builder() -> SnippetBuilder:
    global _BUILDER
    if _BUILDER is None:
        _BUILDER = SnippetBuilder()
    return _BUILDER


def cache_entries() -> dict[str, list[Path]]:
    """Cached snippets and precompiled headers."""
    root = cache_dir("cpp")
    out: dict[str, list[Path]] = {"snippets": [], "pch": [], "pch_failed": []}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("snippet-") and (entry / LIBRARY).exists():
            out["snippets"].append(entry)
        elif entry.name.startswith("pch-") and any(entry.glob("*.gch")):
            out["pch"].append(entry)
        elif entry.name.startswith("pch-") and (entry / "error.log").exists():
            out["pch_failed"].append(entry)
    return out


PCH_IDENTITY = "identity.txt"  # what a precompiled header was built for (torch, compiler)


def pch_torch(folder: Path) -> tuple[str | None, bool]:
    """(the torch install a precompiled header was built for, whether that install is
    gone or now holds another torch version); (None, False) for a header no torchmark
    has used since headers record it. A header recorded on another machine (a shared
    cache) is never called gone."""
    import socket

    try:
        lines = (folder / PCH_IDENTITY).read_text().splitlines()
        first = lines[0]
    except (OSError, IndexError, ValueError):  # ValueError: not text (a damaged file)
        return None, False
    host = next((line[6:] for line in lines if line.startswith("host: ")), None)
    version, _, where = first.removeprefix("torch ").partition(" at ")
    if not where or (host is not None and host != socket.gethostname()):
        return first, False
    if not Path(where).exists():
        return first, True
    installed = _installed_version(Path(where))
    return first, installed is not None and installed != version


def _installed_version(folder: Path) -> str | None:
    """The torch version installed at `folder` (its version.py), None if unreadable."""
    try:
        text = (folder / "version.py").read_text()
    except OSError:
        return None
    match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def remove_stale_pch(keep: Path | None = None,
                     unrecorded: bool = False) -> list[tuple[Path, int]]:
    """Delete the precompiled headers (about 700 MB each) built for torch installs that
    no longer exist or hold another torch version now (a removed virtual environment, an
    old clone, an upgrade), and with `unrecorded` those no torchmark has used since
    headers record their install; returns what went, with its size. One that another
    process is building is left alone."""
    removed = []
    for folder in cache_entries()["pch"]:
        built_for, gone = pch_torch(folder)
        if folder == keep or not (gone or (unrecorded and built_for is None)) \
                or in_use(folder):
            continue
        size = folder_size(folder)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append((folder, size))
    return removed


_TEMP_PREFIXES = (".torchmark_pch.h.gch.", f".{LIBRARY}.")  # + the builder's pid


def remove_orphan_builds(folder: Path, mine: bool = False) -> int:
    """Delete the half-written outputs that builds killed mid-way left in a cache entry
    (a precompiled header's is about 700 MB); returns the bytes freed. Call it holding
    the entry's lock (`mine`: every temp file but this process's own is an orphan), or
    on an entry that is not in use."""
    freed = 0
    for path in folder.iterdir() if folder.is_dir() else ():
        if not path.name.startswith(_TEMP_PREFIXES) or (mine and path.name.endswith(
                f".{os.getpid()}")):
            continue
        try:
            freed += path.stat().st_size
            path.unlink()
        except OSError:
            pass
    return freed


def in_use(entry: Path) -> bool:
    """Whether another process holds the build lock of this cache entry."""
    lock = entry / ".lock"
    if not lock.exists():
        return False
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

