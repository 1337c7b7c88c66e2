"""TaskSpec: what a Timer measures, without its globals."""

from __future__ import annotations

import dataclasses
import enum
import operator
import textwrap
from typing import Any

from torchmark.core.bounded_input import brief_repr


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """The description of one timed task: code, labels and thread count."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """A one-line (or indented multi-line) name for the task."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        sub = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{sub}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        """The setup as printed in a repr ('' when there is none)."""
        if not self.setup or self.setup == "pass":
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """Title, description and setup, as the head of a repr."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "num_threads": plain_int(self.num_threads)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"TaskSpec: unknown field(s) {', '.join(unknown)}")
        if "stmt" not in data or "setup" not in data:
            raise ValueError("TaskSpec: 'stmt' and 'setup' are required")
        for name in ("stmt", "setup", "global_setup"):
            if name in data and not isinstance(data[name], str):
                raise ValueError(f"TaskSpec: {name} must be a str, got {brief_repr(data[name])}")
        for name in ("label", "sub_label", "description", "env"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"TaskSpec: {name} must be a str or null, got {brief_repr(data[name])}")
        threads = data.get("num_threads", 1)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"TaskSpec: num_threads must be an int >= 1, got {brief_repr(threads)}")
        return cls(**data)


def plain_int(value: Any) -> Any:
    """`value` as a built-in int when it is an integer of any kind (a numpy int is one to
    every reader, but not to json); anything else unchanged, for the reader to name."""
    try:
        return operator.index(value)
    except TypeError:
        return value


TASK_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


class Language(enum.Enum):
    """The language of a Timer's statement (torch.utils.benchmark.Language)."""

    PYTHON = 0
    CPP = 1


class TaskLabels:
    """The labels a measurement of a TaskSpec shows (in Compare's rows and columns),
    for classes holding one as `task_spec`."""

    task_spec: TaskSpec

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def description(self) -> str | None:
        return self.task_spec.description

    @property
    def env(self) -> str:
        """The environment tag, or 'Unspecified env' when none was given."""
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        return self.task_spec.sub_label or self.task_spec.stmt or "[Unknown]"

