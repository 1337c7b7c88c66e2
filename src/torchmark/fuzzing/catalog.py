"""The tutorial's example fuzzer, and a fuzzed case summarised for people and files
(the fuzzers by name, the op fuzzers among them, are in op_fuzzers/catalog.py)."""

from __future__ import annotations

from typing import Any

import torch

from torchmark.fuzzing.fuzzer import Fuzzer
from torchmark.fuzzing.parameters import FuzzedParameter
from torchmark.fuzzing.tensors import FuzzedTensor


def example_fuzzer(seed: int | None) -> Fuzzer:
    """The tutorial's fuzzer: 2-D float tensors k0 x k1, sizes log-uniform in [1, 10000],
    128 to 10M elements, 60% contiguous."""
    return Fuzzer(
        parameters=[
            FuzzedParameter("k0", minval=1, maxval=10000, distribution="loguniform"),
            FuzzedParameter("k1", minval=1, maxval=10000, distribution="loguniform"),
        ],
        tensors=[FuzzedTensor("x", size=("k0", "k1"), min_elements=128, max_elements=10_000_000,
                              probability_contiguous=0.6)],
        seed=seed,
    )


def describe_case(index: int, tensors: dict[str, torch.Tensor],
                  properties: dict[str, dict[str, Any]], params: dict[str, Any]) -> dict:
    """A JSON-ready summary of one case: parameters and each tensor's layout."""
    out: dict[str, Any] = {"case": index, "params": {k: _plain(v) for k, v in params.items()},
                           "tensors": {}}
    for name, t in tensors.items():
        props = properties[name]
        info: dict[str, Any] = {"shape": list(props.get("shape", t.shape)),
                                "dtype": props["dtype"], "numel": int(props["numel"])}
        if "is_coalesced" in props:  # sparse
            info.update(layout="sparse_coo", nnz=props["nnz"], density=props["density"],
                        sparse_dim=props["sparse_dim"], coalesced=props["is_coalesced"])
        else:
            info.update(layout="strided", strides=list(t.stride()),
                        contiguous=bool(props["is_contiguous"]),
                        order=[int(i) for i in props["order"]], steps=list(props["steps"]))
        out["tensors"][name] = info
    return out


def _plain(value: Any) -> Any:
    """numpy scalars to Python ones, for JSON; what JSON cannot hold (a torch.dtype
    drawn from a distribution, say) as its str."""
    if hasattr(value, "item") and not isinstance(value, torch.Tensor):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
