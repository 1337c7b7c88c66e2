"""The machine and environment a run measured in, as flat named fields, and which of their
differences make two runs incomparable.

`capture()` reads, cheaply (files under /proc and /sys, os and platform calls; torch only
where it is imported already; the GPUs through NVML where it is installed, else
nvidia-smi where a driver is): the CPU (model, cores, threads, SMT, governor, boost,
maximum frequency, the CPUs this process may use and its cgroup quota), memory, kernel,
load at the start, the Python build, torch's build (version, git hash, BLAS/LAPACK,
OpenMP, MKL, oneDNN, CUDA, cuDNN and NCCL versions, its thread counts), the environment
variables that change performance (threads, allocators, CUDA_*, TORCH_*...), and per GPU
its model, driver, clocks and their limits, power limit, ECC and MIG modes.

Names are dotted ("cpu.model", "torch.blas", "env.OMP_NUM_THREADS", "gpu.0.power_limit");
values are strings, numbers or bools. `differences(a, b)` lists the fields two
fingerprints disagree on, those that change performance (BLOCKING: hardware, the torch
build, thread settings) first; a field only one side recorded is never a blocking
difference (the other side did not look: a run without torch imported, another tool's
file)."""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# what makes two runs' times incomparable: a name equal to one of these, or starting with
# one that ends in "."
BLOCKING = ("cpu.model", "cpu.cores", "cpu.threads", "cpu.smt", "cpu.arch", "cpu.quota",
            "cpu.affinity", "gpu.", "torch.", "threads.", "env.")
# environment variables that change performance (a name equal to one, or beginning
# with one that ends in "_")
PERFORMANCE_VARIABLES = (
    "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "BLIS_", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_", "DNNL_", "ONEDNN_", "MALLOC_", "LD_PRELOAD", "JEMALLOC_", "TCMALLOC_",
    "CUDA_", "CUBLAS_", "CUDNN_", "NCCL_", "NVIDIA_TF32_OVERRIDE", "PYTORCH_", "TORCH_",
    "TORCHINDUCTOR_", "ATEN_", "PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONMALLOC")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")
# true in a fingerprint torchmark captured: then a field of ABSENT_MEANS_NONE it lacks
# is none (no such variable set, no GPU, no quota), not unknown
CAPTURED = "fingerprint.captured"
ABSENT_MEANS_NONE = ("env.", "gpu.", "cpu.quota")
UNSET = "(none)"  # such a field on a side that captured but does not hold it


@dataclasses.dataclass(frozen=True)
class Difference:
    """One field two fingerprints disagree on (None: not recorded on that side)."""

    name: str
    a: Any
    b: Any

    @property
    def blocking(self) -> bool:
        """Whether it makes times incomparable: a BLOCKING field both sides recorded."""
        return self.a is not None and self.b is not None and is_blocking(self.name)

    def describe(self) -> str:
        def shown(value: Any) -> str:
            return "(not recorded)" if value is None else str(value)[:120]

        return f"{self.name}: {shown(self.a)} -> {shown(self.b)}"


@functools.lru_cache(maxsize=4096)
def is_blocking(name: str) -> bool:
    """Whether a field changes performance (BLOCKING)."""
    return any(name == p or (p.endswith(".") and name.startswith(p)) for p in BLOCKING)


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Difference]:
    """The fields `a` and `b` disagree on: blocking ones first, then by name. A field
    of ABSENT_MEANS_NONE that a fingerprint torchmark captured lacks reads as UNSET (a
    variable one side set, a GPU one side has, is a difference)."""
    def value(side: Mapping[str, Any], name: str) -> Any:
        if name in side:
            return side[name]
        return UNSET if name.startswith(ABSENT_MEANS_NONE) and side.get(CAPTURED) else None

    found = [Difference(name, value(a, name), value(b, name))
             for name in sorted({*a, *b}) if value(a, name) != value(b, name)]
    return sorted(found, key=lambda d: (not d.blocking, d.name))


def capture() -> dict[str, Any]:
    """This process's fingerprint now (see the module docstring)."""
    fields: dict[str, Any] = {}
    fields.update(_cpu())
    fields.update(_system())
    fields.update(_python())
    fields.update(_torch())
    fields.update(_variables(os.environ))
    fields[CAPTURED] = True
    fields.update(_gpus())
    return {k: v for k, v in fields.items() if v is not None}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _cpu() -> dict[str, Any]:
    model, cores = None, set()
    physical = core = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and model is None:
                    model = value
                elif key == "physical id":
                    physical = value
                elif key == "core id":
                    core = value
                elif not key and core is not None:  # a processor's block ends
                    cores.add((physical, core))
                    core = None
            if core is not None:
                cores.add((physical, core))
    except OSError:
        pass
    threads = os.cpu_count() or 1
    smt = _read("/sys/devices/system/cpu/smt/active")
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    max_khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    return {
        "cpu.model": model or platform.processor() or None,
        "cpu.arch": platform.machine() or None,
        "cpu.cores": len(cores) or None,
        "cpu.threads": threads,
        "cpu.smt": (smt == "1") if smt is not None else
        (len(cores) < threads if cores else None),
        "cpu.governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "cpu.boost": boost(),
        "cpu.max_mhz": int(max_khz) // 1000 if max_khz and max_khz.isdigit() else None,
        "cpu.affinity": cpu_ranges(affinity) if affinity else None,
        "cpu.quota": cgroup_quota(),
    }


def boost() -> bool | None:
    """Whether turbo / boost is on (intel_pstate's no_turbo, else cpufreq's boost);
    None where neither is readable."""
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo is not None:
        return no_turbo == "0"
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    return None if boost is None else boost == "1"


def cpu_ranges(cpus: list[int]) -> str:
    """CPUs as ranges: [0, 1, 2, 5] -> "0-2,5"."""
    parts: list[str] = []
    start = prev = cpus[0]
    for cpu in [*cpus[1:], None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if cpu is not None:
            start = prev = cpu
    return ",".join(parts)


def cgroup_quota() -> float | None:
    """The CPUs' worth of time this process's cgroup may use (cgroup v2 cpu.max, else
    v1's cfs quota / period); None when unlimited or unreadable."""
    relative = ""
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        if line.startswith("0::"):
            relative = line[3:]
    text = _read(f"/sys/fs/cgroup{relative}/cpu.max") or _read("/sys/fs/cgroup/cpu.max")
    if text:
        quota, _, period = text.partition(" ")
        if quota != "max" and quota.isdigit() and period.isdigit() and int(period):
            return round(int(quota) / int(period), 3)
        return None
    quota_us = _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    period_us = _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if quota_us and period_us and quota_us.lstrip("-").isdigit() and int(quota_us) > 0 \
            and period_us.isdigit() and int(period_us):
        return round(int(quota_us) / int(period_us), 3)
    return None


def _system() -> dict[str, Any]:
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = None
    return {"memory.bytes": memory, "os.system": platform.system() or None,
            "os.kernel": platform.release() or None, "load.1m": load}


def _python() -> dict[str, Any]:
    return {"python.version": f"{platform.python_implementation()} "
                              f"{platform.python_version()}",
            "python.build": " ".join(platform.python_build()),
            "python.compiler": platform.python_compiler() or None}


def _torch() -> dict[str, Any]:
    """torch's build and thread settings, only where torch is imported already."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "__config__"):
        return {}
    out: dict[str, Any] = {"torch.version": torch.__version__,
                           "torch.git": getattr(torch.version, "git_version", None),
                           "torch.debug": bool(getattr(torch.version, "debug", False)),
                           "torch.cuda": torch.version.cuda,
                           "torch.hip": getattr(torch.version, "hip", None)}
    try:
        config = torch.__config__.show()
    except Exception:  # a build without its configuration: leave those fields out
        config = ""
    for name, pattern in (("torch.blas", r"BLAS_INFO=([^,\s]+)"),
                          ("torch.lapack", r"LAPACK_INFO=([^,\s]+)"),
                          ("torch.cpu_capability", r"CPU capability usage: (\S+)"),
                          ("torch.build_type", r"BUILD_TYPE=([^,\s]+)"),
                          ("torch.mkl", r"Intel\(R\) (?:oneAPI )?Math Kernel Library "
                                        r"Version ([\d.]+)"),
                          ("torch.onednn", r"(?:oneDNN|MKL-DNN) v([\d.]+)"),
                          ("torch.openmp", r"OpenMP (\d+)")):
        match = re.search(pattern, config)
        out[name] = match.group(1) if match else None
    backends = torch.backends
    out["torch.mkl_available"] = bool(backends.mkl.is_available())
    out["torch.onednn_available"] = bool(backends.mkldnn.is_available())
    out["torch.openmp_available"] = bool(backends.openmp.is_available())
    try:
        out["torch.cudnn"] = backends.cudnn.version()
    except Exception:  # no cuDNN in this build
        out["torch.cudnn"] = None
    try:
        nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
        out["torch.nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
    except Exception:  # no NCCL in this build
        out["torch.nccl"] = None
    out["threads.intra_op"] = torch.get_num_threads()
    out["threads.inter_op"] = torch.get_num_interop_threads()
    return out


def _variables(environ: Mapping[str, str]) -> dict[str, Any]:
    """The environment variables that change performance (PERFORMANCE_VARIABLES), a
    value whose name suggests a secret masked."""
    out = {}
    for name, value in environ.items():
        if not any(name == p or (p.endswith("_") and name.startswith(p))
                   for p in PERFORMANCE_VARIABLES):
            continue
        secret = any(word in name.upper() for word in SECRET_WORDS)
        out[f"env.{name}"] = "****" if secret else value[:1024]
    return out


def _gpus() -> dict[str, Any]:
    """Per GPU: model, driver, clocks and their limits, power limit, ECC and MIG modes
    (NVML through nvidia-ml-py where installed, else nvidia-smi; nothing without an
    NVIDIA driver)."""
    if not os.path.exists("/proc/driver/nvidia/version"):
        return {}
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return _gpus_from_smi()
    try:
        pynvml.nvmlInit()
    except Exception:  # the driver does not answer: nvidia-smi may
        return _gpus_from_smi()
    out: dict[str, Any] = {}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            reads = {
                "model": lambda h: pynvml.nvmlDeviceGetName(h),
                "sm_clock_max": lambda h: pynvml.nvmlDeviceGetMaxClockInfo(
                    h, pynvml.NVML_CLOCK_SM),
                "memory_clock_max": lambda h: pynvml.nvmlDeviceGetMaxClockInfo(
                    h, pynvml.NVML_CLOCK_MEM),
                "sm_clock_application": lambda h: pynvml.nvmlDeviceGetApplicationsClock(
                    h, pynvml.NVML_CLOCK_SM),
                "sm_clock_locked_max": lambda h: pynvml.nvmlDeviceGetMaxCustomerBoostClock(
                    h, pynvml.NVML_CLOCK_SM),
                "power_limit_w": lambda h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
                "ecc": lambda h: bool(pynvml.nvmlDeviceGetEccMode(h)[0]),
                "mig": lambda h: bool(pynvml.nvmlDeviceGetMigMode(h)[0]),
                "persistence": lambda h: bool(pynvml.nvmlDeviceGetPersistenceMode(h)),
            }
            out[f"gpu.{i}.driver"] = driver
            for name, read in reads.items():
                try:
                    value = read(handle)
                except Exception:  # a field this GPU or driver does not give
                    continue
                out[f"gpu.{i}.{name}"] = value.decode() if isinstance(value, bytes) else value
    finally:
        pynvml.nvmlShutdown()
    return out


SMI_FIELDS = {"name": "model", "driver_version": "driver", "clocks.max.sm": "sm_clock_max",
              "clocks.max.memory": "memory_clock_max",
              "clocks.applications.graphics": "sm_clock_application",
              "enforced.power.limit": "power_limit_w", "ecc.mode.current": "ecc",
              "mig.mode.current": "mig", "persistence_mode": "persistence"}


def _gpus_from_smi() -> dict[str, Any]:
    try:
        text = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20,
            check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    out: dict[str, Any] = {}
    for i, line in enumerate(line for line in text.splitlines() if line.strip()):
        for name, value in zip(SMI_FIELDS.values(), (v.strip() for v in line.split(",")),
                               strict=False):
            if value and value not in ("[N/A]", "N/A", "[Not Supported]"):
                out[f"gpu.{i}.{name}"] = _number(value)
    return out


def _number(text: str) -> Any:
    """"1980" -> 1980, "700.00" -> 700.0, "Enabled" -> True, anything else as is."""
    if text in ("Enabled", "Disabled"):
        return text == "Enabled"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text
