"""Three small models for measuring torch.compile (benchmarks/compile_check.py and the
slow compile tests): an MLP, a conv net and an attention block, each with its input
shape."""

from __future__ import annotations

from typing import Any


def models() -> list[tuple[Any, tuple[int, ...]]]:
    """(model class, input shape) for each of the three."""
    import torch

    class Mlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 8)

        def forward(self, x: Any) -> Any:
            return self.b(torch.relu(self.a(x)))

    class Conv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3)

        def forward(self, x: Any) -> Any:
            return torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1)

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(32, 96)

        def forward(self, x: Any) -> Any:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return torch.softmax(q @ k.transpose(-1, -2) / 5.66, dim=-1) @ v

    return [(Mlp, (16, 32)), (Conv, (2, 3, 16, 16)), (Attention, (2, 16, 32))]
