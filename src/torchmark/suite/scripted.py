"""TorchScript artifacts of the suite: a model scripted once in Python, saved to the cache,
and loaded by both the Python and the C++ TorchScript cases."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib.util
import os
import sys
import textwrap
import warnings
from pathlib import Path

from torchmark.core.paths import cache_dir, cache_root
from torchmark.core.torch_install import torch_version
from torchmark.suite.signature import Signature

MODEL_FILE = "model.pt"


@dataclasses.dataclass(frozen=True)
class ScriptedModel:
    """What to script: a statement body (`kind="stmts"`, made into `forward(args)`) or the
    `model` built by Python model setup (`kind="modules"`)."""

    kind: str
    setup: str
    body: str
    signature: Signature

    @property
    def key(self) -> str:
        text = "\n--\n".join([self.kind, self.setup, self.body, self.signature.arg_list,
                              str(self.signature.output), torch_version() or "unknown"])
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @property
    def folder(self) -> Path:
        return cache_root() / "suite" / "models" / self.key

    @property
    def path(self) -> Path:
        """Where the saved model lives (it exists once `ensure()` has run)."""
        return self.folder / MODEL_FILE

    def module_source(self) -> str:
        """The Python source scripted: for `kind="stmts"` a module whose forward is the
        statement; for `kind="modules"` the setup and the model setup (which makes
        `model`). A file, not exec(): TorchScript reads the source of what it scripts, so
        a module class or function the setup defines must have one."""
        if self.kind == "modules":
            return f"import torch\n\n{self.setup or 'pass'}\n\n{self.body}\n"
        body = textwrap.indent(self.body, " " * 8)
        result = self.signature.output or "None"
        return (f"import torch\n\n\nclass TorchmarkModel(torch.nn.Module):\n"
                f"    def forward(self, {self.signature.arg_list}):\n{body}\n"
                f"        return {result}\n")

    def _script(self):
        import torch

        source = self.folder / "model_source.py"
        source.write_text(self.module_source())
        spec = importlib.util.spec_from_file_location(f"torchmark_model_{self.key}", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # inspect finds a class's source through it
        spec.loader.exec_module(module)
        if self.kind == "stmts":
            try:
                return torch.jit.script(module.TorchmarkModel())
            except Exception as e:  # TorchScript's own errors say little about why
                raise RuntimeError(
                    f"scripting the statement as forward({self.signature.arg_list}) failed: "
                    f"{e}\nTorchScript types each argument of that forward as a Tensor; a "
                    "number or other value the statement needs belongs in the statement "
                    "itself, not in the signature") from e
        if not hasattr(module, "model"):
            raise ValueError("GroupedModules: py_model_setup must assign `model`")
        return torch.jit.script(module.model)

    def ensure(self) -> Path:
        """Script and save the model once per process (the key covers the setup's text,
        not the user code it may import, so a model saved by an earlier run may be stale);
        its path."""
        if self.key in _SCRIPTED_HERE and self.path.exists():
            return self.path
        cache_dir("suite", "models", self.key)
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.key not in _SCRIPTED_HERE or not self.path.exists():
                import torch

                tmp = self.folder / f".{MODEL_FILE}.{os.getpid()}"
                with warnings.catch_warnings():  # TorchScript's deprecation notices
                    warnings.simplefilter("ignore", DeprecationWarning)
                    torch.jit.save(self._script(), str(tmp))
                os.replace(tmp, self.path)
                _SCRIPTED_HERE.add(self.key)
        return self.path


_SCRIPTED_HERE: set[str] = set()  # keys this process has scripted and saved
