"""Fuzzed benchmark inputs: parameters, dense and sparse tensors, the Fuzzer."""

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.fuzzing.parameters import FuzzedParameter, ParameterAlias
from torchmark.fuzzing.sparse import FuzzedSparseTensor
from torchmark.fuzzing.tensors import FuzzedTensor

__all__ = ["FuzzedParameter", "FuzzedSparseTensor", "FuzzedTensor", "Fuzzer", "ParameterAlias"]
