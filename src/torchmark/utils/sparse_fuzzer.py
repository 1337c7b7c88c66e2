"""Mirrors torch.utils.benchmark.utils.sparse_fuzzer: FuzzedSparseTensor."""

import typing

from torchmark.utils._lazy import lazy_exports as _lazy_exports

# torch's module has no __all__; its star-import also carries its own imports (torch,
# math, Number), which are not repeated here
__all__ = ["FuzzedSparseTensor"]

__getattr__, __dir__ = _lazy_exports(globals(), [*__all__, "FuzzedTensor"])

if typing.TYPE_CHECKING:
    from torchmark.fuzzing.sparse import FuzzedSparseTensor as FuzzedSparseTensor
    from torchmark.fuzzing.tensors import FuzzedTensor as FuzzedTensor
