"""Where and with what a run measured: captured once per run, kept with every result so
that a history never mixes machines, torch builds or commits without saying so.

`Provenance.capture()` reads torchmark's and torch's versions and build, Python, the
project's git commit (and whether the checkout was dirty) when run inside one, the
machine (hostname, CPU model, cores, memory, GPUs and driver, frequency governor and
turbo where Linux exposes them), an environment label (`TORCHMARK_ENV`), the start time,
the command line, the commit's date and subject, and the environment fingerprint
(core/fingerprint.py) with the noise warnings of this machine (core/system_check.py, as
"check.warnings"). `machine_fingerprint` hashes the machine's identity: the same host
with the same hardware always gives the same fingerprint."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchmark.core.fingerprint import boost
from torchmark.core.secrets import mask_argv

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Machine:
    """The hardware a run measured on (what a history must not mix)."""

    hostname: str
    cpu_model: str
    cores: int
    memory_bytes: int
    gpus: tuple[str, ...] = ()
    gpu_driver: str | None = None
    governor: str | None = None  # cpufreq scaling governor of CPU 0
    turbo: bool | None = None  # whether turbo/boost is enabled

    @property
    def fingerprint(self) -> str:
        """A short stable hash of the machine's identity (not of its momentary state:
        the governor and turbo are recorded but do not change it)."""
        identity = [self.hostname, self.cpu_model, str(self.cores),
                    str(round(self.memory_bytes / 2**30)), *self.gpus, self.gpu_driver or ""]
        return hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]

    @classmethod
    def capture(cls) -> Machine:
        gpus, driver = _gpus()
        return cls(hostname=platform.node(), cpu_model=_cpu_model(), cores=os.cpu_count() or 1,
                   memory_bytes=_memory_bytes(), gpus=gpus, gpu_driver=driver,
                   governor=_read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
                   turbo=boost())


@dataclasses.dataclass(frozen=True)
class Provenance:
    """One run's provenance (see the module docstring)."""

    torchmark_version: str
    torch_version: str | None
    torch_git: str | None
    torch_cuda: str | None
    torch_cudnn: int | None
    torch_debug: bool | None
    python: str
    git_commit: str | None
    git_dirty: bool | None
    machine: Machine
    env: str | None
    started: str  # ISO 8601 with the offset
    command: tuple[str, ...]
    schema_version: int = SCHEMA_VERSION
    # the machine and environment fingerprint (core/fingerprint.py): sorted
    # (dotted name, value) pairs, "cpu.model", "torch.blas", "env.OMP_NUM_THREADS"...
    environment: tuple[tuple[str, Any], ...] = ()
    git_commit_date: str | None = None  # the commit's committer date (ISO), ordering commits
    git_commit_subject: str | None = None  # its subject line

    def __post_init__(self) -> None:
        if isinstance(self.environment, Mapping):
            object.__setattr__(self, "environment", tuple(sorted(self.environment.items())))

    @property
    def fingerprint(self) -> dict[str, Any]:
        """The environment fingerprint as a dict (dotted name -> value)."""
        return dict(self.environment)

    @property
    def machine_fingerprint(self) -> str:
        return self.machine.fingerprint

    @functools.cached_property
    def build(self) -> str | None:
        """What identifies the code and the place a run measured, as a digest: the commit
        of a clean tree, the torch build, Python, the machine, the env label and the
        fingerprint's fields that change performance. Two runs of one build measured the
        same code in the same way: a difference between them is the machine's. None
        where it cannot be told (no commit, or a tree with uncommitted changes). Kept once
        worked out: a run's results share its provenance, and each side asks."""
        from torchmark.core.fingerprint import is_blocking

        if not self.git_commit or self.git_dirty is not False:
            return None
        what = [self.git_commit, self.torch_version, self.torch_git, self.python,
                self.machine.fingerprint, self.env,
                sorted((k, str(v)) for k, v in self.environment if is_blocking(k))]
        return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()[:16]

    @classmethod
    def capture(cls, env: str | None = None, command: list[str] | None = None) -> Provenance:
        """Read everything now. `env` defaults to $TORCHMARK_ENV; `command` to sys.argv.
        torch is read only where it is already imported, or installed (its version)."""
        from torchmark.core import fingerprint, system_check

        torch_info = _torch_build()
        commit, dirty = _git_state()
        commit_date, subject = _commit_info(commit) if commit else (None, None)
        environment = fingerprint.capture()
        noisy = system_check.warnings(environment)
        if noisy:
            environment["check.warnings"] = "; ".join(noisy)
        return cls(torchmark_version=_version("torchmark") or "unknown", **torch_info,
                   python=f"{platform.python_implementation()} {platform.python_version()}",
                   git_commit=commit, git_dirty=dirty, machine=Machine.capture(),
                   env=env if env is not None else os.environ.get("TORCHMARK_ENV") or None,
                   started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   command=mask_argv(sys.argv if command is None else command),
                   environment=tuple(sorted(environment.items())),
                   git_commit_date=commit_date, git_commit_subject=subject)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["command"] = list(self.command)
        out["environment"] = dict(self.environment)
        out["machine"]["gpus"] = list(self.machine.gpus)
        out["machine"]["fingerprint"] = self.machine.fingerprint
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        """A provenance read from a file (which others may have written): each field
        of its type, its start a date with its offset no later than now (plus a day of
        clock skew), its command masked (core/secrets.py); a ValueError saying which
        field is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("provenance must be an object")
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ValueError(f"provenance schema_version {version!r} is not supported")
        raw = data.get("machine")
        machine = dict(raw) if isinstance(raw, Mapping) else {}
        machine.pop("fingerprint", None)
        machine["gpus"] = tuple(machine.get("gpus") or ())
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["machine"] = Machine(**{k: v for k, v in machine.items()
                                       if k in {f.name for f in dataclasses.fields(Machine)}})
        command = values.get("command") or ()
        if not isinstance(command, (list, tuple)):
            raise ValueError("provenance: command must be a list of strings")
        values["command"] = mask_argv(command)
        values["environment"] = _environment(values.get("environment"))
        provenance = cls(**values)
        _check_fields(provenance)
        return provenance

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


MAX_FIELD_CHARS = 4096  # a provenance's text fields, each, at most
CLOCK_SKEW_S = 86400  # how far in the future a run's start may be (clocks differ)
_TEXTS = ("torchmark_version", "python", "started")
_OPTIONAL_TEXTS = ("torch_version", "torch_git", "torch_cuda", "git_commit", "env",
                   "git_commit_date", "git_commit_subject")


MAX_ENVIRONMENT_FIELDS = 1000


def _environment(value: Any) -> tuple[tuple[str, Any], ...]:
    """A fingerprint read from a file: an object of at most MAX_ENVIRONMENT_FIELDS
    names, each value a string (cut to MAX_FIELD_CHARS), a number, a bool or null; a
    ValueError otherwise."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):  # pairs, as the dataclass holds them
        try:
            value = dict(value)
        except (TypeError, ValueError):
            raise ValueError("provenance: environment must be an object") from None
    if not isinstance(value, Mapping) or len(value) > MAX_ENVIRONMENT_FIELDS:
        raise ValueError(f"provenance: environment must be an object of at most "
                         f"{MAX_ENVIRONMENT_FIELDS} fields")
    out = {}
    for name, item in value.items():
        if not isinstance(name, str) or len(name) > 200:
            raise ValueError("provenance: environment names must be strings")
        if isinstance(item, str):
            item = item[:MAX_FIELD_CHARS]
        elif not (item is None or isinstance(item, (bool, int, float))):
            raise ValueError(f"provenance: environment.{name[:60]} must be a string, a "
                             "number, a bool or null")
        out[name] = item
    return tuple(sorted(out.items()))


def parse_time(text: str) -> Any:
    """An ISO 8601 time (`2026-11-28T09:36:28+0000`, `...Z`, `...+00:00`) as an aware
    datetime (UTC when it names no offset); None when it is not one."""
    import datetime as dt

    for attempt in (lambda t: dt.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S%z"),
                    lambda t: dt.datetime.fromisoformat(t.replace("Z", "+00:00"))):
        try:
            moment = attempt(text)
        except ValueError:
            continue
        return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
    return None


def _check_fields(p: Provenance) -> None:
    """Raise a ValueError naming the first field of `p` that is not of its type, too
    long, or (its start) not a date no later than now plus CLOCK_SKEW_S."""
    import datetime as dt

    def text(name: str, value: Any, optional: bool = False) -> None:
        if value is None and optional:
            return
        if not isinstance(value, str) or len(value) > MAX_FIELD_CHARS:
            raise ValueError(f"provenance: {name} must be a string of at most "
                             f"{MAX_FIELD_CHARS} characters, got {str(value)[:40]!r}")

    for name in _TEXTS:
        text(name, getattr(p, name))
    for name in _OPTIONAL_TEXTS:
        text(name, getattr(p, name), optional=True)
    m = p.machine
    for name in ("hostname", "cpu_model"):
        text(f"machine.{name}", getattr(m, name))
    for name in ("cores", "memory_bytes"):
        value = getattr(m, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
            raise ValueError(f"provenance: machine.{name} must be a count, got "
                             f"{str(value)[:40]!r}")
    if not all(isinstance(g, str) and len(g) <= MAX_FIELD_CHARS for g in m.gpus):
        raise ValueError("provenance: machine.gpus must be a list of names")
    if p.git_dirty not in (None, True, False) or p.torch_debug not in (None, True, False):
        raise ValueError("provenance: git_dirty and torch_debug must be true, false or null")
    if len(p.command) > 1000 or not all(len(a) <= MAX_FIELD_CHARS for a in p.command):
        raise ValueError("provenance: command must be a list of at most 1000 strings")
    started = parse_time(p.started)
    if started is None:
        raise ValueError(f"provenance: started must be a date and time, got "
                         f"{p.started[:40]!r}")
    if (started - dt.datetime.now(dt.timezone.utc)).total_seconds() > CLOCK_SKEW_S:
        raise ValueError(f"provenance: started {p.started[:40]!r} is in the future")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _gpus() -> tuple[tuple[str, ...], str | None]:
    """GPU names and the driver version, from torch when it is imported already (nothing
    is initialized for this) or from nvidia-smi; () when there is none."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                names = tuple(torch.cuda.get_device_name(i)
                              for i in range(torch.cuda.device_count()))
                return names, _nvidia_driver()
            return (), None
        except Exception:  # a broken CUDA install: no GPU to record
            return (), None
    driver = _nvidia_driver()
    if driver is None:
        return (), None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return (), driver
    return tuple(line.strip() for line in out.splitlines() if line.strip()), driver


def _nvidia_driver() -> str | None:
    text = _read("/proc/driver/nvidia/version")
    if text is None:
        return None
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return None


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _torch_build() -> dict[str, Any]:
    """torch's version and build; without importing torch when it is not imported yet
    (then only the version, from its installed metadata)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"torch_version": _version("torch"), "torch_git": None, "torch_cuda": None,
                "torch_cudnn": None, "torch_debug": None}
    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # no cuDNN in this build
        cudnn = None
    return {"torch_version": torch.__version__,
            "torch_git": getattr(torch.version, "git_version", None),
            "torch_cuda": torch.version.cuda, "torch_cudnn": cudnn,
            "torch_debug": bool(getattr(torch.version, "debug", False))}


def _git(*args: str, folder: str | None = None) -> str | None:
    """git's output in `folder` (default: the current one); None when it fails or there
    is no git. No fsmonitor hook (the checkout's own program) and no index lock taken."""
    try:
        proc = subprocess.run(["git", "-c", "core.fsmonitor=", "--no-optional-locks", *args],
                              capture_output=True, text=True, timeout=10, check=False,
                              cwd=folder)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _commit_info(commit: str, folder: str | None = None) -> tuple[str | None, str | None]:
    """The committer date of `commit` (ISO 8601 with its offset) and its subject; Nones
    without git."""
    date, _, subject = (_git("show", "-s", "--format=%cI%n%s", commit, folder=folder)
                        or "").partition("\n")
    return date.strip() or None, subject.strip()[:MAX_FIELD_CHARS] or None


# untracked files of these kinds are code a run may import: a tree holding one is dirty
# (other untracked files, results and logs, are not)
SOURCE_PATTERNS = ("*.py", "*.pyx", "*.pxd", "*.c", "*.cc", "*.cpp", "*.cxx", "*.cu",
                   "*.cuh", "*.h", "*.hpp", "*.so")


def _git_state(folder: str | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout `folder` (default: the current one) is in;
    (None, None) outside one or without git. Dirty: a tracked file changed, or an
    untracked source file that .gitignore does not name (a module written beside the
    benchmark is code the commit does not hold)."""
    commit = _git("rev-parse", "HEAD", folder=folder)
    if commit is None:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no", folder=folder)
    if status is None:
        return commit.strip(), None
    if status.strip():
        return commit.strip(), True
    untracked = _git("ls-files", "--others", "--exclude-standard", "--",  # the whole tree
                     *(f":(top){pattern}" for pattern in SOURCE_PATTERNS), folder=folder)
    return commit.strip(), (bool(untracked.strip()) if untracked is not None else None)


def commit_label(commit: str | None, dirty: bool | None, width: int = 10) -> str:
    """A commit as tables show it: its first `width` characters, and "+" when the tree
    had uncommitted changes ("9828482c3a+"); "" without a commit."""
    return (commit or "")[:width] + ("+" if commit and dirty else "")
