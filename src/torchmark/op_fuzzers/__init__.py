"""Built-in fuzzers for common operator families (as torch.utils.benchmark.op_fuzzers)."""

from torchmark.op_fuzzers.binary import BinaryOpFuzzer
from torchmark.op_fuzzers.sparse_binary import BinaryOpSparseFuzzer
from torchmark.op_fuzzers.sparse_unary import UnaryOpSparseFuzzer
from torchmark.op_fuzzers.spectral import SpectralOpFuzzer
from torchmark.op_fuzzers.unary import UnaryOpFuzzer

__all__ = [
    "BinaryOpFuzzer", "BinaryOpSparseFuzzer", "SpectralOpFuzzer", "UnaryOpFuzzer",
    "UnaryOpSparseFuzzer",
]
