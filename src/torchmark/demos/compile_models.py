"""What measuring torch.compile is tried on (benchmarks/compile_check.py and
tests/compilation): three small models (an MLP, a conv net and an attention block, each
with its input shape), and five planted recompilation triggers."""

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


SCALE = 1  # a global `scaled` reads: changing it is a recompilation trigger


def scaled(x: Any) -> Any:
    return x * SCALE


def with_scalar(x: Any, s: Any) -> Any:
    return x * s


def plain(x: Any) -> Any:
    return (x * 2).sum()


# (name, statement, a word of the guard that fails): five ways to make Dynamo recompile,
# each a statement that alternates what it passes, under trigger_globals()
RECOMPILE_TRIGGERS = [
    ("a new shape", "state[0] += 1; f(a if state[0] % 2 else b)", "size mismatch"),
    ("a new dtype", "state[0] += 1; f(a if state[0] % 2 else a.double())", "dtype mismatch"),
    ("a changed global", "state[0] += 1; g['SCALE'] = 1 + state[0] % 2; s(a)",
     "G['SCALE'] =="),
    ("a Python scalar argument", "state[0] += 1; k(a, state[0] % 2 + 2)", "s =="),
    ("a grad-mode change", "state[0] += 1; torch.set_grad_enabled(state[0] % 2 == 0); f(w)",
     "grad_mode"),
]
TRIGGER_SETUP = "a = torch.ones(8); b = torch.ones(16)"


def trigger_globals() -> dict[str, Any]:
    """The globals RECOMPILE_TRIGGERS' statements use: the three functions compiled
    (backend "eager": Dynamo without inductor), a counter, `scaled`'s globals."""
    import torch

    return {"f": torch.compile(plain, backend="eager"),
            "s": torch.compile(scaled, backend="eager"),
            "k": torch.compile(with_scalar, backend="eager"),
            "g": globals(), "state": [0], "w": torch.ones(8, requires_grad=True)}
