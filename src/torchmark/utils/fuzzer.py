"""Mirrors torch.utils.benchmark.utils.fuzzer: Fuzzer, FuzzedParameter, ParameterAlias, FuzzedTensor."""

import typing

from torchmark.utils._lazy import lazy_exports as _lazy_exports

__all__ = ["FuzzedParameter", "FuzzedTensor", "Fuzzer", "ParameterAlias"]

# dtype_size and prod are module-level helpers of torch's module (not in its __all__)
__getattr__, __dir__ = _lazy_exports(globals(), __all__, elsewhere={
    "dtype_size": "torchmark.fuzzing.tensors", "prod": "torchmark.fuzzing.tensors"})

if typing.TYPE_CHECKING:
    from torchmark.fuzzing.fuzzer import Fuzzer as Fuzzer
    from torchmark.fuzzing.parameters import FuzzedParameter as FuzzedParameter
    from torchmark.fuzzing.parameters import ParameterAlias as ParameterAlias
    from torchmark.fuzzing.tensors import FuzzedTensor as FuzzedTensor
    from torchmark.fuzzing.tensors import dtype_size as dtype_size
    from torchmark.fuzzing.tensors import prod as prod
