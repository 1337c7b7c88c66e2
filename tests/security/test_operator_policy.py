"""The operator policy: names from a config become callables only within torch's tensor
operators (core/operator_policy.py); everything else is refused at validation."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchmark.core.errors import PolicyError
from torchmark.core.operator_policy import FUNCTION_NAMESPACES
from torchmark.ops import config_from_data
from torchmark.ops.registry import resolve
from torchmark.ops.schema import ConfigError

TENSOR = {"type": "tensor", "shape": [2]}


def cli(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "torchmark", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


def test_the_reported_exploit_is_refused_and_runs_nothing(tmp_path):
    victim = tmp_path / "out"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.os.system": {"config": [{"input": [{"args": [
        {"type": "str", "value": f"id > {victim}"}]}]}]}}))
    proc = cli("ops", "-c", str(config), "-o", str(tmp_path / "r.jsonl"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "torch.os.system" in lines[0] and "refused" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not victim.exists()


REFUSED = [
    # attribute chains out of torch's operator namespaces
    ("torch.os.system", "not an operator namespace"),
    ("torch.hub.load", "not an operator namespace"),
    ("torch.utils.cpp_extension.load_inline", "not an operator namespace"),
    ("torch.jit.load", "not an operator namespace"),
    ("torch.ops.load_library", "not an operator namespace"),
    ("torch.classes.load_library", "not an operator namespace"),
    ("torch.distributed.init_process_group", "not an operator namespace"),
    ("torch.multiprocessing.spawn", "not an operator namespace"),
    ("torch.cuda.set_device", "not an operator namespace"),
    ("torch.backends.cudnn", "not an operator namespace"),
    ("torch.autograd.set_detect_anomaly", "not an operator namespace"),
    ("torch.nn.functional.torch.os.system", "not an operator namespace"),
    ("torch.nn.parallel.DistributedDataParallel", "not an operator namespace"),
    ("torch.nn.modules.conv.Conv2d", "not an operator namespace"),
    # serialization, files, processes, process-wide setters in torch's own namespace
    ("torch.load", "torch.serialization"),
    ("torch.save", "side effect"),
    ("torch.from_file", "side effect"),
    ("torch.set_num_threads", "outside torch's tensor operators"),
    ("torch.set_num_interop_threads", "outside torch's tensor operators"),
    ("torch.set_default_dtype", "outside torch's tensor operators"),
    ("torch.set_default_device", "outside torch's tensor operators"),
    ("torch.set_flush_denormal", "outside torch's tensor operators"),
    ("torch.set_printoptions", "outside torch's tensor operators"),
    ("torch.set_float32_matmul_precision", "outside torch's tensor operators"),
    ("torch.use_deterministic_algorithms", "outside torch's tensor operators"),
    ("torch.set_anomaly_enabled", "outside torch's tensor operators"),
    ("torch.set_autocast_enabled", "outside torch's tensor operators"),
    ("torch.manual_seed", "torch.random"),
    ("torch.set_rng_state", "torch.random"),
    ("torch.compile", "outside torch's tensor operators"),
    ("torch.fork", "outside torch's tensor operators"),
    ("torch.import_ir_module", "outside torch's tensor operators"),
    ("torch.parse_ir", "outside torch's tensor operators"),
    ("torch.vmap", "torch.func"),
    # module objects, classes, values
    ("torch.nn.functional.torch", "a module"),
    ("torch.nn.functional.warnings", "a module"),
    ("torch.nn.functional.importlib", "a module"),
    ("torch.fft.torch", "a module"),
    ("torch.special.torch", "a module"),
    ("torch.Generator", "a class"),
    ("torch.no_grad", "a class"),
    ("torch.set_grad_enabled", "a class"),
    ("torch.autocast", "a class"),
    ("torch.Size", "a class"),
    ("torch.float32", "not callable"),
    ("torch.Tensor.T", "not callable"),
    ("torch.nn.functional.handle_torch_function", "torch.overrides"),
    ("torch.nn.functional.boolean_dispatch", "torch._jit_internal"),
    ("torch.nn.functional.has_torch_function", "torch._C"),
    ("torch.linalg.LinAlgError", "a class"),
    # dunder and private names, builtins reached through torch
    ("torch.__builtins__", "private and dunder"),
    ("torch.__loader__", "private and dunder"),
    ("torch.Tensor.__reduce_ex__", "private and dunder"),
    ("torch.Tensor.__class__", "private and dunder"),
    ("torch._C._set_backcompat_broadcast_warn", "private and dunder"),
    ("torch._dynamo", "private and dunder"),
    ("torch.add.__self__", "private and dunder"),
    ("torch.nn.functional.__builtins__", "private and dunder"),
    # module classes outside torch.nn.modules (side effects in __init__), non-modules
    ("torch.nn.DataParallel", "outside torch.nn.modules"),
    ("torch.nn.Parameter", "not an nn.Module"),
    ("torch.nn.Buffer", "not an nn.Module"),
    ("torch.nn.factory_kwargs", "outside torch's tensor operators"),
    # tensor methods with side effects
    ("torch.Tensor.share_memory_", "shared-memory files"),
    ("torch.Tensor.untyped_storage", "Storage"),
    ("torch.Tensor.storage", "Storage"),
    ("torch.Tensor.set_", "Storage"),
    ("torch.Tensor.register_hook", "registers a callable"),
    # aten ops with file or string arguments, TorchScript builtins, Storage, I/O
    ("aten::from_file", "side effect"),
    ("aten::from_file.out", "side effect"),
    ("aten::save", "side effect"),
    ("aten::_print", "side effect"),
    ("aten::warn", "side effect"),
    ("aten::manual_seed", "TorchScript builtin"),
    ("aten::set_grad_enabled", "TorchScript builtin"),
    ("aten::get_autocast_dtype", "TorchScript builtin"),
    ("aten::set_.source_Storage", "Storage"),
    ("aten::set", "Storage"),
    ("aten::_cufft_set_plan_cache_max_size", "process-wide"),
    ("aten::_assert_async", "CUDA context"),
    # private aten ops skip their public forms' checks (a config crashed the process)
    ("aten::_reshape_alias_copy", "private aten op"),
    ("aten::_reshape_alias", "private aten op"),
    ("aten::_sparse_coo_tensor_with_dims_and_tensors", "private aten op"),
    ("aten::_index_put_impl_", "private aten op"),
    ("aten::_softmax", "private aten op"),
]


@pytest.mark.parametrize("name, reason", REFUSED)
def test_routes_out_of_the_policy_are_refused(name, reason):
    with pytest.raises((PolicyError, LookupError)) as e:
        resolve(name)
    assert reason in str(e.value), str(e.value)


ALLOWED = ["torch.add", "torch.mm", "torch.relu", "torch.einsum", "torch.stft",
           "torch.nn.functional.relu", "torch.nn.functional.conv2d",
           "torch.nn.functional.gelu", "torch.nn.functional.scaled_dot_product_attention",
           "torch.linalg.inv", "torch.fft.rfft", "torch.special.erf", "torch.Tensor.add_",
           "torch.Tensor.sum", "torch.Tensor.split", "torch.Tensor.cpu", "torch.nn.Linear",
           "torch.nn.Conv2d", "aten::add.Tensor", "aten::mm", "aten::softmax.int",
           "aten::div.Tensor_mode"]


@pytest.mark.parametrize("name", ALLOWED)
def test_tensor_operators_resolve(name):
    assert callable(resolve(name).target)


def test_the_reported_segfault_config_is_refused(tmp_path):
    """A private aten op with made-up strides read far past a 1-element tensor and
    crashed the process (exit 139, the results file left with its header only)."""
    config = tmp_path / "seg.json"
    config.write_text(json.dumps({"aten::_reshape_alias_copy": {"config": [{"input": [{
        "args": [{"dtype": "float", "shape": [1], "type": "tensor"},
                 {"type": "genericlist", "value": [{"type": "int", "value": 67108864}]},
                 {"type": "genericlist", "value": [{"type": "int", "value": 1024}]}]}]}]}}))
    proc = cli("ops", "-c", str(config), "-w", "0", "-i", "1", "-o", str(tmp_path / "r"))
    assert proc.returncode == 2 and "private aten op" in proc.stderr, proc.stderr


def test_replay_runs_only_the_private_ops_that_check_their_arguments():
    from torchmark.core.operator_policy import REPLAY_PRIVATE_OPS, aten_refusal

    for name in ("_reshape_alias", "_reshape_alias_copy", "_index_put_impl_",
                 "_sparse_coo_tensor_with_dims_and_tensors"):
        assert "private aten op" in aten_refusal(name, "default",
                                                 private_ok=REPLAY_PRIVATE_OPS)
    for name in ("_log_softmax_backward_data", "_to_copy", "_softmax",
                 "_foreach_add"):
        assert aten_refusal(name, None, private_ok=REPLAY_PRIVATE_OPS) is None, name


def test_refusals_are_config_errors_naming_the_operator(tmp_path):
    with pytest.raises(ConfigError) as e:
        config_from_data({"torch.save": {"config": [{"input": [{"args": [TENSOR]}]}]},
                          "torch.add": {"config": [{"input": [{"args": [TENSOR, TENSOR]}]}]}},
                         "c.json")
    assert [path for path, _ in e.value.problems] == ["torch.save"]


# -- a generated walk through torch's namespace --------------------------------------

# What must never come out of a config, judged independently of the policy's code: the
# defining modules of I/O, processes, serialization, compilation and global settings.
FORBIDDEN_MODULE_PREFIXES = (
    "os", "posix", "subprocess", "builtins", "io", "shutil", "socket", "pickle",
    "importlib", "ctypes", "torch.serialization", "torch.hub", "torch.utils",
    "torch.jit", "torch.distributed", "torch.multiprocessing", "torch.cuda",
    "torch.backends", "torch._dynamo", "torch.compiler", "torch.random", "torch.overrides",
    "torch.autograd", "torch.package", "torch.onnx", "torch.export", "torch.library",
    "torch._ops", "torch.fx")


def _names(obj):
    try:
        return sorted(n for n in dir(obj) if isinstance(n, str))
    except Exception:  # some objects' dir() raises
        return []


def _allowed_namespace_object(namespace):
    return torch.Tensor if namespace == "torch.Tensor" else importlib.import_module(namespace)


@st.composite
def dotted_names(draw):
    """A dotted path from torch, each step an attribute the previous object has (or a
    dunder / private one), as someone probing the namespace would write it."""
    start = draw(st.sampled_from(["torch", "torch.nn", "torch.nn.functional", "torch.Tensor",
                                  "torch.linalg", "torch.fft", "torch.special"]))
    parts, obj = start.split("."), _allowed_namespace_object(start)
    for _ in range(draw(st.integers(1, 4))):
        names = _names(obj)
        if not names:
            break
        name = draw(st.sampled_from(names))
        parts.append(name)
        try:
            obj = getattr(obj, name)
        except Exception:
            break
    return ".".join(parts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dotted_names())
def test_nothing_outside_the_policy_resolves(name):
    try:
        operator = resolve(name)
    except (PolicyError, LookupError):
        return
    namespace, _, attr = name.rpartition(".")
    assert namespace in (*FUNCTION_NAMESPACES, "torch.Tensor", "torch.nn"), name
    assert not attr.startswith("_"), name
    target = operator.target
    assert target is getattr(_allowed_namespace_object(namespace), attr)
    assert not inspect.ismodule(target)
    if operator.kind == "module":
        assert issubclass(target, torch.nn.Module)
        assert target.__module__.startswith("torch.nn.modules."), name
        return
    assert callable(target) and not inspect.isclass(target)
    defined = getattr(target, "__module__", None) or ""
    assert not defined.startswith(FORBIDDEN_MODULE_PREFIXES), (name, defined)
    assert not attr.startswith("set_") or namespace == "torch.Tensor", name
    assert attr not in ("from_file", "save", "load", "manual_seed", "seed", "compile")


def test_the_walk_reaches_dangerous_objects():
    """The generated walk is worth running: torch's namespace does reach os.system,
    torch.load and torch.hub.load by plain attribute access."""
    assert torch.os.system is os.system  # type: ignore[attr-defined]
    assert callable(torch.hub.load) and callable(torch.load)


def _safety_arguments():
    """Every bool argument of every ATen schema whose name says it switches a check
    (`unsafe`, `check*`, `*check`, `validate*`), found by scanning the schemas."""
    import re

    found = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        for position, argument in enumerate(schema.arguments):
            if str(argument.type) in ("bool", "Optional[bool]") and \
                    re.search(r"unsafe|check|validate", argument.name):
                found.append((schema.name[len("aten::"):], argument.name,
                              None if argument.kwarg_only else position))
    return sorted(set(found))


def test_every_argument_that_switches_a_check_off_is_refused():
    """Found systematically over the public (and private) ops, never listed by hand: each
    such argument, given the value that turns its check off, by name and by position,
    is refused; the value that keeps the check is not."""
    from torchmark.core.operator_policy import safety_refusal

    found = _safety_arguments()
    names = {name for _, name, _ in found}
    assert {"unsafe", "check_errors"} <= names, names  # segment_reduce, linalg_*_ex
    for op, name, position in found:
        off = name == "unsafe"  # unsafe=True turns checks off; check_x=False does
        assert safety_refusal(f"aten::{op}", [], {name: off}), (op, name)
        assert safety_refusal(f"aten::{op}", [], {name: not off}) is None, (op, name)
        if position is not None:
            args = [None] * position + [off]
            assert safety_refusal(f"aten::{op}", args, {}), (op, name, position)
    assert safety_refusal("torch.segment_reduce", [], {"unsafe": True})
    assert safety_refusal("torch.sparse_coo_tensor", [], {"check_invariants": False})
    # what switches nothing off passes, None for an argument of another name included
    for op, args, kwargs in (("aten::sum", [None], {"dtype": None}),
                             ("aten::ones_like", [None], {"memory_format": None}),
                             ("torch.sparse_coo_tensor", [], {"check_invariants": None})):
        assert safety_refusal(op, args, kwargs) is None, (op, kwargs)


def test_an_unsafe_segment_reduce_is_refused_not_run(tmp_path):
    """The reported crash: ops ran segment_reduce(..., unsafe=True) with lengths past the
    data, and the process died (exit 139) with the run left running; now the case is
    refused and recorded as failed, the run goes on."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"torch.segment_reduce": {"config": [{"input": [
        {"args": [{"type": "tensor", "shape": [4]}, {"type": "str", "value": "sum"}],
         "kwargs": {"lengths": {"type": "tensor", "shape": [3], "dtype": "long",
                                "value_range": [1000000, 1000001]},
                    "unsafe": {"type": "bool", "value": True}}},
        {"args": [{"type": "tensor", "shape": [4]}, {"type": "str", "value": "sum"}],
         "kwargs": {"lengths": {"type": "tensor", "shape": [4], "dtype": "long",
                                "value_range": [1, 1]}}}]}]}}))
    out = tmp_path / "r"
    proc = cli("ops", "-c", str(config), "-o", str(out), "-i", "5", "-w", "1",
               "--no-store")
    assert proc.returncode == 1, proc.stderr  # one case failed: refused
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    failures = [r for r in records if r.get("schema") == "torchmark.result" and r["failure"]]
    assert len(failures) == 1 and "unsafe=True turns a safety check off" in \
        failures[0]["failure"]["error"]
    assert sum(1 for r in records if r.get("schema") == "torchmark.result"
               and not r["failure"]) == 1  # the safe call was measured
