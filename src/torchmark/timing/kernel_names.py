"""Kernel names as people compare them across tools."""

from __future__ import annotations


def kernel_base(name: str) -> str:
    """A kernel's function name without namespaces, template arguments or parameters
    ("void at::native::vectorized_elementwise_kernel<4, ...>(...)" ->
    "vectorized_elementwise_kernel"): tools spell the rest differently (CUPTI
    "at::native::" and "(anonymous namespace)", ncu "native::" and "<unnamed>")."""
    for anonymous in ("(anonymous namespace)::", "<unnamed>::"):
        name = name.replace(anonymous, "")
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=len(name))
    words = name[:cut].split()
    return words[-1].split("::")[-1] if words else name
