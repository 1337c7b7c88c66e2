"""TimerArgs and AutoLabels: one concrete suite case, as plain values."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

LANGUAGES = ("python", "cpp")
# "explicit": a TimerArgs the user wrote whole; torchmark derived nothing, so it cannot
# say whether the code is eager or TorchScript, forward or forward + backward
RUNTIMES = ("eager", "jit", "explicit")
AUTOGRAD_MODES = ("forward", "forward+backward", "explicit")


def _check_text(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{owner}: {name} must be a str, got {type(value).__name__}")


@dataclasses.dataclass(frozen=True)
class TimerArgs:
    """Everything a Timer needs for one case (maps one to one onto `torchmark.Timer`)."""

    stmt: str
    setup: str = "pass"
    global_setup: str = ""
    num_threads: int = 1
    language: str = "python"

    def __post_init__(self) -> None:
        for name in ("stmt", "setup", "global_setup"):
            _check_text("TimerArgs", name, getattr(self, name))
        n = self.num_threads
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"TimerArgs: num_threads must be a positive int, got {n!r}")
        given = self.language.name if isinstance(self.language, enum.Enum) else self.language
        language = {"py": "python", "c++": "cpp"}.get(str(given).lower(), str(given).lower())
        if language not in LANGUAGES:
            raise ValueError(f"TimerArgs: language must be 'python' or 'cpp', "
                             f"got {self.language!r}")
        object.__setattr__(self, "language", language)
        if language == "python" and self.global_setup.strip():
            raise ValueError("TimerArgs: global_setup is for C++ cases only")
        if language == "cpp" and self.setup.strip() == "pass":  # the default: no setup
            object.__setattr__(self, "setup", "")

    def timer(self, **labels: Any):
        """A torchmark.Timer for these arguments (labels are passed through)."""
        from torchmark.timing.timer_class import Timer

        return Timer(stmt=self.stmt, setup=self.setup, global_setup=self.global_setup,
                     num_threads=self.num_threads, language=self.language, **labels)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimerArgs:
        return cls(**data)


@dataclasses.dataclass(frozen=True, order=True)
class AutoLabels:
    """The labels a grouped definition adds to each case it derives."""

    runtime: str = "eager"
    autograd: str = "forward"
    language: str = "python"
    num_threads: int = 1

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"AutoLabels: runtime must be one of {RUNTIMES}, got {self.runtime!r}")
        if self.autograd not in AUTOGRAD_MODES:
            raise ValueError(f"AutoLabels: autograd must be one of {AUTOGRAD_MODES}, "
                             f"got {self.autograd!r}")
        if self.language not in LANGUAGES:
            raise ValueError(f"AutoLabels: language must be one of {LANGUAGES}, "
                             f"got {self.language!r}")
        if (self.runtime == "explicit") != (self.autograd == "explicit"):
            raise ValueError("AutoLabels: runtime and autograd are 'explicit' together "
                             "(a TimerArgs) or not at all")

    @property
    def short(self) -> str:
        """`py eager fwd t1` (`py explicit t1` for a TimerArgs): the compact form used in
        case ids."""
        language = "py" if self.language == "python" else "cpp"
        if self.runtime == "explicit":
            return f"{language} explicit t{self.num_threads}"
        autograd = "fwd" if self.autograd == "forward" else "fwd+bwd"
        return f"{language} {self.runtime} {autograd} t{self.num_threads}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
